"""Replays one action sequence through publication.py's actions.

The counterexample of ContestedTermTakenAtOnce is 37 steps deep in a state
space too large for a Python breadth-first search, so this replays it by
action name (depth-first over the actors that could take each step) and
reports the first violated invariant. The same sequence under Shipped
cannot be replayed to a violation.

usage: python3 replay_contested.py DESIGN
"""
import sys
sys.argv = ["publication.py", sys.argv[1], "0", "0", "0"]
src = open(__file__.replace("replay_contested.py", "publication.py")).read().split("init = S(")[0]
exec(src)
init = S(0, frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), tuple(Pub() for _ in P), tuple(Rd() for _ in R), 1, 0, 0, False, frozenset(), frozenset(), False, False, False)
seq = """ReadLeaseHead ClaimLease ReadBackLease ReadVersionHead ClaimVersion ReadBackVersion ReadLeaseHead
Tick Tick Tick ReadLeaseHead
ClaimLease ReadBackLease IssueManifest EvaluateGuard LandRows IssueCommitRow EvaluateGuard
ClaimLease ReadBackLease ReadLeaseHead ClaimLease ReadBackLease ReadVersionHead ClaimVersion ReadBackVersion ReadLeaseHead ClaimLease ReadBackLease IssueManifest EvaluateGuard LandRows IssueCommitRow EvaluateGuard LandRows
PinSnapshot LandRows""".split()
def dfs(s, k):
    if invariants(s): return (k, invariants(s))
    if k == len(seq): return None
    for name, t in succ(s):
        if name == seq[k]:
            r = dfs(t, k + 1)
            if r: return r
    return None
print(DESIGN, dfs(init, 0))
