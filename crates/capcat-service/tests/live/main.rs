//! Live tests of the storage service against the real embedded ClickHouse
//! engine (through its HTTP front, behind a TCP proxy each test switches)
//! and real stores. Skipped (with a line saying so) without
//! `CAPCAT_LIBCHDB`, unless `CAPCAT_REQUIRE_ENGINES=1`.

#![allow(clippy::unwrap_used, unreachable_pub, missing_debug_implementations)]

mod harness;
mod lease_state;
mod progress;
mod reconcile;
mod refuse;
mod seeds;
mod set_aside;
mod spool_files;
mod spool_owner;
mod status;
