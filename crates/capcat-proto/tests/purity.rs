//! Architecture Invariant: capcat-proto never awaits, reads no clock and
//! draws no randomness, and depends on no IO stack.

use std::path::{Path, PathBuf};
use std::process::Command;

const FORBIDDEN_CRATES: &[&str] = &["tokio", "aws-", "clickhouse", "hyper", "reqwest"];
const FORBIDDEN_CALLS: &[&str] = &[
    "SystemTime",
    "Instant",
    "rand::",
    "thread_rng",
    "getrandom",
    "Uuid::new_v4",
    ".await",
    "std::fs",
    "std::net",
    "std::thread",
];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_normal_dependency_tree_has_no_runtime_or_io_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "capcat-proto",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(crate_dir())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.contains("capcat-proto"),
        "unexpected cargo tree output: {tree}"
    );
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        for bad in FORBIDDEN_CRATES {
            assert!(
                !name.starts_with(bad),
                "capcat-proto depends on {name} ({line})"
            );
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments, so a doc comment explaining why
/// `Instant` is not used does not trip the check.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_source_calls_no_clock_and_no_random_number_generator() {
    let mut files = Vec::new();
    rust_files(&crate_dir().join("src"), &mut files);
    assert!(files.len() > 5, "found the sources");
    let mut hits = Vec::new();
    for file in &files {
        let code = code_of(&std::fs::read_to_string(file).expect("readable source"));
        for bad in FORBIDDEN_CALLS {
            if code.contains(bad) {
                hits.push(format!("{}: {bad}", file.display()));
            }
        }
    }
    assert!(hits.is_empty(), "impure calls in capcat-proto: {hits:#?}");
}
