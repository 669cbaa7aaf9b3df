"""A hand transliteration of spec/DemandFold.tla into a breadth-first search.

Same status as publication.py: a check of the spec's logic while TLC is not
available, not the spec and not the model checker; it can drift.

usage: python3 demand_fold.py DESIGN
"""
import sys, collections, itertools
D = sys.argv[1]
MaxGen, MaxEpoch, MaxBytes, MaxEvents = 2, 2, 1, 3
B = (0, 0)
def leq(a, b): return a[0] < b[0] or (a[0] == b[0] and a[1] <= b[1])
def leqE(a, b): return a[1] < b[1] or (a[1] == b[1] and a[0] <= b[0])
def leqby(a, b): return leqE(a, b) if D == "EpochMajorOrder" else leq(a, b)
def mx(a, b): return b if leqby(a, b) else a
def join(r, e): return (mx(r[0], e[1]), mx(r[1], e[2]), max(r[2], e[3]))
def fold(r, e):
    if D == "EventAsUnit":
        lead = e[1] if e[1] != B else e[2]; cur = r[0] if e[1] != B else r[1]
        return (e[1], e[2], e[3]) if (leq(cur, lead) and cur != lead) else r
    if D == "WriterOverwritesMerged" and e[0] == "writer":
        j = join(r, e); return (j[0], e[2], j[2])
    return join(r, e)
def greatest(S): return max(S, key=lambda m: (m[0], m[1]))
def rebuild(log): return (greatest({e[1] for e in log} | {B}), greatest({e[2] for e in log} | {B}), max({e[3] for e in log} | {0}))
def pending(r): return r[0][0] - r[1][0] if r[1][0] < r[0][0] else 0
def pendingby(r):
    if D == "EpochMajorOrder":
        if r[1][1] == r[0][1]: return pending(r)
        return r[0][0] if r[1][1] < r[0][1] else 0
    return pending(r)
ev = []
for g in range(1, MaxGen+1):
    for e in range(1, MaxEpoch+1):
        for b in range(1, MaxBytes+1): ev.append(("writer", (g, e), B, b))
        ev.append(("executor", B, (g, e), 0))
        for gm in range(0, MaxGen+1):
            for em in range(0, MaxEpoch+1): ev.append(("scan", (g, e), (gm, em), 0))
def inv(s):
    log, r = s; bad = []
    if r != rebuild(log): bad.append("FoldEqualsRebuild")
    if any(not leq(e[2], r[1]) for e in log): bad.append("MergedNeverForgotten")
    if pendingby(r) != pending(rebuild(log)): bad.append("PendingCountsGenerations")
    return bad
init = (frozenset(), (B, B, 0)); par = {init: None}; q = collections.deque([init]); found = None
while q:
    s = q.popleft()
    if inv(s): found = s; break
    log, r = s
    nx = []
    if len(log) < MaxEvents:
        for e in ev:
            if e not in log: nx.append(((e[0]+"Event").capitalize() if False else {"writer":"WriterEvent","executor":"ExecutorEvent","scan":"ScanEvent"}[e[0]], (log | {e}, fold(r, e))))
    for e in log:
        r2 = fold(r, e)
        if r2 != r: nx.append(("RedeliverEvent", (log, r2)))
    for n, t in nx:
        if t not in par: par[t] = (s, n); q.append(t)
if found:
    tr = []; s = found
    while par[s]: s, n = par[s]; tr.append(n)
    print(D, "VIOLATES", inv(found), len(tr), "steps:", " ".join(reversed(tr)), len(par), "states")
else: print(D, "holds,", len(par), "states")
