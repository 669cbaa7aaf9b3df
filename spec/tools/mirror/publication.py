"""A hand transliteration of spec/Publication.tla into a breadth-first search.

TLC cannot be installed here (see spec/README.md), so this script checked the
logic of the spec while it was written: that the shipped design keeps every
safety invariant and that each rejected design breaks one. It is NOT the spec
and NOT the project's model checker (that is model-check/, which drives the
real capcat-proto machines); it is a copy of the spec's actions and can
drift from them. Keep it in step with Publication.tla or delete it.

usage: python3 publication.py DESIGN [MAX_CRASHES [MAX_FOREIGN [STATE_LIMIT]]]
The other constants are Publication.cfg's.
"""
import sys, collections
from dataclasses import dataclass, replace

DESIGN = sys.argv[1] if len(sys.argv) > 1 else "Shipped"
P = ("p1", "p2"); R = ("r1",)
Ttl, Cap, MaxTime, MaxVersion, MaxTerm, MaxId = 3, 1, 3, 3, 4, 10
MaxCrashes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
MaxForeign = int(sys.argv[3]) if len(sys.argv) > 3 else 1
LIMIT = int(sys.argv[4]) if len(sys.argv) > 4 else 10**9
NoLid = 0

@dataclass(frozen=True)
class Pub:
    pc: str = "idle"; mode: str = "acquire"; lid: int = 0; term: int = 0; vseen: int = 0
    cid: int = 0; v: int = 0; pid: int = 0; inc: int = 0

@dataclass(frozen=True)
class Stmt:
    owner: str; inc: int; kind: str; phase: str; v: int; pid: int; lid: int; start: int
    pass_: bool = False; lidOk: bool = False; fenceOk: bool = False; term: int = 0

@dataclass(frozen=True)
class Rd:
    pinned: bool = False; w: int = 0; members: frozenset = frozenset(); reread: frozenset = frozenset()

@dataclass(frozen=True)
class S:
    now: int; claims: frozenset; lease: frozenset; manifest: frozenset; watermark: frozenset
    inventory: frozenset; inflight: frozenset; pub: tuple; rd: tuple; nextId: int; crashes: int
    foreign: int; foreignWm: bool; reports: frozenset; owners: frozenset; fencedLanded: bool; usurped: bool; selfLockout: bool

def EffCap():
    return MaxTime + 1 if DESIGN == "NoExecutionCap" else (Ttl if DESIGN == "CapAtLeastTtl" else Cap)

def head_term(s): return max((r[0] for r in s.lease), default=0)
def at_term(s, t): return [r for r in s.lease if r[0] == t]
def head(s):
    rows = at_term(s, head_term(s)); return max(rows, key=lambda r: r[1]) if rows else None
def contested(s): return len(at_term(s, head_term(s))) > 1
def head_live(s):
    h = head(s); return h is not None and h[4] > s.now
def term_live(s): return any(r[4] > s.now for r in at_term(s, head_term(s)))
def fence(s, lid): return head_live(s) and head(s)[1] == lid
def published_head(s): return max((w[0] for w in s.watermark), default=0)
def has_barrier(k): return k in ("manifest", "commit") and DESIGN != "PostWriteCheck"
def has_fence(k):
    return (k in ("manifest", "commit") and DESIGN not in ("BarrierOnly", "PostWriteCheck")) or (k == "release" and DESIGN != "UnfencedRelease")
def pairs(m, w): return m[0] == w[0] and (DESIGN == "MembershipOnVersionAlone" or m[1] == w[1])
def members(s, W): return frozenset(m[2] for m in s.manifest if any(w[0] <= W and pairs(m, w) for w in s.watermark))
def visible(s, k): return k in members(s, published_head(s))
def fresh(s, n): return s.nextId + n <= MaxId + 1
def local_init(s_inv, p, inc): return Pub(pc="done" if p in s_inv else "idle", inc=inc)
def prompt(l): return (l.pc == "lease_readback" and l.mode == "renew") or l.pc in ("manifest", "commit")
def setpub(s, i, **kw):
    pub = list(s.pub); pub[i] = replace(pub[i], **kw); return tuple(pub)

def append_lease(s, row):
    h = head(s)
    us = s.usurped or (head_live(s) and not contested(s) and row[0] > head_term(s) and (row[2], row[3]) != (h[2], h[3]))
    return dict(lease=s.lease | {row}, usurped=us)

def complete(s, st, killed):
    i = P.index(st.owner); l = s.pub[i]
    if l.inc != st.inc: return s.pub
    if st.kind == "manifest": nxt = "idle" if killed else "commit"
    elif st.kind == "commit": nxt = "readback"
    else: nxt = "released"
    lid = NoLid if (st.kind == "release" and not killed) else l.lid
    return setpub(s, i, pc=nxt, lid=lid)

def succ(s):
    out = []
    # Tick
    if s.now < MaxTime and all(not prompt(l) for l in s.pub) and all(s.now < st.start + EffCap() for st in s.inflight):
        out.append(("Tick", replace(s, now=s.now + 1)))
    for i, p in enumerate(P):
        l = s.pub[i]
        # ReadLeaseHead
        if l.pc in ("idle", "renew"):
            mode = "renew" if l.pc == "renew" else "acquire"
            fr = l.lid == NoLid or (mode == "acquire" and DESIGN == "FreshLeaseIdOnReacquire")
            lid = s.nextId if fr else l.lid
            has = bool(s.lease)
            nxt = head_term(s) + 1 if has else 1
            h = head(s)
            ours = has and h[1] == lid and not contested(s)
            if DESIGN == "ContestedTermTakenAtOnce": takeable = (not has) or (not head_live(s)) or contested(s)
            else: takeable = (not has) or (not term_live(s))
            claim = ours if mode == "renew" else (ours or takeable)
            ownLive = head_live(s) and not contested(s) and h[2] == p and h[3] == l.inc
            lost = "idle" if mode == "renew" else l.pc
            if nxt > MaxTerm or (fr and not fresh(s, 1)):
                out.append(("ReadLeaseHead", replace(s, pub=setpub(s, i, pc="exhausted"))))
            elif claim or l.lid != NoLid or ownLive or mode == "renew":
                pub = setpub(s, i, pc="lease_claim", mode=mode, lid=lid, term=nxt) if claim else setpub(s, i, pc=lost, lid=NoLid)
                out.append(("ReadLeaseHead", replace(s, pub=pub, nextId=s.nextId + 1 if fr else s.nextId,
                                                     selfLockout=s.selfLockout or ((not claim) and ownLive))))
        if l.pc == "lease_claim":
            d = append_lease(s, (l.term, l.lid, p, l.inc, s.now + Ttl))
            out.append(("ClaimLease", replace(s, pub=setpub(s, i, pc="lease_readback"), **d)))
        if l.pc == "lease_readback":
            rows = at_term(s, l.term); sole = len(rows) == 1 and rows[0][1] == l.lid
            pub = setpub(s, i, pc=("manifest" if l.mode == "renew" else "alloc_head")) if sole else setpub(s, i, pc="idle", lid=NoLid)
            out.append(("ReadBackLease", replace(s, pub=pub)))
        if l.pc == "alloc_head":
            seen = max((c[0] for c in s.claims), default=0)
            out.append(("ReadVersionHead", replace(s, pub=setpub(s, i, pc="alloc_claim" if seen < MaxVersion and fresh(s, 1) else "exhausted", vseen=seen))))
        if l.pc == "alloc_claim":
            if fresh(s, 1):
                out.append(("ClaimVersion", replace(s, claims=s.claims | {(l.vseen + 1, s.nextId)}, pub=setpub(s, i, pc="alloc_readback", cid=s.nextId, v=l.vseen + 1), nextId=s.nextId + 1)))
            else:
                out.append(("ClaimVersion", replace(s, pub=setpub(s, i, pc="exhausted"))))
        if l.pc == "alloc_readback":
            sole = {c for c in s.claims if c[0] == l.v} == {(l.v, l.cid)}
            pc = "alloc_head" if not sole else ("early_inventory" if DESIGN == "InventoryBeforePublish" else "renew")
            out.append(("ReadBackVersion", replace(s, pub=setpub(s, i, pc=pc), owners=s.owners | ({(l.v, l.cid)} if sole else set()))))
        if l.pc == "manifest":
            if fresh(s, 1):
                st = Stmt(p, l.inc, "manifest", "issued", l.v, s.nextId, l.lid, s.now)
                out.append(("IssueManifest", replace(s, inflight=s.inflight | {st}, pub=setpub(s, i, pc="manifest_wait", pid=s.nextId), nextId=s.nextId + 1)))
            else:
                out.append(("IssueManifest", replace(s, pub=setpub(s, i, pc="exhausted"))))
        if l.pc == "commit":
            st = Stmt(p, l.inc, "commit", "issued", l.v, l.pid, l.lid, s.now)
            out.append(("IssueCommitRow", replace(s, inflight=s.inflight | {st}, pub=setpub(s, i, pc="commit_wait"))))
        if l.pc == "readback":
            atV = {w for w in s.watermark if w[0] == l.v}
            mine = (l.v, l.pid) in atV; alien = any(w[1] != l.pid for w in atV)
            h = head(s)
            absent = "LostRace" if (h is not None and h[1] == l.lid) else "LeaseLost"
            if DESIGN == "CountOnlyReadBack": oc = "Won" if atV else absent
            elif DESIGN == "PostWriteCheck": oc = "Won" if (mine and published_head(s) == l.v) else "LostRace"
            else: oc = ("Won" if not alien else "Conflict") if mine else absent
            if oc in ("Won", "Conflict"): pc = "done" if DESIGN == "InventoryBeforePublish" else "inventory"
            elif oc == "LostRace": pc = "alloc_head"
            else: pc = "idle"
            out.append(("ReadBackPublish", replace(s, reports=s.reports | {(p, l.v, l.pid, p, oc)}, pub=setpub(s, i, pc=pc, lid=NoLid if oc == "LeaseLost" else l.lid))))
        if l.pc in ("inventory", "early_inventory"):
            out.append(("WriteInventory", replace(s, inventory=s.inventory | {p}, pub=setpub(s, i, pc="done" if l.pc == "inventory" else "renew"))))
        if l.pc == "done" and l.lid != NoLid:
            st = Stmt(p, l.inc, "release", "issued", l.v, 0, l.lid, s.now)
            out.append(("IssueRelease", replace(s, inflight=s.inflight | {st}, pub=setpub(s, i, pc="release_wait"))))
        if s.crashes < MaxCrashes and l.pc not in ("done", "released", "exhausted"):
            pub = list(s.pub); pub[i] = local_init(s.inventory, p, s.crashes + 1)
            out.append(("CrashRestart", replace(s, crashes=s.crashes + 1, pub=tuple(pub))))
    for st in s.inflight:
        if st.phase != "evaluated" and not (st.kind == "release" and head_term(s) + 1 > MaxTerm):
            barrier = (not has_barrier(st.kind)) or published_head(s) < st.v
            split = DESIGN == "TwoSubqueryFence" and st.kind != "release"
            h = head(s)
            if split and st.phase == "issued":
                s2 = replace(st, phase="half", lidOk=(h is not None and h[1] == st.lid), fenceOk=fence(s, st.lid))
            elif split:
                s2 = replace(st, phase="evaluated", pass_=barrier and st.lidOk and head_live(s), fenceOk=st.fenceOk and fence(s, st.lid))
            else:
                s2 = replace(st, phase="evaluated", pass_=barrier and ((not has_fence(st.kind)) or fence(s, st.lid)), fenceOk=fence(s, st.lid), term=head_term(s) + 1 if st.kind == "release" else 0)
            out.append(("EvaluateGuard", replace(s, inflight=(s.inflight - {st}) | {s2})))
        if st.phase == "evaluated":
            kw = {}
            if st.pass_ and st.kind == "manifest": kw["manifest"] = s.manifest | {(st.v, st.pid, st.owner)}
            if st.pass_ and st.kind == "commit": kw["watermark"] = s.watermark | {(st.v, st.pid)}
            if st.pass_ and st.kind == "release": kw.update(append_lease(s, (st.term, NoLid, st.owner, st.inc, s.now)))
            out.append(("LandRows", replace(s, inflight=s.inflight - {st}, fencedLanded=s.fencedLanded or (st.pass_ and not st.fenceOk), pub=complete(s, st, False), **kw)))
        if s.now >= st.start + EffCap():
            out.append(("KillAtCap", replace(s, inflight=s.inflight - {st}, pub=complete(s, st, True))))
    for j, r in enumerate(R):
        d = s.rd[j]
        if not d.pinned:
            m = members(s, published_head(s)); rd = list(s.rd); rd[j] = Rd(True, published_head(s), m, m)
            out.append(("PinSnapshot", replace(s, rd=tuple(rd))))
        elif d.reread != members(s, d.w):
            rd = list(s.rd); rd[j] = replace(d, reread=members(s, d.w))
            out.append(("ReReadSnapshot", replace(s, rd=tuple(rd))))
    if s.foreign < MaxForeign and fresh(s, 1):
        for v in range(1, MaxVersion + 1):
            out.append(("ForeignInsert", replace(s, watermark=s.watermark | {(v, s.nextId)}, foreignWm=True, foreign=s.foreign + 1, nextId=s.nextId + 1)))
            for k in P:
                out.append(("ForeignInsert", replace(s, manifest=s.manifest | {(v, s.nextId, k)}, foreign=s.foreign + 1, nextId=s.nextId + 1)))
    return out

def invariants(s):
    bad = []
    for d in s.rd:
        if not s.foreignWm and d.pinned and (members(s, d.w) != d.members or d.reread != d.members): bad.append("PinnedSnapshotNeverGrows"); break
    if s.fencedLanded: bad.append("FencedOutWritesNothing")
    for (p, v, pid, pack, oc) in s.reports:
        if oc == "Won" and not ((v, pid) in s.watermark and (v, pid, pack) in s.manifest): bad.append("ReportedMeansVisible"); break
        if oc in ("LostRace", "LeaseLost") and ((v, pid) in s.watermark or any(m[1] == pid and any(pairs(m, w) for w in s.watermark) for m in s.manifest)): bad.append("ReportedMeansVisible"); break
    if any(not visible(s, k) for k in s.inventory): bad.append("InventoryOnlyAfterPublish")
    live = [i for i, l in enumerate(s.pub) if l.lid != NoLid and fence(s, l.lid)]
    if len(live) > 1 or s.usurped or s.selfLockout: bad.append("OneLiveLease")
    seen = {}
    for (v, cid) in s.owners:
        if seen.setdefault(v, cid) != cid: bad.append("VersionsUnique"); break
    return bad

init = S(0, frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), tuple(Pub() for _ in P), tuple(Rd() for _ in R), 1, 0, 0, False, frozenset(), frozenset(), False, False, False)
parent = {init: None}; q = collections.deque([init]); found = None
import time; t0 = time.time()
while q:
    s = q.popleft()
    b = invariants(s)
    if b: found = (s, b); break
    for name, t in succ(s):
        if t not in parent:
            parent[t] = (s, name); q.append(t)
    if len(parent) > LIMIT: print("LIMIT"); break
dt = time.time() - t0
if found:
    s, b = found; trace = []
    while parent[s]: s, n = parent[s]; trace.append(n)
    trace.reverse()
    print(f"{DESIGN}: VIOLATES {b} after {len(trace)} steps ({len(parent)} states, {dt:.0f}s): {' '.join(trace)}")
else:
    print(f"{DESIGN}: all invariants hold, {len(parent)} distinct states, {dt:.0f}s")
