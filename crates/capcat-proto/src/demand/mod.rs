//! The demand fold: the indexing backlog as a join-semilattice.
