//! Mapping a ClickHouse exception text to a [`Failure`].

use capcat_proto::Failure;

/// ClickHouse's `TIMEOUT_EXCEEDED`: the statement hit `max_execution_time`.
pub const TIMEOUT_EXCEEDED: u32 = 159;

/// ClickHouse's code for an exception it could not classify; used when the
/// text carries no `Code: NNN.` prefix.
const UNKNOWN_EXCEPTION: u32 = 1002;

/// The [`Failure`] for a server exception: [`Failure::Timeout`] for
/// `TIMEOUT_EXCEEDED` (the statement's cap fired, so its effect is as
/// ambiguous as a client timeout's), [`Failure::Server`] with the code and
/// the whole text otherwise.
pub fn failure_from_exception(code: Option<u32>, message: &str) -> Failure {
    let code = code
        .or_else(|| parse_code(message))
        .unwrap_or(UNKNOWN_EXCEPTION);
    if code == TIMEOUT_EXCEEDED {
        return Failure::Timeout;
    }
    Failure::Server {
        code,
        message: message.trim_end().to_owned(),
    }
}

/// The number after `Code: ` in an exception text.
fn parse_code(message: &str) -> Option<u32> {
    let at = message.find("Code: ")?;
    let rest = &message[at + "Code: ".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_from_the_text_and_timeouts_are_timeouts() {
        assert_eq!(
            failure_from_exception(
                None,
                "Code: 60. DB::Exception: Unknown table (UNKNOWN_TABLE)\n"
            ),
            Failure::Server {
                code: 60,
                message: "Code: 60. DB::Exception: Unknown table (UNKNOWN_TABLE)".to_owned()
            }
        );
        assert_eq!(
            failure_from_exception(None, "Code: 159. DB::Exception: Timeout exceeded"),
            Failure::Timeout
        );
        assert_eq!(
            failure_from_exception(Some(62), "no code in here"),
            Failure::Server {
                code: 62,
                message: "no code in here".to_owned()
            }
        );
        assert!(matches!(
            failure_from_exception(None, "garbled"),
            Failure::Server { code: 1002, .. }
        ));
    }
}
