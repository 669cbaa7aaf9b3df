//! Live tests of the ClickHouse-HTTP front: the real `clickhouse` crate
//! client, unchanged, against the embedded engine; and the raw protocol.

#![cfg(feature = "http-front")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use capcat_chdb::{Engine, HttpFront};
use clickhouse::{Client, Compression, Row};
use common::{isolated, temp_dir};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Row, Serialize, Deserialize)]
struct Capture {
    id: u64,
    name: String,
    tags: Vec<String>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn sample_rows() -> Vec<Capture> {
    vec![
        Capture {
            id: 1,
            name: "it's \"quoted\"\n\\".into(),
            tags: vec!["a".into(), "b'c".into()],
        },
        Capture {
            id: 0x0a0a,
            name: "\0binary\r\n".into(),
            tags: vec![],
        },
        Capture {
            id: 3,
            name: "plain".into(),
            tags: vec![String::new()],
        },
    ]
}

async fn exercise_client(client: &Client, database: &str) {
    client
        .query(&format!("CREATE DATABASE {database}"))
        .execute()
        .await
        .expect("create database");
    let client = client.clone().with_database(database);
    client
        .query("CREATE TABLE caps (id UInt64, name String, tags Array(String)) ENGINE = MergeTree ORDER BY id")
        .execute()
        .await
        .expect("create table");

    let rows = sample_rows();
    let mut insert = client
        .insert::<Capture>("caps")
        .await
        .expect("begin insert");
    for row in &rows {
        insert.write(row).await.expect("write row");
    }
    insert.end().await.expect("end insert");

    let all = client
        .query("SELECT ?fields FROM caps ORDER BY id")
        .fetch_all::<Capture>()
        .await
        .expect("select all");
    let mut expected = rows.clone();
    expected.sort_by_key(|r| r.id);
    assert_eq!(all, expected);

    let quoted = client
        .query("SELECT ?fields FROM caps WHERE name = {n:String} AND has(tags, {t:String})")
        .param("n", rows[0].name.as_str())
        .param("t", "b'c")
        .fetch_all::<Capture>()
        .await
        .expect("select with params");
    assert_eq!(quoted, vec![rows[0].clone()]);

    let ids = client
        .query("SELECT id FROM caps WHERE id IN {ids:Array(UInt64)} ORDER BY id")
        .param("ids", vec![3_u64, 0x0a0a])
        .fetch_all::<u64>()
        .await
        .expect("select with an array param");
    assert_eq!(ids, vec![3, 0x0a0a]);

    match client.query("SELECT * FROM no_such_table").execute().await {
        Err(clickhouse::error::Error::BadResponse(message)) => {
            assert!(message.starts_with("Code: 60. DB::Exception:"), "{message}");
            assert!(message.contains("UNKNOWN_TABLE"), "{message}");
        }
        other => panic!("expected a BadResponse with code 60, got {other:?}"),
    }

    // A setting as a URL parameter reaches the engine.
    match client
        .query("SELECT sleepEachRow(0.5) FROM numbers(20) SETTINGS max_block_size = 1")
        .with_setting("max_execution_time", "1")
        .execute()
        .await
    {
        Err(clickhouse::error::Error::BadResponse(message)) => {
            assert!(message.contains("TIMEOUT_EXCEEDED"), "{message}");
        }
        other => panic!("expected TIMEOUT_EXCEEDED, got {other:?}"),
    }
}

#[test]
fn the_clickhouse_crate_runs_unchanged_against_the_front() {
    isolated(
        "the_clickhouse_crate_runs_unchanged_against_the_front",
        || {
            let dir = temp_dir("chdb-front-client");
            let engine = Engine::open(dir.path()).expect("open");
            runtime().block_on(async {
                let (addr, front) = HttpFront::start(engine).await.expect("start the front");
                assert!(addr.ip().is_loopback());
                // Defaults: LZ4-framed inserts, RowBinaryWithNamesAndTypes with validation.
                let client = Client::default().with_url(front.url());
                exercise_client(&client, "front_lz4").await;
                // No compression, no validation: plain RowBinary bodies.
                let plain = Client::default()
                    .with_url(front.url())
                    .with_compression(Compression::None)
                    .with_validation(false);
                exercise_client(&plain, "front_plain").await;
                front.shutdown().await;
            });
        },
    );
}

#[test]
fn requests_through_the_front_run_in_parallel() {
    isolated("requests_through_the_front_run_in_parallel", || {
        let dir = temp_dir("chdb-front-parallel");
        let engine = Engine::open(dir.path()).expect("open");
        runtime().block_on(async {
            let (_addr, front) = HttpFront::start(engine).await.expect("start the front");
            let client = Client::default().with_url(front.url());
            let marker = format!("front{}", std::process::id());
            let slow = {
                let client = client.clone();
                let sql = format!("SELECT sleep(2), '{marker}'");
                tokio::spawn(async move { client.query(&sql).execute().await })
            };
            // Not a timing assertion: a second request sees the first one
            // running in system.processes, so the front did not serialise them.
            let mut seen = false;
            // Bounded: the slow statement lasts 2 s; 40 polls of 50 ms cover it.
            for _ in 0..40 {
                let count = client
                    .query(
                        "SELECT count() FROM system.processes \
                         WHERE query LIKE concat('%sleep(2)%', {m:String}, '%') \
                         AND query NOT LIKE '%system.processes%'",
                    )
                    .param("m", marker.as_str())
                    .fetch_one::<u64>()
                    .await
                    .expect("probe");
                if count == 1 {
                    seen = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            slow.await.expect("slow task").expect("slow statement");
            assert!(seen, "the second request never saw the first one running");
            front.shutdown().await;
        });
    });
}

/// One HTTP/1.1 request over a fresh connection; returns (status, headers, body).
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect to the front");
    stream.write_all(request).expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    (status, head, response[split + 4..].to_vec())
}

fn post(path_and_query: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {path_and_query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[test]
fn the_raw_protocol_ping_multipart_errors_and_compressed_responses() {
    isolated(
        "the_raw_protocol_ping_multipart_errors_and_compressed_responses",
        || {
            let dir = temp_dir("chdb-front-raw");
            let engine = Engine::open(dir.path()).expect("open");
            runtime().block_on(async {
            let (addr, front) = HttpFront::start(engine).await.expect("start the front");
            let checks = tokio::task::spawn_blocking(move || {
                let (status, _, body) = raw(addr, b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                assert_eq!((status, body.as_slice()), (200, &b"Ok.\n"[..]));

                // SQL in the body, format and a setting as URL parameters.
                let (status, _, body) = raw(
                    addr,
                    &post(
                        "/?default_format=JSONEachRow&max_threads=1",
                        "text/plain",
                        b"SELECT getSetting('max_threads') AS t",
                    ),
                );
                assert_eq!((status, String::from_utf8_lossy(&body).as_ref()), (200, "{\"t\":1}\n"));

                // Multipart query and parameter, as the clickhouse crate sends them.
                let multipart = b"--XB\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\nSELECT {s:String}\r\n\
--XB\r\nContent-Disposition: form-data; name=\"param_s\"\r\n\r\na\\tb\r\n--XB--\r\n";
                let (status, _, body) = raw(addr, &post("/", "multipart/form-data; boundary=XB", multipart));
                assert_eq!((status, body.as_slice()), (200, &b"a\\tb\n"[..]));

                // An engine error: 500, its code in the header, its text as the body.
                let (status, head, body) = raw(addr, &post("/", "text/plain", b"SELECT nosuchfunc()"));
                assert_eq!(status, 500);
                assert!(head.contains("X-ClickHouse-Exception-Code: 46") || head.contains("x-clickhouse-exception-code: 46"), "{head}");
                assert!(body.starts_with(b"Code: 46. DB::Exception:"), "{}", String::from_utf8_lossy(&body));

                // A corrupt LZ4 insert body is refused, and nothing is inserted.
                let (status, _, _) = raw(addr, &post("/", "text/plain", b"CREATE TABLE z (x UInt8) ENGINE = Memory"));
                assert_eq!(status, 200);
                let mut framed = clickhouse::_priv::lz4_compress(b"\x01\x02").expect("frame").to_vec();
                let last = framed.len() - 1;
                framed[last] ^= 0xff;
                let (status, head, _) = raw(
                    addr,
                    &post("/?decompress=1&query=INSERT+INTO+z+FORMAT+RowBinary", "application/octet-stream", &framed),
                );
                assert_eq!(status, 400);
                assert!(head.to_ascii_lowercase().contains("x-clickhouse-exception-code: 40"), "{head}");
                let (_, _, count) = raw(addr, &post("/", "text/plain", b"SELECT count() FROM z"));
                assert_eq!(count, b"0\n");

                // compress=1: the response comes framed; the same framing the
                // clickhouse crate writes for inserts.
                let (status, _, body) = raw(addr, &post("/?compress=1", "text/plain", b"SELECT 'hello'"));
                assert_eq!(status, 200);
                let expected = clickhouse::_priv::lz4_compress(b"hello\n").expect("frame");
                assert_eq!(body, expected.to_vec());
            });
            checks.await.expect("raw protocol checks");
            front.shutdown().await;
        });
        },
    );
}
