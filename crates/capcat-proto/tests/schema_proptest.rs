//! Property tests of the schema guard and the EnsureSchema machine over
//! arbitrary server answers.

use std::collections::{BTreeMap, BTreeSet};

use capcat_proto::schema::{
    CatalogObject, EnsureSchema, LegacyObject, MembershipCounts, ObjectKind, Observed,
    ObservedObject, SchemaError, StampState, Verdict, judge,
};
use capcat_proto::{Failure, Input, Machine, Rows, Step, Tables, Value};
use proptest::prelude::*;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn every_name() -> Vec<String> {
    let t = tables();
    CatalogObject::ALL
        .iter()
        .map(|o| o.name(&t))
        .chain(LegacyObject::ALL.iter().map(|o| o.name(&t)))
        .collect()
}

const ENGINES: [&str; 5] = [
    "MergeTree",
    "ReplacingMergeTree",
    "View",
    "MaterializedView",
    "Memory",
];

/// A catalog this build created, then disturbed: objects removed or given
/// the wrong engine, columns dropped, legacy leftovers added. Starting from a
/// whole catalog is what makes accepted verdicts common enough to test.
fn arb_observed() -> impl Strategy<Value = Observed> {
    let names = every_name();
    let n = names.len();
    (
        proptest::collection::vec(
            prop_oneof![16 => Just(0usize), 1 => Just(1), 1 => Just(2)],
            n,
        ),
        prop_oneof![3 => Just(None), 1 => (0usize..64).prop_map(Some)],
        prop_oneof![
            Just(StampState::Absent),
            Just(StampState::Empty),
            proptest::collection::btree_set(0u64..4, 1..3).prop_map(StampState::Versions),
        ],
        proptest::option::of((0u64..3, 0u64..3)),
        0..ENGINES.len(),
        // Each object's `total_rows`: mostly empty, so that interrupted
        // installs (tables missing, nothing at stake) are common.
        proptest::collection::vec(
            prop_oneof![6 => Just(Some(0u64)), 1 => Just(Some(7)), 1 => Just(None)],
            n,
        ),
    )
        .prop_map(
            move |(disturb, dropped_column, stamp, counts, wrong, rows)| {
                let t = tables();
                let mut objects = BTreeMap::new();
                let mut columns: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                let mut column_index = 0usize;
                for ((name, how), total_rows) in names.iter().zip(disturb).zip(rows) {
                    let ours = CatalogObject::ALL.iter().find(|o| o.name(&t) == *name);
                    let right = match ours.map(|o| o.kind()) {
                        Some(ObjectKind::View) => "View",
                        Some(ObjectKind::Feed) => "MaterializedView",
                        _ => "MergeTree",
                    };
                    let engine = match (ours, how) {
                        // Legacy objects are absent unless disturbed in.
                        (None, 0) | (_, 1) => continue,
                        (_, 2) => ENGINES[wrong],
                        _ => right,
                    };
                    objects.insert(
                        name.clone(),
                        ObservedObject {
                            engine: engine.to_owned(),
                            sorting_key: String::new(),
                            total_rows,
                        },
                    );
                    if let Some(object) = ours {
                        for c in object.required_columns() {
                            column_index += 1;
                            if dropped_column != Some(column_index) {
                                columns
                                    .entry(name.clone())
                                    .or_default()
                                    .insert(c.to_owned());
                            }
                        }
                    }
                }
                Observed {
                    objects,
                    columns,
                    stamp,
                    membership: counts.map(|(i, e)| MembershipCounts {
                        inventory_rows: i,
                        effective_membership_rows: e,
                    }),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn schema_the_guard_accepts_only_whole_catalogs(observed in arb_observed()) {
        let t = tables();
        let verdict = judge(&t, &observed);
        match &verdict {
            Verdict::Fresh => prop_assert!(observed.objects.is_empty()),
            Verdict::Current { missing_views } | Verdict::Incomplete { missing_views, .. } => {
                // Only an empty stamp may stand beside missing tables, and
                // only when no table under our names holds a row.
                let allowed_missing = match &verdict {
                    Verdict::Incomplete { missing_tables, .. } => missing_tables.clone(),
                    _ => BTreeSet::new(),
                };
                if !allowed_missing.is_empty() {
                    prop_assert_eq!(&observed.stamp, &StampState::Empty);
                    for (name, object) in &observed.objects {
                        if object.engine.ends_with("MergeTree") {
                            prop_assert_eq!(object.total_rows, Some(0), "{} holds rows", name);
                        }
                    }
                }
                for object in CatalogObject::ALL {
                    let name = object.name(&t);
                    let found = observed.objects.get(&name);
                    match object.kind() {
                        ObjectKind::Table | ObjectKind::Feed if found.is_none() => {
                            prop_assert!(allowed_missing.contains(&name), "{name} missing");
                        }
                        ObjectKind::Table => {
                            prop_assert!(found.is_some_and(|o| o.engine.ends_with("MergeTree")), "{name}");
                            for c in object.required_columns() {
                                prop_assert!(observed.columns.get(&name).is_some_and(|s| s.contains(c)));
                            }
                        }
                        ObjectKind::Feed => {
                            prop_assert!(found.is_some_and(|o| o.engine == "MaterializedView"), "{name}");
                        }
                        ObjectKind::View => {
                            prop_assert_eq!(missing_views.contains(&name), found.is_none());
                        }
                    }
                }
                if allowed_missing.is_empty() {
                    let counts = observed.membership.expect("accepted only when counted");
                    prop_assert!(counts.inventory_rows == 0 || counts.effective_membership_rows > 0);
                }
                prop_assert!(observed.stamp != StampState::Absent);
                if matches!(verdict, Verdict::Current { .. }) {
                    prop_assert!(allowed_missing.is_empty());
                }
            }
            Verdict::Refuse(refusal) => {
                let text = refusal.to_string();
                prop_assert!(text.starts_with("catalog `cc` refused: "), "{}", text);
            }
        }
    }

    #[test]
    fn schema_ensure_terminates_and_a_refusal_issues_no_ddl(
        answers in proptest::collection::vec(arb_input(), 0..24)
    ) {
        let mut machine = EnsureSchema::new(tables());
        let mut answers = answers.into_iter();
        let mut issued = Vec::new();
        // Five probes (tables, stamp, tables again, columns, membership),
        // every object, and the stamp row.
        let bound = 5 + CatalogObject::ALL.len() + 1;
        let mut outcome = None;
        for _ in 0..=bound {
            match machine.poll() {
                Step::Execute(statement) => {
                    issued.push(statement.name);
                    machine.handle(answers.next().unwrap_or(Input::Rows(Rows::empty())));
                }
                Step::Done(done) => { outcome = Some(done); break; }
                Step::Draw { .. } => prop_assert!(false, "the schema machine never draws"),
            }
        }
        let outcome = outcome.expect("finished within the statement bound");
        if let Err(SchemaError::Refused(_)) = outcome {
            prop_assert!(issued.iter().all(|n| n.starts_with("schema.read") || *n == "schema.count_membership"), "{:?}", issued);
        }
        // Polling again repeats the outcome.
        prop_assert!(matches!(machine.poll(), Step::Done(_)));
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        (0u64..3).prop_map(Value::UInt64),
        prop::sample::select(every_name()).prop_map(Value::String),
        prop::sample::select(ENGINES.to_vec()).prop_map(|e| Value::String(e.to_owned())),
        prop::sample::select(vec!["publish_id", "index_version", "store_id", "pack_id"])
            .prop_map(|c| Value::String(c.to_owned())),
    ]
}

fn arb_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        4 => proptest::collection::vec(proptest::collection::vec(arb_value(), 0..4), 0..6)
            .prop_map(|rows| Input::Rows(Rows(rows))),
        1 => Just(Input::Failed(Failure::Timeout)),
        1 => (0u64..3).prop_map(Input::Drawn),
    ]
}
