//! The publication model's actions, displayed with the shared names of
//! [`crate::names::publication`].

use crate::names::publication as n;

/// One step of the system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The server clock advances one tick.
    Tick,
    /// Publisher `publisher` takes its machine's next step, named `name`
    /// (one of the shared action names); `draw` is the jitter value fed to
    /// a `Step::Draw` before the claim it precedes.
    Client {
        /// The publisher.
        publisher: u8,
        /// The shared action name.
        name: &'static str,
        /// The statement it runs.
        statement: &'static str,
        /// The jitter drawn, for claims.
        draw: Option<u64>,
    },
    /// The engine evaluates the WHERE clause of in-flight statement `flight`.
    Evaluate {
        /// Index into the flights.
        flight: usize,
        /// Its statement.
        statement: &'static str,
        /// Its client.
        publisher: u8,
    },
    /// The engine lands in-flight statement `flight`'s rows.
    Land {
        /// Index into the flights.
        flight: usize,
        /// Its statement.
        statement: &'static str,
        /// Its client.
        publisher: u8,
    },
    /// The engine kills in-flight statement `flight` at its cap.
    Kill {
        /// Index into the flights.
        flight: usize,
        /// Its statement.
        statement: &'static str,
        /// Its client.
        publisher: u8,
    },
    /// The client of in-flight claim `flight` stops waiting for it and is
    /// told it failed; the claim may still be stamped and land.
    Abandon {
        /// Index into the flights.
        flight: usize,
        /// Its statement.
        statement: &'static str,
        /// Its client.
        publisher: u8,
    },
    /// The reader pins W.
    PinSnapshot,
    /// The reader re-reads its pinned snapshot.
    ReReadSnapshot,
    /// A publisher crashes and restarts; with `orphan`, the unconditional
    /// INSERT it was about to send goes out anyway, with no client.
    CrashRestart {
        /// The publisher.
        publisher: u8,
        /// Whether its next INSERT is left in flight.
        orphan: bool,
    },
    /// An out-of-protocol writer appends one row under a foreign publish_id.
    ForeignInsert {
        /// A commit row (true) or a manifest row (false).
        watermark: bool,
        /// Its version.
        version: u64,
    },
}

impl Action {
    /// The shared action name.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Tick => n::TICK,
            Action::Client { name, .. } => name,
            Action::Evaluate { .. } => n::EVALUATE_GUARD,
            Action::Land { .. } => n::LAND_ROWS,
            Action::Kill { .. } => n::KILL_AT_CAP,
            Action::Abandon { .. } => n::ABANDON_STATEMENT,
            Action::PinSnapshot => n::PIN_SNAPSHOT,
            Action::ReReadSnapshot => n::RE_READ_SNAPSHOT,
            Action::CrashRestart { .. } => n::CRASH_RESTART,
            Action::ForeignInsert { .. } => n::FOREIGN_INSERT,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.name();
        match self {
            Action::Tick | Action::PinSnapshot | Action::ReReadSnapshot => f.write_str(name),
            Action::Client {
                publisher,
                statement,
                draw,
                ..
            } => {
                write!(f, "{name} p{publisher} ({statement}")?;
                if let Some(d) = draw {
                    write!(f, ", jitter {d}")?;
                }
                f.write_str(")")
            }
            Action::Evaluate {
                statement,
                publisher,
                ..
            }
            | Action::Land {
                statement,
                publisher,
                ..
            }
            | Action::Kill {
                statement,
                publisher,
                ..
            }
            | Action::Abandon {
                statement,
                publisher,
                ..
            } => write!(f, "{name} {statement} of p{publisher}"),
            Action::CrashRestart { publisher, orphan } => {
                write!(f, "{name} p{publisher}")?;
                if *orphan {
                    f.write_str(" (its next INSERT left in flight)")?;
                }
                Ok(())
            }
            Action::ForeignInsert { watermark, version } => {
                let table = if *watermark { "watermark" } else { "manifest" };
                write!(f, "{name} ({table} row at v{version})")
            }
        }
    }
}

/// The shared action name of a client step running statement `statement`.
pub fn client_action_name(statement: &str) -> Option<&'static str> {
    Some(match statement {
        "lease.read_head" => n::READ_LEASE_HEAD,
        "lease.insert_claim" => n::CLAIM_LEASE,
        "lease.read_claims" => n::READ_BACK_LEASE,
        "allocate.read_head" => n::READ_VERSION_HEAD,
        "allocate.insert_claim" => n::CLAIM_VERSION,
        "allocate.read_claims" => n::READ_BACK_VERSION,
        "publish.insert_manifest" => n::ISSUE_MANIFEST,
        "publish.insert_commit_row" => n::ISSUE_COMMIT_ROW,
        "publish.read_publish_ids" | "publish.read_highest_publish_ids" => n::READ_BACK_PUBLISH,
        "index.insert_inventory" => n::WRITE_INVENTORY,
        "lease.release" => n::ISSUE_RELEASE,
        _ => return None,
    })
}
