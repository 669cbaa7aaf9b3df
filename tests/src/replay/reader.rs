//! The reader's steps. The model's `PinSnapshot` runs capcat-proto's
//! `SearchPage` machine (pin W, then the search at W) and its
//! `ReReadSnapshot` re-reads the snapshot at the pinned W; the trace does
//! not carry these statements, so the replay builds them with the same
//! machine (tenant `t`, the model's reader query), and, where the model's
//! prediction says the statement carried the version-only membership
//! predicate, through capcat-proto's same `designs` rewrite the model uses.

use std::collections::BTreeSet;

use capcat_proto::designs::{
    membership_on_version_alone, rows_above_pinned, unpublished_rows_resolve,
};
use capcat_proto::reader::{SearchFilter, SearchPage, SearchQuery};
use capcat_proto::{Expect, Input, Machine, Statement, Step, Value};

use super::atoms::model_atoms;
use super::db::TraceDb;

/// A pinned snapshot: packs as (store_id, pack_id) atoms.
pub type Snapshot = BTreeSet<(String, String)>;

/// What a pinned read returned: (store_id, pack_id, index_version) atoms of
/// every resolved row.
pub type Resolved = BTreeSet<(String, String, String)>;

/// What the reader pinned on the engine.
#[derive(Clone, Debug)]
pub struct PinnedRead {
    /// W.
    pub version: u64,
    /// The search statement at W (re-run to re-read).
    pub search: Statement,
    /// The packs it returned at pinning.
    pub snapshot: Snapshot,
    /// The rows it resolved at pinning.
    pub rows: Resolved,
}

fn resolved_of(stmt: &Statement, rows: &capcat_proto::Rows) -> Resolved {
    let at = |name: &str| column(stmt, name);
    match (at("store_id"), at("pack_id"), at("index_version")) {
        (Some(s), Some(p), Some(v)) => rows
            .0
            .iter()
            .filter_map(|r| Some((text(r.get(s)?), text(r.get(p)?), text(r.get(v)?))))
            .collect(),
        _ => Resolved::new(),
    }
}

/// A value's atom, as the engine's text form writes it.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Uuid(u) => u.hyphenated().to_string(),
        Value::UInt64(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// The position of result column `name` of `stmt`, if it has one.
fn column(stmt: &Statement, name: &str) -> Option<usize> {
    match &stmt.expect {
        Expect::Rows(columns) => columns.iter().position(|c| c.name == name),
        Expect::Nothing => None,
    }
}

fn packs_of(stmt: &Statement, rows: &capcat_proto::Rows) -> Snapshot {
    let at = |name: &str| column(stmt, name);
    match (at("store_id"), at("pack_id")) {
        (Some(s), Some(p)) => rows
            .0
            .iter()
            .filter_map(|r| Some((text(r.get(s)?), text(r.get(p)?))))
            .collect(),
        _ => Snapshot::new(),
    }
}

/// The snapshot a model's reader notation (`{("s", …), …}`) names.
fn snapshot_atoms(text: &str) -> Snapshot {
    let atoms = model_atoms(text);
    atoms
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect()
}

/// The part of `text` after `label`, up to the matching close of the
/// brackets it opens.
fn section<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let start = text.find(label)? + label.len();
    let rest = &text[start..];
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth -= 1;
                if depth <= 0 {
                    return Some(&rest[..=i]);
                }
            }
            _ => {}
        }
    }
    Some(rest)
}

/// The model's pin: (W, membership, snapshot).
fn predicted_pin(text: &str) -> Option<(u64, String, Snapshot)> {
    let w = model_atoms(section(text, "version: ")?.split(',').next()?)
        .first()?
        .parse()
        .ok()?;
    let membership = text
        .split("membership: ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()?
        .to_owned();
    let snapshot = snapshot_atoms(section(text, "snapshot: ")?);
    Some((w, membership, snapshot))
}

impl PinnedRead {
    /// Pins W and searches at W with capcat-proto's reader machine. Errors
    /// carry the SQL that failed.
    pub fn pin(db: &TraceDb, predicted: &str) -> Result<Self, (String, String)> {
        let query = SearchQuery {
            filter: SearchFilter {
                tenant_id: "t".to_owned(),
                ..SearchFilter::default()
            },
            ..SearchQuery::default()
        };
        let mut page = SearchPage::new(db.tables().clone(), query)
            .map_err(|e| (String::new(), e.to_string()))?;
        let Step::Execute(pin) = page.poll() else {
            return Err((
                String::new(),
                "the reader machine asked for no pin".to_owned(),
            ));
        };
        let rows = db.run_proto(&pin).map_err(|e| (pin.sql.clone(), e))?;
        page.handle(Input::Rows(rows));
        let Step::Execute(search) = page.poll() else {
            return Err((pin.sql, "the reader machine asked for no search".to_owned()));
        };
        let version = match search
            .params
            .get(capcat_proto::fragments::PINNED_VERSION_PARAM)
        {
            Some(capcat_proto::Param::UInt64(w)) => *w,
            _ => 0,
        };
        let search = match predicted_pin(predicted) {
            Some((_, m, _)) if m == "VersionOnly" => {
                membership_on_version_alone(&search, db.tables())
            }
            _ => search,
        };
        // The model's `RowsAbovePinned` and `UnpublishedRowsResolve`
        // readers, through the same hooks.
        let search = if predicted.contains("rows_bounded: None") {
            rows_above_pinned(&search, db.tables())
        } else if predicted.contains("rows_bounded: AtOrBelow") {
            unpublished_rows_resolve(&search, db.tables())
        } else {
            search
        };
        let rows = db.run_proto(&search).map_err(|e| (search.sql.clone(), e))?;
        let snapshot = packs_of(&search, &rows);
        let resolved = resolved_of(&search, &rows);
        Ok(Self {
            version,
            search,
            snapshot,
            rows: resolved,
        })
    }

    /// The search statement's SQL.
    pub fn sql(&self) -> String {
        self.search.sql.clone()
    }

    /// Re-runs the search at the pinned W: its packs and its rows.
    pub fn read_again(&self, db: &TraceDb) -> Result<(Snapshot, Resolved), (String, String)> {
        let rows = db
            .run_proto(&self.search)
            .map_err(|e| (self.search.sql.clone(), e))?;
        Ok((
            packs_of(&self.search, &rows),
            resolved_of(&self.search, &rows),
        ))
    }

    /// Compares the pin with the model's: `Err((predicted, actual))`.
    pub fn compare_pin(&self, predicted: &str) -> Result<(), (String, String)> {
        let actual = format!("W={} {:?}", self.version, self.snapshot);
        match predicted_pin(predicted) {
            Some((w, _, snapshot)) if w == self.version && snapshot == self.snapshot => Ok(()),
            Some((w, m, snapshot)) => Err((format!("W={w} ({m}) {snapshot:?}"), actual)),
            None => Err((format!("unreadable prediction {predicted}"), actual)),
        }
    }

    /// Compares a re-read with the model's: `Err((predicted, actual))`.
    pub fn compare_reread(predicted: &str, now: &Snapshot) -> Result<(), (String, String)> {
        let expected = match predicted.split("reread: ").nth(1) {
            Some(r) if r.starts_with("Some") => snapshot_atoms(r),
            _ => return Err((format!("no re-read in {predicted}"), format!("{now:?}"))),
        };
        if &expected == now {
            Ok(())
        } else {
            Err((format!("{expected:?}"), format!("{now:?}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_reader_notation_is_read() {
        let text = "ReaderState { pinned: Some(Pinned { version: 2, membership: Paired, snapshot: {(\"s\", 00000000-0000-0000-0000-0000facc0001)} }), reread: Some({}) }";
        let (w, m, s) = predicted_pin(text).expect("a pin");
        assert_eq!((w, m.as_str()), (2, "Paired"));
        assert_eq!(
            s,
            Snapshot::from([(
                "s".to_owned(),
                "00000000-0000-0000-0000-0000facc0001".to_owned()
            )])
        );
        assert!(PinnedRead::compare_reread(text, &Snapshot::new()).is_ok());
    }
}
