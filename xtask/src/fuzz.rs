//! `fuzz [--seconds N] [TARGET...]`: every cargo-fuzz target in `fuzz/` (or
//! the ones named) for a short budget each, one after the other, one worker
//! each. See docs/fuzzing.md.
//!
//! Needs the nightly toolchain (cargo-fuzz builds with `-Zsanitizer`); when
//! it is absent the chore prints why and skips, so CI on a machine without
//! nightly still passes. cargo-fuzz itself is installed from crates.io into
//! the cache (`<cache>/cargo-fuzz-<version>/bin`) when missing, and the fuzz
//! build lives in the cache too (`<cache>/fuzz-target-quick` for budgets up
//! to [`QUICK_SECONDS`], an unoptimized build; `<cache>/fuzz-target` for
//! campaigns, cargo-fuzz's optimized one), as do the corpus
//! each run grows (`<cache>/fuzz-corpus/<target>`, seeded from the
//! committed `fuzz/seeds/<target>`) and the inputs of any crash
//! (`<cache>/fuzz-artifacts/<target>/`). Nothing is written into the
//! repository.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Result, cache};

/// The cargo-fuzz release installed when missing.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The budget of each target when `--seconds` is not given.
const DEFAULT_SECONDS: u64 = 30;

/// The longest per-target budget built for speed of building rather than
/// of fuzzing. cargo-fuzz builds optimized, with one codegen unit, by
/// default: the fastest targets, and the slowest build (a cold build of
/// every target and of capcat-service's dependency tree took 16 min 36 s
/// here; 10 min 8 s with 16 units). A short run (CI's 10 s per target)
/// replays the cached corpus and explores a little past it, so it is built
/// unoptimized (`--dev`; AddressSanitizer, debug assertions and overflow
/// checks as in the campaigns): 5 min 48 s cold with other builds running
/// (2026-12-07), for about 20 times fewer executions a second (pack_reader
/// 2,073 runs in 10 s from the corpus, against 47,608 optimized). Longer
/// runs are campaigns, where depth comes from, and keep cargo-fuzz's
/// build. The two builds live in separate target directories, so switching
/// between them rebuilds nothing.
const QUICK_SECONDS: u64 = 60;

/// libFuzzer's limits for every run: no input may allocate 64 MiB at once
/// (no honest input of these parsers comes near it: a declared size must
/// never allocate more than the input allows), take 2 GiB of RSS, or run
/// 10 s.
const LIBFUZZER_LIMITS: &[&str] = &["-malloc_limit_mb=64", "-rss_limit_mb=2048", "-timeout=10"];

/// Runs the chore.
pub(crate) fn run(args: &[String]) -> Result<()> {
    let (seconds, wanted) = parse_args(args)?;
    if !nightly_present() {
        println!(
            "xtask fuzz: skipped: the nightly toolchain is not installed \
             (`rustup toolchain install nightly` enables this step)"
        );
        return Ok(());
    }
    let cache_dir = cache::dir()?;
    let bin_dir = ensure_cargo_fuzz(&cache_dir)?;
    let root = cache::repo_root();
    let fuzz_dir = root.join("fuzz");
    let quick = seconds <= QUICK_SECONDS;
    let target_dir = cache_dir.join(if quick {
        "fuzz-target-quick"
    } else {
        "fuzz-target"
    });
    // `build` and every `run` take the same flags: a run with other flags
    // than the build would rebuild.
    let build_flags: &[&str] = if quick { &["--dev"] } else { &[] };

    let fuzz = |args: &[&str]| {
        let mut command = Command::new("cargo");
        command
            .arg("+nightly")
            .arg("fuzz")
            .args(args)
            .arg("--fuzz-dir")
            .arg(&fuzz_dir)
            .current_dir(&root)
            .env("PATH", path_with(&bin_dir))
            // The caller's target dir (and toolchain pin) must not redirect
            // this build away from the cache or off nightly.
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTUP_TOOLCHAIN");
        command
    };

    let listed = fuzz(&["list"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo fuzz list: {e}"))?;
    if !listed.status.success() {
        return Err(format!("cargo fuzz list failed: {}", listed.status).into());
    }
    let all: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let targets: Vec<String> = if wanted.is_empty() {
        all
    } else {
        for name in &wanted {
            if !all.contains(name) {
                return Err(format!("no fuzz target {name:?}; targets: {}", all.join(", ")).into());
            }
        }
        wanted
    };

    // One build for every target, so the per-target budget is fuzzing time.
    let mut build = fuzz(&["build"]);
    build.args(build_flags).arg("--target-dir").arg(&target_dir);
    cache::run(&mut build)?;

    let mut failed = Vec::new();
    let mut figures = Vec::new();
    for target in &targets {
        let corpus = cache_dir.join("fuzz-corpus").join(target);
        let artifacts = cache_dir.join("fuzz-artifacts").join(target);
        let seeds = fuzz_dir.join("seeds").join(target);
        for dir in [&corpus, &artifacts] {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut command = fuzz(&["run", target]);
        command
            .args(build_flags)
            .arg("--target-dir")
            .arg(&target_dir)
            .arg(&corpus);
        if seeds.is_dir() {
            command.arg(&seeds);
        }
        let mut prefix = artifacts.into_os_string();
        prefix.push("/");
        let mut artifact_prefix = OsString::from("-artifact_prefix=");
        artifact_prefix.push(prefix);
        command
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .args(LIBFUZZER_LIMITS)
            .arg(artifact_prefix)
            .arg("-print_final_stats=1");
        eprintln!("xtask fuzz: {target} for {seconds} s");
        let output = command
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run cargo fuzz run {target}: {e}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        figures.push((target.clone(), summary(&log)));
        if !output.status.success() {
            eprintln!("{log}");
            failed.push(target.clone());
        }
    }
    println!("xtask fuzz: {seconds} s per target");
    for (target, line) in &figures {
        println!("  {target:<16} {line}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz target(s) failed: {} (inputs in {})",
            failed.join(", "),
            cache_dir.join("fuzz-artifacts").display()
        )
        .into())
    }
}

/// `--seconds N` and target names.
fn parse_args(args: &[String]) -> Result<(u64, Vec<String>)> {
    let mut seconds = DEFAULT_SECONDS;
    let mut targets = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--seconds" {
            let value = iter.next().ok_or("--seconds needs a number")?;
            seconds = value
                .parse()
                .ok()
                .filter(|&s| s > 0)
                .ok_or_else(|| format!("--seconds {value:?}: expected a positive integer"))?;
        } else if arg.starts_with('-') {
            return Err(
                format!("unknown option {arg:?} (usage: fuzz [--seconds N] [TARGET...])").into(),
            );
        } else {
            targets.push(arg.clone());
        }
    }
    Ok((seconds, targets))
}

/// Whether `cargo +nightly` runs: rustup has a nightly toolchain.
fn nightly_present() -> bool {
    Command::new("cargo")
        .args(["+nightly", "--version"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The directory holding `cargo-fuzz`, installing it from crates.io first
/// when the cache has none of [`CARGO_FUZZ_VERSION`].
fn ensure_cargo_fuzz(cache_dir: &Path) -> Result<PathBuf> {
    let root = cache_dir.join(format!("cargo-fuzz-{CARGO_FUZZ_VERSION}"));
    let bin_dir = root.join("bin");
    if bin_dir.join("cargo-fuzz").is_file() {
        return Ok(bin_dir);
    }
    eprintln!(
        "xtask: installing cargo-fuzz {CARGO_FUZZ_VERSION} into {}",
        root.display()
    );
    let mut install = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    install
        .args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
        ])
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(cache_dir.join("cargo-fuzz-build"))
        .env_remove("CARGO_TARGET_DIR");
    cache::run(&mut install)?;
    Ok(bin_dir)
}

/// `PATH` with `dir` first, so `cargo fuzz` finds the cached cargo-fuzz.
fn path_with(dir: &Path) -> OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

/// The run's figures from libFuzzer's log: executions, coverage, features,
/// corpus, peak RSS, and the last status line.
fn summary(log: &str) -> String {
    let stat = |name: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .map(str::trim)
            .unwrap_or("?")
            .to_owned()
    };
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with('#') && l.contains("cov:"))
        .unwrap_or("");
    let field = |name: &str| {
        let mut words = last.split_whitespace();
        words
            .position(|w| w == name)
            .and_then(|i| last.split_whitespace().nth(i + 1))
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "execs {} cov {} ft {} corpus {} peak_rss {} MB",
        stat("number_of_executed_units"),
        field("cov:"),
        field("ft:"),
        field("corp:"),
        stat("peak_rss_mb"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_libfuzzer_figures() {
        let log = "#2\tINITED cov: 10 ft: 11 corp: 1/1b exec/s: 0 rss: 30Mb\n\
                   #4096\tDONE   cov: 812 ft: 2311 corp: 97/14Kb lim: 4096 exec/s: 136 rss: 61Mb\n\
                   stat::number_of_executed_units: 4096\n\
                   stat::peak_rss_mb: 61\n";
        assert_eq!(
            summary(log),
            "execs 4096 cov 812 ft 2311 corpus 97/14Kb peak_rss 61 MB"
        );
    }

    #[test]
    fn arguments_parse() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(parse_args(&args(&[])).expect("ok"), (30, vec![]));
        assert_eq!(
            parse_args(&args(&["--seconds", "5", "cursor"])).expect("ok"),
            (5, vec!["cursor".to_owned()])
        );
        assert!(parse_args(&args(&["--seconds", "0"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }
}
