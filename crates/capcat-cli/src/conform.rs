//! `capcat conform ...`: the conformance kit for native writers
//! (docs/native-writers.md), run from the `capcat` command.
//!
//! The kit is its own binary, `capcat-conform`, in a tool crate that
//! nothing of the product depends on (it carries the model checker's
//! simulated engine). This command runs the one installed beside `capcat`
//! (the same directory: `cargo build` puts both in `target/<profile>/`), or
//! else the first on `PATH`, with the arguments as given and the terminal
//! as its own; its exit status is this command's.

use std::path::PathBuf;
use std::process::{Command, ExitStatus};

use crate::CliError;

/// The kit's binary name.
const KIT: &str = "capcat-conform";

/// The kit beside the running `capcat`, if there is one.
fn beside_this_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let kit = exe
        .parent()?
        .join(format!("{KIT}{}", std::env::consts::EXE_SUFFIX));
    kit.is_file().then_some(kit)
}

/// Runs the kit with `args`.
pub(crate) fn run(args: &[String]) -> Result<(), CliError> {
    let program = beside_this_binary().unwrap_or_else(|| PathBuf::from(KIT));
    let status: ExitStatus = Command::new(&program)
        .args(args)
        .status()
        .map_err(|source| CliError::ConformMissing {
            program: program.display().to_string(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(CliError::ConformFailed {
            status: status.to_string(),
        })
    }
}
