//! capcat-proto's machines as the kit's reference: each renders its
//! outcome as the protocol's JSON and says what it leaves its caller.

use capcat_proto::{
    Allocate, IndexPass, Input, Lease, LeaseClaim, Machine, Publish, Release, Step,
};
use serde_json::Value as Json;

use crate::outcome;

/// What a finished machine leaves its caller: the kit's walks build a
/// publisher's next start from it, as a capture service does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// The lease the caller holds afterwards, when the machine names one.
    pub lease: Option<Lease>,
    /// The version allocated.
    pub version: Option<u64>,
    /// Whether a publish won.
    pub won: bool,
}

/// A capcat-proto machine whose outcome is rendered as the protocol's JSON.
pub trait Reference {
    /// The machine's next step; `Done` carries the done object.
    fn poll(&mut self) -> Step<Json>;
    /// Hands the machine the answer to its last step.
    fn handle(&mut self, input: Input);
    /// What it leaves its caller (meaningful once done).
    fn ended(&mut self) -> Ended;
}

/// Runs `machine` one poll, rendering `Done` with `render`.
fn poll_with<M: Machine>(
    machine: &mut M,
    render: impl FnOnce(&M, &M::Outcome) -> Json,
) -> Step<Json> {
    match machine.poll() {
        Step::Execute(stmt) => Step::Execute(stmt),
        Step::Draw { below } => Step::Draw { below },
        Step::Done(outcome) => Step::Done(render(machine, &outcome)),
    }
}

pub(crate) struct Claim(pub(crate) LeaseClaim);
pub(crate) struct Releasing(pub(crate) Release);
pub(crate) struct Allocating(pub(crate) Allocate);
pub(crate) struct Publishing(pub(crate) Publish);
pub(crate) struct Indexing(pub(crate) IndexPass);

impl Reference for Claim {
    fn poll(&mut self) -> Step<Json> {
        poll_with(&mut self.0, |_, o| outcome::claimed(o))
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        match self.0.poll() {
            Step::Done(Ok(lease)) => Ended {
                lease: Some(lease),
                ..Ended::default()
            },
            _ => Ended::default(),
        }
    }
}

impl Reference for Releasing {
    fn poll(&mut self) -> Step<Json> {
        poll_with(&mut self.0, |_, o| outcome::released(o))
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        Ended::default()
    }
}

impl Reference for Allocating {
    fn poll(&mut self) -> Step<Json> {
        poll_with(&mut self.0, |_, o| outcome::allocated(o))
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        match self.0.poll() {
            Step::Done(Ok(version)) => Ended {
                version: Some(version),
                ..Ended::default()
            },
            _ => Ended::default(),
        }
    }
}

impl Reference for Publishing {
    fn poll(&mut self) -> Step<Json> {
        poll_with(&mut self.0, |m, o| outcome::published(o, m.lease()))
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        let won = matches!(
            self.0.poll(),
            Step::Done(Ok(capcat_proto::PublishOutcome::Won { .. }))
        );
        Ended {
            lease: Some(self.0.lease().clone()),
            version: None,
            won,
        }
    }
}

impl Reference for Indexing {
    fn poll(&mut self) -> Step<Json> {
        poll_with(&mut self.0, |m, o| outcome::indexed(o, m.lease()))
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        let won = matches!(
            self.0.poll(),
            Step::Done(Ok(capcat_proto::IndexReport::Indexed { .. }))
        );
        Ended {
            lease: Some(self.0.lease().clone()),
            version: None,
            won,
        }
    }
}
