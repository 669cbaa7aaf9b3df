//! PUT and GET latency for 64 KiB objects and throughput for a 64 MiB pack,
//! against the S3 test server (`CAPCAT_S3_SERVER_BIN`, started here on
//! 127.0.0.1) and LocalStore, beside the SHA-256 throughput of this machine
//! (every PUT and verified GET hashes the whole pack once).
//!
//! Run: `CAPCAT_S3_SERVER_BIN=$(cargo xtask build-s3-server) cargo bench -p capcat-s3 --bench store_io`
//! The figures go to docs/benchmarks.md. Nothing here asserts a time.

#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use capcat_s3::{
    CatalogPrefix, LocalStore, PackKey, PackMetadata, PackStore, S3Config, S3Credentials, S3Store,
    crc64nvme, sha256,
};
use uuid::Uuid;

const SMALL: usize = 64 * 1024;
const LARGE: usize = 64 * 1024 * 1024;
const SMALL_ROUNDS: u128 = 200;
const LARGE_ROUNDS: u128 = 5;

fn body(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

fn meta(n: u128, bytes: &[u8]) -> PackMetadata {
    PackMetadata {
        format_version: 1,
        pack_id: Uuid::from_u128(0xbe9c_0000_0000_4000_8000_0000_0000_0000 | n),
        sha256: sha256(bytes),
        crc64nvme: Some(crc64nvme(bytes)),
        record_count: 1,
    }
}

/// Percentile of sorted durations.
fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn report_latency(name: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<34} n={:<4} p50={:>8.3} ms  p90={:>8.3} ms  p99={:>8.3} ms  mean={:>8.3} ms",
        samples.len(),
        pct(&samples, 50).as_secs_f64() * 1e3,
        pct(&samples, 90).as_secs_f64() * 1e3,
        pct(&samples, 99).as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
    );
}

fn report_throughput(name: &str, bytes: usize, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let mib = bytes as f64 / (1024.0 * 1024.0);
    let median = pct(&samples, 50).as_secs_f64();
    let best = samples[0].as_secs_f64();
    println!(
        "{name:<34} n={:<4} median={:>8.1} MiB/s  best={:>8.1} MiB/s  (median {:.3} s per pack)",
        samples.len(),
        mib / median,
        mib / best,
        median,
    );
}

async fn bench_store<S: PackStore>(label: &str, store: &S) {
    let catalog = CatalogPrefix::new("bench").unwrap();
    let small = body(SMALL, 1);
    let mut puts = Vec::new();
    for n in 0..SMALL_ROUNDS {
        let m = meta(n, &small);
        let start = Instant::now();
        store.put_pack(&catalog, small.clone(), &m).await.unwrap();
        puts.push(start.elapsed());
    }
    report_latency(&format!("{label} PUT 64 KiB latency"), puts);
    let mut gets = Vec::new();
    for n in 0..SMALL_ROUNDS {
        let key = PackKey::new(catalog.clone(), meta(n, &small).pack_id).object_key();
        let start = Instant::now();
        let got = store.get(&key).await.unwrap();
        gets.push(start.elapsed());
        assert_eq!(got.len(), SMALL);
    }
    report_latency(&format!("{label} GET 64 KiB latency"), gets);

    let large = body(LARGE, 2);
    let mut puts = Vec::new();
    for n in 0..LARGE_ROUNDS {
        let m = meta(1_000 + n, &large);
        let start = Instant::now();
        store.put_pack(&catalog, large.clone(), &m).await.unwrap();
        puts.push(start.elapsed());
    }
    report_throughput(&format!("{label} PUT 64 MiB throughput"), LARGE, puts);
    let mut gets = Vec::new();
    for n in 0..LARGE_ROUNDS {
        let key = PackKey::new(catalog.clone(), meta(1_000 + n, &large).pack_id).object_key();
        let start = Instant::now();
        let got = store.get(&key).await.unwrap();
        gets.push(start.elapsed());
        assert_eq!(got.len(), LARGE);
    }
    report_throughput(&format!("{label} GET 64 MiB throughput"), LARGE, gets);
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let large = body(LARGE, 3);
    let mut hashes = Vec::new();
    for _ in 0..LARGE_ROUNDS {
        let start = Instant::now();
        std::hint::black_box(sha256(&large));
        hashes.push(start.elapsed());
    }
    report_throughput("SHA-256 of 64 MiB (reference)", LARGE, hashes);

    let local_dir = tempfile::tempdir().unwrap();
    let local = LocalStore::open(local_dir.path()).unwrap();
    runtime.block_on(bench_store("LocalStore", &local));

    let Some(binary) = std::env::var_os("CAPCAT_S3_SERVER_BIN") else {
        println!("S3 test server: skipped: CAPCAT_S3_SERVER_BIN is not set");
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary)
        .arg("--root")
        .arg(data.path())
        .args([
            "--port",
            "0",
            "--access-key",
            "bench-ak",
            "--secret-key",
            "bench-sk",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Server(child);
    let mut config = S3Config::new(
        format!("http://{}", line.trim()),
        "us-east-1",
        "capcat-bench",
        S3Credentials::new_static("bench-ak", "bench-sk"),
    );
    config.allow_http = true;
    let store = S3Store::new(&config).unwrap();
    runtime.block_on(async {
        store.create_bucket().await.unwrap();
        bench_store("S3 test server", &store).await;
    });
}
