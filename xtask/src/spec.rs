//! `check-specs`: parse every TLA+ spec and match its names with the model.
//!
//! TLC cannot be installed from the package registries this project may
//! use, so CI checks what it can without it:
//!
//! 1. Every `spec/*.tla` parses with the TLA+ tree-sitter grammar (npm
//!    `@tlaplus/tree-sitter-tlaplus` on `tree-sitter` 0.22.4, installed into
//!    `<cache>/tlaplus-parser/` from the committed `spec/tools/package.json`
//!    and lock file, reused when present). Any ERROR or MISSING node fails
//!    the check with `file:line:col`. `spec/tools/parse.js` does the parsing
//!    and prints one fact per line.
//! 2. The names agree with `model-check/src/names.rs`, read as text (see
//!    its module doc for the format): for each model, the operators `Next`
//!    names are exactly `ACTIONS`; `spec/<MODEL>.cfg` lists exactly
//!    `INVARIANTS` + `TLA_ONLY_INVARIANTS` and exactly `PROPERTIES`, each
//!    defined in the spec, with `Design` set to the shipped variant; the
//!    spec's `Designs` set is exactly `VARIANTS`; and every rejected variant
//!    has its `spec/variants/<MODEL>.<VARIANT>.cfg` (and no cfg names a
//!    variant that does not exist). No spec may exist without a model.
//! 3. Every replay in `spec/replays/` parses and runs at the bounds of the
//!    variant cfg it replays, with its shipped-design control beside it
//!    (`spec_replays`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cache, spec_replays};

/// The npm packages the parser needs, as `spec/tools/package.json` pins them.
const PARSER_PACKAGES: [&str; 2] = ["tree-sitter", "@tlaplus/tree-sitter-tlaplus"];

/// Parses `spec/*.tla` and checks action and invariant names.
pub(crate) fn check() -> Result<()> {
    let root = cache::repo_root();
    let spec_dir = root.join("spec");
    let node_modules = ensure_parser(&spec_dir.join("tools"))?;

    let specs = files_with_extension(&spec_dir, "tla")?;
    if specs.is_empty() {
        return Err(format!("no .tla file in {}", spec_dir.display()).into());
    }
    let parsed = parse_specs(&spec_dir, &node_modules, &specs)?;

    let names_path = root.join("model-check").join("src").join("names.rs");
    let names_text = fs::read_to_string(&names_path)
        .map_err(|e| format!("cannot read {}: {e}", names_path.display()))?;
    let models = parse_names(&names_text).map_err(|e| format!("{}: {e}", names_path.display()))?;

    let mut problems = Vec::new();
    for model in &models {
        check_model(&spec_dir, model, &parsed, &mut problems)?;
    }
    let replays = spec_replays::check(&spec_dir, &node_modules, &mut problems)?;
    let known: BTreeSet<&str> = models.iter().map(|m| m.model.as_str()).collect();
    for module in parsed.keys() {
        if !known.contains(module.as_str()) {
            problems.push(format!(
                "spec/{module}.tla has no model in model-check/src/names.rs"
            ));
        }
    }

    if problems.is_empty() {
        for model in &models {
            eprintln!(
                "check-specs: {} parses; {} actions, {} invariants (+{} TLA-only), \
                 {} properties, {} designs match model-check/src/names.rs",
                model.model,
                model.actions.len(),
                model.invariants.len(),
                model.tla_only_invariants.len(),
                model.properties.len(),
                model.variants.len(),
            );
        }
        eprintln!("check-specs: {replays} replay cfg(s) in spec/replays/ match their variant cfgs");
        Ok(())
    } else {
        for problem in &problems {
            eprintln!("check-specs: {problem}");
        }
        Err(format!(
            "{} mismatch(es) between spec/ and model-check/src/names.rs \
             (or between a replay and its variant cfg)",
            problems.len()
        )
        .into())
    }
}

/// Installs the parser's npm packages into the cache, reusing an install
/// made from the same lock file. Returns its `node_modules` directory.
fn ensure_parser(tools: &Path) -> Result<PathBuf> {
    let dir = cache::dir()?.join("tlaplus-parser");
    let node_modules = dir.join("node_modules");
    let lock = fs::read(tools.join("package-lock.json"))
        .map_err(|e| format!("cannot read spec/tools/package-lock.json: {e}"))?;
    let installed = PARSER_PACKAGES
        .iter()
        .all(|package| node_modules.join(package).join("package.json").is_file());
    let same_lock = fs::read(dir.join("package-lock.json")).is_ok_and(|cached| cached == lock);
    if installed && same_lock {
        return Ok(node_modules);
    }

    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for file in ["package.json", "package-lock.json"] {
        fs::copy(tools.join(file), dir.join(file))
            .map_err(|e| format!("cannot copy spec/tools/{file} to {}: {e}", dir.display()))?;
    }
    // `--legacy-peer-deps`: the grammar declares `tree-sitter-cli` as a peer,
    // which only its authors need (to regenerate the parser).
    cache::run(
        Command::new("npm")
            .args(["ci", "--legacy-peer-deps", "--no-audit", "--no-fund"])
            .current_dir(&dir),
    )
    .map_err(|e| format!("{e} (is npm installed?)"))?;
    Ok(node_modules)
}

/// The files of `dir` ending in `.<extension>`, sorted.
pub(crate) fn files_with_extension(dir: &Path, extension: &str) -> Result<Vec<PathBuf>> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.is_file() && path.extension().is_some_and(|ext| ext == extension) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// What the parser found in one module.
#[derive(Debug, Default)]
pub(crate) struct ParsedSpec {
    /// Operators defined at module level.
    pub(crate) operators: BTreeSet<String>,
    /// Module-level operators that `Next` names directly.
    actions: BTreeSet<String>,
    /// The strings of the `Designs` set.
    designs: BTreeSet<String>,
}

/// Runs `spec/tools/parse.js` over `specs`; fails on any syntax error.
/// Returns the parsed modules by module name.
pub(crate) fn parse_specs(
    spec_dir: &Path,
    node_modules: &Path,
    specs: &[PathBuf],
) -> Result<BTreeMap<String, ParsedSpec>> {
    let script = spec_dir.join("tools").join("parse.js");
    let output = Command::new("node")
        .arg(&script)
        .args(specs)
        .env("NODE_PATH", node_modules)
        .output()
        .map_err(|e| {
            format!(
                "cannot run node {}: {e} (is node installed?)",
                script.display()
            )
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);

    let mut by_file: BTreeMap<String, (String, ParsedSpec)> = BTreeMap::new();
    let mut syntax = Vec::new();
    for line in stdout.lines() {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        if kind == "SYNTAX" {
            syntax.push(rest.to_owned());
            continue;
        }
        let (file, value) = rest.split_once(' ').unwrap_or((rest, ""));
        let entry = by_file.entry(file.to_owned()).or_default();
        match kind {
            "MODULE" => entry.0 = value.to_owned(),
            "OPERATOR" => {
                entry.1.operators.insert(value.to_owned());
            }
            "ACTION" => {
                entry.1.actions.insert(value.to_owned());
            }
            "DESIGN" => {
                entry.1.designs.insert(value.to_owned());
            }
            _ => return Err(format!("unexpected line from parse.js: {line}").into()),
        }
    }
    for error in &syntax {
        eprintln!("check-specs: syntax error at {error}");
    }
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "parse.js failed ({}) with {} syntax error(s){}{}",
            output.status,
            syntax.len(),
            if stderr.trim().is_empty() { "" } else { ":\n" },
            stderr.trim()
        )
        .into());
    }

    let mut modules = BTreeMap::new();
    for (file, (module, parsed)) in by_file {
        let stem = Path::new(&file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if module != stem {
            return Err(
                format!("{file} declares MODULE {module}; TLC needs it named {stem}").into(),
            );
        }
        modules.insert(module, parsed);
    }
    Ok(modules)
}

/// The rejected designs of the publication model (its `VARIANTS` but the
/// shipped one), as `model-check/src/names.rs` declares them.
pub(crate) fn rejected_publication_designs(root: &std::path::Path) -> Result<Vec<String>> {
    let names_path = root.join("model-check").join("src").join("names.rs");
    let names_text = fs::read_to_string(&names_path)
        .map_err(|e| format!("cannot read {}: {e}", names_path.display()))?;
    let models = parse_names(&names_text).map_err(|e| format!("{}: {e}", names_path.display()))?;
    let publication = models
        .into_iter()
        .find(|m| m.model == "Publication")
        .ok_or_else(|| format!("{} has no Publication model", names_path.display()))?;
    Ok(publication.variants.into_iter().skip(1).collect())
}

/// The names of one model, as `model-check/src/names.rs` declares them.
#[derive(Debug, Default, PartialEq, Eq)]
struct ModelNames {
    /// The TLA+ module name (`MODEL`).
    model: String,
    /// `ACTIONS`.
    actions: Vec<String>,
    /// `INVARIANTS`.
    invariants: Vec<String>,
    /// `TLA_ONLY_INVARIANTS`.
    tla_only_invariants: Vec<String>,
    /// `PROPERTIES`.
    properties: Vec<String>,
    /// `VARIANTS`, the shipped design first.
    variants: Vec<String>,
}

/// Reads `names.rs` as text. The format is documented at the top of that
/// file: `pub mod <model> {` blocks closed by a `}` at column 0, string
/// constants `pub const X: &str = "...";` and lists
/// `pub const LIST: &[&str] = &[X, Y, "literal"];`.
fn parse_names(text: &str) -> std::result::Result<Vec<ModelNames>, String> {
    let mut models = Vec::new();
    let mut current: Option<OpenModel> = None;
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let number = index + 1;
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("pub mod ") {
            let name = rest.trim_end_matches('{').trim();
            if current.is_some() {
                return Err(format!(
                    "line {number}: `pub mod {name}` inside another model"
                ));
            }
            current = Some(OpenModel {
                module: name.to_owned(),
                ..OpenModel::default()
            });
            continue;
        }
        if line == "}" {
            let Some(OpenModel {
                module,
                strings,
                lists,
            }) = current.take()
            else {
                return Err(format!("line {number}: `}}` closes no model"));
            };
            models.push(model_from(&module, &strings, &lists)?);
            continue;
        }
        let Some(OpenModel { strings, lists, .. }) = current.as_mut() else {
            continue;
        };
        let Some(rest) = trimmed.strip_prefix("pub const ") else {
            continue;
        };
        let (name, rest) = rest
            .split_once(':')
            .ok_or_else(|| format!("line {number}: expected `pub const NAME: ...`"))?;
        let rest = rest.trim();
        if let Some(value) = rest.strip_prefix("&str = ") {
            let literal = value.trim_end_matches(';').trim();
            strings.insert(name.to_owned(), unquote(literal, number)?);
        } else if let Some(value) = rest.strip_prefix("&[&str] = &[") {
            // The list may continue over the following lines up to `];`.
            let mut body = value.to_owned();
            while !body.contains("];") {
                let (_, next) = lines
                    .next()
                    .ok_or_else(|| format!("line {number}: list `{name}` is never closed"))?;
                body.push_str(next);
            }
            let body = body.split("];").next().unwrap_or_default();
            let mut items = Vec::new();
            for item in body
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
            {
                if item.starts_with('"') {
                    items.push(unquote(item, number)?);
                } else {
                    items.push(strings.get(item).cloned().ok_or_else(|| {
                        format!("line {number}: `{item}` is not a name declared above")
                    })?);
                }
            }
            lists.insert(name.to_owned(), items);
        }
    }
    if let Some(OpenModel { module, .. }) = current {
        return Err(format!(
            "`pub mod {module}` is never closed by a `}}` at column 0"
        ));
    }
    if models.is_empty() {
        return Err("declares no model".to_owned());
    }
    Ok(models)
}

/// A `pub mod` block of names.rs being read.
#[derive(Debug, Default)]
struct OpenModel {
    /// The Rust module's name.
    module: String,
    /// Its string constants, by constant name.
    strings: BTreeMap<String, String>,
    /// Its lists, by constant name, resolved to strings.
    lists: BTreeMap<String, Vec<String>>,
}

/// A string literal without escapes, unquoted.
fn unquote(literal: &str, line: usize) -> std::result::Result<String, String> {
    literal
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .filter(|s| !s.contains(['"', '\\']))
        .map(str::to_owned)
        .ok_or_else(|| format!("line {line}: expected a plain string literal, found `{literal}`"))
}

/// Assembles one model's names, requiring every part and no duplicates.
fn model_from(
    module: &str,
    strings: &BTreeMap<String, String>,
    lists: &BTreeMap<String, Vec<String>>,
) -> std::result::Result<ModelNames, String> {
    let list = |name: &str| -> std::result::Result<Vec<String>, String> {
        let items = lists
            .get(name)
            .cloned()
            .ok_or_else(|| format!("model `{module}` has no `{name}` list"))?;
        let unique: BTreeSet<&String> = items.iter().collect();
        if unique.len() != items.len() {
            return Err(format!("model `{module}`: `{name}` names something twice"));
        }
        Ok(items)
    };
    let names = ModelNames {
        model: strings
            .get("MODEL")
            .cloned()
            .ok_or_else(|| format!("model `{module}` has no `MODEL` name"))?,
        actions: list("ACTIONS")?,
        invariants: list("INVARIANTS")?,
        tla_only_invariants: list("TLA_ONLY_INVARIANTS")?,
        properties: list("PROPERTIES")?,
        variants: list("VARIANTS")?,
    };
    if names.variants.is_empty() {
        return Err(format!(
            "model `{module}`: `VARIANTS` must list the shipped design first"
        ));
    }
    Ok(names)
}

/// What a TLC `.cfg` file lists.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Cfg {
    /// Names under `INVARIANT`/`INVARIANTS`.
    pub(crate) invariants: BTreeSet<String>,
    /// Names under `PROPERTY`/`PROPERTIES`.
    pub(crate) properties: BTreeSet<String>,
    /// Every constant of the `CONSTANT`/`CONSTANTS` sections, by name: its
    /// value's tokens joined by single spaces (`{p1, p2}`, `"Shipped"`),
    /// or `<- Op` for a substitution.
    pub(crate) constants: BTreeMap<String, String>,
}

impl Cfg {
    /// The string assigned to the `Design` constant, if any.
    pub(crate) fn design(&self) -> Option<&str> {
        self.constants
            .get("Design")
            .map(|value| value.trim_matches('"'))
    }
}

/// Reads the parts of a TLC config that carry names. Comments (`\*` to the
/// end of the line, `(* ... *)`) are skipped.
pub(crate) fn parse_cfg(text: &str) -> Cfg {
    const KEYWORDS: [&str; 18] = [
        "CONSTANT",
        "CONSTANTS",
        "INIT",
        "NEXT",
        "SPECIFICATION",
        "INVARIANT",
        "INVARIANTS",
        "PROPERTY",
        "PROPERTIES",
        "CONSTRAINT",
        "CONSTRAINTS",
        "ACTION_CONSTRAINT",
        "ACTION_CONSTRAINTS",
        "SYMMETRY",
        "VIEW",
        "CHECK_DEADLOCK",
        "ALIAS",
        "POSTCONDITION",
    ];
    let mut without_comments = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let line_comment = rest.find("\\*");
        let block_comment = rest.find("(*");
        match (line_comment, block_comment) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                without_comments.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |end| &rest[l + end..]);
            }
            (_, Some(b)) => {
                without_comments.push_str(&rest[..b]);
                rest = rest[b..].find("*)").map_or("", |end| &rest[b + end + 2..]);
            }
            _ => {
                without_comments.push_str(rest);
                rest = "";
            }
        }
    }

    let tokens: Vec<&str> = without_comments.split_whitespace().collect();
    let mut cfg = Cfg::default();
    let mut section = "";
    // The constant whose value the tokens that follow belong to.
    let mut constant: Option<&str> = None;
    for (i, token) in tokens.iter().enumerate() {
        if KEYWORDS.contains(token) {
            section = token;
            constant = None;
            continue;
        }
        if matches!(section, "CONSTANT" | "CONSTANTS") {
            let next = tokens.get(i + 1).copied();
            if matches!(next, Some("=" | "<-")) {
                constant = Some(token);
                cfg.constants.insert((*token).to_owned(), String::new());
            } else if let Some(name) = constant {
                let value = cfg.constants.entry(name.to_owned()).or_default();
                if !value.is_empty() {
                    value.push(' ');
                }
                // The `=` of an assignment is the value's start, not part of it.
                if !(value.is_empty() && *token == "=") {
                    value.push_str(token);
                }
            }
        }
        match section {
            "INVARIANT" | "INVARIANTS" => {
                cfg.invariants.insert((*token).to_owned());
            }
            "PROPERTY" | "PROPERTIES" => {
                cfg.properties.insert((*token).to_owned());
            }
            _ => {}
        }
    }
    cfg
}

/// Compares two name sets, reporting what each side lacks.
fn compare(
    what: &str,
    spec_side: &BTreeSet<String>,
    names_side: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    for extra in spec_side.difference(names_side) {
        problems.push(format!(
            "{what}: `{extra}` is in the spec but not in names.rs"
        ));
    }
    for missing in names_side.difference(spec_side) {
        problems.push(format!(
            "{what}: `{missing}` is in names.rs but not in the spec"
        ));
    }
}

/// Checks one model's spec, its shipped cfg and its variant cfgs.
fn check_model(
    spec_dir: &Path,
    model: &ModelNames,
    parsed: &BTreeMap<String, ParsedSpec>,
    problems: &mut Vec<String>,
) -> Result<()> {
    let name = &model.model;
    let Some(spec) = parsed.get(name) else {
        problems.push(format!("model `{name}` has no spec/{name}.tla"));
        return Ok(());
    };
    let set = |items: &[String]| items.iter().cloned().collect::<BTreeSet<_>>();

    compare(
        &format!("{name}.tla actions (Next)"),
        &spec.actions,
        &set(&model.actions),
        problems,
    );
    compare(
        &format!("{name}.tla Designs"),
        &spec.designs,
        &set(&model.variants),
        problems,
    );

    let mut invariants = set(&model.invariants);
    invariants.extend(model.tla_only_invariants.iter().cloned());
    let properties = set(&model.properties);
    for defined in invariants.iter().chain(&properties) {
        if !spec.operators.contains(defined) {
            problems.push(format!("{name}.tla does not define `{defined}`"));
        }
    }

    let shipped = &model.variants[0];
    let cfg_path = spec_dir.join(format!("{name}.cfg"));
    let cfg = read_cfg(&cfg_path)?;
    compare(
        &format!("{name}.cfg invariants"),
        &cfg.invariants,
        &invariants,
        problems,
    );
    compare(
        &format!("{name}.cfg properties"),
        &cfg.properties,
        &properties,
        problems,
    );
    if cfg.design() != Some(shipped.as_str()) {
        problems.push(format!(
            "{name}.cfg must set Design = \"{shipped}\", found {:?}",
            cfg.design()
        ));
    }

    // One cfg per rejected design, named after it, checking every invariant.
    let prefix = format!("{name}.");
    let variant_dir = spec_dir.join("variants");
    let mut found = BTreeSet::new();
    let variant_cfgs = if variant_dir.is_dir() {
        files_with_extension(&variant_dir, "cfg")?
    } else {
        Vec::new()
    };
    for path in variant_cfgs {
        let file = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let Some(variant) = file.strip_prefix(&prefix) else {
            continue;
        };
        found.insert(variant.to_owned());
        let cfg = read_cfg(&path)?;
        compare(
            &format!("variants/{file}.cfg invariants"),
            &cfg.invariants,
            &invariants,
            problems,
        );
        if cfg.design() != Some(variant) {
            problems.push(format!(
                "variants/{file}.cfg must set Design = \"{variant}\", found {:?}",
                cfg.design()
            ));
        }
    }
    let rejected: BTreeSet<String> = model.variants[1..].iter().cloned().collect();
    compare(
        &format!("{name} variant cfgs (spec/variants/)"),
        &found,
        &rejected,
        problems,
    );
    Ok(())
}

/// Reads and parses one TLC config.
pub(crate) fn read_cfg(path: &Path) -> Result<Cfg> {
    let text =
        fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(parse_cfg(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_names_file_parses_into_both_models() {
        let text = fs::read_to_string(cache::repo_root().join("model-check/src/names.rs"))
            .expect("names.rs is committed");
        let models = parse_names(&text).expect("names.rs follows its documented format");
        let publication = &models[0];
        assert_eq!(publication.model, "Publication");
        assert!(publication.actions.contains(&"EvaluateGuard".to_owned()));
        assert_eq!(publication.invariants.len(), 7);
        assert_eq!(publication.tla_only_invariants, ["TypeOK"]);
        assert_eq!(publication.properties, ["HolderEventuallyPublishes"]);
        assert_eq!(publication.variants[0], "Shipped");
        assert_eq!(models[1].model, "DemandFold");
        assert!(models[1].properties.is_empty());
    }

    #[test]
    fn lists_resolve_constants_and_literals_over_several_lines() {
        let text = "pub mod m {\n    pub const MODEL: &str = \"M\";\n    pub const A: &str = \"Alpha\";\n    \
                    pub const ACTIONS: &[&str] = &[\n        A,\n        \"Beta\",\n    ];\n    \
                    pub const INVARIANTS: &[&str] = &[];\n    pub const TLA_ONLY_INVARIANTS: &[&str] = &[];\n    \
                    pub const PROPERTIES: &[&str] = &[];\n    pub const VARIANTS: &[&str] = &[\"Shipped\"];\n}\n";
        let models = parse_names(text).expect("well-formed");
        assert_eq!(models[0].actions, ["Alpha", "Beta"]);
    }

    #[test]
    fn an_unknown_constant_or_a_duplicate_is_refused() {
        let unknown = "pub mod m {\n    pub const MODEL: &str = \"M\";\n    pub const ACTIONS: &[&str] = &[NOPE];\n}\n";
        assert!(parse_names(unknown).unwrap_err().contains("NOPE"));
        let twice = "pub mod m {\n    pub const MODEL: &str = \"M\";\n    pub const ACTIONS: &[&str] = &[\"A\", \"A\"];\n    \
                     pub const INVARIANTS: &[&str] = &[];\n    pub const TLA_ONLY_INVARIANTS: &[&str] = &[];\n    \
                     pub const PROPERTIES: &[&str] = &[];\n    pub const VARIANTS: &[&str] = &[\"Shipped\"];\n}\n";
        assert!(parse_names(twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn cfg_sections_and_design_are_read_and_comments_skipped() {
        let cfg = parse_cfg(
            "\\* INVARIANT NotThis\nSPECIFICATION Spec\nCONSTANTS\n  N = 3\n  Design = \"BarrierOnly\"\n\
             INVARIANTS\n  TypeOK (* Hidden *)\n  Safe\nPROPERTY Live\nCHECK_DEADLOCK FALSE\n",
        );
        assert_eq!(cfg.design(), Some("BarrierOnly"));
        assert_eq!(cfg.invariants, ["Safe", "TypeOK"].map(str::to_owned).into());
        assert_eq!(cfg.properties, ["Live"].map(str::to_owned).into());
        assert_eq!(cfg.constants.get("N").map(String::as_str), Some("3"));
    }

    #[test]
    fn cfg_constants_keep_set_values_and_substitutions() {
        let cfg = parse_cfg(
            "CONSTANTS\n  Publishers = {p1, p2}\n  Script <- FooScript\n  Design = \"Shipped\"\n\
             INVARIANTS TypeOK\n",
        );
        assert_eq!(cfg.constants["Publishers"], "{p1, p2}");
        assert_eq!(cfg.constants["Script"], "<- FooScript");
        assert_eq!(cfg.constants["Design"], "\"Shipped\"");
        assert_eq!(cfg.constants.len(), 3);
    }
}
