//! `Mark`: how far a shard has got, as a generation stamped with an epoch.

/// A generation number stamped with the writer epoch that reported it.
///
/// Marks order by `(value, epoch)`: the generation decides, the epoch only
/// breaks ties. Generation numbering survives a writer epoch change (a new
/// writer claiming a shard continues from the base manifest's generations),
/// so an epoch change is not a numbering restart: a shard merged to 40 whose
/// new-epoch writer seals 60 has 20 pending, not 60. Ordering by epoch first
/// was the round-4 bug of the seed.
///
/// The derived `Ord` compares fields in declaration order, which is why
/// `value` is declared before `epoch`; a named test pins the order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mark {
    /// The generation (a pack sequence number of the shard).
    pub value: u64,
    /// The writer epoch under which the generation was reported.
    pub epoch: u64,
}

impl Mark {
    /// A mark at generation `value` reported under `epoch`.
    pub fn new(value: u64, epoch: u64) -> Self {
        Self { value, epoch }
    }
}
