---------------------------- MODULE Replay ----------------------------------
(***************************************************************************)
(* Replays a rejected design's counterexample through Publication's own    *)
(* Next, for the traces too deep for one TLC worker's breadth-first search *)
(* to reach (spec/README.md, "Replays"). Each step of Script names the one *)
(* component that moves: a publisher ("p1" is A, "p2" is B), the engine    *)
(* ("e": a statement in flight is evaluated, landed or killed), the clock  *)
(* ("t") or the reader ("r"). Every step is still a step of Next, so a     *)
(* violation found here is one of Publication. Run each cfg of this        *)
(* directory from spec/ with `-DTLA-Library=.` (so that EXTENDS finds      *)
(* Publication.tla); a `<Design>.Shipped.cfg` runs the same script on the  *)
(* shipped design, which must not be violated.                             *)
(***************************************************************************)
EXTENDS Publication, Sequences

CONSTANTS A, B, Script
VARIABLE k

\* LeaseIdFence (48 states): the trace in spec/README.md, "Late starts".
LeaseIdFenceScript ==
    << "p2","p1","p1","p1","p1","p1","p1","p1","p1","p1",
       "p2","p2","p1","e","e","p1","t","e","p1","p1",
       "p1","p1","p1","p1","p1","t","t","t","p2","p2",
       "p2","p2","p2","p2","p2","p2","p2","p2","e","e",
       "p2","e","p1","e","e","r","e" >>

\* ContestedTermTakenAtOnce (38 states): p1 holds term 1, allocates v1,
\* renews at term 2 once term 1 expired and reads itself back as sole; its
\* commit row is evaluated; p2's claim at term 2 (read while term 1 lay
\* expired) lands beside p1's; p2 reads back, is refused, takes the
\* contested term at once, allocates v2, renews and publishes; the reader
\* pins W = 2; p1's v1 commit row lands below it.
ContestedTermTakenAtOnceScript ==
    << "p1","p1","p1","p1","p1","p1","t","t","t","p1",
       "p2","p1","p1","p1","e","e","p1","e","p2","p2",
       "p2","p2","p2","p2","p2","p2","p2","p2","p2","p2",
       "e","e","p2","e","e","r","e" >>

\* UnpublishedRowsResolve (39 states): p1's v1 commit row is told Timeout
\* before it starts; p1's next pass claims v2; the abandoned v1 row starts
\* and lands; the clock passes p1's expiry; p2 takes over and publishes v3;
\* the reader pins W = 3; p1 reads its v2 claim back and writes its
\* descriptor row at v2, unpublished and below W, which the rejected row
\* bound lets the pinned read resolve.
UnpublishedRowsResolveScript ==
    << "p1","p1","p1","p1","p1","p1","p1","p1","p1","p1",
       "e","e","p1","t","e","p1","p1","e","e","t",
       "t","p2","p2","p2","p2","p2","p2","p2","p2","p2",
       "p2","e","e","p2","e","e","r","p1" >>

\* A statement was sent: the set of statements in flight grew.
Grows == Cardinality(inflight') > Cardinality(inflight)

Moves(c) ==
    CASE c = "t" -> now' = now + 1
    []   c = "r" -> rd' # rd
    []   c = "e" -> /\ now' = now /\ rd' = rd /\ inflight' # inflight /\ ~Grows
    []   OTHER   -> LET q == IF c = "p1" THEN A ELSE B IN
                    /\ now' = now /\ rd' = rd /\ (inflight' = inflight \/ Grows)
                    /\ pub'[q] # pub[q]
                    /\ \A o \in Publishers \ {q} : pub'[o] = pub[o]

GInit == Init /\ k = 1
GNext == k <= Len(Script) /\ Next /\ Moves(Script[k]) /\ k' = k + 1
GSpec == GInit /\ [][GNext]_<<vars, k>>
=============================================================================
