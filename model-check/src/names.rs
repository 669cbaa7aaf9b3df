//! The names shared by the TLA+ specs in `spec/` and the stateright models
//! in this crate: one module per model, and in it the model's name, its
//! actions, its invariants, its temporal properties and its design variants.
//!
//! This file is the single source of truth. The stateright models must name
//! their actions (`Debug`/`Display` of the action type, and the trace lines
//! the CLI prints), their `Property` names and their `--variant` values with
//! these constants, never with a copy of the text. `cargo run -p xtask --
//! check-specs` reads this file *as text* and fails unless every spec's
//! actions and invariants are exactly these, with no extra on either side.
//!
//! # Format (parsed by `xtask/src/spec.rs`; keep it this simple)
//!
//! - `pub mod <model> {` opens a model; its closing `}` stands alone on a
//!   line at column 0.
//! - `pub const NAME: &str = "Text";` declares one name (with a `///` doc
//!   comment saying what it is and which capcat-proto machine it mirrors).
//! - `pub const LIST: &[&str] = &[A, B, C];` lists names by constant (string
//!   literals are accepted too). rustfmt may spread it over several lines.
//! - In each model: `MODEL` is the TLA+ module name (`spec/<MODEL>.tla`);
//!   `ACTIONS` are the disjuncts of the spec's `Next`; `INVARIANTS` and
//!   `PROPERTIES` are what the spec's `<MODEL>.cfg` lists under
//!   `INVARIANTS` and `PROPERTIES`, together with `TLA_ONLY_INVARIANTS`
//!   (type invariants that Rust's types make redundant in the model);
//!   `VARIANTS` are the values of the spec's `Design` constant, `SHIPPED`
//!   first, each rejected one with a `spec/variants/<MODEL>.<VARIANT>.cfg`.

/// The models, by TLA+ module name.
pub const MODELS: &[&str] = &[publication::MODEL, demand_fold::MODEL];

/// The catalog publication protocol: allocator, lease, publish, index pass,
/// reader, publisher crash and the server clock (`spec/Publication.tla`).
pub mod publication {
    /// The TLA+ module name and the model's name in the CLI.
    pub const MODEL: &str = "Publication";

    /// The server clock advances one tick. Leases expire by it alone, and a
    /// statement may not outlive its execution cap. Environment (the
    /// simulated engine); no capcat-proto machine reads a clock.
    pub const TICK: &str = "Tick";
    /// Lease acquire or renew, step 1: read the lease head (`LIMIT 2`) and
    /// decide whether to claim the next term. A holder's re-acquire is a
    /// renewal keeping its lease_id. Mirrors `capcat_proto::lease`.
    pub const READ_LEASE_HEAD: &str = "ReadLeaseHead";
    /// Lease acquire or renew, step 2: append the claim row at the chosen
    /// term, stamped by the server clock. Mirrors `capcat_proto::lease`.
    pub const CLAIM_LEASE: &str = "ClaimLease";
    /// Lease acquire or renew, step 3: read back; the sole claimant at the
    /// head term holds, anyone else abandons. Mirrors `capcat_proto::lease`.
    pub const READ_BACK_LEASE: &str = "ReadBackLease";
    /// Version allocator, step 1: read the highest claimed version.
    /// Mirrors `capcat_proto::allocate`.
    pub const READ_VERSION_HEAD: &str = "ReadVersionHead";
    /// Version allocator, step 2: append a claim above it.
    /// Mirrors `capcat_proto::allocate`.
    pub const CLAIM_VERSION: &str = "ClaimVersion";
    /// Version allocator, step 3: read the claims at V back; the sole
    /// claimant owns V. Mirrors `capcat_proto::allocate`.
    pub const READ_BACK_VERSION: &str = "ReadBackVersion";
    /// Publish: issue the manifest `INSERT ... SELECT` guarded by
    /// `VERSION_BARRIER AND LEASE_FENCE`, with a fresh publish_id.
    /// Mirrors `capcat_proto::publish`.
    pub const ISSUE_MANIFEST: &str = "IssueManifest";
    /// Publish: issue the commit-row `INSERT ... SELECT` with the same
    /// publish_id and guard. Mirrors `capcat_proto::publish`.
    pub const ISSUE_COMMIT_ROW: &str = "IssueCommitRow";
    /// The engine starts an in-flight statement and evaluates its SELECT:
    /// its WHERE clause (the guards found in its SQL text) and, for a late
    /// claim, the server-clock stamp of its row. The two-subquery fence
    /// reads in two steps. Environment: the simulated engine over
    /// `capcat_proto`'s statements.
    pub const EVALUATE_GUARD: &str = "EvaluateGuard";
    /// The engine lands an evaluated statement's rows (none if its guard
    /// was false), possibly after other actors moved. Environment.
    pub const LAND_ROWS: &str = "LandRows";
    /// The engine kills a statement at its `max_execution_time`: nothing
    /// lands and the client sees a timeout. Environment.
    pub const KILL_AT_CAP: &str = "KillAtCap";
    /// A client stops waiting for its in-flight claim (a transport timeout,
    /// a dropped connection) and is told it failed; the claim may still be
    /// stamped by the server clock and land, with no client. Environment
    /// (the driver); the claim machines read back either way.
    pub const ABANDON_STATEMENT: &str = "AbandonStatement";
    /// Publish: read back the commit rows at V and classify the attempt
    /// as Won, Conflict, LostRace or LeaseLost. Mirrors
    /// `capcat_proto::publish`.
    pub const READ_BACK_PUBLISH: &str = "ReadBackPublish";
    /// Index pass: record the pack in the inventory (the replay guard).
    /// Mirrors `capcat_proto::index`.
    pub const WRITE_INVENTORY: &str = "WriteInventory";
    /// Orderly shutdown: issue the fenced release (a tombstone at
    /// head.term + 1 only if the head is still this lease), possibly from a
    /// stale holder. Mirrors `capcat_proto::lease` (release).
    pub const ISSUE_RELEASE: &str = "IssueRelease";
    /// A reader pins W = max(index_version) and records the snapshot's
    /// members. Mirrors `capcat_proto::reader`.
    pub const PIN_SNAPSHOT: &str = "PinSnapshot";
    /// A reader re-reads its pinned snapshot (next page, cursor).
    /// Mirrors `capcat_proto::reader`.
    pub const RE_READ_SNAPSHOT: &str = "ReReadSnapshot";
    /// A publisher crashes, losing every machine, and restarts; its
    /// statements in flight still run. Environment (the driver of
    /// `capcat_proto::index`).
    pub const CRASH_RESTART: &str = "CrashRestart";
    /// An out-of-protocol writer (an operator, a second build sharing the
    /// prefix) appends one manifest or commit row. Environment.
    pub const FOREIGN_INSERT: &str = "ForeignInsert";

    /// Every action, in the order `Next` lists them.
    pub const ACTIONS: &[&str] = &[
        TICK,
        READ_LEASE_HEAD,
        CLAIM_LEASE,
        READ_BACK_LEASE,
        READ_VERSION_HEAD,
        CLAIM_VERSION,
        READ_BACK_VERSION,
        ISSUE_MANIFEST,
        ISSUE_COMMIT_ROW,
        READ_BACK_PUBLISH,
        WRITE_INVENTORY,
        ISSUE_RELEASE,
        CRASH_RESTART,
        EVALUATE_GUARD,
        LAND_ROWS,
        KILL_AT_CAP,
        ABANDON_STATEMENT,
        PIN_SNAPSHOT,
        RE_READ_SNAPSHOT,
        FOREIGN_INSERT,
    ];

    /// Once a reader has seen W, the packs admitted at or below W never
    /// change (checked now and on the reader's re-read). Promised to runs
    /// in which every commit row went through the fence: an
    /// out-of-protocol commit row can raise W while a fenced publish is
    /// between its guard and its rows (foreign manifest rows stay covered).
    pub const PINNED_SNAPSHOT_NEVER_GROWS: &str = "PinnedSnapshotNeverGrows";
    /// A statement whose lease was not the live head when its guard was
    /// read lands no row (`LEASE_FENCE` in `capcat_proto`'s statements).
    pub const FENCED_OUT_WRITES_NOTHING: &str = "FencedOutWritesNothing";
    /// `Won` only when the attempt's commit row and manifest rows stand
    /// and pair; `LostRace`/`LeaseLost` only when nothing it wrote is
    /// visible (`capcat_proto::publish`'s read-back).
    pub const REPORTED_MEANS_VISIBLE: &str = "ReportedMeansVisible";
    /// A pack reaches the inventory only after a publish that made it
    /// visible (`capcat_proto::index`).
    pub const INVENTORY_ONLY_AFTER_PUBLISH: &str = "InventoryOnlyAfterPublish";
    /// At most one lease passes the fence; no lease row lands above a live,
    /// uncontested head of another holder (so a release by a non-holder
    /// changes nothing); a holder is never refused by its own live lease
    /// (`capcat_proto::lease`).
    pub const ONE_LIVE_LEASE: &str = "OneLiveLease";
    /// One claimant per allocated version (`capcat_proto::allocate`).
    pub const VERSIONS_UNIQUE: &str = "VersionsUnique";
    /// Once the reader pinned W, what a read at W returns (every resolved
    /// row and its `index_version`) never changes and never exceeds W.
    pub const PINNED_READS_NEVER_CHANGE: &str = "PinnedReadsNeverChange";
    /// Type invariant of the TLA+ spec; Rust's types make it redundant.
    pub const TYPE_OK: &str = "TypeOK";
    /// Liveness: a holder that keeps renewing eventually publishes (or
    /// loses its lease, or reaches the model's bounds). In TLA+ under weak
    /// fairness of the publishers' and the engine's steps.
    pub const HOLDER_EVENTUALLY_PUBLISHES: &str = "HolderEventuallyPublishes";

    /// The safety invariants, shared by spec and model.
    pub const INVARIANTS: &[&str] = &[
        PINNED_SNAPSHOT_NEVER_GROWS,
        FENCED_OUT_WRITES_NOTHING,
        REPORTED_MEANS_VISIBLE,
        INVENTORY_ONLY_AFTER_PUBLISH,
        ONE_LIVE_LEASE,
        VERSIONS_UNIQUE,
        PINNED_READS_NEVER_CHANGE,
    ];
    /// Invariants only the TLA+ spec checks.
    pub const TLA_ONLY_INVARIANTS: &[&str] = &[TYPE_OK];
    /// The temporal properties, shared by spec and model.
    pub const PROPERTIES: &[&str] = &[HOLDER_EVENTUALLY_PUBLISHES];

    /// The design the project ships: every property holds.
    pub const SHIPPED: &str = "Shipped";
    /// Rejected: the publish INSERTs carry the version barrier but no lease
    /// fence. Breaks `FencedOutWritesNothing`.
    pub const BARRIER_ONLY: &str = "BarrierOnly";
    /// Rejected: unguarded publish INSERTs, then an "am I the highest?"
    /// check. Breaks `FencedOutWritesNothing` / `ReportedMeansVisible`
    /// (and `PinnedSnapshotNeverGrows` once two publishers overlap).
    pub const POST_WRITE_CHECK: &str = "PostWriteCheck";
    /// Rejected: lease_id and expires_at_ns read by two scalar subqueries
    /// (two reads). Breaks `FencedOutWritesNothing`.
    pub const TWO_SUBQUERY_FENCE: &str = "TwoSubqueryFence";
    /// Rejected: the read-back counts rows at V instead of finding its own
    /// publish_id. Breaks `ReportedMeansVisible`.
    pub const COUNT_ONLY_READ_BACK: &str = "CountOnlyReadBack";
    /// Rejected: membership pairs manifest and commit rows on the version
    /// alone, without publish_id. Breaks `ReportedMeansVisible` (a foreign
    /// row at V admits a lost attempt's rows) and `PinnedSnapshotNeverGrows`
    /// (a foreign manifest row at a published V joins the snapshot).
    pub const MEMBERSHIP_ON_VERSION_ALONE: &str = "MembershipOnVersionAlone";
    /// Rejected: release writes its tombstone without checking the head is
    /// its own. Breaks `OneLiveLease` (and `FencedOutWritesNothing`).
    pub const UNFENCED_RELEASE: &str = "UnfencedRelease";
    /// Rejected: a holder's re-acquire mints a fresh lease_id and is refused
    /// by its own live lease. Breaks `OneLiveLease`.
    pub const FRESH_LEASE_ID_ON_REACQUIRE: &str = "FreshLeaseIdOnReacquire";
    /// Rejected: the publish INSERTs carry no `max_execution_time`.
    /// Breaks `PinnedSnapshotNeverGrows`.
    pub const NO_EXECUTION_CAP: &str = "NoExecutionCap";
    /// Rejected: the execution cap is at least the lease TTL.
    /// Breaks `PinnedSnapshotNeverGrows`.
    pub const CAP_AT_LEAST_TTL: &str = "CapAtLeastTtl";
    /// Rejected: the index pass writes the inventory before publishing.
    /// Breaks `InventoryOnlyAfterPublish`.
    pub const INVENTORY_BEFORE_PUBLISH: &str = "InventoryBeforePublish";
    /// Rejected (found while writing the spec, not in the seeds): a
    /// contested lease term is taken over at once instead of after its
    /// claims expire, while a claimant that read itself back as sole before
    /// the rival claim landed still has a guarded statement in flight.
    /// Breaks `PinnedSnapshotNeverGrows`.
    pub const CONTESTED_TERM_TAKEN_AT_ONCE: &str = "ContestedTermTakenAtOnce";
    /// Rejected (the seed's fence): the head must be live now, with no
    /// margin for the statement's own execution, so a statement evaluated
    /// just before expiry lands after a successor published. Breaks
    /// `PinnedSnapshotNeverGrows`.
    pub const MARGINLESS_FENCE: &str = "MarginlessFence";
    /// Rejected (the seed's read-back): a claimant reads back only the term
    /// it claimed, so a claim retry that lands above another lease's live
    /// renewal holds beside it. Breaks `PinnedSnapshotNeverGrows`.
    pub const OWN_TERM_READ_BACK: &str = "OwnTermReadBack";
    /// Rejected: a pinned read bounds membership by W but not the rows it
    /// resolves, so a pack re-indexed above W changes what the read returns.
    /// Breaks `PinnedReadsNeverChange`.
    pub const ROWS_ABOVE_PINNED: &str = "RowsAbovePinned";
    /// Rejected (this project's fence before the exact-row fence): the fence
    /// names the lease id but not the row, so every renewal extends the
    /// window of a statement sent before it; one the server starts late,
    /// after its holder renewed and published a later version, lands under
    /// a snapshot pinned since. Breaks `PinnedSnapshotNeverGrows`.
    pub const LEASE_ID_FENCE: &str = "LeaseIdFence";
    /// Rejected: a holder whose guarded statement timed out renews,
    /// publishes or releases at once, while that statement may still start
    /// on the server and land until the expiry of the row it named.
    /// Breaks `PinnedSnapshotNeverGrows`.
    pub const NO_SETTLE_AFTER_TIMEOUT: &str = "NoSettleAfterTimeout";
    /// Rejected (this project's row bound before it asked for a published
    /// version): a pinned read resolves rows of any version at or below W,
    /// so rows a pass wrote for a version it claimed and never published (a
    /// successor had already published above it) change what a pinned read
    /// of an older member pack returns. Breaks `PinnedReadsNeverChange`.
    pub const UNPUBLISHED_ROWS_RESOLVE: &str = "UnpublishedRowsResolve";

    /// Every design, shipped first.
    pub const VARIANTS: &[&str] = &[
        SHIPPED,
        BARRIER_ONLY,
        POST_WRITE_CHECK,
        TWO_SUBQUERY_FENCE,
        COUNT_ONLY_READ_BACK,
        MEMBERSHIP_ON_VERSION_ALONE,
        UNFENCED_RELEASE,
        FRESH_LEASE_ID_ON_REACQUIRE,
        NO_EXECUTION_CAP,
        CAP_AT_LEAST_TTL,
        INVENTORY_BEFORE_PUBLISH,
        CONTESTED_TERM_TAKEN_AT_ONCE,
        MARGINLESS_FENCE,
        OWN_TERM_READ_BACK,
        ROWS_ABOVE_PINNED,
        LEASE_ID_FENCE,
        NO_SETTLE_AFTER_TIMEOUT,
        UNPUBLISHED_ROWS_RESOLVE,
    ];
}

/// The demand fold: events from writer, executor and scan, in any order and
/// duplicated, fold to one record (`spec/DemandFold.tla`).
pub mod demand_fold {
    /// The TLA+ module name and the model's name in the CLI.
    pub const MODEL: &str = "DemandFold";

    /// A writer reports a sealed generation and its bytes after a flush.
    /// Mirrors `capcat_proto::demand` (writer source).
    pub const WRITER_EVENT: &str = "WriterEvent";
    /// An executor reports the generation it has merged (indexed).
    /// Mirrors `capcat_proto::demand` (executor source).
    pub const EXECUTOR_EVENT: &str = "ExecutorEvent";
    /// A scan reports the sealed and merged marks storage holds, possibly
    /// older than others reported. Mirrors `capcat_proto::demand` (scan).
    pub const SCAN_EVENT: &str = "ScanEvent";
    /// An event already delivered is folded again (retry, replay).
    /// Mirrors `capcat_proto::demand` (fold of a duplicate).
    pub const REDELIVER_EVENT: &str = "RedeliverEvent";

    /// Every action, in the order `Next` lists them.
    pub const ACTIONS: &[&str] = &[WRITER_EVENT, EXECUTOR_EVENT, SCAN_EVENT, REDELIVER_EVENT];

    /// Every order and duplication folds to what a rebuild from the stored
    /// events computes (the fold is a join-semilattice).
    pub const FOLD_EQUALS_REBUILD: &str = "FoldEqualsRebuild";
    /// No event from any source makes the record forget a merged mark.
    pub const MERGED_NEVER_FORGOTTEN: &str = "MergedNeverForgotten";
    /// Pending is sealed minus merged generations, whatever their epochs.
    pub const PENDING_COUNTS_GENERATIONS: &str = "PendingCountsGenerations";
    /// Type invariant of the TLA+ spec; Rust's types make it redundant.
    pub const TYPE_OK: &str = "TypeOK";

    /// The safety invariants, shared by spec and model.
    pub const INVARIANTS: &[&str] = &[
        FOLD_EQUALS_REBUILD,
        MERGED_NEVER_FORGOTTEN,
        PENDING_COUNTS_GENERATIONS,
    ];
    /// Invariants only the TLA+ spec checks.
    pub const TLA_ONLY_INVARIANTS: &[&str] = &[TYPE_OK];
    /// The fold has no temporal property.
    pub const PROPERTIES: &[&str] = &[];

    /// The fold the project ships: a per-dimension join ordered by
    /// generation with epoch as tiebreak.
    pub const SHIPPED: &str = "Shipped";
    /// Rejected (#344): an event replaces or is rejected as a whole.
    /// Breaks `FoldEqualsRebuild`.
    pub const EVENT_AS_UNIT: &str = "EventAsUnit";
    /// Rejected (#352): marks ordered by epoch first, as if a new writer
    /// restarted generation numbering. Breaks `PendingCountsGenerations`.
    pub const EPOCH_MAJOR_ORDER: &str = "EpochMajorOrder";
    /// Rejected: a writer's publish without a merged mark overwrites the
    /// stored one. Breaks `MergedNeverForgotten`.
    pub const WRITER_OVERWRITES_MERGED: &str = "WriterOverwritesMerged";

    /// Every design, shipped first.
    pub const VARIANTS: &[&str] = &[
        SHIPPED,
        EVENT_AS_UNIT,
        EPOCH_MAJOR_ORDER,
        WRITER_OVERWRITES_MERGED,
    ];
}
