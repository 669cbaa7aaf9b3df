---------------------------- MODULE Publication ----------------------------
(***************************************************************************)
(* Capcat's catalog publication protocol over append-only ClickHouse      *)
(* tables: the sole-claimant version allocator, the publisher lease with  *)
(* its fence evaluated inside the INSERT that makes rows visible, the     *)
(* per-attempt publish_id read back to classify the outcome, membership   *)
(* by (index_version, publish_id) pairing between the snapshot manifest   *)
(* and the watermark log, the indexer's inventory, and readers that pin   *)
(* a pinned version W and re-read.                                        *)
(*                                                                         *)
(* Names: every action in Next and every invariant and property listed in *)
(* Publication.cfg is spelled exactly as in model-check/src/names.rs      *)
(* (`publication::ACTIONS`, `INVARIANTS`, `PROPERTIES`, `VARIANTS`);      *)
(* `cargo run -p xtask -- check-specs` fails when they drift apart.       *)
(*                                                                         *)
(* Modelling choices, said plainly (see spec/README.md):                  *)
(*  - A conditional INSERT ... SELECT is two steps: EvaluateGuard reads   *)
(*    the WHERE clause, LandRows makes its rows visible later, and every  *)
(*    other actor may act in between.                                     *)
(*  - Late start, always on: a guarded statement STARTS on the server     *)
(*    (EvaluateGuard) at any time after its send (queued behind the       *)
(*    server's concurrency limit, held up on the network), and its        *)
(*    execution cap counts from its start, as ClickHouse counts           *)
(*    max_execution_time. A started statement lands or is killed by       *)
(*    start + Cap. One not started by send + Cap is given up by its       *)
(*    client: KillAtCap tells the client Timeout and leaves the statement *)
(*    pending with no client; it may still start, pass and land later.   *)
(*    A client waits for the outcome of a statement that did start.       *)
(*  - Unguarded single-row statements (head reads, read-backs) are atomic *)
(*    steps. So are the claims (lease and version), unless LateClaims:    *)
(*  - Late claims (LateClaims = TRUE): a claim INSERT is in flight like a *)
(*    guarded one. The server stamps it (EvaluateGuard; a lease claim's   *)
(*    expiry is now + Ttl at that instant) any time after its send and    *)
(*    lands it (LandRows) any time after that; until it lands its client  *)
(*    may give up (AbandonStatement: a transport timeout, a dropped       *)
(*    connection) and is told it failed, and the claim may still be       *)
(*    stamped and land with no client. The claim machines read back after *)
(*    a failed claim exactly as after a successful one, so a claim that   *)
(*    lands after its read-back is a row its claimant does not know it    *)
(*    has. Claims carry no execution cap: they never hold the clock and   *)
(*    are never killed. Each lease claim draws a fresh id, which bounds   *)
(*    the claims a run sends by MaxId.                                    *)
(*  - The server clock is free: Tick may happen between any two steps,   *)
(*    including between a renewal's claim and its read-back and before    *)
(*    each guarded statement, so a client may stall for any time.         *)
(*  - LEASE_FENCE names the exact head row its client holds (term,        *)
(*    lease_id, expires_at_ns of the last successful claim) and asks for *)
(*    it to outlive now plus the cap (the margin): a statement sent under *)
(*    row R passes only while R is the head and lands before R expires,   *)
(*    whenever it starts. The claim read-back refuses while any other     *)
(*    lease is live.                                                       *)
(*  - Settle rule: a guarded statement told Timeout may still land until *)
(*    the expiry of the row it named (`unsettled`); the holder sends no   *)
(*    further guarded statement until a claim stamped after that time    *)
(*    (its next renewal) proves the server clock has passed it, and never *)
(*    releases while it is unsettled.                                      *)
(*  - Passes: a pass that ended with a guarded statement told Timeout, or *)
(*    Unsettled, is followed by another pass under the lease it holds     *)
(*    (allocate, renew, publish) while the incarnation has passes left    *)
(*    (MaxPasses), or the publisher stops (a shutdown, or the bound) and  *)
(*    may then release.                                                    *)
(*  - Descriptor rows are one row per (pack, version) allocated; chunking,*)
(*    schema and jitter values are not modelled; a contested version is   *)
(*    simply retried at a higher one.                                     *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Publishers,   \* indexers; each owns one pack, named after itself
    Readers,      \* readers that pin W and re-read
    Ttl,          \* lease time to live, in server clock ticks
    Cap,          \* max_execution_time of a guarded statement, in ticks
    MaxTime,      \* the server clock stops here (bounds the state space)
    MaxVersion,   \* highest index_version the allocator may claim
    MaxTerm,      \* highest lease term
    MaxId,        \* highest fresh id (lease ids, claim ids, publish ids)
    MaxCrashes,   \* publisher crash/restart budget
    MaxForeign,   \* out-of-protocol rows (an operator, a second build)
    MaxPasses,    \* index passes per publisher incarnation (a failed or
                  \* unsettled pass may be followed by another one)
    LateClaims,   \* claims are stamped and land late, and may be abandoned
    Design        \* "Shipped" or the rejected design under test

Designs == {"Shipped", "BarrierOnly", "PostWriteCheck", "TwoSubqueryFence",
            "CountOnlyReadBack", "MembershipOnVersionAlone",
            "UnfencedRelease", "FreshLeaseIdOnReacquire", "NoExecutionCap",
            "CapAtLeastTtl", "InventoryBeforePublish",
            "ContestedTermTakenAtOnce", "MarginlessFence", "OwnTermReadBack",
            "RowsAbovePinned", "LeaseIdFence", "NoSettleAfterTimeout",
            "UnpublishedRowsResolve"}

ASSUME /\ Design \in Designs
       /\ Ttl \in Nat /\ Cap \in Nat /\ MaxTime \in Nat
       /\ 1 <= Cap /\ 2 * Cap < Ttl
       /\ MaxVersion \in Nat /\ MaxTerm \in Nat /\ MaxId \in Nat
       /\ MaxCrashes \in Nat /\ MaxForeign \in Nat
       /\ MaxPasses \in Nat /\ MaxPasses >= 1
       /\ LateClaims \in BOOLEAN
       /\ Publishers \cap Readers = {}

VARIABLES
    now,          \* the server clock (toUnixTimestamp64Nano(now64(9)))
    claims,       \* {p}_version_claims: [v, cid]
    lease,        \* {p}_publisher_lease: [term, lid, holder, inc, exp]
    manifest,     \* {p}_snapshot_manifest: [v, pid, pack]
    watermark,    \* {p}_index_watermark: [v, pid]
    inventory,    \* {p}_pack_inventory_raw: packs
    desc,         \* {p}_capture_raw, projected: [pack, v]
    inflight,     \* guarded statements (and, with LateClaims, claims) sent
                  \* and not yet landed or killed (with or without a client
                  \* still waiting on them)
    pub,          \* each publisher's local state (lost on a crash)
    rd,           \* each reader's pinned snapshot
    nextId,       \* the next fresh id
    crashes,      \* crashes so far
    foreign,      \* out-of-protocol rows so far
    foreignWm,    \* an out-of-protocol commit row was written
    reports,      \* history: every publish outcome a publisher reported
    owners,       \* history: every version a publisher read back as its own
    fencedLanded, \* history: a fenced-out statement landed rows
    usurped,      \* history: a row landed above a live head of another lid
    selfLockout   \* history: a holder was refused by its own live lease

vars == <<now, claims, lease, manifest, watermark, inventory, desc, inflight, pub,
          rd, nextId, crashes, foreign, foreignWm, reports, owners,
          fencedLanded, usurped, selfLockout>>

-----------------------------------------------------------------------------
NoLid == 0
Ids == 1..MaxId
Packs == Publishers
Versions == 1..MaxVersion
Terms == 1..MaxTerm
Times == 0..MaxTime
\* "claim" and "vclaim": a lease claim and a version claim in flight (only
\* with LateClaims).
ClaimKinds == {"claim", "vclaim"}
Kinds == {"manifest", "commit", "release"} \cup ClaimKinds
Outcomes == {"Won", "LostRace", "Conflict", "LeaseLost"}
Pcs == {"idle", "lease_claim", "lease_claim_wait", "lease_readback",
        "alloc_head", "alloc_claim", "alloc_claim_wait", "alloc_readback",
        "early_inventory", "renew", "manifest",
        "manifest_wait", "commit", "commit_wait", "readback",
        "inventory", "done", "release_wait", "released", "exhausted",
        "shut_down"}
\* "lease_claim_wait", "alloc_claim_wait": waiting on a claim in flight
\* (only with LateClaims).
\* "exhausted": stopped at one of the model's bounds (versions, terms, ids);
\* "shut_down": stopped after a failed pass (by choice, or with no pass
\* left). Either may still release.
Modes == {"acquire", "renew"}

Max(S) == IF S = {} THEN 0 ELSE CHOOSE x \in S : \A y \in S : y <= x

\* The execution cap of a guarded statement, per design. MaxTime + 1 is
\* "never": the clock never reaches it, so such a statement is never killed.
EffCap == CASE Design = "NoExecutionCap" -> MaxTime + 1
          []   Design = "CapAtLeastTtl"  -> Ttl
          []   OTHER                     -> Cap

\* LEASE_ORDER is term DESC, lease_id DESC, expires_at_ns DESC: the head.
HeadTerm == Max({r.term : r \in lease})
AtTerm(t) == {r \in lease : r.term = t}
Head == CHOOSE r \in AtTerm(HeadTerm) :
            \A o \in AtTerm(HeadTerm) :
                o.lid < r.lid \/ (o.lid = r.lid /\ o.exp <= r.exp)
HasHead == lease # {}
\* Ground truth: more than one lease id has a row at the head term.
Contested == Cardinality({r.lid : r \in AtTerm(HeadTerm)}) > 1
\* What lease.read_head (ORDER BY LEASE_ORDER LIMIT 2) reports: the second
\* row is at the head term under another lease id. The same as Contested
\* while a lease id has at most one row per term; with LateClaims a
\* claimant's retry at the same term may land a second row of its id, which
\* then hides a rival below it (the claim read-back still sees the rival).
\* Without a head there is nothing to contest: HasHead comes first, because
\* TLC may evaluate this as a branch of a disjunction even when an earlier
\* disjunct (~HasHead) already holds, and Head is undefined on an empty table.
HeadContested ==
    /\ HasHead
    /\ LET others == AtTerm(HeadTerm) \ {Head}
       IN others # {} /\ ~\E r \in others : r.lid = Head.lid
HeadLive == HasHead /\ Head.exp > now
\* A term holds a lease while any claim at it is live. A contested term
\* holds no lease for anyone, but it is taken over only once every claim
\* at it has expired: a claimant that read itself back as sole before a
\* late rival claim landed may still have a statement in flight.
TermLive == \E r \in AtTerm(HeadTerm) : r.exp > now
\* Ground truth: the head is this lease and has not expired.
FenceTrue(lid) == HeadLive /\ Head.lid = lid
\* capcat_proto's LEASE_FENCE: the head is exactly the row the statement
\* names (the term, lease_id and expires_at_ns of its client's last
\* successful claim) and outlives now plus the margin (the cap; the model's
\* engine kills exactly at the cap). Since the cap counts from the
\* statement's start, which is this evaluation, a statement sent under row
\* R lands before R expires, however late it starts. The rejected
\* LeaseIdFence matches the lease_id alone, so every renewal of the holder
\* (and any later claim row under its id) lets an abandoned statement pass;
\* the rejected MarginlessFence asks only that the head be live now.
Margin == CASE Design = "MarginlessFence" -> 0
          []   Design = "CapAtLeastTtl"   -> Ttl
          []   OTHER                      -> Cap
NamesHead(s) == IF Design = "LeaseIdFence" THEN Head.lid = s.lid
                ELSE /\ Head.term = s.rterm /\ Head.lid = s.lid
                     /\ Head.exp = s.rexp
FencePasses(s) == HasHead /\ NamesHead(s) /\ Head.exp > now + Margin
\* capcat_proto's VERSION_BARRIER: ifNull(max(index_version), 0) < V.
PublishedHead == Max({w.v : w \in watermark})
BarrierTrue(v) == PublishedHead < v
\* The highest version claimed (allocate.read_head); the allocator has no
\* version left once it reaches MaxVersion.
ClaimedHead == Max({c.v : c \in claims})

HasBarrier(kind) == kind \in {"manifest", "commit"}
                    /\ Design # "PostWriteCheck"
HasFence(kind) ==
    \/ kind \in {"manifest", "commit"}
       /\ Design \notin {"BarrierOnly", "PostWriteCheck"}
    \/ kind = "release" /\ Design # "UnfencedRelease"

\* A manifest row is admitted when a commit row pairs with it at or
\* below W: on (index_version, publish_id), or on the version alone in the
\* rejected design.
Pairs(m, w) == /\ m.v = w.v
               /\ (Design = "MembershipOnVersionAlone" \/ m.pid = w.pid)
Members(W) == {m.pack : m \in {m2 \in manifest :
                   \E w \in watermark : w.v <= W /\ Pairs(m2, w)}}
Visible(pack) == pack \in Members(PublishedHead)
\* What a pinned read at W returns: per member pack, the version of the
\* descriptor row argMax resolves to, among rows of a version PUBLISHED at
\* or below W (capcat_proto's pinned_rows). The rejected RowsAbovePinned
\* admits any row; the rejected UnpublishedRowsResolve any row at or below
\* W, published or not.
RowBound(v, W) == CASE Design = "RowsAbovePinned"     -> TRUE
                  []   Design = "UnpublishedRowsResolve" -> v <= W
                  []   OTHER -> v <= W /\ \E w \in watermark : w.v = v
Resolved(W) == {[pack |-> k,
                 v |-> Max({d.v : d \in {e \in desc : e.pack = k /\ RowBound(e.v, W)}})] :
                k \in Members(W)}

Fresh(n) == nextId + n <= MaxId + 1

\* exp: the expiry of the publisher's last successful claim (with lid and
\* term, the row its guarded statements name). unsettled: a server time
\* until which a guarded statement it was told Timeout on may still land,
\* 0 when none may. passes: the index passes this incarnation started.
LocalInit(p, inc) == [pc |-> IF p \in inventory THEN "done" ELSE "idle",
                      mode |-> "acquire",
                      lid |-> NoLid, term |-> 0, vseen |-> 0, cid |-> 0,
                      v |-> 0, pid |-> 0, inc |-> inc, retry |-> FALSE,
                      exp |-> 0, unsettled |-> 0, passes |-> 1]

\* Where a failed pass goes: another pass under the lease it holds
\* (allocate, renew, publish), while this incarnation has passes left, or
\* the publisher shuts down, from where it may release. A pass fails when a
\* guarded statement was told Timeout, when a renewal finds it Unsettled,
\* or when its publish reads back LostRace with no version left to try:
\* capcat_proto gives up after max_publish_attempts, and the versions the
\* model may allocate are its budget here (so the bound cuts no retry off).
AfterFailedPass(p) ==
    IF pub[p].passes < MaxPasses THEN {"alloc_head", "shut_down"}
    ELSE {"shut_down"}
\* The passes count once the failed pass of p goes on to next, one of
\* AfterFailedPass(p): another pass is one more started.
PassesAfter(p, next) ==
    IF next = "alloc_head" THEN pub[p].passes + 1 ELSE pub[p].passes
\* The settle rule: a guarded statement told Timeout may still land until
\* the expiry of the row it named. The rejected NoSettleAfterTimeout never
\* records it.
Unsettle(p, s) == IF Design = "NoSettleAfterTimeout" THEN pub[p].unsettled
                  ELSE Max({pub[p].unsettled, s.rexp})

-----------------------------------------------------------------------------
TypeOK ==
    /\ now \in Times
    /\ claims \subseteq [v : Versions, cid : Ids]
    /\ lease \subseteq [term : Terms, lid : {NoLid} \cup Ids,
                        holder : Publishers, inc : 0..MaxCrashes,
                        exp : 0..(MaxTime + Ttl)]
    /\ manifest \subseteq [v : Versions, pid : Ids, pack : Packs]
    /\ watermark \subseteq [v : Versions, pid : Ids]
    /\ inventory \subseteq Packs
    /\ desc \subseteq [pack : Packs, v : Versions]
    /\ \A s \in inflight :
           /\ s.owner \in Publishers /\ s.inc \in 0..MaxCrashes
           /\ s.kind \in Kinds /\ s.phase \in {"issued", "half", "evaluated"}
           /\ s.v \in 0..MaxVersion /\ s.pid \in 0..MaxId
           /\ s.lid \in Ids /\ s.sent \in Times /\ s.start \in Times
           /\ s.rterm \in 0..MaxTerm /\ s.rexp \in 0..(MaxTime + Ttl)
           /\ s.attached \in BOOLEAN
           /\ s.pass \in BOOLEAN /\ s.lidOk \in BOOLEAN
           /\ s.fenceOk \in BOOLEAN /\ s.term \in 0..MaxTerm
           /\ s.cid \in 0..MaxId /\ s.qid \in 0..MaxId
    /\ \A p \in Publishers :
           /\ pub[p].pc \in Pcs /\ pub[p].mode \in Modes
           /\ pub[p].lid \in {NoLid} \cup Ids
           /\ pub[p].term \in 0..MaxTerm /\ pub[p].vseen \in 0..MaxVersion
           /\ pub[p].cid \in 0..MaxId /\ pub[p].v \in 0..MaxVersion
           /\ pub[p].pid \in 0..MaxId /\ pub[p].inc \in 0..MaxCrashes
           /\ pub[p].retry \in BOOLEAN
           /\ pub[p].exp \in 0..(MaxTime + Ttl)
           /\ pub[p].unsettled \in 0..(MaxTime + Ttl)
           /\ pub[p].passes \in 1..MaxPasses
    /\ rd \in [Readers -> [pinned : BOOLEAN, w : 0..MaxVersion,
                           members : SUBSET Packs, reread : SUBSET Packs,
                           rows : SUBSET [pack : Packs, v : 0..MaxVersion],
                           rereadRows : SUBSET [pack : Packs, v : 0..MaxVersion]]]
    /\ nextId \in 1..(MaxId + 1)
    /\ crashes \in 0..MaxCrashes /\ foreign \in 0..MaxForeign
    /\ foreignWm \in BOOLEAN
    /\ reports \subseteq [p : Publishers, v : Versions, pid : Ids,
                          pack : Packs, outcome : Outcomes]
    /\ owners \subseteq [v : Versions, cid : Ids]
    /\ fencedLanded \in BOOLEAN /\ usurped \in BOOLEAN
    /\ selfLockout \in BOOLEAN

Init ==
    /\ now = 0
    /\ claims = {} /\ lease = {} /\ manifest = {} /\ watermark = {}
    /\ inventory = {} /\ desc = {} /\ inflight = {}
    /\ pub = [p \in Publishers |-> LocalInit(p, 0)]
    /\ rd = [r \in Readers |-> [pinned |-> FALSE, w |-> 0,
                                members |-> {}, reread |-> {},
                                rows |-> {}, rereadRows |-> {}]]
    /\ nextId = 1 /\ crashes = 0 /\ foreign = 0 /\ foreignWm = FALSE
    /\ reports = {} /\ owners = {}
    /\ fencedLanded = FALSE /\ usurped = FALSE /\ selfLockout = FALSE

-----------------------------------------------------------------------------
(* The server clock. Leases expire by it alone: no publisher's clock      *)
(* decides whether a lease is live. Mirrors the simulated engine's clock  *)
(* in model-check (no capcat-proto machine reads a clock).                *)
\* A started statement holds the clock at start + cap until it lands or is
\* killed; one not started holds it at send + cap until its client is told
\* Timeout, and once given up it holds nothing (it may start whenever). A
\* claim (LateClaims) has no cap and never holds the clock.
Tick ==
    /\ now < MaxTime
    /\ \A s \in inflight :
           \/ s.kind \in ClaimKinds
           \/ IF s.phase = "issued" THEN s.attached => now < s.sent + EffCap
              ELSE now < s.start + EffCap
    /\ now' = now + 1
    /\ UNCHANGED <<desc, claims, lease, manifest, watermark, inventory, inflight,
                   pub, rd, nextId, crashes, foreign, foreignWm, reports, owners,
                   fencedLanded, usurped, selfLockout>>

(* Acquire or renew, step 1: read the head (LIMIT 2) and decide.          *)
(* Mirrors capcat_proto::lease (LeaseClaim::acquire from "idle", with the *)
(* caller's own lease_id when it already holds one; LeaseClaim::renew at  *)
(* the start of every publish attempt, from "renew"). Acquire claims over *)
(* its own uncontested head, an empty table, or a term none of whose      *)
(* claims is live any more: a contested term is abandoned by its          *)
(* claimants and taken over once its claims expire (the rejected design  *)
(* ContestedTermTakenAtOnce takes it over at once). Renew claims only     *)
(* over its own uncontested head and otherwise reports the lease lost.    *)
ReadLeaseHeadSkipping(p, skip) ==
    LET l == pub[p]
        mode == IF l.pc = "renew" THEN "renew" ELSE "acquire"
        fresh == l.lid = NoLid
                 \/ (mode = "acquire" /\ Design = "FreshLeaseIdOnReacquire")
        lid == IF fresh THEN nextId ELSE l.lid
        next == (IF HasHead THEN HeadTerm + 1 ELSE 1) + skip
        ours == HasHead /\ Head.lid = lid /\ ~HeadContested
        takeable == IF Design = "ContestedTermTakenAtOnce"
                    THEN ~HasHead \/ ~HeadLive \/ HeadContested
                    ELSE ~HasHead \/ ~TermLive
        claim == IF mode = "renew" THEN ours ELSE ours \/ takeable
        \* The live head is this very process's own lease.
        ownLive == HeadLive /\ ~Contested /\ Head.holder = p
                   /\ Head.inc = l.inc
        lost == IF mode = "renew" THEN "idle" ELSE l.pc
    IN /\ l.pc \in {"idle", "renew"}
       /\ IF next > MaxTerm \/ (fresh /\ ~Fresh(1))
             \* The model's term or id bound is reached: this publisher stops.
             THEN /\ pub' = [pub EXCEPT ![p].pc = "exhausted"]
                  /\ UNCHANGED <<nextId, selfLockout>>
             ELSE /\ IF claim
                        THEN pub' = [pub EXCEPT ![p].pc = "lease_claim",
                                                ![p].mode = mode,
                                                ![p].lid = lid,
                                                ![p].term = next]
                        \* A refused acquire keeps its id: an id that never
                        \* held is presented again by the next acquire (so
                        \* its own claim landing late reads as its own), and
                        \* a held one is presented again by a re-acquire.
                        \* Mirrors capcat_clickhouse's Catalog (claim_id.rs)
                        \* and LeaseHandle::reacquire. A renewal refused has
                        \* lost the lease; its next acquire is a fresh one.
                        ELSE pub' = [pub EXCEPT ![p].pc = lost,
                                                ![p].lid = IF mode = "acquire"
                                                           THEN l.lid ELSE NoLid]
                  /\ nextId' = IF fresh THEN nextId + 1 ELSE nextId
                  \* Refused by its own live lease.
                  /\ selfLockout' = (selfLockout \/ (~claim /\ ownLive))
                  \* A plain refusal of a publisher holding nothing changes
                  \* nothing: it is not a step.
                  /\ (claim \/ l.lid # NoLid \/ ownLive \/ mode = "renew")
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped>>

\* The jittered skip of a claim retry: after a refused read-back a claim
\* lands one or two terms above the head it read (capcat_proto draws the
\* skip below 8 * attempt + 1, so a first attempt skips nothing).
ReadLeaseHead(p) ==
    \E skip \in IF pub[p].retry THEN {0, 1} ELSE {0} : ReadLeaseHeadSkipping(p, skip)

(* A lease row lands. `usurped` records a release tombstone landing at a *)
(* term above a live, uncontested head of another holder: a release that  *)
(* revokes a live lease. (A claim may land above a live head: acquirers   *)
(* race, and a jittered claim goes above the head it read. That costs the *)
(* head its fence, and the rival-aware read-back keeps the claimant from  *)
(* holding beside it.)                                                     *)
AppendLease(row) ==
    /\ lease' = lease \cup {row}
    /\ usurped' = (usurped \/ (row.exp = 0 /\ HeadLive /\ ~Contested
                               /\ row.term > HeadTerm
                               /\ <<row.holder, row.inc>>
                                    # <<Head.holder, Head.inc>>))

\* A claim as sent (LateClaims): a lease claim ("claim") carries the row
\* it will append but its expiry, stamped when the server starts it
\* (start + Ttl); a version claim ("vclaim") carries v and cid. A claim
\* names no held row and is not timed, so rterm, rexp and sent stay 0.
\* qid: a lease claim's own fresh id (a query id), drawn only with
\* LateClaims. It keeps two otherwise equal lease claims of one publisher
\* apart (a retry at the same term while an abandoned one is pending),
\* and it bounds the lease claims a run sends by MaxId: without it a
\* publisher could abandon and resend claims at one term without end. A
\* version claim needs none (its cid is fresh).
Claim(p, kind, term, v, cid, qid) ==
    [owner |-> p, inc |-> pub[p].inc, kind |-> kind, phase |-> "issued",
     v |-> v, pid |-> 0, lid |-> pub[p].lid, rterm |-> 0, rexp |-> 0,
     sent |-> 0, start |-> 0, attached |-> TRUE,
     pass |-> FALSE, lidOk |-> FALSE, fenceOk |-> FALSE, term |-> term,
     cid |-> cid, qid |-> qid]

(* Acquire or renew, step 2: append the claim row at the chosen term,     *)
(* stamped by the server's clock. With LateClaims the claim is sent (a    *)
(* "claim" in flight: EvaluateGuard stamps it, LandRows lands it) and the *)
(* client waits on it; a publisher out of ids (the model's bound on the   *)
(* claims sent) stops. Mirrors capcat_proto::lease (lease.insert_claim).  *)
ClaimLease(p) ==
    LET l == pub[p]
    IN /\ l.pc = "lease_claim"
       /\ IF ~LateClaims
             THEN /\ AppendLease([term |-> l.term, lid |-> l.lid, holder |-> p,
                                  inc |-> l.inc, exp |-> now + Ttl])
                  /\ pub' = [pub EXCEPT ![p].pc = "lease_readback"]
                  /\ UNCHANGED <<inflight, nextId>>
          ELSE IF Fresh(1)
             THEN /\ inflight' = inflight \cup
                        {Claim(p, "claim", l.term, 0, 0, nextId)}
                  /\ pub' = [pub EXCEPT ![p].pc = "lease_claim_wait"]
                  /\ nextId' = nextId + 1
                  /\ UNCHANGED <<lease, usurped>>
          ELSE /\ pub' = [pub EXCEPT ![p].pc = "exhausted"]
               /\ UNCHANGED <<inflight, nextId, lease, usurped>>
       /\ UNCHANGED <<desc, now, claims, manifest, watermark, inventory,
                      rd, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, selfLockout>>

(* Acquire or renew, step 3: read the claims at the term back; the sole   *)
(* claimant holds the lease, anyone else abandons the term. It reads back *)
(* after a claim it was told failed (LateClaims) exactly as after one     *)
(* that succeeded: the read-back decides. The held row is now this claim *)
(* (its expiry, the latest of its lease id's rows read back, is what the  *)
(* fence names). The claim was stamped by the server at expiry - Ttl: if *)
(* that is past `unsettled`, no statement told Timeout can land any more *)
(* and the record is cleared. After an acquire the index pass allocates; *)
(* after a renewal the publish attempt goes on to its manifest, or,      *)
(* still unsettled, ends without sending anything (Unsettled: the pass    *)
(* failed). Mirrors capcat_proto::lease and capcat_proto::publish.        *)
ReadBackLease(p) ==
    LET l == pub[p]
        \* CLAIM_READ_BACK: rows at or above the term, and every live row of
        \* another lease; the seed's read-back saw the claimed term only.
        seen == IF Design \in {"OwnTermReadBack", "ContestedTermTakenAtOnce"}
                THEN AtTerm(l.term)
                ELSE {r \in lease : \/ r.term >= l.term
                                     \/ /\ r.lid # l.lid /\ r.exp > now
                                        /\ ~\E t \in lease : t.lid = r.lid /\ t.exp = 0}
        sole == /\ \E r \in seen : r.lid = l.lid
                /\ \A r \in seen : r.lid = l.lid
        \* capcat_proto takes the latest expiry among the rows of its lease id
        \* that the read-back returns. Without LateClaims those are its rows
        \* at the claimed term alone; with it, a late row of an earlier
        \* attempt at a higher term may be among them.
        exp == Max({r.exp : r \in {o \in seen : o.lid = l.lid}})
        settled == l.unsettled = 0 \/ exp - Ttl > l.unsettled
        held == [l EXCEPT !.retry = FALSE, !.exp = exp,
                          !.unsettled = IF settled THEN 0 ELSE l.unsettled]
    IN /\ l.pc = "lease_readback"
       /\ IF sole
             THEN \E next \in IF l.mode = "acquire" THEN {"alloc_head"}
                               ELSE IF settled THEN {"manifest"}
                               ELSE AfterFailedPass(p) :
                     pub' = [pub EXCEPT ![p] = [held EXCEPT
                                 !.pc = next,
                                 !.passes = IF l.mode = "renew" /\ ~settled
                                            THEN PassesAfter(p, next)
                                            ELSE @]]
             \* A refused read-back keeps its lease id: an abandoned acquire
             \* claims again under it (its abandoned row is its own, never
             \* held against it), and a renewal refused by a rival's live row
             \* has not lost the lease (capcat_proto's publish ends with a
             \* renewal error, and the next attempt renews under the same id).
             ELSE pub' = [pub EXCEPT ![p].pc = "idle", ![p].retry = TRUE]
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

(* Allocator, step 1: read the highest claimed version.                  *)
(* Mirrors capcat_proto::allocate.                                         *)
ReadVersionHead(p) ==
    LET seen == ClaimedHead
    IN /\ pub[p].pc = "alloc_head"
       /\ pub' = [pub EXCEPT ![p].pc = IF seen < MaxVersion /\ Fresh(1)
                                       THEN "alloc_claim" ELSE "exhausted",
                             ![p].vseen = seen]
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

(* Allocator, step 2: append a claim one above what was read. With       *)
(* LateClaims the claim is sent (a "vclaim" in flight, landed by          *)
(* LandRows) and the client waits on it. Mirrors capcat_proto::allocate   *)
(* (allocate.insert_claim; the jittered skip is not modelled, and every   *)
(* claim draws a fresh claim id where capcat_proto keeps one per          *)
(* allocation across its attempts).                                        *)
ClaimVersion(p) ==
    /\ pub[p].pc = "alloc_claim"
    /\ IF Fresh(1)
          THEN /\ IF LateClaims
                   THEN /\ inflight' = inflight \cup
                              {Claim(p, "vclaim", 0, pub[p].vseen + 1, nextId, 0)}
                        /\ UNCHANGED claims
                   ELSE /\ claims' = claims \cup {[v |-> pub[p].vseen + 1,
                                                   cid |-> nextId]}
                        /\ UNCHANGED inflight
               /\ pub' = [pub EXCEPT ![p].pc = IF LateClaims THEN "alloc_claim_wait"
                                               ELSE "alloc_readback",
                                     ![p].cid = nextId,
                                     ![p].v = pub[p].vseen + 1]
               /\ nextId' = nextId + 1
          ELSE /\ pub' = [pub EXCEPT ![p].pc = "exhausted"]
               /\ UNCHANGED <<claims, nextId, inflight>>
    /\ UNCHANGED <<desc, now, lease, manifest, watermark, inventory, rd,
                   crashes, foreign, foreignWm, reports, owners, fencedLanded, usurped,
                   selfLockout>>

(* Allocator, step 3: read the claims at V back; the sole claimant owns  *)
(* V, anyone else retries. Mirrors capcat_proto::allocate.                *)
ReadBackVersion(p) ==
    LET l == pub[p]
        sole == {c \in claims : c.v = l.v} = {[v |-> l.v, cid |-> l.cid]}
    IN /\ l.pc = "alloc_readback"
       /\ pub' = [pub EXCEPT ![p].pc =
                     IF ~sole THEN "alloc_head"
                     ELSE IF Design = "InventoryBeforePublish"
                          THEN "early_inventory" ELSE "renew"]
       /\ owners' = IF sole THEN owners \cup {[v |-> l.v, cid |-> l.cid]}
                    ELSE owners
       \* index.insert_descriptors: the pack's rows at V, inert until paired.
       /\ desc' = IF sole THEN desc \cup {[pack |-> p, v |-> l.v]} ELSE desc
       /\ UNCHANGED <<now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, reports,
                      fencedLanded, usurped, selfLockout>>

\* A guarded statement as sent: it names the row its client holds (rterm,
\* lid, rexp), has not started (phase "issued"; start is set when it
\* starts) and its client waits on it (attached).
Statement(p, kind, pid) ==
    [owner |-> p, inc |-> pub[p].inc, kind |-> kind, phase |-> "issued",
     v |-> pub[p].v, pid |-> pid, lid |-> pub[p].lid,
     rterm |-> pub[p].term, rexp |-> pub[p].exp,
     sent |-> now, start |-> now, attached |-> TRUE,
     pass |-> FALSE, lidOk |-> FALSE, fenceOk |-> FALSE, term |-> 0,
     cid |-> 0, qid |-> 0]

(* Publish, step 1: issue the manifest INSERT ... SELECT (one row per    *)
(* pack, this attempt's fresh publish_id) guarded by VERSION_BARRIER AND  *)
(* LEASE_FENCE. Mirrors capcat_proto::publish.                             *)
IssueManifest(p) ==
    /\ pub[p].pc = "manifest"
    /\ IF Fresh(1)
          THEN /\ inflight' = inflight \cup {Statement(p, "manifest", nextId)}
               /\ pub' = [pub EXCEPT ![p].pc = "manifest_wait",
                                     ![p].pid = nextId]
               /\ nextId' = nextId + 1
          ELSE /\ pub' = [pub EXCEPT ![p].pc = "exhausted"]
               /\ UNCHANGED <<inflight, nextId>>
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   crashes, foreign, foreignWm, reports, owners, fencedLanded, usurped,
                   selfLockout>>

(* Publish, step 2: issue the commit-row INSERT ... SELECT with the same *)
(* publish_id and the same guard. Mirrors capcat_proto::publish.           *)
IssueCommitRow(p) ==
    /\ pub[p].pc = "commit"
    /\ inflight' = inflight \cup {Statement(p, "commit", pub[p].pid)}
    /\ pub' = [pub EXCEPT ![p].pc = "commit_wait"]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* The engine starts a statement and evaluates its WHERE clause: the      *)
(* guards the statement's SQL carries, read at this instant. A statement  *)
(* may start at any time after its send, even after its client was told  *)
(* Timeout; its cap counts from this start. The two-subquery fence reads  *)
(* lease_id and expires_at_ns in two separate reads (two steps). A claim *)
(* (LateClaims) has no guard: it always passes, and its start is its      *)
(* server-clock stamp (a lease claim's expiry is start + Ttl), taken even *)
(* if its client gave up on it.                                            *)
(* Mirrors the simulated engine in model-check, which finds the canonical *)
(* fragments of capcat_proto's statements in their SQL text.              *)
EvaluateGuard(s) ==
    LET stamped == [s EXCEPT !.phase = "evaluated", !.start = now,
                             !.pass = TRUE, !.fenceOk = TRUE]
        barrier == ~HasBarrier(s.kind) \/ BarrierTrue(s.v)
        split == Design = "TwoSubqueryFence" /\ s.kind # "release"
        first == [s EXCEPT !.phase = "half", !.start = now,
                           !.lidOk = HasHead /\ Head.lid = s.lid,
                           !.fenceOk = FenceTrue(s.lid)]
        second == [s EXCEPT !.phase = "evaluated",
                            !.pass = barrier /\ s.lidOk /\ HasHead
                                     /\ Head.exp > now + Margin,
                            !.fenceOk = s.fenceOk /\ FenceTrue(s.lid)]
        whole == [s EXCEPT !.phase = "evaluated",
                           !.start = IF s.phase = "issued" THEN now ELSE s.start,
                           !.pass = barrier /\ (~HasFence(s.kind)
                                                \/ FencePasses(s))
                                    \* MANIFEST_COMPLETE on the commit row.
                                    /\ (s.kind # "commit"
                                        \/ \E m \in manifest :
                                               m.v = s.v /\ m.pid = s.pid),
                           !.fenceOk = FenceTrue(s.lid),
                           !.term = IF s.kind = "release"
                                    THEN HeadTerm + 1 ELSE 0]
        s2 == IF s.kind \in ClaimKinds THEN stamped
              ELSE IF split THEN (IF s.phase = "issued" THEN first ELSE second)
              ELSE whole
    IN /\ s \in inflight
       /\ s.phase # "evaluated"
       /\ s.kind = "release" => HeadTerm + 1 <= MaxTerm
       /\ inflight' = (inflight \ {s}) \cup {s2}
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, pub,
                      rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

\* What the owner learns when its statement completes or when it is told
\* Timeout (killed); a crashed incarnation, or a client that already gave
\* up on the statement, learns nothing. A Timeout leaves the statement's
\* effect unknown: it may land until the expiry of the row it named, which
\* the settle rule records in `unsettled`. A manifest or commit row told
\* Timeout fails the pass (capcat_proto::publish ends with the statement
\* error; the index pass fails); a release told Timeout keeps the lease.
\* A claim (LateClaims) is never killed; its client, told of its landing,
\* reads the claims back.
ClaimReadBack(kind) == IF kind = "claim" THEN "lease_readback"
                       ELSE "alloc_readback"
Complete(s, killed) ==
    LET p == s.owner
        l == pub[p]
        told == s.attached /\ l.inc = s.inc
    IN IF ~told THEN pub' = pub
       ELSE IF s.kind = "release"
       THEN pub' = [pub EXCEPT ![p].pc = "released",
                               ![p].lid = IF killed THEN l.lid ELSE NoLid,
                               ![p].unsettled = IF killed THEN Unsettle(p, s)
                                                ELSE l.unsettled]
       ELSE IF s.kind \in ClaimKinds
       THEN pub' = [pub EXCEPT ![p].pc = ClaimReadBack(s.kind)]
       ELSE IF killed
       THEN \E next \in AfterFailedPass(p) :
                pub' = [pub EXCEPT ![p].pc = next,
                                   ![p].passes = PassesAfter(p, next),
                                   ![p].unsettled = Unsettle(p, s)]
       ELSE pub' = [pub EXCEPT ![p].pc = IF s.kind = "manifest"
                                         THEN "commit" ELSE "readback"]

(* The engine lands an evaluated statement's rows (none if its guard was *)
(* false), possibly long after the evaluation: a claim (LateClaims) lands *)
(* its lease row (stamped at its start) or its version claim row, with or *)
(* without a client still waiting. Mirrors the simulated engine in        *)
(* model-check.                                                            *)
LandRows(s) ==
    /\ s \in inflight
    /\ s.phase = "evaluated"
    /\ inflight' = inflight \ {s}
    /\ manifest' = IF s.pass /\ s.kind = "manifest"
                   THEN manifest \cup {[v |-> s.v, pid |-> s.pid,
                                        pack |-> s.owner]}
                   ELSE manifest
    /\ watermark' = IF s.pass /\ s.kind = "commit"
                    THEN watermark \cup {[v |-> s.v, pid |-> s.pid]}
                    ELSE watermark
    /\ CASE s.pass /\ s.kind = "release" ->
              AppendLease([term |-> s.term, lid |-> s.lid, holder |-> s.owner,
                           inc |-> s.inc, exp |-> 0])
         []   s.kind = "claim" ->
              AppendLease([term |-> s.term, lid |-> s.lid, holder |-> s.owner,
                           inc |-> s.inc, exp |-> s.start + Ttl])
         []   OTHER -> UNCHANGED <<lease, usurped>>
    /\ claims' = IF s.kind = "vclaim" THEN claims \cup {[v |-> s.v, cid |-> s.cid]}
                 ELSE claims
    /\ fencedLanded' = (fencedLanded \/ (s.pass /\ ~s.fenceOk))
    /\ Complete(s, FALSE)
    /\ UNCHANGED <<desc, now, inventory, rd, nextId, crashes, foreign, foreignWm,
                   reports, owners, selfLockout>>

(* The server kills a started statement at its max_execution_time       *)
(* (start + cap): nothing lands and its client, if still waiting, sees a  *)
(* timeout. A statement not started by send + cap is given up by its      *)
(* client, which is told Timeout; the statement stays pending with no     *)
(* client and may still start. Mirrors the simulated engine and the       *)
(* driver's settle wait. A claim (LateClaims) has no cap: never killed.  *)
KillAtCap(s) ==
    /\ s \in inflight
    /\ s.kind \notin ClaimKinds
    /\ IF s.phase = "issued"
          THEN /\ s.attached /\ now >= s.sent + EffCap
               /\ inflight' = (inflight \ {s}) \cup {[s EXCEPT !.attached = FALSE]}
          ELSE /\ now >= s.start + EffCap
               /\ inflight' = inflight \ {s}
    /\ Complete(s, TRUE)
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* Publish, step 3: read back the commit rows at V and classify.         *)
(* Shipped: mine alone is Won, mine beside a foreign row is Conflict,     *)
(* mine absent is LostRace, or LeaseLost when the head is not this lease. *)
(* Mirrors capcat_proto::publish.                                          *)
ReadBackPublish(p) ==
    LET l == pub[p]
        atV == {w \in watermark : w.v = l.v}
        mine == [v |-> l.v, pid |-> l.pid] \in atV
        alien == \E w \in atV : w.pid # l.pid
        absent == IF HasHead /\ Head.lid = l.lid THEN "LostRace"
                  ELSE "LeaseLost"
        \* No version is left for another attempt (ReadVersionHead's bound).
        noVersionLeft == ClaimedHead >= MaxVersion
        outcome == CASE Design = "CountOnlyReadBack" ->
                            IF atV # {} THEN "Won" ELSE absent
                   []   Design = "PostWriteCheck" ->
                            IF mine /\ PublishedHead = l.v THEN "Won"
                            ELSE "LostRace"
                   []   OTHER ->
                            IF mine /\ ~alien THEN "Won"
                            ELSE IF mine THEN "Conflict" ELSE absent
    IN /\ l.pc = "readback"
       /\ reports' = reports \cup {[p |-> p, v |-> l.v, pid |-> l.pid,
                                    pack |-> p, outcome |-> outcome]}
       /\ IF outcome = "LostRace" /\ noVersionLeft
             THEN \E next \in AfterFailedPass(p) :
                      pub' = [pub EXCEPT ![p].pc = next,
                                         ![p].passes = PassesAfter(p, next)]
             ELSE pub' = [pub EXCEPT ![p].pc =
                     CASE outcome \in {"Won", "Conflict"} ->
                              IF Design = "InventoryBeforePublish"
                              THEN "done" ELSE "inventory"
                     []   outcome = "LostRace" -> "alloc_head"
                     []   OTHER -> "idle",
                             ![p].lid = IF outcome = "LeaseLost" THEN NoLid
                                        ELSE l.lid]
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, owners,
                      fencedLanded, usurped, selfLockout>>

(* The index pass records the pack in the inventory (the replay guard),  *)
(* after a publish that made it visible, or before the publish in the    *)
(* rejected design. Mirrors capcat_proto::index.                          *)
WriteInventory(p) ==
    /\ pub[p].pc \in {"inventory", "early_inventory"}
    /\ inventory' = inventory \cup {p}
    /\ pub' = [pub EXCEPT ![p].pc = IF pub[p].pc = "inventory" THEN "done"
                                    ELSE "renew"]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inflight, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* Orderly shutdown of a publisher whose work is done, or that stopped:  *)
(* the fenced release writes a tombstone at head.term + 1 only if the     *)
(* head is still exactly its row. The holder may be stale (its lease      *)
(* lapsed and another took over). Never sent while a statement told       *)
(* Timeout may still land (unsettled): the lease is left to expire, as a  *)
(* tombstone would let a successor take over at once. Mirrors             *)
(* capcat_proto::lease (release) and its driver.                          *)
IssueRelease(p) ==
    /\ pub[p].pc \in {"done", "exhausted", "shut_down"}
    /\ pub[p].lid # NoLid
    /\ pub[p].unsettled = 0
    /\ inflight' = inflight \cup {Statement(p, "release", 0)}
    /\ pub' = [pub EXCEPT ![p].pc = "release_wait"]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* A reader pins W = max(index_version) and remembers the snapshot's     *)
(* members. Mirrors capcat_proto::reader (pin W).                          *)
PinSnapshot(r) ==
    /\ ~rd[r].pinned
    /\ rd' = [rd EXCEPT ![r] = [pinned |-> TRUE, w |-> PublishedHead,
                                members |-> Members(PublishedHead),
                                reread |-> Members(PublishedHead),
                                rows |-> Resolved(PublishedHead),
                                rereadRows |-> Resolved(PublishedHead)]]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                   inflight, pub, nextId, crashes, foreign, foreignWm, reports, owners,
                   fencedLanded, usurped, selfLockout>>

(* The reader re-reads its pinned snapshot (the next page, a cursor).    *)
(* Mirrors capcat_proto::reader (membership pairing at pinned W).         *)
ReReadSnapshot(r) ==
    /\ rd[r].pinned
    /\ (rd[r].reread # Members(rd[r].w) \/ rd[r].rereadRows # Resolved(rd[r].w))
    /\ rd' = [rd EXCEPT ![r].reread = Members(rd[r].w),
                        ![r].rereadRows = Resolved(rd[r].w)]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                   inflight, pub, nextId, crashes, foreign, foreignWm, reports, owners,
                   fencedLanded, usurped, selfLockout>>

(* A publisher crashes, losing all local state, and restarts as a new    *)
(* incarnation; its statements in flight still run. Mirrors the model's  *)
(* crash of a capcat_proto::index driver.                                  *)
CrashRestart(p) ==
    /\ crashes < MaxCrashes
    /\ pub[p].pc \notin {"done", "released", "exhausted", "shut_down"}
    /\ crashes' = crashes + 1
    /\ pub' = [pub EXCEPT ![p] = LocalInit(p, crashes + 1)]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                   inflight, rd, nextId, foreign, foreignWm, reports, owners,
                   fencedLanded, usurped, selfLockout>>

(* LateClaims: the client of a claim in flight that has not landed stops *)
(* waiting for it (a transport timeout, a dropped connection) and is told *)
(* it failed. The claim stays in flight with no client and may still be   *)
(* stamped and land; the claim machine goes on to its read-back, which   *)
(* decides, exactly as after a claim that succeeded. Only a client still  *)
(* waiting gives up (a crashed incarnation's claim is already nobody's).  *)
(* Environment: the driver (not fair). Mirrors the model-check driver's   *)
(* give-up and capcat_proto::lease and capcat_proto::allocate, whose      *)
(* Insert state reads back on a failure as on rows.                       *)
AbandonStatement(s) ==
    /\ LateClaims
    /\ s \in inflight
    /\ s.kind \in ClaimKinds
    /\ s.attached
    /\ pub[s.owner].inc = s.inc
    /\ inflight' = (inflight \ {s}) \cup {[s EXCEPT !.attached = FALSE]}
    /\ pub' = [pub EXCEPT ![s.owner].pc = ClaimReadBack(s.kind)]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* An out-of-protocol writer (an operator's INSERT, a second build       *)
(* sharing the prefix) appends one manifest or commit row with its own    *)
(* publish_id. Environment only: no capcat-proto machine.                 *)
ForeignInsert ==
    /\ foreign < MaxForeign
    /\ Fresh(1)
    /\ \E v \in Versions :
          \/ /\ watermark' = watermark \cup {[v |-> v, pid |-> nextId]}
             /\ foreignWm' = TRUE
             /\ UNCHANGED manifest
          \/ \E k \in Packs :
                /\ manifest' = manifest \cup {[v |-> v, pid |-> nextId,
                                               pack |-> k]}
                /\ UNCHANGED <<watermark, foreignWm>>
    /\ foreign' = foreign + 1
    /\ nextId' = nextId + 1
    /\ UNCHANGED <<desc, now, claims, lease, inventory, inflight, pub, rd, crashes,
                   reports, owners, fencedLanded, usurped, selfLockout>>

-----------------------------------------------------------------------------
\* Publisher steps: the protocol's own client actions (fair in Spec).
PublisherStep(p) ==
    \/ ReadLeaseHead(p) \/ ClaimLease(p) \/ ReadBackLease(p)
    \/ ReadVersionHead(p) \/ ClaimVersion(p) \/ ReadBackVersion(p)
    \/ IssueManifest(p) \/ IssueCommitRow(p) \/ ReadBackPublish(p)
    \/ WriteInventory(p)

Next ==
    \/ Tick
    \/ \E p \in Publishers :
          \/ ReadLeaseHead(p) \/ ClaimLease(p) \/ ReadBackLease(p)
          \/ ReadVersionHead(p) \/ ClaimVersion(p) \/ ReadBackVersion(p)
          \/ IssueManifest(p) \/ IssueCommitRow(p) \/ ReadBackPublish(p)
          \/ WriteInventory(p) \/ IssueRelease(p) \/ CrashRestart(p)
    \/ \E s \in inflight : EvaluateGuard(s) \/ LandRows(s) \/ KillAtCap(s)
                            \/ AbandonStatement(s)
    \/ \E r \in Readers : PinSnapshot(r) \/ ReReadSnapshot(r)
    \/ ForeignInsert

\* The engine's statement steps, claims' included (fair in Spec);
\* AbandonStatement is the environment's choice, like a crash, and not fair.
EngineStep == \E s \in inflight : EvaluateGuard(s) \/ LandRows(s)
                                  \/ KillAtCap(s)

Spec == /\ Init /\ [][Next]_vars
        /\ \A p \in Publishers : WF_vars(PublisherStep(p))
        /\ WF_vars(EngineStep)
        /\ WF_vars(Tick)

-----------------------------------------------------------------------------
(* Once a reader has seen W, the packs admitted at or below W never      *)
(* change: neither now nor on its re-read. The promise is made to runs    *)
(* in which every commit row went through the fence: a commit row         *)
(* written outside the protocol can raise W while a fenced publish is     *)
(* between its guard and its rows, and nothing in the catalog can stop    *)
(* that (foreign manifest rows stay covered).                             *)
PinnedSnapshotNeverGrows ==
    \/ foreignWm
    \/ \A r \in Readers :
           rd[r].pinned => /\ Members(rd[r].w) = rd[r].members
                           /\ rd[r].reread = rd[r].members

(* Once a reader has seen W, what a read at W returns (each member's      *)
(* resolved row and its version) never changes and never exceeds W.     *)
PinnedReadsNeverChange ==
    \/ foreignWm
    \/ \A r \in Readers :
           rd[r].pinned => /\ Resolved(rd[r].w) = rd[r].rows
                           /\ rd[r].rereadRows = rd[r].rows
                           /\ \A x \in rd[r].rows : x.v <= rd[r].w

(* A statement whose lease was not the live head when its guard was read *)
(* lands no row.                                                           *)
FencedOutWritesNothing == ~fencedLanded

(* Won only when the attempt's commit row and its manifest row stand      *)
(* and pair; LostRace (and LeaseLost) only when nothing the attempt wrote *)
(* is visible.                                                              *)
ReportedMeansVisible ==
    \A r \in reports :
        /\ r.outcome = "Won" =>
               /\ [v |-> r.v, pid |-> r.pid] \in watermark
               /\ [v |-> r.v, pid |-> r.pid, pack |-> r.pack] \in manifest
        /\ r.outcome \in {"LostRace", "LeaseLost"} =>
               /\ [v |-> r.v, pid |-> r.pid] \notin watermark
               /\ ~\E m \in manifest :
                      /\ m.pid = r.pid
                      /\ \E w \in watermark : Pairs(m, w)

(* A pack reaches the inventory only after a publish that made it        *)
(* visible.                                                                 *)
InventoryOnlyAfterPublish == \A k \in inventory : Visible(k)

(* At most one publisher's lease passes the fence; no row ever lands     *)
(* above a live head of another lease id (so a release by a non-holder   *)
(* changes nothing); and a holder is never refused by its own live lease. *)
OneLiveLease ==
    /\ \A p, q \in Publishers :
           (p # q /\ pub[p].lid # NoLid /\ FenceTrue(pub[p].lid))
               => ~FenceTrue(pub[q].lid)
    /\ ~usurped
    /\ ~selfLockout

(* One claimant per allocated version.                                   *)
VersionsUnique == \A a, b \in owners : a.v = b.v => a.cid = b.cid

(* Liveness: a holder that keeps renewing eventually publishes: while it *)
(* holds a live lease it either makes its pack visible, loses the lease, *)
(* or stops: it runs out of the model's version, term or id bounds, or   *)
(* shuts down after a failed pass while the clock runs (and then perhaps *)
(* releases; a release refused or told Timeout leaves the lease to       *)
(* expire, which the model's bounded clock may never reach).              *)
\* A contested head term holds no lease for anyone: its claimants keep
\* their ids (a refused acquire presents its id again) but wait it out.
HoldsLive(p) == pub[p].lid # NoLid /\ FenceTrue(pub[p].lid) /\ ~Contested
\* A shutdown after a failed pass is excused only while the clock runs: a
\* statement may then time out, and the pass fail, through nobody's fault.
\* On a frozen clock (MaxTime = 0) nothing times out or expires, so a live,
\* uncontested holder's pass fails only by the design's own doing (the
\* rejected CapAtLeastTtl: every guarded statement fenced out, every
\* attempt LostRace), as in the Rust model's liveness check.
Stopped(p) == \/ pub[p].pc \in {"exhausted", "release_wait", "released"}
              \/ pub[p].pc = "shut_down" /\ MaxTime > 0
HolderEventuallyPublishes ==
    \A p \in Publishers :
        HoldsLive(p) ~> (Visible(p) \/ ~HoldsLive(p) \/ Stopped(p))
=============================================================================
