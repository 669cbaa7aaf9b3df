//! `check-specs`, part two: the replays of `spec/replays/` stay the runs
//! their variant cfgs describe.
//!
//! A replay (spec/README.md, "Replays") checks one rejected design's
//! counterexample step by step through `Publication`'s own `Next`, for a
//! trace too deep for one TLC worker's breadth-first search. It is only
//! evidence for the variant cfg if it runs at that cfg's bounds, so CI
//! requires, for every `spec/replays/<Design>.cfg`:
//!
//! - `spec/variants/Publication.<Design>.cfg` exists, and the replay sets
//!   every one of its constants to the same value, `Design` aside, and
//!   lists the same invariants;
//! - `Design` is `"<Design>"`, `Script` is `<- <Design>Script`, an operator
//!   `spec/replays/Replay.tla` defines, and `A`, `B` are set;
//! - `spec/replays/<Design>.Shipped.cfg` is the same run with
//!   `Design = "Shipped"`: the control that the script shows the design's
//!   failure, not the model's.
//!
//! Every `spec/replays/*.tla` must parse, as the specs do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::Result;
use crate::spec::{Cfg, files_with_extension, parse_specs, read_cfg};

/// The module every replay cfg runs.
const REPLAY_MODULE: &str = "Replay";
/// The constants a replay adds to its variant's.
const REPLAY_ONLY: [&str; 3] = ["A", "B", "Script"];
/// The suffix of a control's file stem.
const SHIPPED_SUFFIX: &str = ".Shipped";

/// Checks `spec_dir/replays/`, pushing every mismatch onto `problems`.
/// Returns how many replay cfgs were checked. A missing directory is no
/// replay at all, which is not an error.
pub(crate) fn check(
    spec_dir: &Path,
    node_modules: &Path,
    problems: &mut Vec<String>,
) -> Result<usize> {
    let dir = spec_dir.join("replays");
    if !dir.is_dir() {
        return Ok(0);
    }
    let modules = files_with_extension(&dir, "tla")?;
    let parsed = if modules.is_empty() {
        BTreeMap::new()
    } else {
        parse_specs(spec_dir, node_modules, &modules)?
    };
    let operators = parsed
        .get(REPLAY_MODULE)
        .map(|module| module.operators.clone())
        .unwrap_or_default();
    check_cfgs(spec_dir, &operators, problems)
}

/// Checks every cfg of `spec_dir/replays/` against its variant cfg, with
/// `operators` the operators `Replay.tla` defines. Returns how many cfgs
/// were checked.
fn check_cfgs(
    spec_dir: &Path,
    operators: &BTreeSet<String>,
    problems: &mut Vec<String>,
) -> Result<usize> {
    let dir = spec_dir.join("replays");
    let cfgs = files_with_extension(&dir, "cfg")?;
    let stems: BTreeSet<String> = cfgs
        .iter()
        .filter_map(|path| path.file_stem().and_then(|s| s.to_str()))
        .map(str::to_owned)
        .collect();
    if !cfgs.is_empty() && operators.is_empty() {
        problems.push(format!(
            "spec/replays/ has cfgs but no {REPLAY_MODULE}.tla defining their scripts"
        ));
    }
    for path in &cfgs {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let (design, shipped) = match stem.strip_suffix(SHIPPED_SUFFIX) {
            Some(design) => (design, true),
            None => (stem, false),
        };
        let variant_path = spec_dir
            .join("variants")
            .join(format!("Publication.{design}.cfg"));
        if !variant_path.is_file() {
            problems.push(format!(
                "replays/{stem}.cfg: no variants/Publication.{design}.cfg to replay"
            ));
            continue;
        }
        let replay = read_cfg(path)?;
        let variant = read_cfg(&variant_path)?;
        compare_replay(
            stem, design, shipped, &replay, &variant, operators, problems,
        );
        if !shipped && !stems.contains(&format!("{design}{SHIPPED_SUFFIX}")) {
            problems.push(format!(
                "replays/{stem}.cfg has no control replays/{design}{SHIPPED_SUFFIX}.cfg"
            ));
        }
    }
    Ok(cfgs.len())
}

/// Compares one replay cfg with the variant cfg it replays.
fn compare_replay(
    stem: &str,
    design: &str,
    shipped: bool,
    replay: &Cfg,
    variant: &Cfg,
    operators: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let expected_design = if shipped { "Shipped" } else { design };
    if replay.design() != Some(expected_design) {
        problems.push(format!(
            "replays/{stem}.cfg must set Design = \"{expected_design}\", found {:?}",
            replay.design()
        ));
    }
    for (name, value) in &variant.constants {
        if name == "Design" {
            continue;
        }
        match replay.constants.get(name) {
            Some(same) if same == value => {}
            Some(other) => problems.push(format!(
                "replays/{stem}.cfg sets {name} = {other}, its variant cfg {value}"
            )),
            None => problems.push(format!(
                "replays/{stem}.cfg does not set {name} (its variant cfg: {value})"
            )),
        }
    }
    for name in replay.constants.keys() {
        let known = name == "Design"
            || REPLAY_ONLY.contains(&name.as_str())
            || variant.constants.contains_key(name);
        if !known {
            problems.push(format!(
                "replays/{stem}.cfg sets {name}, which its variant cfg does not"
            ));
        }
    }
    for name in ["A", "B"] {
        if !replay.constants.contains_key(name) {
            problems.push(format!("replays/{stem}.cfg does not set {name}"));
        }
    }
    let script = format!("{design}Script");
    match replay.constants.get("Script") {
        Some(value) if *value == format!("<- {script}") => {
            if !operators.contains(&script) {
                problems.push(format!(
                    "replays/{stem}.cfg: {REPLAY_MODULE}.tla does not define {script}"
                ));
            }
        }
        other => problems.push(format!(
            "replays/{stem}.cfg must set Script <- {script}, found {other:?}"
        )),
    }
    if replay.invariants != variant.invariants {
        problems.push(format!(
            "replays/{stem}.cfg checks invariants {:?}, its variant cfg {:?}",
            replay.invariants, variant.invariants
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_cfg;

    const VARIANT: &str = "SPECIFICATION Spec\nCONSTANTS\n    Ttl = 3\n    MaxTime = 3\n    \
                           Design = \"Foo\"\nINVARIANTS\n    TypeOK\n    Safe\n";
    const REPLAY: &str = "SPECIFICATION GSpec\nCONSTANTS\n    A = p1\n    B = p2\n    \
                          Script <- FooScript\n    Ttl = 3\n    MaxTime = 3\n    \
                          Design = \"Foo\"\nINVARIANTS\n    TypeOK\n    Safe\n";

    fn problems_of(replay: &str, shipped: bool) -> Vec<String> {
        let operators = ["FooScript".to_owned()].into();
        let stem = if shipped { "Foo.Shipped" } else { "Foo" };
        let mut problems = Vec::new();
        compare_replay(
            stem,
            "Foo",
            shipped,
            &parse_cfg(replay),
            &parse_cfg(VARIANT),
            &operators,
            &mut problems,
        );
        problems
    }

    #[test]
    fn a_replay_at_its_variants_bounds_passes() {
        assert_eq!(problems_of(REPLAY, false), Vec::<String>::new());
        let control = REPLAY.replace("\"Foo\"", "\"Shipped\"");
        assert_eq!(problems_of(&control, true), Vec::<String>::new());
    }

    #[test]
    fn a_replay_whose_bounds_drift_from_its_variant_is_refused() {
        let drifted = REPLAY.replace("MaxTime = 3", "MaxTime = 4");
        let problems = problems_of(&drifted, false);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("MaxTime = 4"), "{problems:?}");
    }

    #[test]
    fn a_replay_missing_a_constant_or_an_invariant_or_its_script_is_refused() {
        let no_ttl = REPLAY.replace("    Ttl = 3\n", "");
        assert!(problems_of(&no_ttl, false)[0].contains("does not set Ttl"));
        let fewer = REPLAY.replace("    Safe\n", "");
        assert!(problems_of(&fewer, false)[0].contains("invariants"));
        let other_script = REPLAY.replace("FooScript", "BarScript");
        assert!(problems_of(&other_script, false)[0].contains("Script <- FooScript"));
    }

    #[test]
    fn a_control_must_run_the_shipped_design() {
        let problems = problems_of(REPLAY, true);
        assert!(problems[0].contains("Design = \"Shipped\""), "{problems:?}");
    }

    #[test]
    fn the_committed_replays_match_their_variant_cfgs() {
        let spec_dir = crate::cache::repo_root().join("spec");
        // check-specs reads the scripts' names off the parsed Replay.tla;
        // without the parser here, every rejected design's script is taken
        // as defined, and the names the cfgs use are checked all the same.
        let designs = files_with_extension(&spec_dir.join("variants"), "cfg")
            .expect("spec/variants is listed");
        let operators = designs
            .iter()
            .filter_map(|path| path.file_stem().and_then(|s| s.to_str()))
            .filter_map(|stem| stem.strip_prefix("Publication."))
            .map(|design| format!("{design}Script"))
            .collect();
        let mut problems = Vec::new();
        let checked =
            check_cfgs(&spec_dir, &operators, &mut problems).expect("the committed cfgs read");
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(checked, 6, "three replays and their controls");
    }
}
