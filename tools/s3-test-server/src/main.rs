//! The Capcat S3 test server: the s3s-fs library served on 127.0.0.1 with
//! TCP_NODELAY set on every accepted connection.
//!
//! Usage: `capcat-s3-test-server --root DIR [--port N] [--access-key K --secret-key S]`
//!
//! `--port 0` (the default) lets the kernel pick a free port. The first line on
//! stdout is the bound address (`127.0.0.1:PORT`), so a test can spawn the
//! server and read where it listens. The access key and secret come from the
//! arguments, else from `CAPCAT_S3_TEST_ACCESS_KEY` / `CAPCAT_S3_TEST_SECRET_KEY`;
//! with neither, the server accepts unsigned requests.

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use s3s_fs::FileSystem;
use tokio::net::TcpListener;

const USAGE: &str =
    "usage: capcat-s3-test-server --root DIR [--port N] [--access-key K --secret-key S]";

/// The parsed command line.
#[derive(Debug)]
struct Options {
    root: PathBuf,
    port: u16,
    access_key: Option<String>,
    secret_key: Option<String>,
}

fn parse_options() -> Result<Options, String> {
    let mut root = None;
    let mut port = 0_u16;
    let mut access_key = std::env::var("CAPCAT_S3_TEST_ACCESS_KEY").ok();
    let mut secret_key = std::env::var("CAPCAT_S3_TEST_SECRET_KEY").ok();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--root" => root = Some(PathBuf::from(value()?)),
            "--port" => {
                let text = value()?;
                port = text
                    .parse()
                    .map_err(|e| format!("bad --port {text:?}: {e}"))?;
            }
            "--access-key" => access_key = Some(value()?),
            "--secret-key" => secret_key = Some(value()?),
            "--help" | "-h" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let root = root.ok_or_else(|| format!("--root is required\n{USAGE}"))?;
    if access_key.is_some() != secret_key.is_some() {
        return Err("the access key and the secret key must be given together".to_owned());
    }
    Ok(Options {
        root,
        port,
        access_key,
        secret_key,
    })
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match serve(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("capcat-s3-test-server: {error}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn serve(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&options.root)?;
    let fs = FileSystem::new(&options.root)
        .map_err(|e| format!("cannot open {}: {e:?}", options.root.display()))?;
    let service = {
        let mut builder = S3ServiceBuilder::new(fs);
        if let (Some(access_key), Some(secret_key)) = (options.access_key, options.secret_key) {
            builder.set_auth(SimpleAuth::from_single(access_key, secret_key));
        }
        builder.build()
    };

    let listener = TcpListener::bind(("127.0.0.1", options.port)).await?;
    let address = listener.local_addr()?;
    // The first stdout line is the contract with the tests: print it and flush
    // before accepting anything, so a reader never waits on a buffered line.
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{address}")?;
        stdout.flush()?;
    }

    let http = ConnBuilder::new(TokioExecutor::new());
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(error) => {
                    eprintln!("capcat-s3-test-server: accept failed: {error}");
                    continue;
                }
            },
            _ = ctrl_c.as_mut() => return Ok(()),
        };
        // Without this, a small response waits on the peer's delayed ACK.
        if let Err(error) = socket.set_nodelay(true) {
            eprintln!("capcat-s3-test-server: cannot set TCP_NODELAY: {error}");
        }
        let connection = http
            .serve_connection(TokioIo::new(socket), service.clone())
            .into_owned();
        tokio::spawn(async move {
            // A client that hangs up mid-request is normal in the fault tests.
            let _ = connection.await;
        });
    }
}
