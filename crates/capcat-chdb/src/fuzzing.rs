//! Entry points for the fuzz targets in `fuzz/`, not an API: they reach the
//! parsers of bytes this crate did not write (libchdb's exception text, and
//! with `http-front` the HTTP requests the front serves) without an engine
//! or a socket. Hidden from the docs; nothing else may call them.

/// The code and symbolic name [`crate::ChdbError::Query`] gets from a
/// ClickHouse exception text (what libchdb returns for a failed
/// statement).
pub fn parse_exception(text: &str) -> (u32, String) {
    let parsed = crate::error::parse_exception(text);
    (parsed.code, parsed.name)
}

/// The engine request the HTTP front builds from one request, or `None`
/// when it answers `Ok.\n` without the engine (`/ping`, a `GET` without a
/// query), or its refusal as (HTTP status, ClickHouse code, message).
#[cfg(feature = "http-front")]
pub fn http_request(
    get: bool,
    path: &str,
    query: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> Result<Option<HttpStatement>, (u16, u32, String)> {
    use crate::http::handler::{self, Refusal, Url};
    let refused = |r: Refusal| (r.status.as_u16(), r.code, r.message);
    let method = if get {
        hyper::Method::GET
    } else {
        hyper::Method::POST
    };
    let fields = match handler::parse_url(&method, path, query).map_err(refused)? {
        Url::Ping => return Ok(None),
        Url::Query(fields) => fields,
    };
    let statement = handler::parse_body(fields, content_type, body).map_err(refused)?;
    let valid = statement.request.validate().map_err(|e| e.to_string());
    Ok(Some(HttpStatement {
        request: statement.request,
        format: statement.format,
        compress_response: statement.compress_response,
        valid,
    }))
}

/// What [`http_request`] built.
#[cfg(feature = "http-front")]
#[derive(Debug)]
pub struct HttpStatement {
    /// The engine request.
    pub request: crate::Request,
    /// The output format.
    pub format: String,
    /// Whether the answer is framed in compressed blocks.
    pub compress_response: bool,
    /// What the engine's own check of the request's names says.
    pub valid: Result<(), String>,
}

/// Decodes a body framed in ClickHouse's compressed blocks
/// (`decompress=1`), at most `limit` bytes once decompressed.
#[cfg(feature = "http-front")]
pub fn decode_compressed(body: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    crate::http::compressed::decode(body, limit).map_err(|e| e.to_string())
}

/// Frames `data` as the front frames a `compress=1` response.
#[cfg(feature = "http-front")]
pub fn encode_compressed(data: &[u8]) -> Vec<u8> {
    crate::http::compressed::encode(data)
}

/// The CityHash128 a compressed block's first 16 bytes hold, of `block`
/// (everything after the checksum), as the 16 bytes to store.
#[cfg(feature = "http-front")]
pub fn compressed_checksum(block: &[u8]) -> [u8; 16] {
    crate::http::compressed::checksum(block).to_le_bytes()
}

/// The most bytes the front accepts in a request body.
#[cfg(feature = "http-front")]
pub const MAX_BODY: usize = crate::http::handler::MAX_BODY;

/// The (name, value) fields of a URL query string, as the front reads them.
#[cfg(feature = "http-front")]
pub fn parse_query_string(query: &str) -> Result<Vec<(String, String)>, String> {
    crate::http::form::parse_query_string(query).map_err(|e| e.to_string())
}

/// The (name, value) parts of a `multipart/form-data` body, as the front
/// reads them.
#[cfg(feature = "http-front")]
pub fn parse_multipart(body: &[u8], boundary: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    crate::http::form::parse_multipart(body, boundary).map_err(|e| e.to_string())
}
