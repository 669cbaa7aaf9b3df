//! [`CatalogError`]: why a catalog operation did not complete.

use std::collections::BTreeSet;

use capcat_proto::lease::LeaseHead;
use capcat_proto::reader::ReaderError;
use capcat_proto::schema::SchemaError;
use capcat_proto::{
    AllocateError, ConfigError, Failure, IndexError, InvalidPrefix, LeaseError, LostRace,
    PublishError,
};
use uuid::Uuid;

use crate::transport::{AccessError, HttpError};

/// Why a catalog operation did not complete. Each protocol error is carried
/// whole, so an operator sees what the protocol core reported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The prefix cannot name catalog objects.
    #[error(transparent)]
    Prefix(#[from] InvalidPrefix),
    /// The protocol configuration cannot be honoured.
    #[error("protocol configuration: {0}")]
    Config(#[from] ConfigError),
    /// The embedded engine could not be opened.
    #[error("embedded engine: {0}")]
    Engine(#[from] capcat_chdb::ChdbError),
    /// The HTTP transport could not be built.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The server refused the connection itself: its certificate, the
    /// credentials, or TLS (what to fix is in the message).
    #[error(transparent)]
    Access(#[from] AccessError),
    /// `ensure_schema` refused the catalog or failed.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A `DROP ... IF EXISTS` of `drop_schema` failed; the objects before it
    /// were dropped, and rerunning the teardown resumes.
    #[error("drop_schema: {statement} failed: {failure}")]
    Drop {
        /// The drop statement's name.
        statement: &'static str,
        /// What the transport reported.
        failure: Failure,
    },
    /// A lease operation failed.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The lease handle was released, or a release was sent whose effect
    /// is unknown (it may still land): the lease may not renew or publish
    /// any more (every rival's read-back ignores a released lease's rows),
    /// only retry its release; acquire a new one.
    #[error(
        "lease {lease_id} was released (or a release of it was sent) by this handle; \
         acquire the lease again"
    )]
    Released {
        /// The released lease's id.
        lease_id: Uuid,
    },
    /// A publish or index pass under this handle was dropped (its future
    /// cancelled) before it handed the lease back, so a guarded statement of
    /// it may still be running on the server. The handle is never used
    /// again and never released; acquire the lease again (a fresh acquire
    /// waits until every row of this lease has expired).
    #[error(
        "lease {lease_id} is in doubt: an operation under it was cancelled mid-statement; \
         it is left to expire; acquire the lease again"
    )]
    InDoubt {
        /// The lease left to expire.
        lease_id: Uuid,
    },
    /// Version allocation failed.
    #[error(transparent)]
    Allocate(#[from] AllocateError),
    /// A publish ended in an error whose effect is described by the source.
    /// (A publish the lease stopped converts to
    /// [`LeaseLost`](Self::LeaseLost) or [`Unsettled`](Self::Unsettled),
    /// as an index pass's does.)
    #[error(transparent)]
    Publish(PublishError),
    /// The publish lost its version race: nothing it wrote is visible.
    #[error(transparent)]
    LostRace(#[from] LostRace),
    /// The publish was fenced out: the lease is no longer this publisher's.
    #[error(
        "publish of version {version} (publish {publish_id}) was fenced out: the publisher lease \
         is no longer ours (head: {}); acquire it again",
        capcat_proto::lease::HeadShown(head)
    )]
    LeaseLost {
        /// The version attempted.
        version: u64,
        /// The attempt's id.
        publish_id: Uuid,
        /// The head that replaced the lease, if any.
        head: Option<LeaseHead>,
    },
    /// The publish was put off: a guarded statement an earlier attempt under
    /// this lease abandoned (a timeout, a lost connection) may still land
    /// until the server's clock passes `until_ns`. Nothing was written;
    /// publish again after `wait_ns` (a renewal by the lease keeper in the
    /// meantime proves the wait over just as well).
    #[error(
        "publish of version {version} was put off: a statement an earlier attempt abandoned \
         may still land for {wait_ns} ns (until server time {until_ns}); publish again after that"
    )]
    Unsettled {
        /// The version that was to be published.
        version: u64,
        /// The server time the abandoned statement may land until.
        until_ns: u64,
        /// How much longer the server's clock must run past the renewal.
        wait_ns: u64,
    },
    /// The publish stands beside a foreign publish at the same version: the
    /// packs ARE visible, and an operator must look at the union.
    #[error(
        "version {version} holds publish {publish_id} and foreign publish(es) {all_foreign:?}: \
         its contents are the union of both; operator attention needed"
    )]
    Conflict {
        /// The version.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// Every foreign publish id at the version.
        all_foreign: BTreeSet<Uuid>,
    },
    /// An index pass failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A read failed.
    #[error(transparent)]
    Reader(#[from] ReaderError),
    /// A machine took more steps than any legitimate run needs: a bug in the
    /// machine, reported instead of looping.
    #[error("{operation} did not finish within {steps} steps")]
    MachineRunaway {
        /// The operation.
        operation: &'static str,
        /// The bound.
        steps: u32,
    },
}

impl From<PublishError> for CatalogError {
    /// The lease stopping a publish is the same error whichever machine
    /// reports it: [`CatalogError::LeaseLost`] and
    /// [`CatalogError::Unsettled`], as from an index pass.
    fn from(error: PublishError) -> Self {
        match error {
            PublishError::LeaseLost {
                version,
                publish_id,
                head,
            } => Self::LeaseLost {
                version,
                publish_id,
                head,
            },
            PublishError::Unsettled {
                version,
                until_ns,
                wait_ns,
                ..
            } => Self::Unsettled {
                version,
                until_ns,
                wait_ns,
            },
            other => Self::Publish(other),
        }
    }
}

impl CatalogError {
    /// Whether this failure is an outage, which says nothing about the
    /// values the operation carried (retry the same work later; a failed
    /// index pass counts against none of its packs), rather than the
    /// catalog refusing those values (a failed index pass then counts
    /// against its packs, and the service halves the batch to find the
    /// culprit).
    ///
    /// Only an index pass whose statement the server refused with one of
    /// [`VALUE_REFUSAL_CODES`] is a refusal; every other failure is an
    /// outage, so a misconfigured, unreachable or half-dropped catalog
    /// never sets packs aside. Per kind of variant:
    ///
    /// - [`Index`](Self::Index): a refusal only when a statement (or the
    ///   inventory read) failed with a value-refusal code; lost races, lost
    ///   leases, allocation and publish failures and a read-back of the
    ///   wrong shape are outages.
    /// - Set-up failures ([`Prefix`](Self::Prefix),
    ///   [`Config`](Self::Config), [`Engine`](Self::Engine),
    ///   [`Http`](Self::Http), [`Access`](Self::Access), [`Schema`](Self::Schema),
    ///   [`Drop`](Self::Drop)): outages: they carry no pack data.
    /// - Lease states ([`Lease`](Self::Lease), [`Released`](Self::Released),
    ///   [`InDoubt`](Self::InDoubt), [`LeaseLost`](Self::LeaseLost),
    ///   [`Unsettled`](Self::Unsettled)): outages: acquire (or wait) and
    ///   retry.
    /// - Publish outcomes ([`Allocate`](Self::Allocate),
    ///   [`Publish`](Self::Publish), [`LostRace`](Self::LostRace),
    ///   [`Conflict`](Self::Conflict)): outages of the protocol, never of the
    ///   values (a conflict still needs an operator; it is not the packs'
    ///   fault).
    /// - [`Reader`](Self::Reader): a read carries no pack data: an outage.
    /// - [`MachineRunaway`](Self::MachineRunaway): a bug, not the values: an
    ///   outage.
    #[must_use]
    pub fn is_outage(&self) -> bool {
        match self {
            Self::Index(error) => index_error_is_outage(error),
            Self::Prefix(_)
            | Self::Config(_)
            | Self::Engine(_)
            | Self::Http(_)
            | Self::Access(_)
            | Self::Schema(_)
            | Self::Drop { .. }
            | Self::Lease(_)
            | Self::Released { .. }
            | Self::InDoubt { .. }
            | Self::LeaseLost { .. }
            | Self::Unsettled { .. }
            | Self::Allocate(_)
            | Self::Publish(_)
            | Self::LostRace(_)
            | Self::Conflict { .. }
            | Self::Reader(_)
            | Self::MachineRunaway { .. } => true,
        }
    }
}

/// Whether an index failure is an outage (the catalog could not be reached,
/// timed out, fenced or out-raced us, or failed in a way that says nothing
/// about the packs) rather than a refusal of these packs' values.
fn index_error_is_outage(error: &IndexError) -> bool {
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
/// Anything not listed counts as an outage (see [`CatalogError::is_outage`]),
/// so a misconfigured or half-dropped catalog never sets packs aside.
///
/// The packs' values travel as the descriptor INSERT's `RowBinary` data,
/// never in the SQL text nor in a parameter, and the text is the
/// protocol's own. So SYNTAX_ERROR (62), TOO_BIG_AST (167), TOO_DEEP_AST
/// (168) and BAD_QUERY_PARAMETER (457) can no longer be caused by a pack,
/// however large: they mean the statement itself is wrong, an outage that
/// must not set packs aside, and are not listed. What data can still be
/// refused for: a string or an array over the server's limits
/// (TOO_LARGE_STRING_SIZE, TOO_LARGE_ARRAY_SIZE), and the parse and range
/// errors a server applies to values, kept in case a server's input format
/// checks them.
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
    128, // TOO_LARGE_ARRAY_SIZE: a shape with more dimensions than the server takes.
    131, // TOO_LARGE_STRING_SIZE: a string over `format_binary_max_string_size`.
    321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE: a value outside its column's type.
    376, // CANNOT_PARSE_UUID
];

/// Whether a statement failure is an outage: everything but a server
/// exception refusing the statement's values ([`VALUE_REFUSAL_CODES`]).
#[must_use]
pub fn failure_is_outage(failure: &Failure) -> bool {
    !matches!(failure, Failure::Server { code, .. } if VALUE_REFUSAL_CODES.contains(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_the_lease_stopped_is_the_same_error_as_from_an_index_pass() {
        let id = Uuid::from_u128(1);
        let lost = CatalogError::from(PublishError::LeaseLost {
            version: 3,
            publish_id: id,
            head: None,
        });
        assert!(
            matches!(lost, CatalogError::LeaseLost { version: 3, .. }),
            "{lost:?}"
        );
        let unsettled = CatalogError::from(PublishError::Unsettled {
            version: 3,
            publish_id: id,
            until_ns: 9,
            wait_ns: 2,
        });
        assert!(
            matches!(
                unsettled,
                CatalogError::Unsettled {
                    until_ns: 9,
                    wait_ns: 2,
                    ..
                }
            ),
            "{unsettled:?}"
        );
        let other = CatalogError::from(PublishError::VersionZero);
        assert!(matches!(
            other,
            CatalogError::Publish(PublishError::VersionZero)
        ));
    }

    fn statement(failure: Failure) -> IndexError {
        IndexError::Statement {
            statement: "index.insert_descriptors",
            failure,
        }
    }

    fn server(code: u32) -> Failure {
        Failure::Server {
            code,
            message: format!("exception {code}"),
        }
    }

    #[test]
    fn only_an_index_statement_refusing_values_is_not_an_outage() {
        // Value refusals count against the packs.
        for code in [27, 131, 321] {
            assert!(
                !CatalogError::Index(statement(server(code))).is_outage(),
                "{code}"
            );
            let inventory = IndexError::Inventory {
                version: 1,
                publish_id: Uuid::nil(),
                failure: server(code),
            };
            assert!(!CatalogError::Index(inventory).is_outage(), "{code}");
        }
        // SYNTAX_ERROR: no value enters the SQL text, so it is never the
        // packs' fault; UNKNOWN_TABLE (a dropped catalog) and
        // MEMORY_LIMIT_EXCEEDED (the server's state) neither.
        for outage in [
            server(62),
            server(457),
            server(60),
            server(241),
            Failure::Timeout,
            Failure::Transport {
                message: "connection refused".into(),
            },
            Failure::Malformed {
                message: "wrong width".into(),
            },
        ] {
            assert!(
                CatalogError::Index(statement(outage.clone())).is_outage(),
                "{outage:?}"
            );
        }
        // An index pass that lost its lease or read back the wrong shape
        // says nothing about the packs.
        let lost = IndexError::LeaseLost {
            version: 3,
            publish_id: Uuid::nil(),
            head: None,
        };
        assert!(CatalogError::Index(lost).is_outage());
        let malformed = IndexError::Malformed {
            statement: "index.read_committed",
            detail: String::new(),
        };
        assert!(CatalogError::Index(malformed).is_outage());
    }

    #[test]
    fn every_other_variant_is_an_outage_even_carrying_a_refusal_code() {
        let outages = [
            CatalogError::Released {
                lease_id: Uuid::nil(),
            },
            CatalogError::InDoubt {
                lease_id: Uuid::nil(),
            },
            CatalogError::MachineRunaway {
                operation: "index",
                steps: 1,
            },
            // A refusal code outside an index pass is still no pack's fault.
            CatalogError::Drop {
                statement: "schema.drop",
                failure: server(27),
            },
            CatalogError::Reader(ReaderError::Statement {
                statement: "reader.pin_snapshot",
                failure: server(27),
            }),
            CatalogError::Unsettled {
                version: 1,
                until_ns: 2,
                wait_ns: 3,
            },
            CatalogError::LeaseLost {
                version: 1,
                publish_id: Uuid::nil(),
                head: None,
            },
            CatalogError::Conflict {
                version: 1,
                publish_id: Uuid::nil(),
                all_foreign: BTreeSet::new(),
            },
        ];
        for error in outages {
            assert!(error.is_outage(), "{error:?}");
        }
    }

    #[test]
    fn failures_are_outages_unless_a_listed_server_code() {
        for &code in VALUE_REFUSAL_CODES {
            assert!(!failure_is_outage(&server(code)), "{code}");
        }
        assert!(failure_is_outage(&server(62)));
        assert!(failure_is_outage(&Failure::Timeout));
    }
}
