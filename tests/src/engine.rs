//! The embedded engine for a live test, or a skip.

use std::path::Path;
use std::sync::OnceLock;

use capcat_chdb::{Engine, EngineOptions};

/// Connections the stress may hold at once: publishers, readers, the
/// checker, stall probes, and statements of crashed tasks still running.
const MAX_CONNECTIONS: usize = 16;

/// The embedded engine on a data path under `dir` (named by the process
/// id), opened once per process: libchdb serves one data path per process,
/// so tests sharing a process (`cargo test`) share it and keep apart by
/// prefix, and under nextest every test has a process, and an engine, of
/// its own.
///
/// Without `CAPCAT_LIBCHDB` it prints that `test` skipped and returns
/// `None`, unless `CAPCAT_REQUIRE_ENGINES=1`, which panics instead.
pub fn engine_or_skip(test: &str, dir: &Path) -> Option<Engine> {
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        assert!(
            std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
            "{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1"
        );
        println!("{test}: skipped (CAPCAT_LIBCHDB is not set)");
        return None;
    }
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    let engine = ENGINE.get_or_init(|| {
        let path = dir.join(std::process::id().to_string());
        // A pid reused from an earlier run: start clean.
        let _ = std::fs::remove_dir_all(&path);
        Engine::open_with(
            &path,
            EngineOptions::default().with_max_connections(MAX_CONNECTIONS),
        )
        .unwrap_or_else(|e| {
            panic!(
                "{test}: open the embedded engine at {}: {e}",
                path.display()
            )
        })
    });
    Some(engine.clone())
}
