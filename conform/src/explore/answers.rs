//! The answers the exploration varies: every shape an answer to a step can
//! take ([`Alt`]), where each fits ([`Shape`]), and the answer itself.

use capcat_proto::statement::{Expect, Value};
use capcat_proto::{Failure, Input, Rows, Statement, Tables};
use uuid::Uuid;

use crate::world::{Catalog, FOREIGN, OWN};

/// An answer in place of the engine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alt {
    /// A server exception; nothing ran.
    ServerError,
    /// A timeout; the statement did not land.
    Timeout,
    /// A timeout after the INSERT landed.
    TimeoutLanded,
    /// A lost connection; the statement did not land.
    Transport,
    /// The adapter could not read the server's answer.
    MalformedAnswer,
    /// One row whose every value is a string.
    BadRow,
    /// One row with no values.
    ShortRow,
    /// The engine's rows and one more: the first row again with every UUID
    /// another publisher's.
    RivalRow,
    /// No rows where the engine returned some.
    NoRows,
    /// A draw where rows were asked for.
    DrawnNotRows,
    /// The server clock jumps a TTL before the statement runs.
    Late,
    /// The top of the jitter window.
    DrawTop,
    /// One past the top of the jitter window.
    DrawOutside,
    /// Rows where a draw was asked for.
    RowsNotDrawn,
    /// The engine's rows with every unsigned integer sent as a
    /// (non-negative) signed one, which a reader of `UInt64` accepts.
    SignedValues,
    /// The engine's rows with every `live` flag 2: a flag is 0 or 1.
    FlagTwo,
    /// The engine's rows and one more whose every value is a string.
    BadExtraRow,
    /// The engine's rows and two more: the first row again under two other
    /// publishers' ids, the larger id first.
    TwoRivals,
    /// The engine's rows under another publisher's ids, every `live` flag
    /// 0: a dead stranger's head.
    DeadRival,
}

impl Alt {
    pub(super) const ALL: [Alt; 19] = [
        Alt::ServerError,
        Alt::Timeout,
        Alt::TimeoutLanded,
        Alt::Transport,
        Alt::MalformedAnswer,
        Alt::BadRow,
        Alt::ShortRow,
        Alt::RivalRow,
        Alt::NoRows,
        Alt::DrawnNotRows,
        Alt::Late,
        Alt::DrawTop,
        Alt::DrawOutside,
        Alt::RowsNotDrawn,
        Alt::SignedValues,
        Alt::FlagTwo,
        Alt::BadExtraRow,
        Alt::TwoRivals,
        Alt::DeadRival,
    ];

    /// The answers varied at a second step of the same run: those that
    /// keep a machine going (a later step exists to vary) rather than end it.
    pub(super) const SECOND: [Alt; 5] = [
        Alt::Timeout,
        Alt::TimeoutLanded,
        Alt::RivalRow,
        Alt::Late,
        Alt::DrawTop,
    ];

    /// Its name in case names.
    pub fn name(self) -> &'static str {
        match self {
            Alt::ServerError => "server-error",
            Alt::Timeout => "timeout",
            Alt::TimeoutLanded => "timeout-landed",
            Alt::Transport => "transport",
            Alt::MalformedAnswer => "malformed",
            Alt::BadRow => "bad-row",
            Alt::ShortRow => "short-row",
            Alt::RivalRow => "rival-row",
            Alt::NoRows => "no-rows",
            Alt::DrawnNotRows => "drawn-not-rows",
            Alt::Late => "late",
            Alt::DrawTop => "draw-top",
            Alt::DrawOutside => "draw-outside",
            Alt::RowsNotDrawn => "rows-not-drawn",
            Alt::SignedValues => "signed-values",
            Alt::FlagTwo => "flag-two",
            Alt::BadExtraRow => "bad-extra-row",
            Alt::TwoRivals => "two-rivals",
            Alt::DeadRival => "dead-rival",
        }
    }

    pub(super) fn from_name(name: &str) -> Option<Alt> {
        Alt::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether this answer has a meaning at a step of `shape`.
    pub(super) fn fits(self, shape: Shape) -> bool {
        match shape {
            Shape::Draw { below } => match self {
                Alt::DrawTop => below > 1,
                Alt::DrawOutside | Alt::RowsNotDrawn => true,
                _ => false,
            },
            Shape::Insert => matches!(
                self,
                Alt::ServerError
                    | Alt::Timeout
                    | Alt::TimeoutLanded
                    | Alt::Transport
                    | Alt::DrawnNotRows
                    | Alt::Late
            ),
            Shape::Read { rows, flags } => match self {
                Alt::RivalRow
                | Alt::NoRows
                | Alt::SignedValues
                | Alt::BadExtraRow
                | Alt::TwoRivals => rows,
                Alt::FlagTwo | Alt::DeadRival => rows && flags,
                Alt::TimeoutLanded | Alt::DrawTop | Alt::DrawOutside | Alt::RowsNotDrawn => false,
                _ => true,
            },
        }
    }
}

/// What a step of a run looked like, before any answer was varied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A jitter draw.
    Draw {
        /// Its bound.
        below: u64,
    },
    /// An INSERT (no rows expected).
    Insert,
    /// A read; `rows` when the engine returned at least one.
    Read {
        /// Whether the engine's answer had rows.
        rows: bool,
        /// Whether it has `live` flag columns.
        flags: bool,
    },
}

/// Another publisher's id that sorts after [`FOREIGN`] (in byte order, as
/// the outcomes list ids, and in ClickHouse's order).
const FOREIGN_HIGH: Uuid = Uuid::from_u128(0xf0f0_0000_0000_4000_8000_0000_0000_0f02);

/// `row` with every UUID replaced by `id`.
fn with_ids(row: &[Value], id: Uuid) -> Vec<Value> {
    row.iter()
        .map(|v| match v {
            Value::Uuid(_) => Value::Uuid(id),
            other => other.clone(),
        })
        .collect()
}

/// The positions of a read's `live` flags (`live`, `term_live`).
fn flag_columns(stmt: &Statement) -> Vec<usize> {
    match &stmt.expect {
        Expect::Rows(columns) => columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name.ends_with("live"))
            .map(|(i, _)| i)
            .collect(),
        Expect::Nothing => Vec::new(),
    }
}

pub(super) fn draw_answer(below: u64, alt: Option<Alt>) -> Input {
    match alt {
        Some(Alt::DrawTop) => Input::Drawn(below - 1),
        Some(Alt::DrawOutside) => Input::Drawn(below),
        Some(Alt::RowsNotDrawn) => Input::Rows(Rows::empty()),
        _ => Input::Drawn(0),
    }
}

/// The engine's answer to `stmt`, or the varied one, and the step's shape.
pub(super) fn answer(
    catalog: &mut Catalog,
    tables: &Tables,
    stmt: &Statement,
    alt: Option<Alt>,
    ttl_ticks: u8,
) -> (Shape, Input) {
    let insert = stmt.expect == Expect::Nothing;
    if alt == Some(Alt::Late) {
        catalog.advance(ttl_ticks);
    }
    // The engine runs the statement unless the varied answer says it never
    // ran (a server error, a timeout or a lost connection before it landed).
    let runs = !matches!(alt, Some(Alt::ServerError | Alt::Timeout | Alt::Transport));
    let engine = if runs || !insert {
        catalog.answer(tables, stmt)
    } else {
        Input::Rows(Rows::empty())
    };
    let rows = match &engine {
        Input::Rows(rows) => rows.clone(),
        _ => Rows::empty(),
    };
    let shape = if insert {
        Shape::Insert
    } else {
        Shape::Read {
            rows: !rows.0.is_empty(),
            flags: !flag_columns(stmt).is_empty(),
        }
    };
    let input = match alt {
        None | Some(Alt::Late) => engine,
        Some(Alt::ServerError) => Input::Failed(Failure::Server {
            code: 241,
            message: "Memory limit (total) exceeded (the kit's answer)".to_owned(),
        }),
        Some(Alt::Timeout | Alt::TimeoutLanded) => Input::Failed(Failure::Timeout),
        Some(Alt::Transport) => Input::Failed(Failure::Transport {
            message: "connection reset by peer (the kit's answer)".to_owned(),
        }),
        Some(Alt::MalformedAnswer) => Input::Failed(Failure::Malformed {
            message: "expected 2 columns, got 1 (the kit's answer)".to_owned(),
        }),
        Some(Alt::BadRow) => Input::Rows(Rows(vec![vec![Value::String("kit".to_owned())]])),
        Some(Alt::ShortRow) => Input::Rows(Rows(vec![Vec::new()])),
        Some(Alt::RivalRow) => {
            let mut rows = rows;
            if let Some(first) = rows.0.first() {
                let rival = first
                    .iter()
                    .map(|v| match v {
                        Value::Uuid(id) if *id != FOREIGN => Value::Uuid(FOREIGN),
                        Value::Uuid(_) => Value::Uuid(OWN),
                        other => other.clone(),
                    })
                    .collect();
                rows.0.push(rival);
            }
            Input::Rows(rows)
        }
        Some(Alt::NoRows) => Input::Rows(Rows::empty()),
        Some(Alt::SignedValues) => Input::Rows(Rows(
            rows.0
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|v| match v {
                            Value::UInt64(n) => {
                                i64::try_from(n).map_or(Value::UInt64(n), Value::Int64)
                            }
                            other => other,
                        })
                        .collect()
                })
                .collect(),
        )),
        Some(Alt::FlagTwo) => {
            let flags = flag_columns(stmt);
            Input::Rows(Rows(
                rows.0
                    .into_iter()
                    .map(|mut row| {
                        for i in &flags {
                            if let Some(v) = row.get_mut(*i) {
                                *v = Value::UInt64(2);
                            }
                        }
                        row
                    })
                    .collect(),
            ))
        }
        Some(Alt::BadExtraRow) => {
            let mut rows = rows;
            let width = rows.0.first().map_or(1, Vec::len);
            rows.0.push(vec![Value::String("kit".to_owned()); width]);
            Input::Rows(rows)
        }
        Some(Alt::TwoRivals) => {
            let mut rows = rows;
            if let Some(first) = rows.0.first().cloned() {
                for id in [FOREIGN_HIGH, FOREIGN] {
                    rows.0.push(with_ids(&first, id));
                }
            }
            Input::Rows(rows)
        }
        Some(Alt::DeadRival) => {
            let flags = flag_columns(stmt);
            Input::Rows(Rows(
                rows.0
                    .iter()
                    .map(|row| {
                        let mut row = with_ids(row, FOREIGN);
                        for i in &flags {
                            if let Some(v) = row.get_mut(*i) {
                                *v = Value::UInt64(0);
                            }
                        }
                        row
                    })
                    .collect(),
            ))
        }
        Some(Alt::DrawnNotRows) => Input::Drawn(0),
        Some(Alt::DrawTop | Alt::DrawOutside | Alt::RowsNotDrawn) => engine,
    };
    (shape, input)
}
