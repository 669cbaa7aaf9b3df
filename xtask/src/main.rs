//! `cargo xtask <chore>`: the project's chores, in Rust so they run wherever
//! cargo does.
//!
//! Every chore that downloads or builds something puts it in the cache
//! directory (`$CAPCAT_CACHE_DIR`, default `~/.cache/capcat`), reuses it when
//! present and fetches it when absent. Nothing it produces is committed.

#![forbid(unsafe_code)]

mod cache;
mod conform;
mod corpus;
mod engine;
mod fuzz;
mod golden;
mod lint_arch;
mod model;
mod python;
mod s3_server;
mod spec;
mod spec_replays;
mod test;
mod test_binaries;

use std::process::ExitCode;

/// The error type of every chore: a message for the person running it.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;
/// Result of a chore.
pub(crate) type Result<T> = std::result::Result<T, Error>;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test               fetch engines, build test servers, run every test suite
                     (the README's test command; `.ci/run` calls it)
  fetch-engine       download libchdb into the cache and print its path
  build-s3-server    build the TCP_NODELAY s3s-fs test server into the cache
                     and print its path
  check-specs        parse spec/*.tla and check their names against the model
  check-golden       open the golden pack from Python and compare it with
                     its manifest
  conform            run the conformance kit against the Python implementation
                     of the protocol (tests/conform-python, with pytest)
  python [ARGS...]   build the capcat Python package (maturin) into the cached
                     venv and run its pytest suite on the real engines
                     (ARGS go to pytest)
  lint-arch          check the crate layering (cargo metadata) and that
                     rejected protocol designs stay in capcat-proto's designs/
  corpus [--check]   regenerate the model's trace corpus (tests/corpus); with
                     --check, regenerate into a temp dir and fail if it differs
  model [--deep]     list (or, with --deep, run in release) the model
                     configurations too large for `cargo test`
  fuzz [--seconds N] [TARGET...]
                     run every cargo-fuzz target (default 30 s each, one
                     worker); needs nightly, skipped without it; installs
                     cargo-fuzz into the cache when missing (docs/fuzzing.md)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "test" => test::run(rest),
        "fetch-engine" => engine::ensure_libchdb().map(|path| println!("{}", path.display())),
        "build-s3-server" => s3_server::ensure_binary().map(|path| println!("{}", path.display())),
        "check-specs" => spec::check(),
        "check-golden" => golden::check_python(),
        "conform" => test_binaries::build().and_then(|bins| conform::run(&bins.conform)),
        "python" => test_binaries::build().and_then(|bins| python::run(rest, &bins.capcat)),
        "lint-arch" => lint_arch::run(),
        "corpus" => corpus::run(rest),
        "model" => model::run(rest),
        "fuzz" => fuzz::run(rest),
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}").into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask {command}: {error}");
            ExitCode::FAILURE
        }
    }
}
