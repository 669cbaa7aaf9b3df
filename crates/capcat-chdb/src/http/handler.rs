//! One HTTP request of the ClickHouse interface, turned into an engine
//! [`Request`] and its answer.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Response, StatusCode};

use super::compressed;
use super::form::{self, FormError};
use super::options::FrontCredentials;
use crate::engine::Engine;
use crate::error::{ChdbError, UNKNOWN_EXCEPTION};
use crate::request::{DEFAULT_FORMAT, Request};

/// Largest request body accepted, before and after decompression.
pub(crate) const MAX_BODY: usize = 256 << 20;

/// URL parameters that belong to the HTTP interface itself (or to features
/// this front does not have), never passed on as settings.
const NOT_SETTINGS: &[&str] = &[
    "query",
    "database",
    "default_format",
    "decompress",
    "compress",
    "query_id",
    "session_id",
    "session_timeout",
    "session_check",
    "user",
    "password",
    "quota_key",
    "role",
    "client_protocol_version",
    "wait_end_of_query",
    "buffer_size",
    "enable_http_compression",
    "http_zlib_compression_level",
    "send_progress_in_http_headers",
    "http_headers_progress_interval_ms",
    "add_http_cors_header",
];

/// ClickHouse codes for requests refused before reaching the engine.
const BAD_ARGUMENTS: u32 = 36;
const CHECKSUM_DOESNT_MATCH: u32 = 40;
const CANNOT_DECOMPRESS: u32 = 271;
const UNKNOWN_COMPRESSION_METHOD: u32 = 89;
const TOO_LARGE_REQUEST: u32 = 1001;
const AUTHENTICATION_FAILED: u32 = 516;

/// A refusal: HTTP status, ClickHouse code, message.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: u32,
    pub(crate) message: String,
}

impl Refusal {
    fn bad(code: u32, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
        }
    }
}

impl From<FormError> for Refusal {
    fn from(e: FormError) -> Self {
        Self::bad(BAD_ARGUMENTS, e.to_string())
    }
}

impl From<compressed::FrameError> for Refusal {
    fn from(e: compressed::FrameError) -> Self {
        use compressed::FrameError as F;
        let code = match &e {
            F::Checksum { .. } => CHECKSUM_DOESNT_MATCH,
            F::Method { .. } => UNKNOWN_COMPRESSION_METHOD,
            F::TooLarge { .. } => TOO_LARGE_REQUEST,
            _ => CANNOT_DECOMPRESS,
        };
        Self::bad(code, e.to_string())
    }
}

impl From<ChdbError> for Refusal {
    fn from(e: ChdbError) -> Self {
        match e {
            ChdbError::Query { code, message, .. } => Self {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                code,
                message,
            },
            ChdbError::InvalidInput { .. } => Self::bad(BAD_ARGUMENTS, e.to_string()),
            other => Self {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                code: UNKNOWN_EXCEPTION,
                message: other.to_string(),
            },
        }
    }
}

/// Answers one request. Never fails: every error becomes a ClickHouse-style
/// error response.
pub(crate) async fn handle(
    engine: Engine,
    credentials: Option<&FrontCredentials>,
    request: hyper::Request<Incoming>,
) -> Response<Full<Bytes>> {
    match answer(engine, credentials, request).await {
        Ok(response) => response,
        Err(refusal) => {
            tracing::debug!(code = refusal.code, message = %refusal.message, "HTTP front refused a request");
            let mut body = refusal.message.into_bytes();
            if !body.ends_with(b"\n") {
                body.push(b'\n');
            }
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = refusal.status;
            let headers = response.headers_mut();
            headers.insert(
                "X-ClickHouse-Exception-Code",
                HeaderValue::from(refusal.code),
            );
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=UTF-8"),
            );
            response
        }
    }
}

fn text_response(text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=UTF-8"),
    );
    response
}

async fn answer(
    engine: Engine,
    credentials: Option<&FrontCredentials>,
    request: hyper::Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Refusal> {
    let (parts, body) = request.into_parts();
    let url_fields = match parse_url(&parts.method, parts.uri.path(), parts.uri.query())? {
        // As on a ClickHouse server, a ping needs no login.
        Url::Ping => return Ok(text_response("Ok.\n")),
        Url::Query(fields) => fields,
    };
    if let Some(credentials) = credentials {
        authenticate(credentials, &parts.headers)?;
    }
    let body = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(|e| Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: TOO_LARGE_REQUEST,
            message: format!("cannot read the request body: {e}"),
        })?
        .to_bytes();
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Statement {
        request,
        format,
        compress_response,
    } = parse_body(url_fields, content_type, &body)?;

    let output = engine.execute_async(request).await?;
    let output = if compress_response {
        compressed::encode(&output)
    } else {
        output
    };
    let mut response = Response::new(Full::new(Bytes::from(output)));
    if let Ok(value) = HeaderValue::from_str(&format) {
        response.headers_mut().insert("X-ClickHouse-Format", value);
    }
    Ok(response)
}

/// Admits a request carrying the front's user and password in
/// `X-ClickHouse-User` and `X-ClickHouse-Key`, and refuses every other one
/// with the server's own words: they name the user, never the password,
/// and do not say which of the two was wrong.
fn authenticate(credentials: &FrontCredentials, headers: &hyper::HeaderMap) -> Result<(), Refusal> {
    let header = |name: &str| headers.get(name).map_or(&b""[..], HeaderValue::as_bytes);
    let user = header("X-ClickHouse-User");
    let user = if user.is_empty() {
        &b"default"[..]
    } else {
        user
    };
    if credentials.admit(user, header("X-ClickHouse-Key")) {
        return Ok(());
    }
    Err(Refusal {
        status: StatusCode::FORBIDDEN,
        code: AUTHENTICATION_FAILED,
        message: format!(
            "Code: {AUTHENTICATION_FAILED}. DB::Exception: {}: Authentication failed: password is \
             incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)",
            String::from_utf8_lossy(user)
        ),
    })
}

/// What a request's method, path and URL query ask for.
#[derive(Debug)]
pub(crate) enum Url {
    /// `GET /ping`, or `GET /` without a query: answered `Ok.\n` at once.
    Ping,
    /// A statement; the URL's fields, in order. The body is read next.
    Query(Vec<(String, String)>),
}

/// Reads the method, the path and the URL query, before the body.
pub(crate) fn parse_url(method: &Method, path: &str, query: Option<&str>) -> Result<Url, Refusal> {
    if path == "/ping" {
        return Ok(Url::Ping);
    }
    if path != "/" {
        return Err(Refusal {
            status: StatusCode::NOT_FOUND,
            code: BAD_ARGUMENTS,
            message: format!("no handler for {path}"),
        });
    }
    let url_fields = form::parse_query_string(query.unwrap_or(""))?;
    if *method == Method::GET && url_fields.iter().all(|(k, _)| k != "query") {
        return Ok(Url::Ping);
    }
    Ok(Url::Query(url_fields))
}

/// A request the engine is to run, and how to answer with its output.
#[derive(Debug)]
pub(crate) struct Statement {
    /// The engine request.
    pub(crate) request: Request,
    /// The output format, echoed in `X-ClickHouse-Format`.
    pub(crate) format: String,
    /// `compress=1`: frame the output in compressed blocks.
    pub(crate) compress_response: bool,
}

/// Builds the engine request from the URL's fields, the content type and
/// the body (multipart fields, compressed INSERT data, or the SQL itself).
pub(crate) fn parse_body(
    url_fields: Vec<(String, String)>,
    content_type: &str,
    body: &[u8],
) -> Result<Statement, Refusal> {
    let multipart = match form::multipart_boundary(content_type) {
        Some(boundary) => Some(form::parse_multipart(body, boundary)?),
        None => None,
    };
    let flag = |name: &str| url_fields.iter().any(|(k, v)| k == name && v == "1");
    let compress_response = flag("compress");
    let decompress = flag("decompress");

    let mut url_query = None;
    let mut params: Vec<(String, Vec<u8>)> = Vec::new();
    let mut settings = Vec::new();
    let mut database = None;
    let mut format = None;
    for (name, value) in url_fields {
        if let Some(param) = name.strip_prefix("param_") {
            params.push((param.to_owned(), value.into_bytes()));
            continue;
        }
        match name.as_str() {
            "query" => url_query = Some(value),
            "database" => database = Some(value),
            "default_format" => format = Some(value),
            other if NOT_SETTINGS.contains(&other) => {}
            _ => settings.push((name, value)),
        }
    }

    // Where the SQL is, and whether the body is data for it.
    let (sql, data) = match multipart {
        Some(fields) => {
            let mut sql = url_query.map(String::into_bytes);
            for (name, value) in fields {
                if let Some(param) = name.strip_prefix("param_") {
                    params.push((param.to_owned(), value));
                } else if name == "query" {
                    if sql.is_some() {
                        return Err(Refusal::bad(
                            BAD_ARGUMENTS,
                            "the query is given twice (URL and multipart)",
                        ));
                    }
                    sql = Some(value);
                }
            }
            (
                sql.ok_or_else(|| Refusal::bad(BAD_ARGUMENTS, "no query in the multipart body"))?,
                Vec::new(),
            )
        }
        None => {
            let body = if decompress {
                compressed::decode(body, MAX_BODY)?
            } else {
                body.to_vec()
            };
            match url_query {
                Some(query) => (query.into_bytes(), body),
                None => (body, Vec::new()),
            }
        }
    };
    if sql.iter().all(u8::is_ascii_whitespace) {
        return Err(Refusal::bad(BAD_ARGUMENTS, "empty query"));
    }

    let mut request = match crate::request::split_insert_format(&sql) {
        Some((statement, input_format)) if !data.is_empty() => {
            Request::from_bytes(statement.to_vec()).insert_data(input_format, data)
        }
        _ if data.is_empty() => Request::from_bytes(sql),
        _ => {
            // ClickHouse's own rule: the SQL, a newline, then the body.
            let mut text = sql;
            text.push(b'\n');
            text.extend_from_slice(&data);
            Request::from_bytes(text)
        }
    };
    for (name, value) in params {
        let value = String::from_utf8(value)
            .map_err(|_| Refusal::bad(BAD_ARGUMENTS, format!("parameter {name} is not UTF-8")))?;
        request = request.param(name, value);
    }
    for (name, value) in settings {
        request = request.setting(name, value);
    }
    if let Some(db) = database.filter(|d| !d.is_empty()) {
        request = request.database(db);
    }
    let format = format
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| DEFAULT_FORMAT.to_owned());
    request = request.format(format.clone());
    Ok(Statement {
        request,
        format,
        compress_response,
    })
}
