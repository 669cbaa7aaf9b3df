//! Feeds HTTP requests to capcat-chdb's ClickHouse-HTTP front, up to the
//! engine request it would run (`capcat_chdb::fuzzing::http_request`: the
//! path, the URL query string, a multipart body, a body of compressed
//! blocks), and bodies of compressed blocks to the block decoder alone.
//! Requests are built from the input: a raw query string or fields it
//! percent-encodes, a raw body, a multipart body of the parts it lists
//! under its boundary, or compressed blocks whose sizes and method it
//! chooses and whose checksums are then made right (or left wrong), so the
//! fuzzer gets past the CityHash check.
//!
//! Properties: no request panics the front; every refusal is a 4xx or 5xx
//! with a ClickHouse code; no declared size allocates more than the input
//! allows (run with `-malloc_limit_mb`: a block's declared decompressed
//! size is bounded by what its payload can decode to); the decoded body
//! never exceeds its limit; and the round trips are identities: fields
//! percent-encoded into a query string parse back to themselves, parts
//! written under a boundary none of them contains parse back to themselves,
//! and `decode(encode(data))` is `data`.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use capcat_chdb::fuzzing::{
    MAX_BODY, compressed_checksum, decode_compressed, encode_compressed, http_request,
    parse_multipart, parse_query_string,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Path {
    Root,
    Ping,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Query {
    Raw(String),
    Fields(Vec<(Name, String)>),
}

#[derive(Arbitrary, Debug)]
enum Name {
    Query,
    Param(String),
    Database,
    DefaultFormat,
    Decompress,
    Compress,
    Setting(String),
}

impl Name {
    fn text(&self) -> String {
        match self {
            Name::Query => "query".into(),
            Name::Param(p) => format!("param_{p}"),
            Name::Database => "database".into(),
            Name::DefaultFormat => "default_format".into(),
            Name::Decompress => "decompress".into(),
            Name::Compress => "compress".into(),
            Name::Setting(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Body {
    Raw(Vec<u8>),
    Multipart {
        boundary: String,
        parts: Vec<(String, Vec<u8>)>,
        epilogue: Vec<u8>,
    },
    Blocks(Vec<Block>),
}

#[derive(Arbitrary, Debug)]
struct Block {
    method: u8,
    data: Vec<u8>,
    /// Overrides of the size fields.
    compressed: Option<u32>,
    decompressed: Option<u32>,
    /// Leave the checksum wrong.
    bad_checksum: bool,
}

#[derive(Arbitrary, Debug)]
struct Request {
    get: bool,
    path: Path,
    query: Option<Query>,
    content_type: Option<String>,
    body: Body,
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Compressed blocks as ClickHouse frames them, checksums made right unless
/// a block asks otherwise.
fn blocks(list: &[Block]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in list {
        let (method, payload) = match b.method % 4 {
            0 => (0x82, lz4_compress(&b.data)),
            1 => (0x02, b.data.clone()),
            2 => (0x82, b.data.clone()),
            _ => (b.method, b.data.clone()),
        };
        let compressed = b
            .compressed
            .unwrap_or_else(|| u32::try_from(9 + payload.len()).unwrap_or(u32::MAX));
        let decompressed = b
            .decompressed
            .unwrap_or_else(|| u32::try_from(b.data.len()).unwrap_or(u32::MAX));
        let mut block = vec![method];
        block.extend_from_slice(&compressed.to_le_bytes());
        block.extend_from_slice(&decompressed.to_le_bytes());
        block.extend_from_slice(&payload);
        let mut sum = compressed_checksum(&block);
        if b.bad_checksum {
            sum[0] ^= 1;
        }
        out.extend_from_slice(&sum);
        out.extend_from_slice(&block);
    }
    out
}

/// LZ4 block compression through the front's own encoder: its framed output
/// minus the 25-byte block header, for one block of at most 1 MiB.
fn lz4_compress(data: &[u8]) -> Vec<u8> {
    let framed = encode_compressed(data);
    framed.get(25..).map(<[u8]>::to_vec).unwrap_or_default()
}

fn check_request(r: &Request) {
    let path = match &r.path {
        Path::Root => "/".to_owned(),
        Path::Ping => "/ping".to_owned(),
        Path::Other(p) => p.clone(),
    };
    let query = r.query.as_ref().map(|q| match q {
        Query::Raw(raw) => raw.clone(),
        Query::Fields(fields) => fields
            .iter()
            .map(|(n, v)| format!("{}={}", percent_encode(&n.text()), percent_encode(v)))
            .collect::<Vec<_>>()
            .join("&"),
    });
    let (content_type, body) = match &r.body {
        Body::Raw(bytes) => (r.content_type.clone().unwrap_or_default(), bytes.clone()),
        Body::Multipart {
            boundary,
            parts,
            epilogue,
        } => {
            let mut body = multipart_body(boundary, parts);
            body.extend_from_slice(epilogue);
            (format!("multipart/form-data; boundary={boundary}"), body)
        }
        Body::Blocks(list) => (r.content_type.clone().unwrap_or_default(), blocks(list)),
    };
    match http_request(r.get, &path, query.as_deref(), &content_type, &body) {
        Ok(None) => assert!(path == "/ping" || path == "/"),
        Ok(Some(statement)) => {
            assert!(!statement.format.is_empty());
            assert!(!statement.request.sql().iter().all(u8::is_ascii_whitespace));
        }
        Err((status, code, _message)) => {
            assert!((400..600).contains(&status), "status {status}");
            assert!(code > 0);
        }
    }
}

fn multipart_body(boundary: &str, parts: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        body.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The round trips: query-string fields, multipart parts, compressed blocks.
fn check_round_trips(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let fields: Vec<(String, String)> = u.arbitrary()?;
    let query: Vec<String> = fields
        .iter()
        .map(|(n, v)| format!("{}={}", percent_encode(n), percent_encode(v)))
        .collect();
    assert_eq!(parse_query_string(&query.join("&")), Ok(fields));

    let boundary = format!("b{}", u.arbitrary::<u32>()?);
    let parts: Vec<(String, Vec<u8>)> = u.arbitrary()?;
    let parts: Vec<(String, Vec<u8>)> = parts
        .into_iter()
        .map(|(n, v)| (n.chars().filter(char::is_ascii_alphanumeric).collect(), v))
        .filter(|(n, v): &(String, Vec<u8>)| {
            !n.is_empty() && !contains(v, format!("--{boundary}").as_bytes())
        })
        .collect();
    let body = multipart_body(&boundary, &parts);
    assert_eq!(parse_multipart(&body, &boundary), Ok(parts));

    let data: Vec<u8> = u.arbitrary()?;
    let framed = encode_compressed(&data);
    assert_eq!(
        decode_compressed(&framed, MAX_BODY).as_deref(),
        Ok(&data[..])
    );
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(rest);
    match mode % 3 {
        0 => {
            if let Ok(request) = Request::arbitrary(&mut u) {
                check_request(&request);
            }
        }
        1 => {
            // The block decoder alone, on blocks the input describes, under
            // the limit the front decodes request bodies with.
            if let Ok(list) = Vec::<Block>::arbitrary(&mut u) {
                let body = blocks(&list);
                if let Ok(decoded) = decode_compressed(&body, MAX_BODY) {
                    assert!(decoded.len() <= MAX_BODY);
                }
            }
        }
        _ => {
            let _ = check_round_trips(&mut u);
        }
    }
});
