//! `capcat-conform --driver CMD`: runs the conformance kit against an
//! implementation of the protocol (docs/native-writers.md).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use capcat_conform::run::{self, Plan};
use clap::Parser;

/// The conformance kit: drives an implementation of the Capcat protocol
/// through every case and compares each step with capcat-proto.
#[derive(Debug, Parser)]
#[command(name = "capcat-conform", version)]
struct Args {
    /// The driver's command line, run with `sh -c` (e.g.
    /// `python3 tests/conform-python/driver.py`).
    #[arg(long, required_unless_present = "list")]
    driver: Option<String>,
    /// Run this one case (a name from `--list` or from a report's replay
    /// line).
    #[arg(long)]
    case: Option<String>,
    /// How many seeded random walks of each flavour to run (seeds 0..N).
    #[arg(long, default_value_t = 200)]
    walks: u64,
    /// How long the driver may take to answer one message, in seconds.
    #[arg(long, default_value_t = 10)]
    timeout_s: u64,
    /// Print every case's name and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        // Written by hand rather than with println!, which panics when the
        // reader goes away (`capcat-conform --list | head`).
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for name in run::names(args.walks) {
            if writeln!(out, "{name}").is_err() {
                break;
            }
        }
        return ExitCode::SUCCESS;
    }
    let Some(driver) = args.driver else {
        // clap requires --driver unless --list, which returned above.
        return ExitCode::from(2);
    };
    if args.timeout_s == 0 {
        eprintln!("capcat-conform: --timeout-s must be at least 1");
        return ExitCode::from(2);
    }
    let plan = Plan {
        driver: driver.clone(),
        case: args.case,
        walks: args.walks,
        timeout: Duration::from_secs(args.timeout_s),
    };
    let outcome = run::run(&plan, |done, total| {
        if total > 1 {
            eprintln!("capcat-conform: {done}/{total} cases");
        }
    });
    match outcome {
        Ok(passed) => {
            println!("{}", passed.summary());
            ExitCode::SUCCESS
        }
        Err(verdict) => {
            print!("{}", run::report(&verdict, &driver));
            ExitCode::FAILURE
        }
    }
}
