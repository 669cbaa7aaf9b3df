//! `check-golden`: open the golden pack from Python and compare with its manifest.

use crate::Result;

/// Runs the Python cross-check of `tests/data/golden/`.
pub(crate) fn check_python() -> Result<()> {
    Err("check-golden is not implemented yet".into())
}
