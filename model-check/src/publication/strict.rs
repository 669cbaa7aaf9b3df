//! The model's strictness: a statement the simulated engine cannot give a
//! meaning to is a defect of the model (or of a builder), never a quiet
//! "no guard". Every check here stops the model check, in debug and release
//! builds alike, with the statement printed.
//!
//! A conditional INSERT's WHERE clause must be exactly a conjunction of
//! recognised guard fragments (at the top level of the clause, split on
//! `AND` outside parentheses). A fragment edited inside (a comparison, a
//! bound, an order) is no longer one of them, and a fragment under `NOT`,
//! `OR` or in a subquery is no conjunct of its own: both stop the check
//! instead of running the statement as if it were unguarded.

use capcat_proto::Tables;
use capcat_proto::designs::{lease_id_fence_text, marginless_fence_text};
use capcat_proto::fragments;
use capcat_proto::statement::Statement;

/// Why the model cannot give a statement a meaning.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelDefect {
    /// A conditional INSERT has no top-level WHERE clause.
    #[error("{name}: no WHERE clause in a conditional INSERT:\n{sql}")]
    NoWhere {
        /// The statement's name.
        name: &'static str,
        /// Its SQL.
        sql: String,
    },
    /// A conjunct of the WHERE clause is no recognised guard fragment.
    #[error("{name}: unrecognised conjunct `{conjunct}` in:\n{sql}")]
    UnknownConjunct {
        /// The statement's name.
        name: &'static str,
        /// The conjunct.
        conjunct: String,
        /// Its SQL.
        sql: String,
    },
}

/// Splits `text` on `sep` where it stands outside every parenthesis.
fn split_top_level<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ if depth == 0 && text[i..].starts_with(sep) => {
                out.push(&text[start..i]);
                i += sep.len();
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&text[start..]);
    out
}

/// The top-level WHERE clause of `sql`: the text after the last ` WHERE `
/// that stands outside every parenthesis.
fn top_level_where(sql: &str) -> Option<&str> {
    let parts = split_top_level(sql, " WHERE ");
    (parts.len() > 1).then(|| parts[parts.len() - 1])
}

/// Every conjunct a guarded statement may carry: the shipped fragments, the
/// rejected designs' texts (capcat-proto's `designs` module builds them), and
/// the always-true `1 = 1` of the unguarded designs.
fn known_conjuncts(tables: &Tables) -> Vec<String> {
    let mut known = vec![
        fragments::lease_fence(tables),
        fragments::version_barrier(tables),
        fragments::manifest_complete(tables),
        marginless_fence_text(tables),
        lease_id_fence_text(tables),
        "1 = 1".to_owned(),
    ];
    let two_reads = capcat_proto::designs::two_subquery_fence_text(tables);
    known.extend(
        split_top_level(&two_reads, " AND ")
            .into_iter()
            .map(str::to_owned),
    );
    known
}

/// Checks that a conditional INSERT's WHERE clause is exactly a conjunction
/// of recognised fragments.
pub fn check_guarded(tables: &Tables, stmt: &Statement) -> Result<(), ModelDefect> {
    let Some(clause) = top_level_where(&stmt.sql) else {
        return Err(ModelDefect::NoWhere {
            name: stmt.name,
            sql: stmt.sql.clone(),
        });
    };
    let known = known_conjuncts(tables);
    for conjunct in split_top_level(clause, " AND ") {
        if !known.iter().any(|k| k == conjunct) {
            return Err(ModelDefect::UnknownConjunct {
                name: stmt.name,
                conjunct: conjunct.to_owned(),
                sql: stmt.sql.clone(),
            });
        }
    }
    Ok(())
}

/// Stops the model check: a model defect must never end a path quietly
/// (a path ended by a fake server error would let every property pass on
/// it vacuously).
pub fn stop(defect: &dyn std::fmt::Display) -> ! {
    panic!("model defect, the check stops: {defect}")
}

#[cfg(test)]
mod tests {
    use capcat_proto::Config;
    use capcat_proto::publish::sql::{insert_commit_row, insert_manifest};
    use uuid::Uuid;

    use super::*;
    use crate::publication::test_lease;

    fn tables() -> Tables {
        Tables::new("m").expect("valid prefix")
    }

    fn commit_row() -> Statement {
        insert_commit_row(
            &tables(),
            &Config::default(),
            1,
            Uuid::from_u128(1),
            &test_lease(),
            1,
        )
    }

    #[test]
    fn the_shipped_guarded_statements_are_conjunctions_of_known_fragments() {
        let t = tables();
        let cfg = Config::default();
        let release = capcat_proto::lease::sql::release(&t, &cfg, &test_lease());
        let manifest = insert_manifest(&t, &cfg, 1, Uuid::from_u128(1), &test_lease(), vec![]);
        for stmt in [commit_row(), manifest, release] {
            assert_eq!(check_guarded(&t, &stmt), Ok(()), "{}", stmt.sql);
        }
    }

    #[test]
    fn a_one_token_edit_inside_the_fence_stops_the_check() {
        let t = tables();
        for (from, to) in [
            ("expires_at_ns > toUnix", "expires_at_ns >= toUnix"),
            ("LIMIT 1)", "LIMIT 2)"),
            ("expires_at_ns DESC", "expires_at_ns ASC"),
            (") = 1", ") >= 1"),
            ("+ {fence_margin_ns:UInt64}", "- {fence_margin_ns:UInt64}"),
        ] {
            let mut stmt = commit_row();
            assert!(stmt.sql.contains(from), "{from}");
            stmt.sql = stmt.sql.replacen(from, to, 1);
            assert!(
                matches!(
                    check_guarded(&t, &stmt),
                    Err(ModelDefect::UnknownConjunct { .. })
                ),
                "{from} -> {to} went unnoticed"
            );
        }
    }

    #[test]
    fn a_fragment_under_not_or_or_stops_the_check() {
        let t = tables();
        let fence = fragments::lease_fence(&t);
        for wrap in [format!("NOT {fence}"), format!("({fence} OR 1 = 1)")] {
            let mut stmt = commit_row();
            stmt.sql = stmt.sql.replace(&fence, &wrap);
            assert!(
                check_guarded(&t, &stmt).is_err(),
                "{wrap} was taken for a guard"
            );
        }
    }

    #[test]
    fn a_conditional_insert_without_a_where_clause_stops_the_check() {
        let mut stmt = commit_row();
        stmt.sql = "INSERT INTO m_index_watermark SELECT 1".to_owned();
        assert!(matches!(
            check_guarded(&tables(), &stmt),
            Err(ModelDefect::NoWhere { .. })
        ));
    }

    #[test]
    #[should_panic(expected = "model defect, the check stops")]
    fn a_defect_stops_the_check_in_every_build() {
        stop(&"an unknown statement");
    }
}
