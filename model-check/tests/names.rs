//! The model's action and property names are exactly the shared names of
//! `names.rs` (which the TLA+ specs are checked against): every shared
//! action is one the model takes, and the model takes no other.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use capcat_model_check::names::{demand_fold, publication as n};
use capcat_model_check::publication::{Design, ModelConfig, PublicationModel};
use stateright::Model;

fn fingerprint<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

#[test]
fn the_model_takes_every_shared_action_and_no_other() {
    let cfg = ModelConfig {
        release: true,
        foreign_writes: 1,
        crash_mid_statement: true,
        late_claims: true,
        ..ModelConfig::ci(Design::Shipped)
    };
    let model = PublicationModel::new(cfg).expect("valid configuration");
    let expected: BTreeSet<&str> = n::ACTIONS.iter().copied().collect();
    let mut seen = BTreeSet::new();
    let mut visited = HashSet::new();
    let mut queue: VecDeque<_> = model.init_states().into();
    // Depth-first, so the deep actions (the inventory write) come early.
    while let Some(s) = queue.pop_back() {
        if seen == expected || visited.len() > 300_000 {
            break;
        }
        let mut actions = Vec::new();
        model.actions(&s, &mut actions);
        for a in actions {
            seen.insert(a.name());
            if let Some(next) = model.next_state(&s, a)
                && visited.insert(fingerprint(&next))
            {
                queue.push_back(next);
            }
        }
    }
    assert_eq!(seen, expected);
}

#[test]
fn the_model_checks_exactly_the_shared_properties() {
    let names = |liveness| -> BTreeSet<&str> {
        let cfg = ModelConfig {
            liveness,
            ..ModelConfig::ci(Design::Shipped)
        };
        let model = PublicationModel::new(cfg).expect("valid configuration");
        model.properties().iter().map(|p| p.name).collect()
    };
    let safety: BTreeSet<&str> = n::INVARIANTS.iter().copied().collect();
    assert_eq!(names(false), safety);
    let all: BTreeSet<&str> = n::INVARIANTS.iter().chain(n::PROPERTIES).copied().collect();
    assert_eq!(names(true), all);
    let fold = capcat_model_check::demand::DemandModel::new(
        capcat_model_check::demand::FoldDesign::Shipped,
        1,
    );
    let fold_names: BTreeSet<&str> = fold.properties().iter().map(|p| p.name).collect();
    assert_eq!(
        fold_names,
        demand_fold::INVARIANTS
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
    );
}

#[test]
fn every_shared_variant_has_a_design() {
    for v in n::VARIANTS {
        assert!(Design::from_name(v).is_some(), "{v} is not modelled");
    }
    for v in demand_fold::VARIANTS {
        assert!(
            capcat_model_check::demand::FoldDesign::from_name(v).is_some(),
            "{v} is not modelled"
        );
    }
}
