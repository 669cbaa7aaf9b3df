#!/usr/bin/env python3
"""A second, independent implementation of Capcat's publication machines.

Written from docs/native-writers.md, docs/protocol.md and the Rust machines
they describe, in plain Python 3.11 (stdlib only). It speaks the conformance
kit's driver protocol v1 on stdin and stdout: the kit starts a machine,
answers each statement or draw, and compares every step with capcat-proto.
As in capcat-proto, no machine here reads a clock, draws randomness or does
IO: it asks for a statement or a draw, and is handed the answer.

    capcat-conform --driver 'python3 tests/conform-python/driver.py'
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, replace

MACHINES = ["acquire", "renew", "release", "allocate", "publish"]
U64_MAX = 2**64 - 1
SERVER_NOW_NS = "toUnixTimestamp64Nano(now64(9))"  # the server's clock, as every statement reads it
LEASE_ORDER = "term DESC, lease_id DESC, expires_at_ns DESC"  # one total order of lease rows


@dataclass(frozen=True)
class Config:
    """The protocol configuration the kit hands every start (the fields used)."""

    lease_ttl_ns: int
    publish_timeout_s: int
    fence_slack_ns: int
    max_claim_attempts: int
    max_allocate_attempts: int
    chunk: int

    @property
    def fence_margin_ns(self) -> int:
        # Derived as capcat-proto derives it: the cap plus the engine's slack.
        return self.publish_timeout_s * 1_000_000_000 + self.fence_slack_ns


@dataclass(frozen=True)
class Lease:
    lease_id: str
    holder: str
    term: int
    expires_at_ns: int
    unsettled_until_ns: int  # until when an abandoned guarded statement may land; 0: none

    def claimed_at_ns(self, ttl_ns: int) -> int:
        return max(self.expires_at_ns - ttl_ns, 0)

    def abandoned(self) -> Lease:
        # A guarded statement of unknown fate lands, if ever, before the
        # expiry of the row its fence names.
        return replace(self, unsettled_until_ns=max(self.unsettled_until_ns, self.expires_at_ns))


@dataclass(frozen=True)
class Head:
    """The lease log's head as `lease.read_head` saw it."""

    term: int
    lease_id: str
    holder: str
    expires_at_ns: int
    live: bool
    contested: bool
    term_expires_at_ns: int
    term_live: bool


# -- Parameters, in ClickHouse's parameter text form --------------------------


def escape_text(s: str) -> str:
    """A top-level String parameter: the escaped text format."""
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def quote(s: str) -> str:
    """A string inside an array or a tuple: a quoted literal."""
    return "'" + escape_text(s).replace("'", "\\'") + "'"


def u64(v: int) -> dict:
    return {"type": "UInt64", "value": str(v)}


def uuid_param(u: str) -> dict:
    return {"type": "UUID", "value": u}


def string(s: str) -> dict:
    return {"type": "String", "value": escape_text(s)}


def store_packs(packs: list[tuple[str, str]]) -> dict:
    items = ",".join(f"({quote(store)},'{pack}')" for store, pack in packs)
    return {"type": "Array(Tuple(String, UUID))", "value": f"[{items}]"}


def settings(consistent: bool, cap_s: int | None = None) -> dict:
    return {"select_sequential_consistency": consistent, "max_execution_time_s": cap_s}


def statement(name, sql, params, settings, expect=None) -> dict:
    cols = None if expect is None else [{"name": n, "type": ty} for n, ty in expect]
    return {"name": name, "sql": sql, "params": params, "settings": settings,
            "expect": cols, "data": None}


# -- The statements, guards spliced in verbatim ------------------------------


class Sql:
    """Every statement of the five machines, for one prefix and config.

    A guard edited by one character is a different guard, so each guard
    fragment is spelled once, here, and only ever spliced into statements.
    """

    PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")  # spliced into SQL: validate once
    # Both sole-claimant protocols are sound only if a read sees every acknowledged write.
    CONSISTENT = settings(True)

    def __init__(self, prefix: str, cfg: Config):
        if not isinstance(prefix, str) or not self.PREFIX.fullmatch(prefix):
            raise ProtocolError(f"invalid catalog prefix {prefix!r}")
        self.cfg = cfg
        self.lease = f"{prefix}_publisher_lease"
        self.claims = f"{prefix}_version_claims"
        self.watermark = f"{prefix}_index_watermark"
        self.manifest = f"{prefix}_snapshot_manifest"
        # Capped, so a statement that passed its fence lands within the margin.
        self.guarded = settings(True, cfg.publish_timeout_s)

    def lease_fence(self) -> str:
        # The head must be EXACTLY the row held, and outlive the statement's cap.
        return (
            f"(SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM {self.lease} "
            f"ORDER BY {LEASE_ORDER} LIMIT 1) "
            "WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} "
            "AND expires_at_ns = {lease_expires_ns:UInt64} "
            f"AND expires_at_ns > {SERVER_NOW_NS} + {{fence_margin_ns:UInt64}}) = 1")

    def claim_read_back(self) -> str:
        # Every row at or above the term and every live row of another
        # unreleased lease: the claimant holds only if all are its own.
        return (
            f"term >= {{term:UInt64}} OR (lease_id != {{lease_id:UUID}} "
            f"AND expires_at_ns > {SERVER_NOW_NS} "
            f"AND lease_id NOT IN (SELECT lease_id FROM {self.lease} WHERE expires_at_ns = 0))")

    def version_barrier(self) -> str:
        return (f"ifNull((SELECT max(index_version) FROM {self.watermark}), 0) "
                "< {index_version:UInt64}")

    def manifest_complete(self) -> str:
        return (
            f"(SELECT uniqExact(store_id, pack_id) FROM {self.manifest} "
            "WHERE index_version = {index_version:UInt64} AND publish_id = {publish_id:UUID}) "
            "= {manifest_packs:UInt64}")

    def fence_params(self, lease: Lease) -> dict:
        # The exact row the lease holds, and the margin it must outlive.
        return {"lease_id": uuid_param(lease.lease_id), "lease_term": u64(lease.term),
                "lease_expires_ns": u64(lease.expires_at_ns),
                "fence_margin_ns": u64(self.cfg.fence_margin_ns)}

    def lease_read_head(self) -> dict:
        # Two rows: the second alone says whether the head term is contested.
        sql = (
            f"SELECT term, lease_id, holder, expires_at_ns, "
            f"toUInt64(expires_at_ns > {SERVER_NOW_NS}) AS live, "
            f"toUInt64(ifNull((SELECT max(expires_at_ns) FROM {self.lease} "
            f"WHERE term = (SELECT max(term) FROM {self.lease})), 0)) AS term_expires_at_ns, "
            f"toUInt64(term_expires_at_ns > {SERVER_NOW_NS}) AS term_live "
            f"FROM {self.lease} ORDER BY {LEASE_ORDER} LIMIT 2")
        cols = [("term", "UInt64"), ("lease_id", "UUID"), ("holder", "String"),
                ("expires_at_ns", "UInt64"), ("live", "UInt64"),
                ("term_expires_at_ns", "UInt64"), ("term_live", "UInt64")]
        return statement("lease.read_head", sql, {}, self.CONSISTENT, cols)

    def lease_insert_claim(self, term: int, lease_id: str, holder: str) -> dict:
        # Both timestamps from the server's clock: no publisher's clock decides.
        sql = (
            f"INSERT INTO {self.lease} (term, lease_id, holder, acquired_at_ns, expires_at_ns) "
            "SELECT {term:UInt64}, {lease_id:UUID}, {holder:String}, "
            f"{SERVER_NOW_NS}, {SERVER_NOW_NS} + {{ttl_ns:UInt64}}")
        params = {"term": u64(term), "lease_id": uuid_param(lease_id), "holder": string(holder),
                  "ttl_ns": u64(self.cfg.lease_ttl_ns)}
        return statement("lease.insert_claim", sql, params, settings(False))

    def lease_read_claims(self, term: int, lease_id: str) -> dict:
        sql = f"SELECT lease_id, expires_at_ns FROM {self.lease} WHERE {self.claim_read_back()}"
        params = {"term": u64(term), "lease_id": uuid_param(lease_id)}
        return statement("lease.read_claims", sql, params, self.CONSISTENT,
                         [("lease_id", "UUID"), ("expires_at_ns", "UInt64")])

    def lease_release(self, lease: Lease) -> dict:
        # One fenced INSERT ... SELECT: the check and the tombstone are one statement.
        sql = (
            f"INSERT INTO {self.lease} (term, lease_id, holder, acquired_at_ns, expires_at_ns) "
            f"SELECT ifNull((SELECT max(term) FROM {self.lease}), 0) + 1, {{lease_id:UUID}}, "
            f"{{holder:String}}, {SERVER_NOW_NS}, 0 FROM system.one WHERE {self.lease_fence()}")
        params = self.fence_params(lease) | {"holder": string(lease.holder)}
        return statement("lease.release", sql, params, self.guarded)

    def allocate_read_head(self) -> dict:
        # The watermark too: pruned claims must never hand out a published version.
        sql = (f"SELECT greatest(ifNull((SELECT max(index_version) FROM {self.claims}), 0), "
               f"ifNull((SELECT max(index_version) FROM {self.watermark}), 0)) AS head")
        return statement("allocate.read_head", sql, {}, self.CONSISTENT, [("head", "UInt64")])

    def allocate_insert_claim(self, version: int, claim_id: str) -> dict:
        sql = (f"INSERT INTO {self.claims} (index_version, claim_id, claimed_at_ns) "
               f"SELECT {{index_version:UInt64}}, {{claim_id:UUID}}, {SERVER_NOW_NS}")
        params = {"index_version": u64(version), "claim_id": uuid_param(claim_id)}
        return statement("allocate.insert_claim", sql, params, settings(False))

    def allocate_read_claims(self, version: int) -> dict:
        sql = f"SELECT claim_id FROM {self.claims} WHERE index_version = {{index_version:UInt64}}"
        return statement("allocate.read_claims", sql, {"index_version": u64(version)},
                         self.CONSISTENT, [("claim_id", "UUID")])

    def guarded_params(self, version: int, publish_id: str, lease: Lease) -> dict:
        return self.fence_params(lease) | {"index_version": u64(version),
                                           "publish_id": uuid_param(publish_id)}

    def publish_insert_manifest(self, version, publish_id, lease, packs) -> dict:
        sql = (
            f"INSERT INTO {self.manifest} (index_version, publish_id, store_id, pack_id) "
            "SELECT {index_version:UInt64}, {publish_id:UUID}, p.1, p.2 "
            "FROM (SELECT arrayJoin({packs:Array(Tuple(String, UUID))}) AS p) "
            f"WHERE {self.version_barrier()} AND {self.lease_fence()}")
        params = self.guarded_params(version, publish_id, lease) | {"packs": store_packs(packs)}
        return statement("publish.insert_manifest", sql, params, self.guarded)

    def publish_insert_commit_row(self, version, publish_id, lease, manifest_packs) -> dict:
        # MANIFEST_COMPLETE too: a commit row never stands without its members.
        sql = (
            f"INSERT INTO {self.watermark} (index_version, publish_id, published_at_ns) "
            f"SELECT {{index_version:UInt64}}, {{publish_id:UUID}}, {SERVER_NOW_NS} "
            f"FROM system.one WHERE {self.version_barrier()} AND {self.lease_fence()} "
            f"AND {self.manifest_complete()}")
        params = self.guarded_params(version, publish_id, lease)
        params["manifest_packs"] = u64(manifest_packs)
        return statement("publish.insert_commit_row", sql, params, self.guarded)

    def publish_read_publish_ids(self, version: int) -> dict:
        sql = (f"SELECT DISTINCT publish_id FROM {self.watermark} "
               "WHERE index_version = {index_version:UInt64}")
        return statement("publish.read_publish_ids", sql, {"index_version": u64(version)},
                         self.CONSISTENT, [("publish_id", "UUID")])


# -- Reading rows: a value of the wrong type, or a missing column, is a BadRow


class BadRow(Exception):
    """A row without the shape its statement expects: the machine's `malformed`."""


def cell(row: list, i: int, what: str) -> dict | None:
    if i >= len(row):
        raise BadRow(f"{what}: missing column {i}")
    return row[i]


def u64_at(row, i, what) -> int:
    v = cell(row, i, what)
    n = v.get("u64", v.get("i64")) if v else None  # an Int64 reads as unsigned unless negative
    if n is None or n < 0:
        raise BadRow(f"{what}: expected an unsigned integer, got {v!r}")
    return n


def bool_at(row, i, what) -> bool:
    n = u64_at(row, i, what)
    if n > 1:
        raise BadRow(f"{what}: expected 0 or 1, got {n}")
    return n == 1


def tagged_at(tag: str, row, i, what) -> str:
    v = cell(row, i, what)
    if not v or tag not in v:
        raise BadRow(f"{what}: expected {tag}, got {v!r}")
    return v[tag]


def parse_head(rows: list) -> Head | None:
    """The head row, contested when a second claimant stands at its term."""
    if not rows:
        return None
    first = rows[0]
    term, lease_id = u64_at(first, 0, "term"), tagged_at("uuid", first, 1, "lease_id")
    contested = False
    if len(rows) > 1:  # its term and id must both decode, whatever they say
        second = rows[1]
        second_term, second_id = u64_at(second, 0, "term"), tagged_at("uuid", second, 1, "lease_id")
        contested = second_term == term and second_id != lease_id
    return Head(term, lease_id, tagged_at("str", first, 2, "holder"),
                u64_at(first, 3, "expires_at_ns"), bool_at(first, 4, "live"), contested,
                u64_at(first, 5, "term_expires_at_ns"), bool_at(first, 6, "term_live"))


# -- Outcomes and inputs ------------------------------------------------------


def ok(value) -> dict:
    return {"ok": value}


def err(kind: str, **fields) -> dict:
    return {"err": {"kind": kind, **fields}}


def unexpected(expected: str, kind: str) -> dict:
    """An input of the wrong kind. Inputs are pairs (kind, value), as the kit
    sends them: ("rows", rows), ("failed", failure) or ("drawn", n)."""
    got = {"rows": "rows", "failed": "a failure", "drawn": "a draw"}[kind]
    return err("unexpected_input", expected=expected, got=got)


# -- The sole-claimant protocol: read the head, draw a skip above it, append a
# claim there, read back who claimed it (capcat-proto's sole_claim.rs).


class SoleClaim:
    """One transition table for both claimants. Phases: ("read_head",),
    ("draw", head), ("insert", slot), ("read_back", slot), ("done", outcome).
    A head is (the number read, what the claim carries), and a slot is the
    same tuple with the number claimed above it."""

    READ_HEAD = READ_CLAIMS = ""
    MAX_ATTEMPTS = ""  # the Config field bounding attempts

    def __init__(self, sql: Sql):
        self.sql = sql
        self.attempt = 0  # attempts abandoned so far: sizes the jitter window
        self.phase: tuple = ("read_head",)

    def window(self) -> int:
        return 8 * self.attempt + 1

    def poll(self) -> tuple:
        name, *arg = self.phase
        if name == "read_head":
            return "execute", self.read_head()
        if name == "draw":
            return "draw", self.window()
        if name == "insert":
            return "execute", self.insert_claim(arg[0])
        if name == "read_back":
            return "execute", self.read_claims(arg[0])
        return "done", arg[0]

    def handle(self, inp: tuple) -> None:
        self.phase = self.next(*inp)

    def next(self, kind: str, value) -> tuple:
        name, *arg = self.phase
        if name == "done":
            return self.phase
        if name == "draw":
            if kind == "drawn" and value < self.window():
                return self.above(arg[0], value)
            return ("done", unexpected("a draw within the jitter window", kind))
        if kind == "drawn":
            return ("done", unexpected("rows or a failure", kind))
        if name == "insert":
            # A failed claim INSERT may still have landed: the read-back decides.
            return ("read_back", arg[0])
        stmt = self.READ_HEAD if name == "read_head" else self.READ_CLAIMS
        if kind == "failed":
            return ("done", err("statement", statement=stmt, failure=value))
        try:
            return self.on_head(value) if name == "read_head" else self.on_read_back(arg[0], value)
        except BadRow as bad:
            return ("done", err("malformed", statement=stmt, detail=str(bad)))

    def above(self, head: tuple, skip: int) -> tuple:
        number = head[0] + 1 + skip
        if number > U64_MAX:  # a head at the top of u64 leaves nothing to claim
            return ("done", err("malformed", statement=self.READ_HEAD,
                                detail=f"head {head[0]} leaves no slot above it"))
        return ("insert", (number, *head[1:]))

    def retry(self, outcome: dict) -> tuple:
        # Contested, or our claim never landed: abandon the slot and go round
        # again from a fresh head read, with a wider jitter window.
        self.attempt += 1
        if self.attempt >= getattr(self.sql.cfg, self.MAX_ATTEMPTS):
            return ("done", outcome)
        return ("read_head",)


class LeaseClaim(SoleClaim):
    """Acquire (or re-acquire) the lease, or renew one held: one machine in
    two modes. Heads and slots are (term, lease_id the claim carries)."""

    READ_HEAD, READ_CLAIMS = "lease.read_head", "lease.read_claims"
    MAX_ATTEMPTS = "max_claim_attempts"

    def __init__(self, sql: Sql, mode: str, holder: str, held: Lease | None, fresh_lease_id: str):
        super().__init__(sql)
        self.mode, self.holder, self.held, self.fresh = mode, holder, held, fresh_lease_id

    @classmethod
    def renew(cls, sql: Sql, lease: Lease) -> LeaseClaim:
        return cls(sql, "renew", lease.holder, lease, lease.lease_id)

    def read_head(self) -> dict:
        return self.sql.lease_read_head()

    def insert_claim(self, slot) -> dict:
        return self.sql.lease_insert_claim(*slot, self.holder)

    def read_claims(self, slot) -> dict:
        return self.sql.lease_read_claims(*slot)

    def own(self, lease_id: str) -> bool:
        # An acquire's claim id is its own too: a row of an attempt it
        # abandoned must not hold the lease against it.
        return ((self.held is not None and lease_id == self.held.lease_id)
                or (self.mode == "acquire" and lease_id == self.fresh))

    def on_head(self, rows) -> tuple:
        head = parse_head(rows)
        # Never over its own tombstone (expiry 0): a released id claims no more.
        own_live = head is not None and self.own(head.lease_id) and head.expires_at_ns != 0
        ours = own_live and not head.contested
        if self.mode == "renew" and not ours:
            return ("done", err("not_held", lease_id=self.held.lease_id, head=head))
        # A term is held while ANY row at it is live, whatever the head row is.
        if (self.mode == "acquire" and head is not None and not ours and head.term_live
                and not self.own(head.lease_id)):
            return ("done", err("held", holder=head.holder, lease_id=head.lease_id,
                                term=head.term, expires_at_ns=head.term_expires_at_ns))
        # Over its own head the claim keeps that head's id: a second id would
        # make it a stranger to its own live row.
        return ("draw", (head.term if head else 0, head.lease_id if own_live else self.fresh))

    def on_read_back(self, slot, rows) -> tuple:
        term, lease_id = slot
        ids, expiry = set(), None
        for row in rows:
            rid, exp = tagged_at("uuid", row, 0, "lease_id"), u64_at(row, 1, "expires_at_ns")
            if rid == lease_id:
                expiry = exp if expiry is None else max(expiry, exp)
            ids.add(rid)
        if expiry is None or len(ids) != 1:
            return self.retry(err("contested", attempts=self.attempt + 1, last_term=term))
        carried = self.held.unsettled_until_ns if self.held else 0
        lease = Lease(lease_id, self.holder, term, expiry, carried)
        # Stamped after the last moment an abandoned statement could land:
        # none of them can land any more.
        if lease.claimed_at_ns(self.sql.cfg.lease_ttl_ns) > carried:
            lease = replace(lease, unsettled_until_ns=0)
        return ("done", ok(lease))


class Allocate(SoleClaim):
    """Allocate one catalog version, owned by `claim_id` alone."""

    READ_HEAD, READ_CLAIMS = "allocate.read_head", "allocate.read_claims"
    MAX_ATTEMPTS = "max_allocate_attempts"

    def __init__(self, sql: Sql, claim_id: str):
        super().__init__(sql)
        self.claim_id = claim_id

    def read_head(self) -> dict:
        return self.sql.allocate_read_head()

    def insert_claim(self, slot) -> dict:
        return self.sql.allocate_insert_claim(slot[0], self.claim_id)

    def read_claims(self, slot) -> dict:
        return self.sql.allocate_read_claims(slot[0])

    def on_head(self, rows) -> tuple:
        if len(rows) != 1:
            raise BadRow(f"expected one row, got {len(rows)}")
        return ("draw", (u64_at(rows[0], 0, "head"),))

    def on_read_back(self, slot, rows) -> tuple:
        version = slot[0]
        if {tagged_at("uuid", row, 0, "claim_id") for row in rows} == {self.claim_id}:
            return ("done", ok(version))
        return self.retry(err("exhausted", attempts=self.attempt + 1, last_version=version))


class Release:
    """One fenced tombstone INSERT, never sent while the lease is unsettled
    (a successor could take over before an abandoned statement lands)."""

    def __init__(self, sql: Sql, lease: Lease):
        self.sql, self.lease, self.outcome = sql, lease, None
        if lease.unsettled_until_ns:
            self.outcome = err("unsettled", lease_id=lease.lease_id,
                               until_ns=lease.unsettled_until_ns)

    def poll(self) -> tuple:
        if self.outcome is None:
            return "execute", self.sql.lease_release(self.lease)
        return "done", self.outcome

    def handle(self, inp: tuple) -> None:
        kind, value = inp
        if self.outcome is not None:
            return
        if kind == "rows":
            self.outcome = ok(None)
        elif kind == "failed":
            self.outcome = err("statement", statement="lease.release", failure=value)
        else:
            self.outcome = unexpected("rows or a failure", kind)


class Publish:
    """Publish packs as version V under a lease: renew, insert the manifest
    chunks and the commit row (guarded), read back the publish ids, and read
    the head only when this attempt's id is absent. States: ("renew", claim),
    ("manifest", chunk), ("commit",), ("read_back",), ("read_head", found),
    ("done", outcome)."""

    STATEMENTS = {"manifest": "publish.insert_manifest", "commit": "publish.insert_commit_row",
                  "read_back": "publish.read_publish_ids", "read_head": "lease.read_head"}

    def __init__(self, sql: Sql, lease: Lease, version: int, packs: list, publish_id: str):
        self.sql, self.lease, self.version, self.publish_id = sql, lease, version, publish_id
        self.packs = sorted(set(packs))  # a set of (store_id, pack_id), in capcat-proto's order
        if version == 0:
            self.state = ("done", err("version_zero"))
        elif not self.packs:
            self.state = ("done", err("no_packs", version=version))
        else:
            self.state = ("renew", LeaseClaim.renew(sql, lease))

    def error(self, kind: str, **fields) -> dict:
        return err(kind, version=self.version, publish_id=self.publish_id, **fields)

    def done_extra(self) -> dict:
        return {"lease": self.lease}  # the caller keeps this lease whatever the outcome

    def poll(self) -> tuple:
        name, *arg = self.state
        if name == "renew":
            step = arg[0].poll()
            if step[0] != "done":
                return step
            self.state = self.on_renewed(step[1])
            return self.poll()
        args = (self.version, self.publish_id, self.lease)
        if name == "manifest":
            size = self.sql.cfg.chunk
            chunk = self.packs[arg[0] * size:(arg[0] + 1) * size]
            return "execute", self.sql.publish_insert_manifest(*args, chunk)
        if name == "commit":
            return "execute", self.sql.publish_insert_commit_row(*args, len(self.packs))
        if name == "read_back":
            return "execute", self.sql.publish_read_publish_ids(self.version)
        if name == "read_head":
            return "execute", self.sql.lease_read_head()
        return "done", arg[0]

    def on_renewed(self, outcome: dict) -> tuple:
        if "err" in outcome:
            source = outcome["err"]
            if source["kind"] == "not_held":
                return ("done", self.error("lease_lost", head=source["head"]))
            return ("done", err("renew", version=self.version, source=source))
        self.lease = lease = outcome["ok"]
        if not lease.unsettled_until_ns:
            return ("manifest", 0)
        # Renewed, but an abandoned statement may still land: send nothing.
        until = lease.unsettled_until_ns
        wait = max(until - lease.claimed_at_ns(self.sql.cfg.lease_ttl_ns), 0) + 1
        return ("done", self.error("unsettled", until_ns=until, wait_ns=min(wait, U64_MAX)))

    def handle(self, inp: tuple) -> None:
        kind, value = inp
        name, *arg = self.state
        if name == "renew":
            arg[0].handle(inp)
        elif name == "done":
            pass
        elif kind == "drawn":  # only the renewal ever asks for a draw
            self.state = ("done", unexpected("rows or a failure", kind))
        elif kind == "failed":
            self.state = ("done", self.failed(name, value))
        elif name == "manifest":
            # The commit row only once every chunk is known to stand.
            last = (arg[0] + 1) * self.sql.cfg.chunk >= len(self.packs)
            self.state = ("commit",) if last else ("manifest", arg[0] + 1)
        elif name == "commit":
            self.state = ("read_back",)
        else:
            try:
                self.state = (self.on_read_back(value) if name == "read_back"
                              else self.on_head(arg[0], value))
            except BadRow as bad:
                self.state = ("done", err("malformed", statement=self.STATEMENTS[name],
                                          detail=str(bad)))

    def failed(self, name: str, failure: dict) -> dict:
        # A guarded INSERT whose fate is unknown may still land: the lease
        # records until when, before anything else is sent under it.
        if name in ("manifest", "commit") and failure["kind"] in ("timeout", "transport"):
            self.lease = self.lease.abandoned()
        return self.error("statement", statement=self.STATEMENTS[name], failure=failure)

    def on_read_back(self, rows) -> tuple:
        found = sorted({tagged_at("uuid", row, 0, "publish_id") for row in rows})
        if self.publish_id not in found:
            return ("read_head", found)  # a lost race or a lost lease: the head decides
        ids = {"version": self.version, "publish_id": self.publish_id}
        foreign = [f for f in found if f != self.publish_id]
        if not foreign:
            return ("done", ok({"won": ids}))
        return ("done", ok({"conflict": ids | {"foreign": foreign[0], "all_foreign": foreign}}))

    def on_head(self, found: list, rows) -> tuple:
        head = parse_head(rows)
        # Another live head fences us out at every version: the lease is lost.
        # Our own head, even expired, is a race the next renewal settles.
        if head is not None and head.live and (head.contested
                                               or head.lease_id != self.lease.lease_id):
            return ("done", self.error("lease_lost", head=head))
        return ("done", ok({"lost_race": {"version": self.version,
                                          "publish_id": self.publish_id, "found": found}}))


# -- The driver protocol, version 1: one JSON object a line ------------------


class ProtocolError(Exception):
    """A line this driver cannot handle; reported as {"error": ...}."""


def start_machine(start: dict):
    # The kit sends every field in its documented shape (UUIDs hyphenated
    # lower case, integers exact); a field missing is a KeyError, reported.
    cfg = Config(**{field: start["config"][field] for field in Config.__dataclass_fields__})
    sql, a = Sql(start["prefix"], cfg), start["args"]
    match start["machine"]:
        case "acquire":
            held = Lease(**a["held"]) if a["held"] is not None else None
            return LeaseClaim(sql, "acquire", a["holder"], held, a["fresh_lease_id"])
        case "renew":
            return LeaseClaim.renew(sql, Lease(**a["lease"]))
        case "release":
            return Release(sql, Lease(**a["lease"]))
        case "allocate":
            return Allocate(sql, a["claim_id"])
        case "publish":
            packs = [(store, pack) for store, pack in a["packs"]]
            return Publish(sql, Lease(**a["lease"]), a["version"], packs, a["publish_id"])
        case other:
            raise ProtocolError(f"unknown machine {other!r}")


def parse_input(msg: dict) -> tuple:
    # Rows and failures are handed on as sent: a failure is echoed in the
    # outcome exactly, and rows are judged by the machine that asked.
    for kind in ("rows", "failed", "drawn"):
        if kind in msg:
            return kind, msg[kind]
    raise ProtocolError(f"unknown message {json.dumps(msg)[:200]}")


def step_line(session: int, machine) -> dict:
    kind, value = machine.poll()
    if kind == "execute":
        return {"session": session, "execute": value}
    if kind == "draw":
        return {"session": session, "draw": {"below": value}}
    extra = machine.done_extra() if isinstance(machine, Publish) else {}
    return {"session": session, "done": {"outcome": value, **extra}}


def answer(msg, sessions: dict) -> dict | None:
    """The reply to one line from the kit; None after `bye`."""
    if "bye" in msg:
        return None
    if "start" in msg:
        session = msg["start"]["session"]
        sessions[session] = start_machine(msg["start"])  # a number may be reused after done
    else:
        session = msg["session"]
        if session not in sessions:
            raise ProtocolError(f"unknown session {session!r}")
        sessions[session].handle(parse_input(msg))
    return step_line(session, sessions[session])


def to_json(o) -> dict:
    if isinstance(o, (Lease, Head)):
        return asdict(o)  # leases and heads travel as their fields, snake case
    raise TypeError(f"cannot encode {type(o).__name__}")


def main() -> int:
    def send(obj) -> None:
        sys.stdout.write(json.dumps(obj, default=to_json) + "\n")
        sys.stdout.flush()  # the kit waits for every line

    send({"hello": {"protocol": 1, "implementation": "capcat-python 0.1", "machines": MACHINES}})
    sessions: dict = {}
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line), sessions)
        except Exception as e:  # noqa: BLE001 - a driver says why it stops, never just dies
            why = e if isinstance(e, ProtocolError) else f"{type(e).__name__} {e}"
            send({"error": f"cannot handle {line.strip()[:200]}: {why}"})
            return 2
        if reply is None:
            return 0
        send(reply)
    send({"error": "stdin closed before bye"})
    return 2


if __name__ == "__main__":
    sys.exit(main())
