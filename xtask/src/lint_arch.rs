//! `lint-arch`: the architecture rules `ARCHITECTURE.md` states, checked.
//!
//! 1. **Layering.** Read from `cargo metadata --format-version 1 --no-deps`:
//!    every workspace crate's normal and build dependencies on other
//!    workspace crates must be among those [`LAYERS`] allows it (downward
//!    only: capcat-cli -> capcat-targets -> capcat-service -> {capcat-clickhouse, capcat-s3,
//!    capcat-pack} -> capcat-proto, and capcat-clickhouse -> capcat-chdb;
//!    capcat-proto and capcat-chdb depend on no capcat crate). A
//!    dev-dependency may reach lower or sideways, never upward. The tools
//!    (model-check, conform, tests, benches, xtask) may depend on anything, and
//!    nothing depends on them.
//! 2. **Rejected designs stay in the designs module.** No file under
//!    `crates/capcat-proto/src` outside `crates/capcat-proto/src/designs/`
//!    may contain one of [`DESIGN_MARKERS`] (the switches and names of the
//!    protocol designs the model rejected).
//! 3. **One drive loop.** No file under the `src/` of capcat-clickhouse,
//!    capcat-service, capcat-targets, capcat-cli or capcat-py calls a transport's `.execute(` but
//!    capcat-clickhouse's `drive.rs` and its `transport/` module (which
//!    implements it): every statement runs as a capcat-proto machine
//!    through `drive`.
//!
//! The rules are pure functions ([`edges_from_metadata`],
//! [`layering_violations`], [`design_leaks`], [`stray_executes`]) over data
//! the IO in [`run`] gathers, so their unit tests run on synthetic input.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cache};

/// Where a crate sits: a layer (0 is the bottom), or a tool above them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A library or the binary, at this height.
    Layer(u8),
    /// A tool (model checker, cross-crate tests, benchmarks, xtask): may
    /// depend on anything; no crate may depend on it.
    Tool,
}

impl Role {
    /// Height for comparing dev-dependencies; tools are above every layer.
    fn height(self) -> u16 {
        match self {
            Self::Layer(layer) => u16::from(layer),
            Self::Tool => u16::MAX,
        }
    }
}

/// One workspace crate: its role and the workspace crates its normal and
/// build dependencies may name.
#[derive(Debug)]
struct Placement {
    name: &'static str,
    role: Role,
    may_depend_on: &'static [&'static str],
}

/// What the two front ends, the `capcat` binary and the Python package, may
/// depend on: every library below them except capcat-chdb, which they reach
/// only through capcat-clickhouse.
const FRONT_END_DEPENDENCIES: &[&str] = &[
    "capcat-targets",
    "capcat-service",
    "capcat-clickhouse",
    "capcat-s3",
    "capcat-pack",
    "capcat-proto",
];

/// The layering. A workspace crate missing here is itself a violation:
/// place it before it ships.
const LAYERS: &[Placement] = &[
    Placement {
        name: "capcat-proto",
        role: Role::Layer(0),
        may_depend_on: &[],
    },
    Placement {
        name: "capcat-chdb",
        role: Role::Layer(0),
        may_depend_on: &[],
    },
    Placement {
        name: "capcat-pack",
        role: Role::Layer(1),
        may_depend_on: &["capcat-proto"],
    },
    Placement {
        name: "capcat-s3",
        role: Role::Layer(1),
        may_depend_on: &["capcat-proto"],
    },
    Placement {
        name: "capcat-clickhouse",
        role: Role::Layer(1),
        may_depend_on: &["capcat-proto", "capcat-chdb"],
    },
    Placement {
        name: "capcat-service",
        role: Role::Layer(2),
        may_depend_on: &[
            "capcat-clickhouse",
            "capcat-s3",
            "capcat-pack",
            "capcat-proto",
        ],
    },
    Placement {
        name: "capcat-targets",
        role: Role::Layer(3),
        may_depend_on: &["capcat-service", "capcat-clickhouse", "capcat-s3"],
    },
    Placement {
        name: "capcat-cli",
        role: Role::Layer(4),
        may_depend_on: FRONT_END_DEPENDENCIES,
    },
    Placement {
        name: "capcat-py",
        role: Role::Layer(4),
        may_depend_on: FRONT_END_DEPENDENCIES,
    },
    Placement {
        name: "capcat-model-check",
        role: Role::Tool,
        may_depend_on: &[],
    },
    Placement {
        name: "capcat-conform",
        role: Role::Tool,
        may_depend_on: &[],
    },
    Placement {
        name: "capcat-tests",
        role: Role::Tool,
        may_depend_on: &[],
    },
    Placement {
        name: "capcat-benches",
        role: Role::Tool,
        may_depend_on: &[],
    },
    Placement {
        name: "xtask",
        role: Role::Tool,
        may_depend_on: &[],
    },
];

/// Text that names a rejected protocol design: its configuration switch
/// (`cfg.is(..)`), its names (`VariantName`, `Variant::..`) or the cargo
/// features that compile it in. Allowed only under `designs/`.
const DESIGN_MARKERS: &[&str] = &[
    "cfg.is(",
    "VariantName",
    "Variant::",
    "feature = \"mutations\"",
    "feature = \"designs\"",
];

/// The one directory of capcat-proto's sources the markers may appear in,
/// relative to `crates/capcat-proto/src`.
const DESIGNS_DIR: &str = "designs/";

/// The guard fragments: their docs name the rejected design each guard
/// rules out, which is the reason for its shape.
const FRAGMENTS_DIR: &str = "fragments/";

/// How a dependency is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Normal,
    Build,
    Dev,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Normal => "normal",
            Self::Build => "build",
            Self::Dev => "dev",
        })
    }
}

/// A dependency of one workspace crate on another.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Edge {
    from: String,
    to: String,
    kind: Kind,
}

/// The workspace crates and the dependencies among them, from the JSON
/// `cargo metadata --format-version 1 --no-deps` prints (with `--no-deps`,
/// `packages` is exactly the workspace members). Self-edges (a crate's
/// dev-dependency on itself with more features) are left out.
fn edges_from_metadata(json: &str) -> Result<(Vec<String>, Vec<Edge>)> {
    let metadata: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("cargo metadata: bad JSON: {e}"))?;
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata: no `packages` array")?;
    let mut members = Vec::new();
    for package in packages {
        let name = package["name"]
            .as_str()
            .ok_or("cargo metadata: a package without a name")?;
        members.push(name.to_owned());
    }
    let mut edges = Vec::new();
    for package in packages {
        let from = package["name"].as_str().unwrap_or_default();
        let dependencies = package["dependencies"]
            .as_array()
            .ok_or_else(|| format!("cargo metadata: {from} has no `dependencies` array"))?;
        for dependency in dependencies {
            let to = dependency["name"]
                .as_str()
                .ok_or_else(|| format!("cargo metadata: a dependency of {from} has no name"))?;
            if to == from || !members.iter().any(|m| m == to) {
                continue;
            }
            let kind = match dependency["kind"].as_str() {
                None => Kind::Normal,
                Some("build") => Kind::Build,
                Some("dev") => Kind::Dev,
                Some(other) => {
                    return Err(format!(
                        "cargo metadata: {from} -> {to} has an unknown kind {other:?}"
                    )
                    .into());
                }
            };
            let edge = Edge {
                from: from.to_owned(),
                to: to.to_owned(),
                kind,
            };
            // A crate may declare the same dependency twice (per target).
            if !edges.contains(&edge) {
                edges.push(edge);
            }
        }
    }
    Ok((members, edges))
}

fn placement(name: &str) -> Option<&'static Placement> {
    LAYERS.iter().find(|p| p.name == name)
}

/// Every member missing from [`LAYERS`] and every edge against it, one
/// line each, naming the edge and the rule.
fn layering_violations(members: &[String], edges: &[Edge]) -> Vec<String> {
    let mut violations = Vec::new();
    for member in members {
        if placement(member).is_none() {
            violations.push(format!(
                "{member}: not placed in the layering (xtask/src/lint_arch.rs LAYERS); \
                 add it with its layer and allowed dependencies, and update ARCHITECTURE.md"
            ));
        }
    }
    for edge in edges {
        let (Some(from), Some(to)) = (placement(&edge.from), placement(&edge.to)) else {
            // Reported above as unplaced.
            continue;
        };
        let Edge {
            from: from_name,
            to: to_name,
            kind,
        } = edge;
        if from.role == Role::Tool {
            continue;
        }
        match kind {
            Kind::Normal | Kind::Build => {
                if !from.may_depend_on.contains(&to.name) {
                    let rule = if from.may_depend_on.is_empty() {
                        "on no capcat crate".to_owned()
                    } else {
                        format!("only on {}", from.may_depend_on.join(", "))
                    };
                    violations.push(format!(
                        "{from_name} -> {to_name} ({kind} dependency): {from_name} may depend \
                         {rule}"
                    ));
                }
            }
            Kind::Dev => {
                if to.role.height() > from.role.height() {
                    violations.push(format!(
                        "{from_name} -> {to_name} (dev dependency): upward ({to_name} is above \
                         {from_name}); a dev-dependency may reach lower or sideways only"
                    ));
                }
            }
        }
    }
    violations
}

/// One line that breaks a rule: a rejected design's marker outside the
/// designs module, or a statement sent outside the drive loop.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Leak {
    /// The file, relative to the tree the rule reads (`crates/capcat-proto/src`
    /// for designs, `crates` for the drive loop), with `/` separators.
    path: String,
    /// 1-based.
    line: usize,
    marker: String,
    text: String,
}

impl fmt::Display for Leak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: `{}`: {}",
            self.path,
            self.line,
            self.marker,
            self.text.trim()
        )
    }
}

/// The one place the feature gate may stand outside [`DESIGNS_DIR`]: the
/// `cfg` line right above `pub mod designs;` in `lib.rs`.
fn is_designs_gate(path: &str, lines: &[&str], index: usize) -> bool {
    path == "lib.rs" && lines.get(index + 1).map(|l| l.trim()) == Some("pub mod designs;")
}

/// Whether `line` names `name` as a whole word (not inside a longer
/// identifier).
fn names_word(line: &str, name: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + name.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Every line of `files` (path relative to `crates/capcat-proto/src`,
/// contents) outside [`DESIGNS_DIR`] that contains one of
/// [`DESIGN_MARKERS`] (but the feature gate of the designs module itself),
/// once per marker found on it; and every line that names one of
/// `rejected` (the rejected designs' names) outside [`DESIGNS_DIR`] and
/// [`FRAGMENTS_DIR`], whose docs say which rejected design each guard rules
/// out.
fn design_leaks(files: &[(String, String)], rejected: &[String]) -> Vec<Leak> {
    let mut leaks = Vec::new();
    for (path, text) in files {
        if path.starts_with(DESIGNS_DIR) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let markers = DESIGN_MARKERS
                .iter()
                .filter(|m| line.contains(**m) && !is_designs_gate(path, &lines, index))
                .map(|m| (*m).to_owned());
            let names = rejected
                .iter()
                .filter(|n| !path.starts_with(FRAGMENTS_DIR) && names_word(line, n))
                .cloned();
            for marker in markers.chain(names) {
                leaks.push(Leak {
                    path: format!("crates/capcat-proto/src/{path}"),
                    line: index + 1,
                    marker,
                    text: (*line).to_owned(),
                });
            }
        }
    }
    leaks
}

/// The crates whose `src/` may send statements only through the drive loop.
const DRIVEN_CRATES: [&str; 5] = [
    "capcat-clickhouse",
    "capcat-service",
    "capcat-targets",
    "capcat-cli",
    "capcat-py",
];

/// The files (relative to `crates/`) allowed to call `.execute(`: the
/// drive loop, and the transports that implement it.
fn may_execute(path: &str) -> bool {
    path == "capcat-clickhouse/src/drive.rs" || path.starts_with("capcat-clickhouse/src/transport/")
}

/// Every line of `files` (path relative to `crates/`, contents) that calls
/// `.execute(` outside the drive loop and the transports, but in comments.
fn stray_executes(files: &[(String, String)]) -> Vec<Leak> {
    let mut leaks = Vec::new();
    for (path, text) in files {
        if may_execute(path) {
            continue;
        }
        for (index, line) in text.lines().enumerate() {
            // White space removed, so `. execute (` is caught too; a method
            // call (`.execute(`) and a path call (`Transport::execute(`,
            // `<T as Transport>::execute(`) are both a statement sent.
            let code: String = line
                .split("//")
                .next()
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            if code.contains(".execute(") || code.contains("::execute(") {
                leaks.push(Leak {
                    path: format!("crates/{path}"),
                    line: index + 1,
                    marker: ".execute(".to_owned(),
                    text: line.to_owned(),
                });
            }
        }
    }
    leaks
}

/// Every file under `dir`, as (path relative to `dir` with `/`
/// separators, contents read lossily), in a stable order.
fn read_tree(dir: &Path) -> Result<Vec<(String, String)>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<()> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let bytes = std::fs::read(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let relative = path
                    .strip_prefix(root)
                    .map_err(|e| {
                        format!("{} is not under {}: {e}", path.display(), root.display())
                    })?
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((relative, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// Runs both checks and fails, listing every violation, when either finds one.
pub(crate) fn run() -> Result<()> {
    let root = cache::repo_root();
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let json = String::from_utf8(output.stdout)
        .map_err(|e| format!("cargo metadata printed non-UTF-8: {e}"))?;
    let (members, edges) = edges_from_metadata(&json)?;
    let layering = layering_violations(&members, &edges);
    let rejected = crate::spec::rejected_publication_designs(&root)?;
    let leaks = design_leaks(
        &read_tree(&root.join("crates/capcat-proto/src"))?,
        &rejected,
    );
    let mut driven = Vec::new();
    for krate in DRIVEN_CRATES {
        let src = format!("{krate}/src");
        for (path, text) in read_tree(&root.join("crates").join(&src))? {
            driven.push((format!("{src}/{path}"), text));
        }
    }
    let strays = stray_executes(&driven);

    for violation in &layering {
        eprintln!("lint-arch: layering: {violation}");
    }
    for leak in &leaks {
        eprintln!("lint-arch: designs: {leak}");
    }
    for stray in &strays {
        eprintln!("lint-arch: drive loop: {stray}");
    }
    eprintln!(
        "lint-arch: {} crate(s), {} workspace edge(s): {} layering violation(s); \
         {} rejected-design marker(s) outside crates/capcat-proto/src/designs/; \
         {} statement(s) sent outside the drive loop",
        members.len(),
        edges.len(),
        layering.len(),
        leaks.len(),
        strays.len()
    );
    if layering.is_empty() && leaks.is_empty() && strays.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} layering violation(s), {} rejected-design marker(s) outside designs/, \
             {} statement(s) sent outside the drive loop \
             (listed above; the rules are in ARCHITECTURE.md)",
            layering.len(),
            leaks.len(),
            strays.len()
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str, kind: Kind) -> Edge {
        Edge {
            from: from.to_owned(),
            to: to.to_owned(),
            kind,
        }
    }

    fn members() -> Vec<String> {
        LAYERS.iter().map(|p| p.name.to_owned()).collect()
    }

    #[test]
    fn metadata_yields_workspace_edges_with_their_kinds() {
        let json = r#"{"packages": [
            {"name": "capcat-proto", "dependencies": [
                {"name": "thiserror", "kind": null},
                {"name": "capcat-proto", "kind": "dev"}
            ]},
            {"name": "capcat-clickhouse", "dependencies": [
                {"name": "capcat-proto", "kind": null, "path": "/x"},
                {"name": "capcat-chdb", "kind": "build", "path": "/y"},
                {"name": "capcat-chdb", "kind": "build", "path": "/y", "target": "cfg(unix)"},
                {"name": "capcat-service", "kind": "dev", "path": "/z"}
            ]},
            {"name": "capcat-chdb", "dependencies": []},
            {"name": "capcat-service", "dependencies": []}
        ]}"#;
        let (members, edges) = edges_from_metadata(json).expect("parses");
        assert_eq!(
            members,
            [
                "capcat-proto",
                "capcat-clickhouse",
                "capcat-chdb",
                "capcat-service"
            ]
        );
        assert_eq!(
            edges,
            [
                edge("capcat-clickhouse", "capcat-proto", Kind::Normal),
                edge("capcat-clickhouse", "capcat-chdb", Kind::Build),
                edge("capcat-clickhouse", "capcat-service", Kind::Dev),
            ],
            "registry crates and self-edges are left out, duplicates merged"
        );
        assert!(edges_from_metadata("{}").is_err());
        assert!(edges_from_metadata("not json").is_err());
    }

    #[test]
    fn the_shipped_graph_passes() {
        // The workspace graph as `cargo metadata` reports it on this branch
        // (all 23 edges).
        let edges = [
            edge("capcat-proto", "capcat-chdb", Kind::Dev),
            edge("capcat-chdb", "capcat-proto", Kind::Dev),
            edge("capcat-clickhouse", "capcat-chdb", Kind::Normal),
            edge("capcat-clickhouse", "capcat-proto", Kind::Normal),
            edge("capcat-clickhouse", "capcat-chdb", Kind::Dev),
            edge("capcat-clickhouse", "capcat-proto", Kind::Dev),
            edge("capcat-service", "capcat-clickhouse", Kind::Normal),
            edge("capcat-service", "capcat-pack", Kind::Normal),
            edge("capcat-service", "capcat-proto", Kind::Normal),
            edge("capcat-service", "capcat-s3", Kind::Normal),
            edge("capcat-service", "capcat-chdb", Kind::Dev),
            edge("capcat-cli", "capcat-clickhouse", Kind::Normal),
            edge("capcat-cli", "capcat-pack", Kind::Normal),
            edge("capcat-cli", "capcat-proto", Kind::Normal),
            edge("capcat-cli", "capcat-s3", Kind::Normal),
            edge("capcat-cli", "capcat-service", Kind::Normal),
            edge("capcat-model-check", "capcat-proto", Kind::Normal),
            edge("capcat-tests", "capcat-chdb", Kind::Normal),
            edge("capcat-tests", "capcat-clickhouse", Kind::Normal),
            edge("capcat-tests", "capcat-model-check", Kind::Normal),
            edge("capcat-tests", "capcat-proto", Kind::Normal),
            edge("capcat-benches", "capcat-pack", Kind::Dev),
            edge("xtask", "capcat-chdb", Kind::Normal),
        ];
        assert_eq!(
            layering_violations(&members(), &edges),
            Vec::<String>::new()
        );
    }

    #[test]
    fn upward_skipping_and_unlisted_edges_are_named() {
        let edges = [
            // Upward, normal.
            edge("capcat-proto", "capcat-clickhouse", Kind::Normal),
            // The engine may only be reached through the catalog adapter.
            edge("capcat-cli", "capcat-chdb", Kind::Normal),
            edge("capcat-service", "capcat-chdb", Kind::Build),
            // The engine depends on no capcat crate.
            edge("capcat-chdb", "capcat-proto", Kind::Normal),
            // Sideways, normal: not listed.
            edge("capcat-s3", "capcat-pack", Kind::Normal),
            // Upward dev-dependencies, and on a tool.
            edge("capcat-clickhouse", "capcat-service", Kind::Dev),
            edge("capcat-proto", "capcat-model-check", Kind::Dev),
            // Sideways and lower dev-dependencies are fine.
            edge("capcat-s3", "capcat-pack", Kind::Dev),
            edge("capcat-cli", "capcat-chdb", Kind::Dev),
        ];
        let violations = layering_violations(&members(), &edges);
        let expected_edges = [
            "capcat-proto -> capcat-clickhouse (normal dependency)",
            "capcat-cli -> capcat-chdb (normal dependency)",
            "capcat-service -> capcat-chdb (build dependency)",
            "capcat-chdb -> capcat-proto (normal dependency)",
            "capcat-s3 -> capcat-pack (normal dependency)",
            "capcat-clickhouse -> capcat-service (dev dependency): upward",
            "capcat-proto -> capcat-model-check (dev dependency): upward",
        ];
        assert_eq!(violations.len(), expected_edges.len(), "{violations:#?}");
        for (violation, expected) in violations.iter().zip(expected_edges) {
            assert!(violation.starts_with(expected), "{violation}");
        }
        assert!(
            violations[3].ends_with("capcat-chdb may depend on no capcat crate"),
            "{}",
            violations[3]
        );
    }

    #[test]
    fn an_unplaced_crate_is_a_violation_and_tools_depend_on_anything() {
        let mut members = members();
        members.push("capcat-new".to_owned());
        let edges = [
            edge("capcat-new", "capcat-proto", Kind::Normal),
            edge("xtask", "capcat-cli", Kind::Normal),
            edge("capcat-tests", "capcat-service", Kind::Build),
        ];
        let violations = layering_violations(&members, &edges);
        assert_eq!(violations.len(), 1, "{violations:#?}");
        assert!(violations[0].starts_with("capcat-new: not placed"));
    }

    #[test]
    fn design_markers_are_found_outside_designs_only() {
        let file = |path: &str, text: &str| (path.to_owned(), text.to_owned());
        let files = [
            file(
                "config.rs",
                "pub enum Variant {}\nif cfg.is(Variant::LateFence) {\n",
            ),
            file("publish/sql.rs", "let n = VariantName::Shipped;\n"),
            file(
                "lib.rs",
                "#[cfg(feature = \"mutations\")]\npub mod mutations;\n",
            ),
            file(
                "index/machine.rs",
                "#[cfg(any(test, feature = \"designs\"))]\n",
            ),
            file(
                "lease/claim.rs",
                "// plain code, no marker: variant, cfg.iso\n",
            ),
            // The designs module may hold all of them.
            file(
                "designs/mod.rs",
                "cfg.is( VariantName Variant:: feature = \"mutations\" feature = \"designs\"",
            ),
            file("designs/publish/late_fence.rs", "Variant::LateFence"),
        ];
        let leaks = design_leaks(&files, &[]);
        let found: Vec<(&str, usize, &str)> = leaks
            .iter()
            .map(|l| (l.path.as_str(), l.line, l.marker.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("crates/capcat-proto/src/config.rs", 2, "cfg.is("),
                ("crates/capcat-proto/src/config.rs", 2, "Variant::"),
                ("crates/capcat-proto/src/publish/sql.rs", 1, "VariantName"),
                (
                    "crates/capcat-proto/src/lib.rs",
                    1,
                    "feature = \"mutations\""
                ),
                (
                    "crates/capcat-proto/src/index/machine.rs",
                    1,
                    "feature = \"designs\""
                ),
            ]
        );
        assert_eq!(
            leaks[2].to_string(),
            "crates/capcat-proto/src/publish/sql.rs:1: `VariantName`: \
             let n = VariantName::Shipped;"
        );
        // A directory merely named like it is not the designs module.
        assert_eq!(
            design_leaks(&[file("not_designs/x.rs", "Variant::A")], &[]).len(),
            1
        );
    }

    #[test]
    fn the_designs_gate_in_lib_rs_passes_and_design_names_are_found_in_machines_only() {
        let file = |path: &str, text: &str| (path.to_owned(), text.to_owned());
        let gate = "#[cfg(any(test, feature = \"designs\"))]\npub mod designs;\n";
        let rejected = ["BarrierOnly".to_owned(), "LeaseIdFence".to_owned()];
        let files = [
            file("lib.rs", gate),
            // The same gate anywhere else, or above another module, is a leak.
            file("publish/mod.rs", gate),
            file("lib.rs", "#[cfg(feature = \"designs\")]\npub mod other;\n"),
            file(
                "lease/claim.rs",
                "// taking it at once is the BarrierOnly design\n",
            ),
            // A longer identifier is not the name.
            file(
                "index/machine.rs",
                "let barrier = BarrierOnlyish + LeaseIdFenced;\n",
            ),
            // The fragments say which design each guard rules out.
            file(
                "fragments/mod.rs",
                "/// (`LeaseIdFence`) would be renewed\n",
            ),
        ];
        let found: Vec<(String, usize, String)> = design_leaks(&files, &rejected)
            .into_iter()
            .map(|l| (l.path, l.line, l.marker))
            .collect();
        let want =
            |p: &str, l: usize, m: &str| (format!("crates/capcat-proto/src/{p}"), l, m.to_owned());
        assert_eq!(
            found,
            [
                want("publish/mod.rs", 1, "feature = \"designs\""),
                want("lib.rs", 1, "feature = \"designs\""),
                want("lease/claim.rs", 1, "BarrierOnly"),
            ]
        );
    }

    #[test]
    fn a_statement_sent_outside_the_drive_loop_is_found_and_the_loop_itself_is_not() {
        let files = [
            (
                "capcat-clickhouse/src/drive.rs".to_owned(),
                "let input = transport.execute(&stmt).await;".to_owned(),
            ),
            (
                "capcat-clickhouse/src/transport/counting.rs".to_owned(),
                "self.inner.execute(stmt).await".to_owned(),
            ),
            (
                "capcat-clickhouse/src/catalog.rs".to_owned(),
                "// the drive loop calls .execute( for us\nself.transport.execute(&stmt)"
                    .to_owned(),
            ),
            (
                "capcat-cli/src/commands.rs".to_owned(),
                "let rows = catalog.transport().execute(&pin).await?;".to_owned(),
            ),
            (
                "capcat-service/src/cycle.rs".to_owned(),
                "fn execute(&self) {}\nTransport::execute(&*t, &stmt)\nt . execute (&stmt)"
                    .to_owned(),
            ),
        ];
        let strays = stray_executes(&files);
        let found: Vec<(&str, usize)> = strays.iter().map(|s| (s.path.as_str(), s.line)).collect();
        assert_eq!(
            found,
            [
                ("crates/capcat-clickhouse/src/catalog.rs", 2),
                ("crates/capcat-cli/src/commands.rs", 1),
                ("crates/capcat-service/src/cycle.rs", 2),
                ("crates/capcat-service/src/cycle.rs", 3)
            ]
        );
    }
}
