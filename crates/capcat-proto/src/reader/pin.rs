//! [`PinSnapshot`]: the published head a new read pins.

use crate::machine::{Input, Machine, Step};
use crate::tables::Tables;

use super::ReaderError;
use super::machines::input_error;
use super::plan::{decode_pinned_version, pin_snapshot};

/// Reads the published head, the snapshot version a new read pins: one
/// `reader.pin_snapshot`. [`super::SearchPage`] and [`super::GetByIds`]
/// start with the same statement; this machine is for a caller that wants
/// the head alone (a status report, a test).
///
/// ```
/// use capcat_proto::reader::PinSnapshot;
/// use capcat_proto::{Input, Machine, Rows, Step, Tables, Value};
///
/// let mut pin = PinSnapshot::new(Tables::new("t").unwrap());
/// let Step::Execute(stmt) = pin.poll() else { unreachable!() };
/// assert_eq!(stmt.name, "reader.pin_snapshot");
/// pin.handle(Input::Rows(Rows(vec![vec![Value::UInt64(4)]])));
/// assert_eq!(pin.poll(), Step::Done(Ok(4)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PinSnapshot {
    tables: Tables,
    outcome: Option<Result<u64, ReaderError>>,
}

impl PinSnapshot {
    /// A read of the published head of the catalog under `tables`.
    pub fn new(tables: Tables) -> Self {
        Self {
            tables,
            outcome: None,
        }
    }
}

impl Machine for PinSnapshot {
    type Outcome = Result<u64, ReaderError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.outcome {
            Some(outcome) => Step::Done(outcome.clone()),
            None => Step::Execute(pin_snapshot(&self.tables)),
        }
    }

    fn handle(&mut self, input: Input) {
        if self.outcome.is_none() {
            self.outcome = Some(
                input_error("reader.pin_snapshot", input)
                    .and_then(|rows| decode_pinned_version(&rows)),
            );
        }
    }
}
