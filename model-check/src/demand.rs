//! The demand fold model (`spec/DemandFold.tla`): events from the writer,
//! the executor and the scan arrive in every order, some twice, and are
//! folded one at a time with capcat-proto's [`DemandRecord::join`]; the
//! properties compare the running fold with a rebuild from the stored
//! events ([`capcat_proto::demand::fold()`]).
//!
//! The rejected folds are kept as alternative `absorb` steps, each the
//! shape a seed round shipped and withdrew.

use std::collections::BTreeSet;

use capcat_proto::demand::{DemandEvent, DemandRecord, Mark, Source, fold};
use stateright::{Model, Property};

use crate::names::demand_fold as n;

/// A fold design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FoldDesign {
    /// capcat-proto's per-dimension join.
    Shipped,
    /// An event replaces the record whole when its sealed mark is not
    /// lower, and is rejected whole otherwise.
    EventAsUnit,
    /// Marks ordered by epoch first.
    EpochMajorOrder,
    /// A writer's report, which carries no merged mark, overwrites it.
    WriterOverwritesMerged,
}

impl FoldDesign {
    /// Every design, shipped first.
    pub const ALL: [FoldDesign; 4] = [
        FoldDesign::Shipped,
        FoldDesign::EventAsUnit,
        FoldDesign::EpochMajorOrder,
        FoldDesign::WriterOverwritesMerged,
    ];

    /// The shared name.
    pub fn name(self) -> &'static str {
        match self {
            FoldDesign::Shipped => n::SHIPPED,
            FoldDesign::EventAsUnit => n::EVENT_AS_UNIT,
            FoldDesign::EpochMajorOrder => n::EPOCH_MAJOR_ORDER,
            FoldDesign::WriterOverwritesMerged => n::WRITER_OVERWRITES_MERGED,
        }
    }

    /// The design with this shared name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// The shard every event reports on.
pub const SHARD: &str = "shard-0";

/// The events the model delivers: a writer that seals two generations
/// across an epoch change, an executor merge, and a scan from the new epoch
/// that is behind the writer.
pub fn events() -> Vec<DemandEvent> {
    vec![
        DemandEvent::writer_sealed(SHARD, 1, 3, 300, 10),
        DemandEvent::executor_merged(SHARD, 1, 2),
        DemandEvent::scan(SHARD, 2, 2, Some(2)),
        DemandEvent::writer_sealed(SHARD, 2, 4, 400, 20),
    ]
}

fn epoch_major(a: Option<Mark>, b: Option<Mark>) -> Option<Mark> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if (y.epoch, y.value) > (x.epoch, x.value) {
            y
        } else {
            x
        }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// One fold step under `design`.
pub fn absorb(design: FoldDesign, record: &DemandRecord, event: &DemandEvent) -> DemandRecord {
    let joined = record
        .join(&event.record)
        .unwrap_or_else(|_| record.clone());
    match design {
        FoldDesign::Shipped => joined,
        FoldDesign::EventAsUnit => {
            if event.record.sealed >= record.sealed {
                event.record.clone().normalized()
            } else {
                record.clone()
            }
        }
        FoldDesign::EpochMajorOrder => DemandRecord {
            sealed: epoch_major(record.sealed, event.record.sealed),
            merged: epoch_major(record.merged, event.record.merged),
            ..joined
        },
        FoldDesign::WriterOverwritesMerged => {
            if event.source == Source::Writer {
                DemandRecord {
                    merged: event.record.merged,
                    ..joined
                }
            } else {
                joined
            }
        }
    }
}

/// The demand fold model.
#[derive(Clone, Debug)]
pub struct DemandModel {
    /// The fold design under check.
    pub design: FoldDesign,
    /// How many redeliveries the model may take.
    pub redeliveries: u8,
    events: Vec<DemandEvent>,
}

/// The model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DemandState {
    /// The running fold.
    pub record: DemandRecord,
    /// Events delivered (stored) so far.
    pub delivered: BTreeSet<usize>,
    /// Redeliveries left.
    pub redeliveries_left: u8,
}

/// One delivery.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DemandAction {
    /// Deliver event `k` for the first time (named by its source).
    Deliver(usize, Source),
    /// Deliver event `k` again.
    Redeliver(usize),
}

impl std::fmt::Display for DemandAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemandAction::Deliver(k, source) => {
                let name = match source {
                    Source::Writer => n::WRITER_EVENT,
                    Source::Executor => n::EXECUTOR_EVENT,
                    _ => n::SCAN_EVENT,
                };
                write!(f, "{name} e{k}")
            }
            DemandAction::Redeliver(k) => write!(f, "{} e{k}", n::REDELIVER_EVENT),
        }
    }
}

impl DemandModel {
    /// The model of `design` with `redeliveries` duplicate deliveries.
    pub fn new(design: FoldDesign, redeliveries: u8) -> Self {
        Self {
            design,
            redeliveries,
            events: events(),
        }
    }

    fn delivered<'a>(&'a self, s: &'a DemandState) -> impl Iterator<Item = &'a DemandEvent> + 'a {
        s.delivered.iter().filter_map(|k| self.events.get(*k))
    }

    /// The rebuild: the stored events folded in storage order.
    fn rebuild(&self, s: &DemandState) -> DemandRecord {
        self.delivered(s)
            .fold(DemandRecord::default().normalized(), |r, e| {
                absorb(self.design, &r, e)
            })
    }
}

impl Model for DemandModel {
    type State = DemandState;
    type Action = DemandAction;

    fn init_states(&self) -> Vec<DemandState> {
        vec![DemandState {
            record: DemandRecord::default().normalized(),
            delivered: BTreeSet::new(),
            redeliveries_left: self.redeliveries,
        }]
    }

    fn actions(&self, s: &DemandState, actions: &mut Vec<DemandAction>) {
        for (k, e) in self.events.iter().enumerate() {
            if s.delivered.contains(&k) {
                if s.redeliveries_left > 0 {
                    actions.push(DemandAction::Redeliver(k));
                }
            } else {
                actions.push(DemandAction::Deliver(k, e.source));
            }
        }
    }

    fn next_state(&self, last: &DemandState, action: DemandAction) -> Option<DemandState> {
        let mut s = last.clone();
        let k = match action {
            DemandAction::Deliver(k, _) => {
                s.delivered.insert(k);
                k
            }
            DemandAction::Redeliver(k) => {
                s.redeliveries_left -= 1;
                k
            }
        };
        let event = self.events.get(k)?;
        s.record = absorb(self.design, &s.record, event);
        Some(s)
    }

    fn format_action(&self, action: &DemandAction) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                n::FOLD_EQUALS_REBUILD,
                |m: &DemandModel, s: &DemandState| s.record == m.rebuild(s),
            ),
            Property::always(
                n::MERGED_NEVER_FORGOTTEN,
                |m: &DemandModel, s: &DemandState| {
                    let top = m
                        .delivered(s)
                        .filter_map(|e| e.record.merged.map(|x| x.value))
                        .max();
                    s.record.merged.map(|x| x.value) >= top
                },
            ),
            Property::always(
                n::PENDING_COUNTS_GENERATIONS,
                |m: &DemandModel, s: &DemandState| {
                    // The reference is capcat-proto's own fold of the stored
                    // events, read by generation alone.
                    let shards = fold(m.delivered(s)).shards;
                    let sealed = m
                        .delivered(s)
                        .filter_map(|e| e.record.sealed.map(|x| x.value))
                        .max();
                    let merged = m
                        .delivered(s)
                        .filter_map(|e| e.record.merged.map(|x| x.value))
                        .max();
                    let expected = sealed.unwrap_or(0).saturating_sub(merged.unwrap_or(0));
                    let reference = shards.get(SHARD).map_or(0, DemandRecord::pending);
                    reference == expected && s.record.pending() == expected
                },
            ),
        ]
    }
}
