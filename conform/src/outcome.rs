//! Outcomes as the protocol writes them (docs/native-writers.md,
//! "Outcomes"), and the one normalisation the kit applies before comparing.

use capcat_proto::{
    AllocateError, IndexError, IndexReport, Lease, LeaseError, LostRace, PackRef, PublishError,
    PublishOutcome,
};
use serde_json::{Value as Json, json};

use crate::wire::{failure_json, head_json, lease_json, uuid_json};

fn ids(set: &std::collections::BTreeSet<uuid::Uuid>) -> Json {
    Json::Array(set.iter().map(|id| uuid_json(*id)).collect())
}

fn unexpected(expected: &str, got: &str) -> Json {
    json!({ "kind": "unexpected_input", "expected": expected, "got": got })
}

/// A statement that failed, with the failure the kit sent (every machine's
/// `statement` error but a publish's, which adds its version and id).
pub(crate) fn statement_failed(statement: &str, failure: &capcat_proto::Failure) -> Json {
    json!({ "kind": "statement", "statement": statement, "failure": failure_json(failure) })
}

/// A read whose rows the machine could not decode; `detail` is its words.
pub(crate) fn malformed(statement: &str, detail: &str) -> Json {
    json!({ "kind": "malformed", "statement": statement, "detail": detail })
}

/// A lease error.
pub fn lease_error(e: &LeaseError) -> Json {
    match e {
        LeaseError::Held {
            holder,
            lease_id,
            term,
            expires_at_ns,
        } => json!({
            "kind": "held", "holder": holder, "lease_id": uuid_json(*lease_id),
            "term": term, "expires_at_ns": expires_at_ns,
        }),
        LeaseError::NotHeld { lease_id, head } => json!({
            "kind": "not_held", "lease_id": uuid_json(*lease_id), "head": head_json(head),
        }),
        LeaseError::Contested {
            attempts,
            last_term,
        } => json!({ "kind": "contested", "attempts": attempts, "last_term": last_term }),
        LeaseError::Statement { statement, failure } => statement_failed(statement, failure),
        LeaseError::Unsettled { lease_id, until_ns } => json!({
            "kind": "unsettled", "lease_id": uuid_json(*lease_id), "until_ns": until_ns,
        }),
        LeaseError::Malformed { statement, detail } => malformed(statement, detail),
        LeaseError::UnexpectedInput { expected, got } => unexpected(expected, got),
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

/// An allocation error.
pub fn allocate_error(e: &AllocateError) -> Json {
    match e {
        AllocateError::Exhausted {
            attempts,
            last_version,
        } => json!({ "kind": "exhausted", "attempts": attempts, "last_version": last_version }),
        AllocateError::Statement { statement, failure } => statement_failed(statement, failure),
        AllocateError::Malformed { statement, detail } => malformed(statement, detail),
        AllocateError::UnexpectedInput { expected, got } => unexpected(expected, got),
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

/// A publish error.
pub fn publish_error(e: &PublishError) -> Json {
    match e {
        PublishError::VersionZero => json!({ "kind": "version_zero" }),
        PublishError::NoPacks { version } => json!({ "kind": "no_packs", "version": version }),
        PublishError::LeaseLost {
            version,
            publish_id,
            head,
        } => json!({
            "kind": "lease_lost", "version": version, "publish_id": uuid_json(*publish_id),
            "head": head_json(head),
        }),
        PublishError::Unsettled {
            version,
            publish_id,
            until_ns,
            wait_ns,
        } => json!({
            "kind": "unsettled", "version": version, "publish_id": uuid_json(*publish_id),
            "until_ns": until_ns, "wait_ns": wait_ns,
        }),
        PublishError::Renew { version, source } => json!({
            "kind": "renew", "version": version, "source": lease_error(source),
        }),
        PublishError::Statement {
            statement,
            version,
            publish_id,
            failure,
        } => json!({
            "kind": "statement", "statement": statement, "version": version,
            "publish_id": uuid_json(*publish_id), "failure": failure_json(failure),
        }),
        PublishError::Malformed { statement, detail } => malformed(statement, detail),
        PublishError::UnexpectedInput { expected, got } => unexpected(expected, got),
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

/// The done object of a lease claim (acquire or renew).
pub fn claimed(outcome: &Result<Lease, LeaseError>) -> Json {
    json!({ "outcome": match outcome {
        Ok(lease) => json!({ "ok": lease_json(lease) }),
        Err(e) => json!({ "err": lease_error(e) }),
    }})
}

/// The done object of a release.
pub fn released(outcome: &Result<(), LeaseError>) -> Json {
    json!({ "outcome": match outcome {
        Ok(()) => json!({ "ok": null }),
        Err(e) => json!({ "err": lease_error(e) }),
    }})
}

/// The done object of an allocation.
pub fn allocated(outcome: &Result<u64, AllocateError>) -> Json {
    json!({ "outcome": match outcome {
        Ok(version) => json!({ "ok": version }),
        Err(e) => json!({ "err": allocate_error(e) }),
    }})
}

/// The done object of a publish: its outcome and the lease the caller
/// keeps (renewed, and marked unsettled after an abandoned statement).
pub fn published(outcome: &Result<PublishOutcome, PublishError>, kept: &Lease) -> Json {
    let outcome = match outcome {
        Ok(PublishOutcome::Won {
            version,
            publish_id,
        }) => json!({ "ok": { "won": {
            "version": version, "publish_id": uuid_json(*publish_id),
        }}}),
        Ok(PublishOutcome::LostRace(LostRace {
            version,
            publish_id,
            found,
        })) => json!({ "ok": { "lost_race": {
            "version": version, "publish_id": uuid_json(*publish_id), "found": ids(found),
        }}}),
        Ok(PublishOutcome::Conflict {
            version,
            publish_id,
            foreign,
            all_foreign,
        }) => json!({ "ok": { "conflict": {
            "version": version, "publish_id": uuid_json(*publish_id),
            "foreign": uuid_json(*foreign), "all_foreign": ids(all_foreign),
        }}}),
        Err(e) => json!({ "err": publish_error(e) }),
    };
    json!({ "outcome": outcome, "lease": lease_json(kept) })
}

fn packs(set: &std::collections::BTreeSet<PackRef>) -> Json {
    Json::Array(
        set.iter()
            .map(|(store, pack)| json!([store, uuid_json(*pack)]))
            .collect(),
    )
}

fn lost_race(race: &LostRace) -> Json {
    json!({
        "version": race.version, "publish_id": uuid_json(race.publish_id),
        "found": ids(&race.found),
    })
}

/// An index pass error.
pub fn index_error(e: &IndexError) -> Json {
    match e {
        IndexError::Exhausted { attempts, last } => json!({
            "kind": "exhausted", "attempts": attempts, "last": lost_race(last),
        }),
        IndexError::LeaseLost {
            version,
            publish_id,
            head,
        } => json!({
            "kind": "lease_lost", "version": version, "publish_id": uuid_json(*publish_id),
            "head": head_json(head),
        }),
        IndexError::Unsettled {
            version,
            wait_ns,
            until_ns,
        } => json!({
            "kind": "unsettled", "version": version, "wait_ns": wait_ns, "until_ns": until_ns,
        }),
        IndexError::Conflict {
            version,
            publish_id,
            foreign,
            all_foreign,
            packs: p,
        } => json!({
            "kind": "conflict", "version": version, "publish_id": uuid_json(*publish_id),
            "foreign": uuid_json(*foreign), "all_foreign": ids(all_foreign), "packs": packs(p),
        }),
        IndexError::CommitAtVersionZero => json!({ "kind": "commit_at_version_zero" }),
        IndexError::DuplicateDescriptor {
            capture_id,
            store_id,
            pack_id,
        } => json!({
            "kind": "duplicate_descriptor", "capture_id": uuid_json(*capture_id),
            "store_id": store_id, "pack_id": uuid_json(*pack_id),
        }),
        IndexError::Allocate(source) => {
            json!({ "kind": "allocate", "source": allocate_error(source) })
        }
        IndexError::Publish(source) => {
            json!({ "kind": "publish", "source": publish_error(source) })
        }
        IndexError::Inventory {
            version,
            publish_id,
            failure,
        } => json!({
            "kind": "inventory", "version": version, "publish_id": uuid_json(*publish_id),
            "failure": failure_json(failure),
        }),
        IndexError::Statement { statement, failure } => statement_failed(statement, failure),
        IndexError::Malformed { statement, detail } => malformed(statement, detail),
        IndexError::UnexpectedInput { expected, got } => unexpected(expected, got),
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

/// The done object of an index pass: its outcome and the lease the caller
/// keeps.
pub fn indexed(outcome: &Result<IndexReport, IndexError>, kept: &Lease) -> Json {
    let outcome = match outcome {
        Ok(IndexReport::NothingToDo { skipped }) => {
            json!({ "ok": { "nothing_to_do": { "skipped": packs(skipped) }}})
        }
        Ok(IndexReport::Indexed {
            version,
            publish_id,
            packs: published,
            skipped,
            descriptors,
            attempts,
        }) => json!({ "ok": { "indexed": {
            "version": version, "publish_id": uuid_json(*publish_id),
            "packs": packs(published), "skipped": packs(skipped),
            "descriptors": descriptors, "attempts": attempts,
        }}}),
        Err(e) => json!({ "err": index_error(e) }),
    };
    json!({ "outcome": outcome, "lease": lease_json(kept) })
}

/// The one normalisation before outcomes are compared: the free text a
/// machine writes itself (`detail` of a `malformed` error, a schema
/// refusal and a bad cursor; `expected` and `got` of `unexpected_input`) is
/// dropped, everywhere in the object. Everything else, including text
/// echoed from the kit's inputs (a failure's message), is compared exactly.
pub fn normalise(j: &mut Json) {
    match j {
        Json::Object(m) => {
            match m.get("kind").and_then(Json::as_str) {
                // A failure the kit sent is `malformed` too, but carries no
                // statement and keeps its message.
                Some("malformed") if m.contains_key("statement") => {
                    m.remove("detail");
                }
                Some("refused" | "bad_cursor") => {
                    m.remove("detail");
                }
                Some("unexpected_input") => {
                    m.remove("expected");
                    m.remove("got");
                }
                _ => {}
            }
            m.values_mut().for_each(normalise);
        }
        Json::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_drops_only_the_machine_s_own_words() {
        let mut a = json!({"outcome": {"err": {"kind": "renew", "version": 1, "source":
            {"kind": "malformed", "statement": "lease.read_head", "detail": "x"}}}});
        let mut b = json!({"outcome": {"err": {"kind": "renew", "version": 1, "source":
            {"kind": "malformed", "statement": "lease.read_head", "detail": "y"}}}});
        normalise(&mut a);
        normalise(&mut b);
        assert_eq!(a, b);
        // A failure the kit sent is echoed, message and all: a driver that
        // loses the message differs.
        let mut sent = json!({"kind": "statement", "statement": "s", "failure":
            {"kind": "malformed", "message": "m"}});
        let before = sent.clone();
        normalise(&mut sent);
        assert_eq!(sent, before);
        // A refusal is compared by its diagnosis, not its words.
        let mut refused = json!({"kind": "refused", "diagnosis": "leftovers", "detail": "drop x"});
        normalise(&mut refused);
        assert_eq!(
            refused,
            json!({"kind": "refused", "diagnosis": "leftovers"})
        );
    }
}
