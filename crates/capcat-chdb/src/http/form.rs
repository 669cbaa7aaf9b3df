//! The two ways a request carries named fields: the URL query string
//! (`application/x-www-form-urlencoded`) and a `multipart/form-data` body.

/// Most fields accepted in one request; bounds both parsers.
const MAX_FIELDS: usize = 10_000;

/// Why a request's fields could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FormError {
    /// A `%` escape is not followed by two hex digits.
    #[error("bad percent-escape in the URL query")]
    BadEscape,
    /// A decoded URL field is not UTF-8.
    #[error("URL query field is not UTF-8")]
    NotUtf8,
    /// More fields than the front accepts.
    #[error("more than {MAX_FIELDS} fields")]
    TooManyFields,
    /// The multipart body does not follow its declared boundary.
    #[error("malformed multipart body: {0}")]
    Multipart(&'static str),
}

/// Parses a URL query string into (name, value) pairs, in order.
pub(crate) fn parse_query_string(query: &str) -> Result<Vec<(String, String)>, FormError> {
    let mut out = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        if out.len() == MAX_FIELDS {
            return Err(FormError::TooManyFields);
        }
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((percent_decode(name)?, percent_decode(value)?));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, FormError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(FormError::BadEscape)?;
                let hex = std::str::from_utf8(hex).map_err(|_| FormError::BadEscape)?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| FormError::BadEscape)?);
                i += 2;
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| FormError::NotUtf8)
}

/// The boundary of a `multipart/form-data` content type, if it is one.
pub(crate) fn multipart_boundary(content_type: &str) -> Option<&str> {
    let (mime, params) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"'))
    })
}

/// Parses a `multipart/form-data` body into (name, value) pairs.
pub(crate) fn parse_multipart(
    body: &[u8],
    boundary: &str,
) -> Result<Vec<(String, Vec<u8>)>, FormError> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut rest = body;
    let start = find(rest, delimiter).ok_or(FormError::Multipart("no opening boundary"))?;
    rest = &rest[start + delimiter.len()..];
    let mut out = Vec::new();
    // Bounded: each iteration consumes one delimiter, and fields are capped.
    loop {
        if rest.starts_with(b"--") {
            return Ok(out);
        }
        if out.len() == MAX_FIELDS {
            return Err(FormError::TooManyFields);
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .ok_or(FormError::Multipart("boundary not followed by CRLF"))?;
        let headers_end =
            find(rest, b"\r\n\r\n").ok_or(FormError::Multipart("part without headers end"))?;
        let headers = std::str::from_utf8(&rest[..headers_end])
            .map_err(|_| FormError::Multipart("part headers are not UTF-8"))?;
        let name = field_name(headers).ok_or(FormError::Multipart("part without a name"))?;
        rest = &rest[headers_end + 4..];
        let end =
            find(rest, delimiter).ok_or(FormError::Multipart("part without a closing boundary"))?;
        let value = rest[..end]
            .strip_suffix(b"\r\n")
            .ok_or(FormError::Multipart("part value not followed by CRLF"))?;
        out.push((name.to_owned(), value.to_vec()));
        rest = &rest[end + delimiter.len()..];
    }
}

fn field_name(headers: &str) -> Option<&str> {
    headers.split("\r\n").find_map(|line| {
        let (key, value) = line.split_once(':')?;
        if !key.trim().eq_ignore_ascii_case("content-disposition") {
            return None;
        }
        value.split(';').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            (k.trim() == "name").then(|| v.trim().trim_matches('"'))
        })
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode_plus_and_percent() {
        assert_eq!(
            parse_query_string("query=SELECT+1%2C%27a%27&param_x=%7B%7D&flag").expect("parse"),
            vec![
                ("query".into(), "SELECT 1,'a'".into()),
                ("param_x".into(), "{}".into()),
                ("flag".into(), String::new()),
            ]
        );
        assert_eq!(parse_query_string("a=%4"), Err(FormError::BadEscape));
        assert_eq!(parse_query_string("a=%zz"), Err(FormError::BadEscape));
        assert_eq!(parse_query_string("a=%ff"), Err(FormError::NotUtf8));
    }

    #[test]
    fn multipart_as_the_clickhouse_crate_writes_it() {
        let body =
            b"--B\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\nSELECT {a:String}\r\n\
--B\r\nContent-Disposition: form-data; name=\"param_a\"\r\n\r\nline1\r\nline2\r\n--B--\r\n";
        assert_eq!(
            multipart_boundary("multipart/form-data; boundary=B"),
            Some("B")
        );
        assert_eq!(multipart_boundary("text/plain"), None);
        assert_eq!(
            parse_multipart(body, "B").expect("parse"),
            vec![
                ("query".into(), b"SELECT {a:String}".to_vec()),
                ("param_a".into(), b"line1\r\nline2".to_vec()),
            ]
        );
    }

    #[test]
    fn malformed_multipart_is_an_error_not_a_panic() {
        for body in [
            &b""[..],
            b"--B",
            b"--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--",
            b"--B\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nno end",
            b"--Bjunk",
        ] {
            assert!(parse_multipart(body, "B").is_err(), "{body:?}");
        }
    }
}
