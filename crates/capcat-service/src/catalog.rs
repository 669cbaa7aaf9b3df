//! The service's view of the catalog: capcat-clickhouse's [`Catalog`], and
//! the one decision the service makes about catalog failures (whether a
//! failed index pass counts against its packs).
//!
//! The service runs every catalog operation through [`Catalog`] (one drive
//! loop, in capcat-clickhouse) and holds the publisher lease as a
//! [`capcat_clickhouse::LeaseHandle`]; nothing here drives a machine.

pub use capcat_clickhouse::Catalog;
use capcat_clickhouse::CatalogError;
use capcat_proto::{Failure, IndexError};

/// Whether a failed index pass is an outage that counts against no pack:
/// everything but an index error refusing the packs' values (see
/// [`index_error_is_outage`]). A released or lost lease, a machine that ran
/// away, or any other catalog error says nothing about the packs.
#[must_use]
pub fn catalog_error_is_outage(error: &CatalogError) -> bool {
    match error {
        CatalogError::Index(error) => index_error_is_outage(error),
        _ => true,
    }
}

/// Whether an index failure is an outage (the catalog could not be reached,
/// timed out, fenced or out-raced us, or failed in a way that says nothing
/// about the packs) rather than a refusal of these packs' values. An outage
/// counts against no pack.
#[must_use]
pub fn index_error_is_outage(error: &IndexError) -> bool {
    match error {
        IndexError::Statement { failure, .. } | IndexError::Inventory { failure, .. } => {
            failure_is_outage(failure)
        }
        // Lost races, lost leases, allocation and publish failures, and a
        // read-back of the wrong shape say nothing about the packs: retry
        // the same batch later.
        _ => true,
    }
}

/// ClickHouse exception codes that refuse the values a statement carried
/// (a parse error, a type mismatch, a value too large), as opposed to the
/// server being unreachable, missing a table, or out of resources.
/// Anything not listed counts as an outage, so a misconfigured or
/// half-dropped catalog never sets packs aside.
///
/// The packs' values travel only as query parameters (the descriptor rows
/// are one TabSeparated `String` parameter parsed by `format()`), never in
/// the SQL text, and the text is the protocol's own. So SYNTAX_ERROR (62),
/// TOO_BIG_AST (167) and TOO_DEEP_AST (168) can no longer be caused by a
/// pack, however large (max_query_size bounds the text, which no value
/// enters): they mean the statement itself is wrong, an outage that must
/// not set packs aside, and are not listed.
pub const VALUE_REFUSAL_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    43,  // ILLEGAL_TYPE_OF_ARGUMENT
    53,  // TYPE_MISMATCH
    69,  // ARGUMENT_OUT_OF_BOUND
    72,  // CANNOT_PARSE_NUMBER
    131, // TOO_LARGE_STRING_SIZE
    321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE: a value outside its column's type.
    376, // CANNOT_PARSE_UUID
    // BAD_QUERY_PARAMETER: a parameter's value does not parse as its
    // declared type. The only parameters that carry pack data are the
    // descriptor rows, so this refuses the packs' values and counts against
    // them (halving finds the culprit; a renderer bug refusing every batch
    // would show as every pack refused alone, named in rejected_packs,
    // still in the store and recoverable by reconcile).
    457,
];
/// Whether a statement failure is an outage: everything but a server
/// exception refusing the statement's values.
#[must_use]
pub fn failure_is_outage(failure: &Failure) -> bool {
    !matches!(failure, Failure::Server { code, .. } if VALUE_REFUSAL_CODES.contains(code))
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn statement(failure: Failure) -> IndexError {
        IndexError::Statement {
            statement: "index.insert_descriptors",
            failure,
        }
    }

    #[test]
    fn only_value_refusals_count_against_a_pack() {
        let refused = Failure::Server {
            code: 27,
            message: "Cannot parse input".into(),
        };
        assert!(!index_error_is_outage(&statement(refused)));
        for code in [321, 457] {
            let refused = Failure::Server {
                code,
                message: "a value the engine refused".into(),
            };
            assert!(!index_error_is_outage(&statement(refused)), "{code}");
        }
        // SYNTAX_ERROR: no value enters the SQL text, so it is never the
        // packs' fault.
        assert!(index_error_is_outage(&statement(Failure::Server {
            code: 62,
            message: "Syntax error".into(),
        })));
        for outage in [
            Failure::Timeout,
            Failure::Transport {
                message: "connection refused".into(),
            },
            Failure::Malformed {
                message: "wrong width".into(),
            },
            // UNKNOWN_TABLE: a dropped catalog is not the pack's fault.
            Failure::Server {
                code: 60,
                message: "Table does not exist".into(),
            },
            // MEMORY_LIMIT_EXCEEDED: the server's state, not the values.
            Failure::Server {
                code: 241,
                message: "Memory limit".into(),
            },
        ] {
            assert!(
                index_error_is_outage(&statement(outage.clone())),
                "{outage:?}"
            );
        }
        let lost = IndexError::LeaseLost {
            version: 3,
            publish_id: Uuid::nil(),
            head: None,
        };
        assert!(index_error_is_outage(&lost));
        let malformed = IndexError::Malformed {
            statement: "index.read_committed",
            detail: String::new(),
        };
        assert!(index_error_is_outage(&malformed));
        // Through the adapter's error: only an index refusal of values
        // counts against the packs.
        let refusal = CatalogError::Index(statement(Failure::Server {
            code: 27,
            message: "Cannot parse input".into(),
        }));
        assert!(!catalog_error_is_outage(&refusal));
        assert!(catalog_error_is_outage(&CatalogError::Index(lost)));
        assert!(catalog_error_is_outage(&CatalogError::Released {
            lease_id: Uuid::nil()
        }));
        assert!(catalog_error_is_outage(&CatalogError::MachineRunaway {
            operation: "index",
            steps: 1
        }));
    }
}
