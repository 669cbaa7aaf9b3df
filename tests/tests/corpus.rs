//! The trace corpus (`tests/corpus/`): counterexamples of every rejected
//! design and seeded random walks of the shipped design, exported from
//! capcat-model-check as JSON (`capcat_tests::traces`).
//!
//! Regenerate with `cargo xtask corpus` (which runs
//! `cargo test -p capcat-tests --test corpus -- --ignored regenerate_the_trace_corpus`);
//! a change to the model or to the SQL that changes a trace then shows as a
//! diff under `tests/corpus/`.
//! `CAPCAT_CORPUS_DIR` writes the corpus elsewhere (the check's temp dir).
//!
//! The committed corpus is checked here, one test per file: each test
//! exports its file afresh and compares it byte for byte with the committed
//! one. One test per rejected design (rather than one test for the whole
//! corpus) lets the test runner spread the searches over its threads and
//! overlap them with the suite's engine tests, which spend much of their
//! time waiting on leases to expire.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use capcat_model_check::publication::Design;
use capcat_tests::traces::{counterexample, random_walks, rejected_designs};
use serde_json::Value as Json;

/// The seed of the corpus's random walks.
const WALK_SEED: u64 = 0x00CA_9CA7_5EED;
/// Walks in the corpus, and their length bound.
const WALKS: usize = 20;
const WALK_STEPS: usize = 40;

/// The committed corpus, whatever `CAPCAT_CORPUS_DIR` says.
fn committed_corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// The document as the corpus stores it.
fn corpus_text(doc: &Json) -> String {
    serde_json::to_string_pretty(doc).expect("a JSON value serialises") + "\n"
}

/// Fails unless the committed file `relative` holds exactly `doc`, naming
/// the first line that differs and the command that brings the corpus up
/// to date.
fn assert_committed(relative: &Path, doc: &Json) {
    let path = committed_corpus().join(relative);
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask corpus`", path.display()));
    let now = corpus_text(doc);
    if committed == now {
        return;
    }
    let (line, (was, is)) = committed
        .lines()
        .chain(std::iter::repeat("<end of file>"))
        .zip(now.lines().chain(std::iter::repeat("<end of file>")))
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .expect("two different texts differ in some line");
    panic!(
        "{} is stale: line {} is {was:?} in the commit, {is:?} in the export now; \
         run `cargo xtask corpus` and commit tests/corpus",
        path.display(),
        line + 1
    );
}

/// The committed counterexample of `design` is the one its search finds now.
fn check_counterexample(design: Design) {
    let (design, cfg, property) = rejected_designs()
        .into_iter()
        .find(|(d, ..)| *d == design)
        .unwrap_or_else(|| panic!("{} is not a rejected design", design.name()));
    let doc =
        counterexample(design, cfg, property).unwrap_or_else(|e| panic!("{}: {e}", design.name()));
    assert_characteristic_steps(design, &doc);
    assert_committed(
        &Path::new("counterexamples").join(format!("{}.json", design.name())),
        &doc,
    );
}

/// The steps, in order, that make a design's counterexample the flaw it
/// records, for the designs whose search runs only here (model-check's
/// publication tests leave these searches of minutes to this check). A
/// regenerated corpus that loses one of them has found another flaw, which
/// needs a reader's judgement before it is committed.
fn characteristic_steps(design: Design) -> &'static [&'static str] {
    match design {
        // A claim retry of p1 lands above p0's live renewal and holds beside
        // it; p0's commit row lands after the reader pinned p1's snapshot.
        Design::OwnTermReadBack => &[
            "EvaluateGuard publish.insert_commit_row of p0",
            "ClaimLease p1 (lease.insert_claim, jitter 1)",
            "LandRows publish.insert_commit_row of p1",
            "PinSnapshot",
            "LandRows publish.insert_commit_row of p0",
        ],
        // A commit row abandoned at the cap passes a fence its holder's
        // later renewal extended and lands under a pinned snapshot.
        Design::LeaseIdFence => &[
            "KillAtCap publish.insert_commit_row of p0",
            "EvaluateGuard publish.insert_commit_row of p0",
            "PinSnapshot",
            "LandRows publish.insert_commit_row of p0",
        ],
        // The holder acts at once after the timeout; the abandoned commit
        // row lands under a snapshot pinned after its next publish.
        Design::NoSettleAfterTimeout => &[
            "KillAtCap publish.insert_commit_row of p0",
            "EvaluateGuard publish.insert_commit_row of p0",
            "PinSnapshot",
            "LandRows publish.insert_commit_row of p0",
        ],
        // A commit row lands after its client timed out; the pass runs
        // again at a version it never publishes, below a W pinned since.
        Design::UnpublishedRowsResolve => &[
            "KillAtCap publish.insert_commit_row of p0",
            "LandRows publish.insert_commit_row of p0",
            "LandRows publish.insert_commit_row of p1",
            "PinSnapshot",
            "ReadBackVersion p0 (allocate.read_claims)",
        ],
        _ => &[],
    }
}

/// Fails unless `doc`'s steps contain [`characteristic_steps`] in order.
fn assert_characteristic_steps(design: Design, doc: &Json) {
    let actions: Vec<&str> = doc["steps"]
        .as_array()
        .expect("a counterexample has steps")
        .iter()
        .map(|step| step["action"].as_str().expect("a step names its action"))
        .collect();
    let mut rest = actions.iter();
    for wanted in characteristic_steps(design) {
        assert!(
            rest.any(|action| action == wanted),
            "{}: the counterexample lost {wanted:?} (in order) from\n{}",
            design.name(),
            actions.join("\n")
        );
    }
}

/// One test per rejected design, and a test that the list is the whole of
/// `rejected_designs()` and of the committed `counterexamples/` folder.
macro_rules! committed_counterexamples {
    ($($test:ident => $design:ident,)*) => {
        $(
            #[test]
            fn $test() {
                check_counterexample(Design::$design);
            }
        )*

        #[test]
        fn every_rejected_design_has_its_committed_counterexample_checked() {
            let checked: BTreeSet<&str> = [$(Design::$design.name()),*].into_iter().collect();
            let rejected: BTreeSet<&str> =
                rejected_designs().iter().map(|(d, ..)| d.name()).collect();
            assert_eq!(checked, rejected, "a rejected design without its corpus check");
            let dir = committed_corpus().join("counterexamples");
            let committed: BTreeSet<String> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|entry| entry.expect("a directory entry").file_name())
                .map(|name| name.to_string_lossy().into_owned())
                .collect();
            let expected: BTreeSet<String> =
                checked.iter().map(|name| format!("{name}.json")).collect();
            assert_eq!(
                committed, expected,
                "tests/corpus/counterexamples holds a file no design exports, or misses one; \
                 run `cargo xtask corpus`"
            );
        }
    };
}

committed_counterexamples! {
    the_committed_barrier_only_counterexample_is_current => BarrierOnly,
    the_committed_post_write_check_counterexample_is_current => PostWriteCheck,
    the_committed_two_subquery_fence_counterexample_is_current => TwoSubqueryFence,
    the_committed_count_only_read_back_counterexample_is_current => CountOnlyReadBack,
    the_committed_membership_on_version_alone_counterexample_is_current => MembershipOnVersionAlone,
    the_committed_unfenced_release_counterexample_is_current => UnfencedRelease,
    the_committed_fresh_lease_id_on_reacquire_counterexample_is_current => FreshLeaseIdOnReacquire,
    the_committed_no_execution_cap_counterexample_is_current => NoExecutionCap,
    the_committed_inventory_before_publish_counterexample_is_current => InventoryBeforePublish,
    the_committed_marginless_fence_counterexample_is_current => MarginlessFence,
    the_committed_own_term_read_back_counterexample_is_current => OwnTermReadBack,
    the_committed_rows_above_pinned_counterexample_is_current => RowsAbovePinned,
    the_committed_lease_id_fence_counterexample_is_current => LeaseIdFence,
    the_committed_no_settle_after_timeout_counterexample_is_current => NoSettleAfterTimeout,
    the_committed_unpublished_rows_resolve_counterexample_is_current => UnpublishedRowsResolve,
}

#[test]
fn the_committed_walks_of_the_shipped_design_are_current() {
    let doc = random_walks(WALK_SEED, WALKS, WALK_STEPS).expect("walks");
    assert_committed(Path::new("walks-shipped.json"), &doc);
}

/// Where the regeneration writes: `CAPCAT_CORPUS_DIR`, else the committed
/// corpus.
fn corpus() -> PathBuf {
    std::env::var_os("CAPCAT_CORPUS_DIR").map_or_else(committed_corpus, PathBuf::from)
}

/// Every step that names a statement points at a stored SQL text, and the
/// guarded publish statements carry the canonical fence (shipped design).
fn check_document(doc: &Json, steps: &[&Json]) {
    let sql = doc["sql"].as_array().expect("an sql table");
    let mut statements = 0;
    for step in steps {
        assert!(
            step["action"].is_string() && step["actor"].is_string(),
            "{step}"
        );
        if let Some(stmt) = step["statement"].as_object() {
            statements += 1;
            let i = stmt["sql_ref"].as_u64().expect("sql_ref") as usize;
            let text = sql[i].as_str().expect("sql text");
            assert!(!text.is_empty());
            assert!(
                stmt["name"].is_string() && stmt["params"].is_object(),
                "{step}"
            );
        }
    }
    assert!(statements > 0, "no step named a statement");
}

#[test]
fn random_walks_of_the_shipped_design_export_every_statement() {
    let doc = random_walks(WALK_SEED, 3, 30).expect("export");
    let walks = doc["walks"].as_array().expect("walks");
    assert_eq!(walks.len(), 3);
    let steps: Vec<&Json> = walks
        .iter()
        .flat_map(|w| w["steps"].as_array().expect("steps").iter())
        .collect();
    check_document(&doc, &steps);
    // The same seed exports the same document.
    assert_eq!(doc, random_walks(WALK_SEED, 3, 30).expect("export"));
    // Guarded INSERTs of the shipped design carry the fence, verbatim from
    // capcat-proto (the model only recognises it by that text).
    let fenced = doc["sql"]
        .as_array()
        .expect("sql")
        .iter()
        .filter_map(Json::as_str)
        .filter(|s| s.starts_with("INSERT INTO") && s.contains("snapshot_manifest"))
        .all(|s| {
            s.contains(&capcat_proto::fragments::lease_fence(
                &capcat_proto::Tables::new("m").expect("prefix"),
            ))
        });
    assert!(fenced);
}

#[test]
fn the_barrier_only_counterexample_exports_a_fenced_out_write() {
    let (design, cfg, property) = rejected_designs()
        .into_iter()
        .find(|(d, ..)| d.name() == "BarrierOnly")
        .expect("BarrierOnly is a rejected design");
    let doc = counterexample(design, cfg, property).expect("export");
    let steps: Vec<&Json> = doc["steps"].as_array().expect("steps").iter().collect();
    check_document(&doc, &steps);
    assert_eq!(doc["violates"], "FencedOutWritesNothing");
    // The trace ends with a guarded statement landing rows.
    assert!(
        steps.iter().any(|s| s["action"]
            .as_str()
            .is_some_and(|a| a.starts_with("LandRows"))
            && s["tables_gained"]
                .as_object()
                .is_some_and(|t| !t.is_empty())),
        "{doc:#}"
    );
}

#[test]
#[ignore = "regenerates tests/corpus (minutes: one breadth-first search per rejected design)"]
fn regenerate_the_trace_corpus() {
    let dir = corpus();
    // Exported into a fresh sibling directory, then swapped in whole: a
    // file no longer exported (a design renamed or dropped) does not stay
    // behind, and a failed export leaves the committed corpus as it was.
    let name = dir
        .file_name()
        .expect("the corpus directory has a name")
        .to_string_lossy()
        .into_owned();
    let staging = dir.with_file_name(format!("{name}.exporting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("counterexamples")).expect("staging dir");
    for (design, cfg, property) in rejected_designs() {
        println!("{}: searching for its counterexample", design.name());
        let doc = counterexample(design, cfg, property)
            .unwrap_or_else(|e| panic!("{}: {e}", design.name()));
        let path = staging
            .join("counterexamples")
            .join(format!("{}.json", design.name()));
        std::fs::write(&path, corpus_text(&doc))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!(
            "{}: {} steps",
            path.display(),
            doc["steps"].as_array().map_or(0, Vec::len)
        );
    }
    let doc = random_walks(WALK_SEED, WALKS, WALK_STEPS).expect("walks");
    let path = staging.join("walks-shipped.json");
    std::fs::write(&path, corpus_text(&doc)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("{}: {WALKS} walks", path.display());
    let old = dir.with_file_name(format!("{name}.replaced-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&old);
    if dir.exists() {
        std::fs::rename(&dir, &old).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::rename(&staging, &dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let _ = std::fs::remove_dir_all(&old);
    println!("{}: replaced by the export", dir.display());
}

/// The committed files keep the steps that make each flaw what it is (read
/// from the files, so this holds between regenerations too).
#[test]
fn the_committed_counterexamples_keep_their_characteristic_steps() {
    for (design, ..) in rejected_designs() {
        let path = committed_corpus()
            .join("counterexamples")
            .join(format!("{}.json", design.name()));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Json = serde_json::from_str(&text).expect("the corpus is JSON");
        assert_characteristic_steps(design, &doc);
    }
}

/// A trace without one of those steps is refused.
#[test]
#[should_panic(expected = "lost \"PinSnapshot\"")]
fn a_counterexample_without_a_characteristic_step_is_refused() {
    let path = committed_corpus().join("counterexamples/LeaseIdFence.json");
    let text = std::fs::read_to_string(&path).expect("the committed LeaseIdFence trace");
    let mut doc: Json = serde_json::from_str(&text).expect("the corpus is JSON");
    doc["steps"]
        .as_array_mut()
        .expect("steps")
        .retain(|step| step["action"] != "PinSnapshot");
    assert_characteristic_steps(Design::LeaseIdFence, &doc);
}
