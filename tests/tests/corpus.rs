//! The trace corpus (`tests/corpus/`): counterexamples of every rejected
//! design and seeded random walks of the shipped design, exported from
//! capcat-model-check as JSON (`capcat_tests::traces`).
//!
//! Regenerate with `cargo xtask corpus` (which runs
//! `cargo test -p capcat-tests --test corpus -- --ignored regenerate_the_trace_corpus`);
//! a change to the model or to the SQL that changes a trace then shows as a
//! diff under `tests/corpus/`, and `cargo xtask corpus --check` fails on it.
//! `CAPCAT_CORPUS_DIR` writes the corpus elsewhere (the check's temp dir).

use std::path::PathBuf;

use capcat_tests::traces::{counterexample, random_walks, rejected_designs};
use serde_json::Value as Json;

/// The seed of the corpus's random walks.
const WALK_SEED: u64 = 0x00CA_9CA7_5EED;
/// Walks in the corpus, and their length bound.
const WALKS: usize = 20;
const WALK_STEPS: usize = 40;

fn corpus() -> PathBuf {
    std::env::var_os("CAPCAT_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        PathBuf::from,
    )
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
        let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!(
            "{}: {} steps",
            path.display(),
            doc["steps"].as_array().map_or(0, Vec::len)
        );
    }
    let doc = random_walks(WALK_SEED, WALKS, WALK_STEPS).expect("walks");
    let path = staging.join("walks-shipped.json");
    let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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
