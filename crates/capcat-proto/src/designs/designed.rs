//! [`Designed`]: a shipped machine run as a rejected design.

use uuid::Uuid;

use crate::config::Config;
use crate::index::{IndexError, IndexPass};
use crate::lease::{LeaseClaim, Release};
use crate::machine::{Input, Machine, Step};
use crate::publish::{PackRef, Publish};
use crate::tables::Tables;

use super::{Acts, Design};

/// What [`Designed`] needs to know of the machine it wraps. Every method
/// has a default for machines a design never looks into.
pub trait Designable: Machine + Clone {
    /// The publish attempt the machine runs now, if it publishes.
    fn publish_id(&self) -> Option<Uuid> {
        None
    }
    /// The publish an index pass has just started, with the packs it
    /// publishes: `(version, publish_id, packs)`.
    fn publish_started(&self) -> Option<(u64, Uuid, Vec<PackRef>)> {
        None
    }
    /// The publish attempt whose packs the machine is recording in the
    /// inventory now, if it is.
    fn recording(&self) -> Option<Uuid> {
        None
    }
    /// The outcome of an index pass that failed with `error`.
    fn failed(error: IndexError) -> Option<Self::Outcome> {
        let _ = error;
        None
    }
}

impl Designable for LeaseClaim {}
impl Designable for Release {}
impl Designable for crate::allocate::Allocate {}

impl Designable for Publish {
    fn publish_id(&self) -> Option<Uuid> {
        Some(Publish::publish_id(self))
    }
}

impl Designable for IndexPass {
    fn publish_id(&self) -> Option<Uuid> {
        self.publishing().map(Publish::publish_id)
    }
    fn publish_started(&self) -> Option<(u64, Uuid, Vec<PackRef>)> {
        self.publishing()
            .map(|p| (p.version(), p.publish_id(), self.pending().to_vec()))
    }
    fn recording(&self) -> Option<Uuid> {
        IndexPass::recording(self)
    }
    fn failed(error: IndexError) -> Option<Self::Outcome> {
        Some(Err(error))
    }
}

/// Where the inventory-before-publish design stands in an index pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
enum Early {
    /// Nothing recorded ahead of a publish.
    #[default]
    Idle,
    /// Recording `packs` ahead of publish `publish_id`, chunk by chunk.
    Recording {
        version: u64,
        publish_id: Uuid,
        packs: Vec<PackRef>,
        chunk: usize,
    },
    /// Recorded ahead of publish `publish_id`: the pass's own recording
    /// after that publish is answered here and never sent.
    Recorded { publish_id: Uuid },
    /// Recording ahead failed: the pass is over.
    Failed(IndexError),
}

/// A shipped machine run as `design`: its statements rewritten on the way
/// out, its answers on the way in, and (for an index pass under the
/// inventory-before-publish design) its inventory recorded before its
/// publish instead of after. The shipped design passes everything through.
///
/// Drive it like any [`Machine`]: `poll`, execute, `handle`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Designed<M> {
    design: Design,
    tables: Tables,
    cfg: Config,
    inner: M,
    early: Early,
}

impl Design {
    /// `machine` (built with `tables` and `cfg`) run as this design.
    pub fn wrap<M: Designable>(self, tables: Tables, cfg: Config, machine: M) -> Designed<M> {
        Designed {
            design: self,
            tables,
            cfg,
            inner: machine,
            early: Early::Idle,
        }
    }
}

impl<M: Designable> Designed<M> {
    /// The design this machine runs.
    pub fn design(&self) -> Design {
        self.design
    }

    /// The wrapped machine (its lease, its attempts).
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped machine, unwrapped.
    pub fn into_inner(self) -> M {
        self.inner
    }

    fn early_statement(&mut self) -> Option<Step<M::Outcome>> {
        let Early::Recording {
            version,
            publish_id,
            packs,
            chunk,
        } = &self.early
        else {
            return None;
        };
        let size = self.cfg.chunk();
        let slice = packs
            .iter()
            .skip(chunk * size)
            .take(size)
            .cloned()
            .collect();
        match crate::index::sql::commit_packs(&self.tables, *version, *publish_id, slice) {
            Ok(stmt) => Some(Step::Execute(stmt)),
            Err(error) => {
                self.early = Early::Failed(error);
                None
            }
        }
    }

    fn handle_early(&mut self, input: Input) {
        let Early::Recording {
            version,
            publish_id,
            packs,
            chunk,
        } = std::mem::take(&mut self.early)
        else {
            return;
        };
        self.early = match input {
            Input::Rows(_) if (chunk + 1) * self.cfg.chunk() < packs.len() => Early::Recording {
                version,
                publish_id,
                packs,
                chunk: chunk + 1,
            },
            Input::Rows(_) => Early::Recorded { publish_id },
            Input::Failed(failure) => Early::Failed(IndexError::Inventory {
                version,
                publish_id,
                failure,
            }),
            Input::Drawn(_) => Early::Failed(IndexError::UnexpectedInput {
                expected: "rows or a failure",
                got: "a draw",
            }),
        };
    }
}

impl<M: Designable> Machine for Designed<M> {
    type Outcome = M::Outcome;

    fn poll(&mut self) -> Step<Self::Outcome> {
        // While recording ahead, the next chunk is this wrapper's own
        // statement; building it may end the pass instead.
        if let Some(step) = self.early_statement() {
            return step;
        }
        if let Early::Failed(error) = &self.early
            && let Some(outcome) = M::failed(error.clone())
        {
            return Step::Done(outcome);
        }
        // The pass's own recording of packs it recorded ahead is answered
        // here. Each answer moves it one chunk on; the bound is the chunks
        // of a full batch.
        for _ in 0..=crate::config::MAX_CHUNK {
            let recorded_ahead = matches!(
                (&self.early, self.inner.recording()),
                (Early::Recorded { publish_id }, Some(id)) if *publish_id == id
            );
            if !recorded_ahead {
                break;
            }
            self.inner
                .handle(Input::Rows(crate::statement::Rows::empty()));
        }
        match self.inner.poll() {
            Step::Execute(stmt) => {
                Step::Execute(self.design.rewrite(stmt, &self.tables, &self.cfg))
            }
            other => other,
        }
    }

    fn handle(&mut self, input: Input) {
        if matches!(self.early, Early::Recording { .. }) {
            return self.handle_early(input);
        }
        let input = match self.design.acts() {
            Acts::Answers | Acts::StatementsAndAnswers => match self.inner.clone().poll() {
                Step::Execute(sent) => {
                    let publish_id = self.inner.publish_id();
                    self.design.answer(&sent, input, publish_id)
                }
                _ => input,
            },
            _ => input,
        };
        // Only the inventory-before-publish design looks for a publish that
        // has just started: every other design hands the input straight on.
        let records_ahead = self.design == Design::InventoryBeforePublish;
        let publishing_before = records_ahead && self.inner.publish_id().is_some();
        self.inner.handle(input);
        if records_ahead
            && !publishing_before
            && let Some((version, publish_id, packs)) = self.inner.publish_started()
        {
            self.early = Early::Recording {
                version,
                publish_id,
                packs,
                chunk: 0,
            };
        }
    }
}
