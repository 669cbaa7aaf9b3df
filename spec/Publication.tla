---------------------------- MODULE Publication ----------------------------
(***************************************************************************)
(* Capcat's catalog publication protocol over append-only ClickHouse      *)
(* tables: the sole-claimant version allocator, the publisher lease with  *)
(* its fence evaluated inside the INSERT that makes rows visible, the     *)
(* per-attempt publish_id read back to classify the outcome, membership   *)
(* by (index_version, publish_id) pairing between the snapshot manifest   *)
(* and the watermark log, the indexer's inventory, and readers that pin   *)
(* a watermark W and re-read.                                             *)
(*                                                                         *)
(* Names: every action in Next and every invariant and property listed in *)
(* Publication.cfg is spelled exactly as in model-check/src/names.rs      *)
(* (`publication::ACTIONS`, `INVARIANTS`, `PROPERTIES`, `VARIANTS`);      *)
(* `cargo run -p xtask -- check-specs` fails when they drift apart.       *)
(*                                                                         *)
(* Modelling choices, said plainly (see spec/README.md):                  *)
(*  - A conditional INSERT ... SELECT is two steps: EvaluateGuard reads   *)
(*    the WHERE clause, LandRows makes its rows visible later, and every  *)
(*    other actor may act in between. A statement stays in flight until  *)
(*    its execution cap (start + Cap), where KillAtCap may end it with    *)
(*    nothing landed.                                                      *)
(*  - Unguarded single-row statements (claims, reads) are atomic steps.   *)
(*  - The server clock is free: Tick may happen between any two steps,   *)
(*    including between a renewal's claim and its read-back and before    *)
(*    each guarded statement, so a client may stall for any time.         *)
(*  - LEASE_FENCE asks for the head to outlive now plus the cap (the      *)
(*    margin), so a statement that passes it lands before the lease       *)
(*    expires; the claim read-back refuses while any other lease is live. *)
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
    Design        \* "Shipped" or the rejected design under test

Designs == {"Shipped", "BarrierOnly", "PostWriteCheck", "TwoSubqueryFence",
            "CountOnlyReadBack", "MembershipOnVersionAlone",
            "UnfencedRelease", "FreshLeaseIdOnReacquire", "NoExecutionCap",
            "CapAtLeastTtl", "InventoryBeforePublish",
            "ContestedTermTakenAtOnce", "MarginlessFence", "OwnTermReadBack",
            "RowsAboveWatermark"}

ASSUME /\ Design \in Designs
       /\ Ttl \in Nat /\ Cap \in Nat /\ MaxTime \in Nat
       /\ 1 <= Cap /\ 2 * Cap < Ttl
       /\ MaxVersion \in Nat /\ MaxTerm \in Nat /\ MaxId \in Nat
       /\ MaxCrashes \in Nat /\ MaxForeign \in Nat
       /\ Publishers \cap Readers = {}

VARIABLES
    now,          \* the server clock (toUnixTimestamp64Nano(now64(9)))
    claims,       \* {p}_version_claims: [v, cid]
    lease,        \* {p}_publisher_lease: [term, lid, holder, inc, exp]
    manifest,     \* {p}_snapshot_manifest: [v, pid, pack]
    watermark,    \* {p}_index_watermark: [v, pid]
    inventory,    \* {p}_pack_inventory_raw: packs
    desc,         \* {p}_capture_raw, projected: [pack, v]
    inflight,     \* guarded statements issued and not yet completed
    pub,          \* each publisher's local state (lost on a crash)
    rd,           \* each reader's pinned snapshot
    nextId,       \* the next fresh id
    crashes,      \* crashes so far
    foreign,      \* out-of-protocol rows so far
    foreignWm,    \* an out-of-protocol watermark row was written
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
Kinds == {"manifest", "watermark", "release"}
Outcomes == {"Won", "LostRace", "Conflict", "LeaseLost"}
Pcs == {"idle", "lease_claim", "lease_readback", "alloc_head", "alloc_claim",
        "alloc_readback", "early_inventory", "renew", "manifest",
        "manifest_wait", "watermark", "watermark_wait", "readback",
        "inventory", "done", "release_wait", "released", "exhausted"}
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
Contested == Cardinality(AtTerm(HeadTerm)) > 1
HeadLive == HasHead /\ Head.exp > now
\* A term holds a lease while any claim at it is live. A contested term
\* holds no lease for anyone, but it is taken over only once every claim
\* at it has expired: a claimant that read itself back as sole before a
\* late rival claim landed may still have a statement in flight.
TermLive == \E r \in AtTerm(HeadTerm) : r.exp > now
\* Ground truth: the head is this lease and has not expired.
FenceTrue(lid) == HeadLive /\ Head.lid = lid
\* capcat_proto's LEASE_FENCE: the head is this lease and outlives now plus
\* the margin (the cap; the model's engine kills exactly at the cap). The
\* rejected MarginlessFence asks only that it be live now.
Margin == CASE Design = "MarginlessFence" -> 0
          []   Design = "CapAtLeastTtl"   -> Ttl
          []   OTHER                      -> Cap
FencePasses(lid) == HasHead /\ Head.lid = lid /\ Head.exp > now + Margin
\* capcat_proto's VERSION_BARRIER: ifNull(max(index_version), 0) < V.
MaxWatermark == Max({w.v : w \in watermark})
BarrierTrue(v) == MaxWatermark < v

HasBarrier(kind) == kind \in {"manifest", "watermark"}
                    /\ Design # "PostWriteCheck"
HasFence(kind) ==
    \/ kind \in {"manifest", "watermark"}
       /\ Design \notin {"BarrierOnly", "PostWriteCheck"}
    \/ kind = "release" /\ Design # "UnfencedRelease"

\* A manifest row is admitted when a watermark row pairs with it at or
\* below W: on (index_version, publish_id), or on the version alone in the
\* rejected design.
Pairs(m, w) == /\ m.v = w.v
               /\ (Design = "MembershipOnVersionAlone" \/ m.pid = w.pid)
Members(W) == {m.pack : m \in {m2 \in manifest :
                   \E w \in watermark : w.v <= W /\ Pairs(m2, w)}}
Visible(pack) == pack \in Members(MaxWatermark)
\* What a pinned read at W returns: per member pack, the version of the
\* descriptor row argMax resolves to, among rows at or below W (any row in
\* the rejected RowsAboveWatermark).
RowBound(v, W) == Design = "RowsAboveWatermark" \/ v <= W
Resolved(W) == {[pack |-> k,
                 v |-> Max({d.v : d \in {e \in desc : e.pack = k /\ RowBound(e.v, W)}})] :
                k \in Members(W)}

Fresh(n) == nextId + n <= MaxId + 1

LocalInit(p, inc) == [pc |-> IF p \in inventory THEN "done" ELSE "idle",
                      mode |-> "acquire",
                      lid |-> NoLid, term |-> 0, vseen |-> 0, cid |-> 0,
                      v |-> 0, pid |-> 0, inc |-> inc, retry |-> FALSE]

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
           /\ s.lid \in Ids /\ s.start \in Times
           /\ s.pass \in BOOLEAN /\ s.lidOk \in BOOLEAN
           /\ s.fenceOk \in BOOLEAN /\ s.term \in 0..MaxTerm
    /\ \A p \in Publishers :
           /\ pub[p].pc \in Pcs /\ pub[p].mode \in Modes
           /\ pub[p].lid \in {NoLid} \cup Ids
           /\ pub[p].term \in 0..MaxTerm /\ pub[p].vseen \in 0..MaxVersion
           /\ pub[p].cid \in 0..MaxId /\ pub[p].v \in 0..MaxVersion
           /\ pub[p].pid \in 0..MaxId /\ pub[p].inc \in 0..MaxCrashes
           /\ pub[p].retry \in BOOLEAN
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
Tick ==
    /\ now < MaxTime
    /\ \A s \in inflight : now < s.start + EffCap
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
        ours == HasHead /\ Head.lid = lid /\ ~Contested
        takeable == IF Design = "ContestedTermTakenAtOnce"
                    THEN ~HasHead \/ ~HeadLive \/ Contested
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
                        ELSE pub' = [pub EXCEPT ![p].pc = lost,
                                                ![p].lid = NoLid]
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

(* Acquire or renew, step 2: append the claim row at the chosen term,     *)
(* stamped by the server's clock. Mirrors capcat_proto::lease.            *)
ClaimLease(p) ==
    LET l == pub[p]
    IN /\ l.pc = "lease_claim"
       /\ AppendLease([term |-> l.term, lid |-> l.lid, holder |-> p,
                       inc |-> l.inc, exp |-> now + Ttl])
       /\ pub' = [pub EXCEPT ![p].pc = "lease_readback"]
       /\ UNCHANGED <<desc, now, claims, manifest, watermark, inventory, inflight,
                      rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, selfLockout>>

(* Acquire or renew, step 3: read the claims at the term back; the sole   *)
(* claimant holds the lease, anyone else abandons the term. After an      *)
(* acquire the index pass allocates; after a renewal the publish attempt *)
(* goes on to its manifest. Mirrors capcat_proto::lease.                  *)
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
    IN /\ l.pc = "lease_readback"
       /\ pub' = IF sole
                 THEN [pub EXCEPT ![p].pc = IF l.mode = "renew" THEN "manifest"
                                            ELSE "alloc_head",
                                  ![p].retry = FALSE]
                 \* A refused read-back keeps its lease id: an abandoned
                 \* acquire claims again under it (its abandoned row is its
                 \* own, never held against it), and a renewal refused by a
                 \* rival's live row has not lost the lease (capcat_proto's
                 \* publish ends with a renewal error, and the next attempt
                 \* renews under the same id).
                 ELSE [pub EXCEPT ![p].pc = "idle", ![p].retry = TRUE]
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

(* Allocator, step 1: read the highest claimed version.                  *)
(* Mirrors capcat_proto::allocate.                                         *)
ReadVersionHead(p) ==
    LET seen == Max({c.v : c \in claims})
    IN /\ pub[p].pc = "alloc_head"
       /\ pub' = [pub EXCEPT ![p].pc = IF seen < MaxVersion /\ Fresh(1)
                                       THEN "alloc_claim" ELSE "exhausted",
                             ![p].vseen = seen]
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                      inflight, rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

(* Allocator, step 2: append a claim one above what was read.            *)
(* Mirrors capcat_proto::allocate (the jittered skip is not modelled).    *)
ClaimVersion(p) ==
    /\ pub[p].pc = "alloc_claim"
    /\ IF Fresh(1)
          THEN /\ claims' = claims \cup {[v |-> pub[p].vseen + 1,
                                          cid |-> nextId]}
               /\ pub' = [pub EXCEPT ![p].pc = "alloc_readback",
                                     ![p].cid = nextId,
                                     ![p].v = pub[p].vseen + 1]
               /\ nextId' = nextId + 1
          ELSE /\ pub' = [pub EXCEPT ![p].pc = "exhausted"]
               /\ UNCHANGED <<claims, nextId>>
    /\ UNCHANGED <<desc, now, lease, manifest, watermark, inventory, inflight, rd,
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

Statement(p, kind, pid) ==
    [owner |-> p, inc |-> pub[p].inc, kind |-> kind, phase |-> "issued",
     v |-> pub[p].v, pid |-> pid, lid |-> pub[p].lid, start |-> now,
     pass |-> FALSE, lidOk |-> FALSE, fenceOk |-> FALSE, term |-> 0]

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

(* Publish, step 2: issue the watermark INSERT ... SELECT with the same  *)
(* publish_id and the same guard. Mirrors capcat_proto::publish.           *)
IssueWatermark(p) ==
    /\ pub[p].pc = "watermark"
    /\ inflight' = inflight \cup {Statement(p, "watermark", pub[p].pid)}
    /\ pub' = [pub EXCEPT ![p].pc = "watermark_wait"]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* The engine evaluates a statement's WHERE clause: the guards the        *)
(* statement's SQL carries, read at this instant. The two-subquery fence  *)
(* reads lease_id and expires_at_ns in two separate reads (two steps).    *)
(* Mirrors the simulated engine in model-check, which finds the canonical *)
(* fragments of capcat_proto's statements in their SQL text.              *)
EvaluateGuard(s) ==
    LET barrier == ~HasBarrier(s.kind) \/ BarrierTrue(s.v)
        split == Design = "TwoSubqueryFence" /\ s.kind # "release"
        first == [s EXCEPT !.phase = "half",
                           !.lidOk = HasHead /\ Head.lid = s.lid,
                           !.fenceOk = FenceTrue(s.lid)]
        second == [s EXCEPT !.phase = "evaluated",
                            !.pass = barrier /\ s.lidOk /\ HasHead
                                     /\ Head.exp > now + Margin,
                            !.fenceOk = s.fenceOk /\ FenceTrue(s.lid)]
        whole == [s EXCEPT !.phase = "evaluated",
                           !.pass = barrier /\ (~HasFence(s.kind)
                                                \/ FencePasses(s.lid))
                                    \* MANIFEST_COMPLETE on the watermark.
                                    /\ (s.kind # "watermark"
                                        \/ \E m \in manifest :
                                               m.v = s.v /\ m.pid = s.pid),
                           !.fenceOk = FenceTrue(s.lid),
                           !.term = IF s.kind = "release"
                                    THEN HeadTerm + 1 ELSE 0]
        s2 == IF split THEN (IF s.phase = "issued" THEN first ELSE second)
              ELSE whole
    IN /\ s \in inflight
       /\ s.phase # "evaluated"
       /\ s.kind = "release" => HeadTerm + 1 <= MaxTerm
       /\ inflight' = (inflight \ {s}) \cup {s2}
       /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, pub,
                      rd, nextId, crashes, foreign, foreignWm, reports, owners,
                      fencedLanded, usurped, selfLockout>>

\* What the owner learns when its statement completes or is killed; a
\* crashed incarnation learns nothing.
Complete(s, killed) ==
    LET p == s.owner
        next == CASE s.kind = "manifest" /\ killed  -> "idle"
                []   s.kind = "manifest" /\ ~killed -> "watermark"
                []   s.kind = "watermark"          -> "readback"
                []   s.kind = "release"            -> "released"
    IN pub' = IF pub[p].inc = s.inc
              THEN [pub EXCEPT ![p].pc = next,
                               ![p].lid = IF s.kind = "release" /\ ~killed
                                          THEN NoLid ELSE pub[p].lid]
              ELSE pub

(* The engine lands an evaluated statement's rows (none if its guard was *)
(* false), possibly long after the evaluation. Mirrors the simulated      *)
(* engine in model-check.                                                  *)
LandRows(s) ==
    /\ s \in inflight
    /\ s.phase = "evaluated"
    /\ inflight' = inflight \ {s}
    /\ manifest' = IF s.pass /\ s.kind = "manifest"
                   THEN manifest \cup {[v |-> s.v, pid |-> s.pid,
                                        pack |-> s.owner]}
                   ELSE manifest
    /\ watermark' = IF s.pass /\ s.kind = "watermark"
                    THEN watermark \cup {[v |-> s.v, pid |-> s.pid]}
                    ELSE watermark
    /\ IF s.pass /\ s.kind = "release"
          THEN AppendLease([term |-> s.term, lid |-> s.lid, holder |-> s.owner,
                            inc |-> s.inc, exp |-> 0])
          ELSE UNCHANGED <<lease, usurped>>
    /\ fencedLanded' = (fencedLanded \/ (s.pass /\ ~s.fenceOk))
    /\ Complete(s, FALSE)
    /\ UNCHANGED <<desc, now, claims, inventory, rd, nextId, crashes, foreign, foreignWm,
                   reports, owners, selfLockout>>

(* The server kills a statement at its max_execution_time: nothing lands *)
(* and the client sees a timeout. Mirrors the simulated engine.           *)
KillAtCap(s) ==
    /\ s \in inflight
    /\ now >= s.start + EffCap
    /\ inflight' = inflight \ {s}
    /\ Complete(s, TRUE)
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* Publish, step 3: read back the watermark rows at V and classify.      *)
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
        outcome == CASE Design = "CountOnlyReadBack" ->
                            IF atV # {} THEN "Won" ELSE absent
                   []   Design = "PostWriteCheck" ->
                            IF mine /\ MaxWatermark = l.v THEN "Won"
                            ELSE "LostRace"
                   []   OTHER ->
                            IF mine /\ ~alien THEN "Won"
                            ELSE IF mine THEN "Conflict" ELSE absent
    IN /\ l.pc = "readback"
       /\ reports' = reports \cup {[p |-> p, v |-> l.v, pid |-> l.pid,
                                    pack |-> p, outcome |-> outcome]}
       /\ pub' = [pub EXCEPT ![p].pc =
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

(* Orderly shutdown of a publisher whose work is done: the fenced        *)
(* release writes a tombstone at head.term + 1 only if the head is still *)
(* its own lease. The holder may be stale (its lease lapsed and another   *)
(* took over). Mirrors capcat_proto::lease (release).                     *)
IssueRelease(p) ==
    /\ pub[p].pc = "done"
    /\ pub[p].lid # NoLid
    /\ inflight' = inflight \cup {Statement(p, "release", 0)}
    /\ pub' = [pub EXCEPT ![p].pc = "release_wait"]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory, rd,
                   nextId, crashes, foreign, foreignWm, reports, owners, fencedLanded,
                   usurped, selfLockout>>

(* A reader pins W = max(index_version) and remembers the snapshot's     *)
(* members. Mirrors capcat_proto::reader (pin W).                          *)
PinWatermark(r) ==
    /\ ~rd[r].pinned
    /\ rd' = [rd EXCEPT ![r] = [pinned |-> TRUE, w |-> MaxWatermark,
                                members |-> Members(MaxWatermark),
                                reread |-> Members(MaxWatermark),
                                rows |-> Resolved(MaxWatermark),
                                rereadRows |-> Resolved(MaxWatermark)]]
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
    /\ pub[p].pc \notin {"done", "released", "exhausted"}
    /\ crashes' = crashes + 1
    /\ pub' = [pub EXCEPT ![p] = LocalInit(p, crashes + 1)]
    /\ UNCHANGED <<desc, now, claims, lease, manifest, watermark, inventory,
                   inflight, rd, nextId, foreign, foreignWm, reports, owners,
                   fencedLanded, usurped, selfLockout>>

(* An out-of-protocol writer (an operator's INSERT, a second build       *)
(* sharing the prefix) appends one manifest or watermark row with its own *)
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
    \/ IssueManifest(p) \/ IssueWatermark(p) \/ ReadBackPublish(p)
    \/ WriteInventory(p)

Next ==
    \/ Tick
    \/ \E p \in Publishers :
          \/ ReadLeaseHead(p) \/ ClaimLease(p) \/ ReadBackLease(p)
          \/ ReadVersionHead(p) \/ ClaimVersion(p) \/ ReadBackVersion(p)
          \/ IssueManifest(p) \/ IssueWatermark(p) \/ ReadBackPublish(p)
          \/ WriteInventory(p) \/ IssueRelease(p) \/ CrashRestart(p)
    \/ \E s \in inflight : EvaluateGuard(s) \/ LandRows(s) \/ KillAtCap(s)
    \/ \E r \in Readers : PinWatermark(r) \/ ReReadSnapshot(r)
    \/ ForeignInsert

EngineStep == \E s \in inflight : EvaluateGuard(s) \/ LandRows(s)
                                  \/ KillAtCap(s)

Spec == /\ Init /\ [][Next]_vars
        /\ \A p \in Publishers : WF_vars(PublisherStep(p))
        /\ WF_vars(EngineStep)
        /\ WF_vars(Tick)

-----------------------------------------------------------------------------
(* Once a reader has seen W, the packs admitted at or below W never      *)
(* change: neither now nor on its re-read. The promise is made to runs    *)
(* in which every watermark row went through the fence: a watermark row   *)
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

(* Won only when the attempt's watermark row and its manifest row stand   *)
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
(* or runs out of the model's version bound.                              *)
HoldsLive(p) == pub[p].lid # NoLid /\ FenceTrue(pub[p].lid)
HolderEventuallyPublishes ==
    \A p \in Publishers :
        HoldsLive(p) ~> (Visible(p) \/ ~HoldsLive(p)
                         \/ pub[p].pc = "exhausted")
=============================================================================
