----------------------------- MODULE DemandFold -----------------------------
(***************************************************************************)
(* The demand fold: a shard's indexing backlog folded from events that a  *)
(* writer (sealed generations and bytes), an executor (merged, i.e.       *)
(* indexed, generations) and a scan (both, read back from storage)        *)
(* deliver in any order, any number of times. The fold must be a         *)
(* join-semilattice: each dimension is the maximum over every event that *)
(* carried it, so every order and every duplication yields one record,   *)
(* and rebuilding from the stored events equals the incremental fold.    *)
(*                                                                         *)
(* Marks are (generation, epoch) ordered by generation first; the epoch  *)
(* is a fence and tiebreak only, because generation numbering continues  *)
(* across writer claims. Pending = sealed - merged, plainly.             *)
(*                                                                         *)
(* Not modelled: the age clock (sealed_times), schema versions, bounded  *)
(* publish retries; see spec/README.md.                                  *)
(*                                                                         *)
(* Names: actions in Next and the invariants in DemandFold.cfg are spelled *)
(* exactly as in model-check/src/names.rs (`demand_fold::*`).             *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    MaxGen,      \* highest generation an event may carry
    MaxEpoch,    \* highest writer epoch
    MaxBytes,    \* highest byte count a writer may report
    MaxEvents,   \* distinct events delivered (bounds the state space)
    Design       \* "Shipped" or the rejected fold under test

Designs == {"Shipped", "EventAsUnit", "EpochMajorOrder",
            "WriterOverwritesMerged"}

ASSUME /\ Design \in Designs
       /\ MaxGen \in Nat /\ MaxEpoch \in Nat /\ MaxBytes \in Nat
       /\ MaxEvents \in Nat

VARIABLES
    log,      \* every distinct event delivered so far (the stored events)
    record    \* the incrementally folded record

vars == <<log, record>>

-----------------------------------------------------------------------------
Marks == [g : 0..MaxGen, e : 0..MaxEpoch]
Bottom == [g |-> 0, e |-> 0]            \* "no mark carried"
Sources == {"writer", "executor", "scan"}
Events == [src : Sources, sealed : Marks, merged : Marks, bytes : 0..MaxBytes]
Records == [sealed : Marks, merged : Marks, bytes : 0..MaxBytes]
BottomRecord == [sealed |-> Bottom, merged |-> Bottom, bytes |-> 0]

\* The shipped order: generation first, epoch as tiebreak.
Leq(a, b) == a.g < b.g \/ (a.g = b.g /\ a.e <= b.e)
\* The rejected order (#352): epoch first, as if a new writer restarted
\* the generation numbering.
LeqEpochMajor(a, b) == a.e < b.e \/ (a.e = b.e /\ a.g <= b.g)
LeqBy(a, b) == IF Design = "EpochMajorOrder" THEN LeqEpochMajor(a, b)
               ELSE Leq(a, b)

MaxMark(a, b) == IF LeqBy(a, b) THEN b ELSE a
MaxOf(x, y) == IF x <= y THEN y ELSE x
\* The greatest mark of a set under the shipped order.
Greatest(S) == CHOOSE m \in S : \A o \in S : Leq(o, m)

\* The per-dimension join.
Join(r, ev) == [sealed |-> MaxMark(r.sealed, ev.sealed),
                merged |-> MaxMark(r.merged, ev.merged),
                bytes  |-> MaxOf(r.bytes, ev.bytes)]

\* One event folded into the record, per design.
Fold(r, ev) ==
    CASE Design = "EventAsUnit" ->
             \* The event replaces the record whole when its leading mark is
             \* newer, and is rejected whole otherwise (#344).
             LET lead == IF ev.sealed # Bottom THEN ev.sealed ELSE ev.merged
                 cur == IF ev.sealed # Bottom THEN r.sealed ELSE r.merged
             IN IF Leq(cur, lead) /\ cur # lead
                   THEN [sealed |-> ev.sealed, merged |-> ev.merged,
                         bytes |-> ev.bytes]
                   ELSE r
    []   Design = "WriterOverwritesMerged" /\ ev.src = "writer" ->
             \* A writer's publish wrote merged = None over the stored mark.
             [Join(r, ev) EXCEPT !.merged = ev.merged]
    []   OTHER -> Join(r, ev)

\* Rebuild from the stored events: the shipped join over the set.
Rebuild(S) ==
    [sealed |-> Greatest({ev.sealed : ev \in S} \cup {Bottom}),
     merged |-> Greatest({ev.merged : ev \in S} \cup {Bottom}),
     bytes  |-> CHOOSE b \in {ev.bytes : ev \in S} \cup {0} :
                    \A ev \in S : ev.bytes <= b]

\* Pending generations of the shipped fold.
Pending(r) == IF r.merged.g < r.sealed.g THEN r.sealed.g - r.merged.g ELSE 0
\* Pending as the rejected design computed it: equal epochs only; an older
\* epoch's merged mark counts everything pending, a newer one nothing.
PendingBy(r) ==
    IF Design = "EpochMajorOrder"
       THEN CASE r.merged.e = r.sealed.e -> Pending(r)
            []   r.merged.e < r.sealed.e -> r.sealed.g
            []   OTHER                   -> 0
       ELSE Pending(r)

-----------------------------------------------------------------------------
TypeOK == /\ log \subseteq Events
          /\ record \in Records

Init == /\ log = {}
        /\ record = BottomRecord

Deliver(ev) == /\ Cardinality(log) < MaxEvents
               /\ ev \notin log
               /\ log' = log \cup {ev}
               /\ record' = Fold(record, ev)

(* A writer reports a sealed generation and its bytes after a flush.     *)
(* Mirrors capcat_proto::demand (writer source).                          *)
WriterEvent ==
    \E g \in 1..MaxGen, e \in 1..MaxEpoch, b \in 1..MaxBytes :
        Deliver([src |-> "writer", sealed |-> [g |-> g, e |-> e],
                 merged |-> Bottom, bytes |-> b])

(* An executor reports the generation it has merged (indexed).           *)
(* Mirrors capcat_proto::demand (executor source).                        *)
ExecutorEvent ==
    \E g \in 1..MaxGen, e \in 1..MaxEpoch :
        Deliver([src |-> "executor", sealed |-> Bottom,
                 merged |-> [g |-> g, e |-> e], bytes |-> 0])

(* A scan reports what storage holds: a sealed and a merged mark, each   *)
(* possibly older than what the others reported.                          *)
(* Mirrors capcat_proto::demand (scan source).                            *)
ScanEvent ==
    \E gs \in 1..MaxGen, es \in 1..MaxEpoch, gm \in 0..MaxGen,
       em \in 0..MaxEpoch :
        Deliver([src |-> "scan", sealed |-> [g |-> gs, e |-> es],
                 merged |-> [g |-> gm, e |-> em], bytes |-> 0])

(* An event already delivered arrives again (a retry, a replay).         *)
(* Mirrors capcat_proto::demand (fold of a duplicated event).             *)
RedeliverEvent ==
    \E ev \in log :
        /\ record' = Fold(record, ev)
        /\ record' # record
        /\ UNCHANGED log

Next == WriterEvent \/ ExecutorEvent \/ ScanEvent \/ RedeliverEvent

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Every order and every duplication of the events folds to the record a *)
(* rebuild from the stored events computes.                              *)
FoldEqualsRebuild == record = Rebuild(log)

(* No event, from any source, makes the record forget a merged mark      *)
(* some event carried.                                                    *)
MergedNeverForgotten == \A ev \in log : Leq(ev.merged, record.merged)

(* The backlog counts generations: sealed minus merged, whatever epochs  *)
(* the two marks carry.                                                   *)
PendingCountsGenerations == PendingBy(record) = Pending(Rebuild(log))
=============================================================================
