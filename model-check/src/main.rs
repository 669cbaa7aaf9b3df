//! `capcat-model-check`: list and run the protocol models.
//!
//! ```text
//! capcat-model-check list
//! capcat-model-check check Publication [--variant NAME] [--publishers N] [--ticks N]
//!     [--crashes N] [--crash-mid-statement] [--no-late-start] [--passes N] [--release]
//!     [--reacquire] [--foreign N] [--no-reader] [--ttl N] [--cap N] [--attempts C,A,P] [--liveness]
//!     [--late-claims] [--packs N] [--rounds N]
//!     [--threads N] [--stop-at-first] [--strip-fence] [--dfs]
//! capcat-model-check check DemandFold [--variant NAME] [--redeliveries N]
//! capcat-model-check explore <model> [options] [--port N]
//! ```
//!
//! `check` exits 0 when every property holds, 1 with the counterexample
//! traces otherwise, 2 on a usage error; it always prints states, unique
//! states, seconds and states/s.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use capcat_model_check::demand::{DemandModel, FoldDesign};
use capcat_model_check::names;
use capcat_model_check::publication::{Design, ModelConfig, PublicationModel};
use capcat_model_check::run::{RunOptions, check};
use stateright::Model;

const USAGE: &str = "usage: capcat-model-check list | check <model> [options] | explore <model> [options] [--port N]
models: Publication, DemandFold
options (Publication): --variant NAME --publishers N --ticks N --crashes N --crash-mid-statement
  --no-late-start (an assumption: statements start when sent) --passes N --release --reacquire --foreign N --no-reader --ttl N --cap N --attempts C,A,P
  --late-claims (claims stamped and landed later, possibly after their client gave up)
  --packs N (packs per pass, one manifest chunk each) --rounds N (lease acquisitions per incarnation)
  --liveness --threads N --stop-at-first --dfs --strip-fence (the mutation guard: publish
  statements rebuilt without the fence text through capcat-proto's hook)
  --strip-manifest-check (the commit row sent without MANIFEST_COMPLETE)
options (DemandFold): --variant NAME --redeliveries N";

/// A usage error, printed with the usage text.
#[derive(Debug)]
struct Usage(String);

struct Args {
    publication: ModelConfig,
    fold: FoldDesign,
    redeliveries: u8,
    run: RunOptions,
    port: u16,
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, Usage> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Usage(format!("{flag} needs a number")))
}

fn parse(model: &str, rest: Vec<String>) -> Result<Args, Usage> {
    let mut variant: Option<String> = None;
    let mut cfg = ModelConfig::ci(Design::Shipped);
    let mut liveness = false;
    let mut args = Args {
        publication: cfg.clone(),
        fold: FoldDesign::Shipped,
        redeliveries: 2,
        run: RunOptions {
            progress: Some(Duration::from_secs(10)),
            ..RunOptions::default()
        },
        port: 3000,
    };
    let mut it = rest.into_iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--variant" => variant = it.next(),
            "--publishers" => cfg.publishers = number(&flag, it.next())?,
            "--ticks" => cfg.max_ticks = number(&flag, it.next())?,
            "--crashes" => cfg.crashes = number(&flag, it.next())?,
            "--crash-mid-statement" => cfg.crash_mid_statement = true,
            // Late starts are on by default; the flag is kept for old commands.
            "--late-start" => cfg.late_start = true,
            "--no-late-start" => cfg.late_start = false,
            "--passes" => cfg.passes = number(&flag, it.next())?,
            "--release" => cfg.release = true,
            "--late-claims" => cfg.late_claims = true,
            "--rounds" => cfg.acquire_rounds = number(&flag, it.next())?,
            "--packs" => cfg.packs_per_pass = number(&flag, it.next())?,
            "--reacquire" => cfg.reacquire = true,
            "--foreign" => cfg.foreign_writes = number(&flag, it.next())?,
            "--no-reader" => cfg.reader = false,
            "--ttl" => cfg.ttl_ticks = number(&flag, it.next())?,
            "--cap" => cfg.cap_ticks = number(&flag, it.next())?,
            "--attempts" => {
                let v = it.next().unwrap_or_default();
                let parts: Vec<u32> = v.split(',').filter_map(|p| p.parse().ok()).collect();
                match parts.as_slice() {
                    [c, a, p] => cfg.attempts = (*c, *a, *p),
                    _ => return Err(Usage("--attempts needs C,A,P".to_owned())),
                }
            }
            "--liveness" => liveness = true,
            "--strip-fence" => cfg.strip_fence = true,
            "--strip-manifest-check" => cfg.strip_manifest_check = true,
            "--threads" => args.run.threads = number(&flag, it.next())?,
            "--stop-at-first" => args.run.stop_at_first = true,
            "--dfs" => args.run.depth_first = true,
            "--redeliveries" => args.redeliveries = number(&flag, it.next())?,
            "--port" => args.port = number(&flag, it.next())?,
            other => return Err(Usage(format!("unknown option {other}"))),
        }
    }
    if model == names::publication::MODEL {
        if let Some(v) = &variant {
            cfg.design = Design::from_name(v)
                .ok_or_else(|| Usage(format!("unknown {model} variant {v}")))?;
        }
        if liveness {
            let base = ModelConfig::liveness(cfg.design);
            cfg = ModelConfig {
                publishers: cfg.publishers,
                ..base
            };
        }
    } else if model == names::demand_fold::MODEL {
        if let Some(v) = &variant {
            args.fold = FoldDesign::from_name(v)
                .ok_or_else(|| Usage(format!("unknown {model} variant {v}")))?;
        }
    } else {
        return Err(Usage(format!("unknown model {model}")));
    }
    args.publication = cfg;
    Ok(args)
}

fn list() {
    use names::{demand_fold as d, publication as p};
    for (model, invariants, properties, variants) in [
        (p::MODEL, p::INVARIANTS, p::PROPERTIES, p::VARIANTS),
        (d::MODEL, d::INVARIANTS, d::PROPERTIES, d::VARIANTS),
    ] {
        println!("model {model}");
        println!("  invariants: {}", invariants.join(", "));
        println!("  properties: {}", properties.join(", "));
        for v in variants {
            let modelled = if model == p::MODEL {
                Design::from_name(v).is_some()
            } else {
                FoldDesign::from_name(v).is_some()
            };
            let note = if modelled {
                ""
            } else {
                " (TLA+ only; not in the Rust model)"
            };
            println!("  variant: {v}{note}");
        }
    }
}

fn run_check(model: &str, args: Args) -> Result<bool, Usage> {
    let report = if model == names::publication::MODEL {
        let cfg = args.publication;
        eprintln!("checking {model} {} with {cfg:?}", cfg.design);
        let m = PublicationModel::new(cfg).map_err(|e| Usage(e.to_string()))?;
        check(m, args.run)
    } else {
        eprintln!("checking {model} {}", args.fold.name());
        check(DemandModel::new(args.fold, args.redeliveries), args.run)
    };
    print!("{}", report.render());
    Ok(report.holds())
}

fn explore(model: &str, args: Args) -> Result<(), Usage> {
    let address = ("127.0.0.1", args.port);
    eprintln!(
        "serving the {model} explorer on http://127.0.0.1:{}",
        args.port
    );
    if model == names::publication::MODEL {
        let m = PublicationModel::new(args.publication).map_err(|e| Usage(e.to_string()))?;
        let _ = m.checker().serve(address);
    } else {
        let _ = DemandModel::new(args.fold, args.redeliveries)
            .checker()
            .serve(address);
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let result = match command.as_str() {
        "list" => {
            list();
            Ok(true)
        }
        "check" | "explore" => {
            let model = argv.next().unwrap_or_default();
            parse(&model, argv.collect()).and_then(|args| {
                if command == "check" {
                    run_check(&model, args)
                } else {
                    explore(&model, args).map(|()| true)
                }
            })
        }
        _ => Err(Usage(format!("unknown command {command:?}"))),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Usage(message)) => {
            eprintln!("{message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
