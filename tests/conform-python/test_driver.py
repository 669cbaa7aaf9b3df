"""Tests of the Python driver: its machines fed by hand, then the whole
driver under the conformance kit, and the kit catching a broken guard.

    python3 -m pytest tests/conform-python              # everything
    python3 -m pytest tests/conform-python -k 'not kit' # without the kit
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DRIVER = HERE / "driver.py"

_spec = importlib.util.spec_from_file_location("capcat_python_driver", DRIVER)
d = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(d)

CFG = d.Config(lease_ttl_ns=30_000_000_000, publish_timeout_s=10, fence_slack_ns=250_000_000,
               max_claim_attempts=8, max_allocate_attempts=8, chunk=1000)
TTL = CFG.lease_ttl_ns


def sql(**cfg) -> d.Sql:
    return d.Sql("t", replace(CFG, **cfg))


def uid(n: int) -> str:
    return f"00000000-0000-0000-0000-{n:012x}"


def lease(n=7, term=1, expires_at_ns=31_000_000_000, unsettled_until_ns=0) -> d.Lease:
    return d.Lease(uid(n), "host-a", term, expires_at_ns, unsettled_until_ns)


def head_row(term, n, expires, *, live=1, term_expires=None, term_live=None, holder="host-a"):
    """A `lease.read_head` row, as the kit sends it."""
    term_expires = expires if term_expires is None else term_expires
    term_live = live if term_live is None else term_live
    return [{"u64": term}, {"uuid": uid(n)}, {"str": holder}, {"u64": expires}, {"u64": live},
            {"u64": term_expires}, {"u64": term_live}]


def rows(*r) -> tuple:
    return ("rows", list(r))


def drawn(n: int) -> tuple:
    return ("drawn", n)


def failed(kind: str, **fields) -> tuple:
    return ("failed", {"kind": kind, **fields})


def drive(machine, *inputs):
    """Feeds `inputs` in turn; returns every step the machine asked for
    (a statement's name, a draw's `below`) and the outcome it ended with."""
    steps = []
    for inp in inputs:
        kind, value = machine.poll()
        assert kind != "done", f"done early with {value} after {steps}"
        steps.append(value["name"] if kind == "execute" else value)
        machine.handle(inp)
    kind, value = machine.poll()
    assert kind == "done", f"not done after {steps}: asks for {value}"
    return steps, value


def renewal(lease_: d.Lease, expires: int) -> list:
    """The inputs of an uncontested renewal of `lease_` to `expires`."""
    n = int(lease_.lease_id[-12:], 16)
    return [rows(head_row(lease_.term, n, lease_.expires_at_ns)), drawn(0), rows(),
            rows([{"uuid": lease_.lease_id}, {"u64": expires}])]


# -- (a) the machines, fed by hand -------------------------------------------


def test_an_uncontended_allocate_takes_the_version_above_the_head():
    allocate = d.Allocate(sql(), uid(1))
    assert allocate.poll() == ("execute", allocate.sql.allocate_read_head())
    steps, outcome = drive(allocate, rows([{"u64": 4}]), drawn(0), rows(),
                           rows([{"uuid": uid(1)}]))
    assert steps == ["allocate.read_head", 1, "allocate.insert_claim", "allocate.read_claims"]
    assert outcome == {"ok": 5}


def test_a_contested_read_back_retries_with_a_wider_window():
    allocate = d.Allocate(sql(), uid(1))
    rival = [{"uuid": uid(2)}]
    steps, _ = drive(allocate, rows([{"u64": 4}]), drawn(0), rows(),
                     rows([{"uuid": uid(1)}], rival),  # a rival at 5: abandon it
                     rows([{"u64": 5}]), drawn(8), failed("timeout"), rows([{"uuid": uid(1)}]))
    assert steps[4:6] == ["allocate.read_head", 9]  # round again, the window 8 * attempt + 1
    assert allocate.poll() == ("done", {"ok": 14})
    # The failed claim INSERT may have landed: the read-back decided.
    assert steps[-1] == "allocate.read_claims"


def test_allocate_gives_up_after_its_attempt_bound():
    contested = [rows([{"u64": 0}]), drawn(0), rows(), rows([{"uuid": uid(1)}], [{"uuid": uid(2)}])]
    _, outcome = drive(d.Allocate(sql(max_allocate_attempts=1), uid(1)), *contested)
    assert outcome == {"err": {"kind": "exhausted", "attempts": 1, "last_version": 1}}


def test_a_draw_outside_the_window_and_a_draw_for_rows_are_unexpected_inputs():
    _, outcome = drive(d.Allocate(sql(), uid(1)), rows([{"u64": 0}]), drawn(1))
    assert outcome["err"]["kind"] == "unexpected_input"
    _, outcome = drive(d.Allocate(sql(), uid(1)), drawn(0))
    assert outcome["err"]["kind"] == "unexpected_input"
    assert outcome["err"]["got"] == "a draw"


def test_rows_of_the_wrong_shape_end_the_machine_malformed():
    missing_column = [{"u64": 1}, {"uuid": uid(7)}]  # a head row cut short
    _, outcome = drive(d.LeaseClaim.renew(sql(), lease()), rows(missing_column))
    assert outcome["err"]["kind"] == "malformed"
    assert outcome["err"]["statement"] == "lease.read_head"
    _, outcome = drive(d.Allocate(sql(), uid(1)), rows([{"str": "4"}]))
    assert outcome["err"]["statement"] == "allocate.read_head"


def test_acquire_is_refused_while_a_foreign_lease_is_live():
    acquire = d.LeaseClaim(sql(), "acquire", "host-b", None, uid(9))
    _, outcome = drive(acquire, rows(head_row(3, 7, 40, term_expires=50)))
    assert outcome == {"err": {"kind": "held", "holder": "host-a", "lease_id": uid(7),
                               "term": 3, "expires_at_ns": 50}}


def test_a_renewal_over_a_foreign_head_is_not_held():
    _, outcome = drive(d.LeaseClaim.renew(sql(), lease()), rows(head_row(2, 8, 40)))
    assert outcome["err"]["kind"] == "not_held"
    assert outcome["err"]["head"].lease_id == uid(8)


def test_an_uncontested_publish_wins_and_keeps_the_renewed_lease():
    publish = d.Publish(sql(chunk=1), lease(), 3, [("s3", uid(21)), ("s3", uid(20))], uid(50))
    steps, outcome = drive(publish, *renewal(lease(), 32_000_000_000), rows(), rows(), rows(),
                           rows([{"uuid": uid(50)}]))
    assert steps == ["lease.read_head", 1, "lease.insert_claim", "lease.read_claims",
                     "publish.insert_manifest", "publish.insert_manifest",
                     "publish.insert_commit_row", "publish.read_publish_ids"]
    assert outcome == {"ok": {"won": {"version": 3, "publish_id": uid(50)}}}
    assert publish.lease == lease(term=2, expires_at_ns=32_000_000_000)


def test_a_commit_row_that_times_out_marks_the_kept_lease_unsettled():
    publish = d.Publish(sql(), lease(), 3, [("s3", uid(20))], uid(50))
    _, outcome = drive(publish, *renewal(lease(), 32_000_000_000), rows(), failed("timeout"))
    assert outcome == {"err": {"kind": "statement", "version": 3, "publish_id": uid(50),
                               "statement": "publish.insert_commit_row",
                               "failure": {"kind": "timeout"}}}
    # The commit row may still land until the expiry of the row its fence named.
    assert publish.done_extra()["lease"].unsettled_until_ns == 32_000_000_000
    # A server exception is final: nothing is left running.
    publish = d.Publish(sql(), lease(), 3, [("s3", uid(20))], uid(50))
    drive(publish, *renewal(lease(), 32_000_000_000), rows(),
          failed("server", code=159, message="x"))
    assert publish.lease.unsettled_until_ns == 0


def test_a_publish_whose_renewal_is_still_unsettled_sends_nothing():
    held = lease(unsettled_until_ns=32_000_000_000)
    # The renewal was stamped at 33e9 - TTL = 3e9, before the statement's last moment.
    steps, outcome = drive(d.Publish(sql(), held, 3, [("s3", uid(20))], uid(50)),
                           *renewal(held, 33_000_000_000))
    assert "publish.insert_manifest" not in steps
    assert outcome["err"] == {"kind": "unsettled", "version": 3, "publish_id": uid(50),
                              "until_ns": 32_000_000_000, "wait_ns": 29_000_000_001}


def test_an_absent_publish_id_reads_the_head_lost_race_or_lost_lease():
    def absent(head):
        publish = d.Publish(sql(), lease(), 3, [("s3", uid(20))], uid(50))
        return drive(publish, *renewal(lease(), 32_000_000_000), rows(), rows(),
                     rows([{"uuid": uid(61)}]), rows(head))
    steps, outcome = absent(head_row(2, 7, 32_000_000_000, live=0))
    assert steps[-1] == "lease.read_head"
    assert outcome == {"ok": {"lost_race": {"version": 3, "publish_id": uid(50),
                                            "found": [uid(61)]}}}
    _, outcome = absent(head_row(3, 8, 40_000_000_000))
    assert outcome["err"]["kind"] == "lease_lost"


def test_a_release_of_an_unsettled_lease_ends_at_once():
    release = d.Release(sql(), lease(unsettled_until_ns=32_000_000_000))
    _, outcome = drive(release)
    assert outcome == {"err": {"kind": "unsettled", "lease_id": uid(7),
                               "until_ns": 32_000_000_000}}
    release.handle(rows())  # a done machine ignores what it is handed
    assert release.poll() == ("done", outcome)


def test_a_settled_release_is_one_fenced_statement():
    steps, outcome = drive(d.Release(sql(), lease()), rows())
    assert (steps, outcome) == (["lease.release"], {"ok": None})


# -- (a) the statement texts for the prefix `t`, copied from golden_sql.rs ---

FENCE = (
    "(SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM t_publisher_lease ORDER BY "
    "term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND "
    "lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > "
    "toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1")

GOLDEN = {
    "lease.read_head": "SELECT term, lease_id, holder, expires_at_ns, toUInt64(expires_at_ns > toUnixTimestamp64Nano(now64(9))) AS live, toUInt64(ifNull((SELECT max(expires_at_ns) FROM t_publisher_lease WHERE term = (SELECT max(term) FROM t_publisher_lease)), 0)) AS term_expires_at_ns, toUInt64(term_expires_at_ns > toUnixTimestamp64Nano(now64(9))) AS term_live FROM t_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 2",  # noqa: E501
    "lease.read_claims": "SELECT lease_id, expires_at_ns FROM t_publisher_lease WHERE term >= {term:UInt64} OR (lease_id != {lease_id:UUID} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) AND lease_id NOT IN (SELECT lease_id FROM t_publisher_lease WHERE expires_at_ns = 0))",  # noqa: E501
    "lease.release": "INSERT INTO t_publisher_lease (term, lease_id, holder, acquired_at_ns, expires_at_ns) SELECT ifNull((SELECT max(term) FROM t_publisher_lease), 0) + 1, {lease_id:UUID}, {holder:String}, toUnixTimestamp64Nano(now64(9)), 0 FROM system.one WHERE (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM t_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1",  # noqa: E501
    "allocate.read_head": "SELECT greatest(ifNull((SELECT max(index_version) FROM t_version_claims), 0), ifNull((SELECT max(index_version) FROM t_index_watermark), 0)) AS head",  # noqa: E501
    "publish.insert_manifest": "INSERT INTO t_snapshot_manifest (index_version, publish_id, store_id, pack_id) SELECT {index_version:UInt64}, {publish_id:UUID}, p.1, p.2 FROM (SELECT arrayJoin({packs:Array(Tuple(String, UUID))}) AS p) WHERE ifNull((SELECT max(index_version) FROM t_index_watermark), 0) < {index_version:UInt64} AND (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM t_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1",  # noqa: E501
    "publish.insert_commit_row": "INSERT INTO t_index_watermark (index_version, publish_id, published_at_ns) SELECT {index_version:UInt64}, {publish_id:UUID}, toUnixTimestamp64Nano(now64(9)) FROM system.one WHERE ifNull((SELECT max(index_version) FROM t_index_watermark), 0) < {index_version:UInt64} AND (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM t_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1 AND (SELECT uniqExact(store_id, pack_id) FROM t_snapshot_manifest WHERE index_version = {index_version:UInt64} AND publish_id = {publish_id:UUID}) = {manifest_packs:UInt64}",  # noqa: E501
}


def golden_statements() -> dict:
    s = sql()
    stmts = [s.lease_read_head(), s.lease_read_claims(7, uid(1)), s.lease_release(lease()),
             s.allocate_read_head(),
             s.publish_insert_manifest(3, uid(9), lease(), [("s3", uid(5))]),
             s.publish_insert_commit_row(3, uid(9), lease(), 2)]
    return {stmt["name"]: stmt for stmt in stmts}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_statement_texts_are_the_golden_texts(name):
    assert golden_statements()[name]["sql"] == GOLDEN[name]


def test_the_fence_is_spliced_verbatim_and_once():
    assert sql().lease_fence() == FENCE
    for name in ("lease.release", "publish.insert_manifest", "publish.insert_commit_row"):
        assert golden_statements()[name]["sql"].count(FENCE) == 1


def test_parameters_settings_and_columns_are_the_golden_ones():
    manifest = golden_statements()["publish.insert_manifest"]
    types = {name: p["type"] for name, p in manifest["params"].items()}
    assert types == {"fence_margin_ns": "UInt64", "index_version": "UInt64",
                     "lease_expires_ns": "UInt64", "lease_id": "UUID", "lease_term": "UInt64",
                     "packs": "Array(Tuple(String, UUID))", "publish_id": "UUID"}
    assert manifest["params"]["fence_margin_ns"]["value"] == "10250000000"
    assert manifest["settings"] == {"select_sequential_consistency": True,
                                    "max_execution_time_s": 10}
    assert manifest["expect"] is None and manifest["data"] is None
    claims = golden_statements()["lease.read_claims"]
    assert claims["expect"] == [{"name": "lease_id", "type": "UUID"},
                                {"name": "expires_at_ns", "type": "UInt64"}]


def test_parameter_values_are_in_clickhouse_text_form():
    s = sql()
    claim = s.lease_insert_claim(7, uid(1), "a\tb\\c\n'd'")
    assert claim["params"]["holder"] == {"type": "String", "value": "a\\tb\\\\c\\n'd'"}
    packs = s.publish_insert_manifest(3, uid(9), lease(), [("it's", uid(5))])["params"]["packs"]
    assert packs["value"] == f"[('it\\'s','{uid(5)}')]"


# -- The wire, without the kit -----------------------------------------------


def converse(*lines: str) -> tuple[int, list[dict]]:
    proc = subprocess.run([sys.executable, str(DRIVER)], input="".join(f"{x}\n" for x in lines),
                          capture_output=True, text=True, timeout=30)
    return proc.returncode, [json.loads(x) for x in proc.stdout.splitlines()]


def test_the_driver_says_hello_first_and_leaves_on_bye():
    start = {"session": 4, "machine": "release", "prefix": "t",
             "config": {f: getattr(CFG, f) for f in CFG.__dataclass_fields__},
             "args": {"lease": vars(lease())}}
    code, out = converse(json.dumps({"start": start}), '{"session": 4, "rows": []}',
                         '{"bye": {}}')
    assert code == 0
    assert out[0]["hello"]["protocol"] == 1
    assert out[0]["hello"]["machines"] == ["acquire", "renew", "release", "allocate", "publish"]
    assert out[1]["execute"]["name"] == "lease.release"
    assert out[2] == {"session": 4, "done": {"outcome": {"ok": None}}}


def test_a_line_the_driver_cannot_handle_is_an_error_and_a_failing_exit():
    code, out = converse('{"session": 99, "rows": []}')
    assert code != 0
    assert "unknown session" in out[-1]["error"]


# -- (b) and (c): the conformance kit ------------------------------------------


@pytest.fixture(scope="session")
def kit() -> str:
    """The kit binary: $CAPCAT_CONFORM_BIN, or built here (never skipped)."""
    if os.environ.get("CAPCAT_CONFORM_BIN"):
        return os.environ["CAPCAT_CONFORM_BIN"]
    built = subprocess.run(
        ["cargo", "build", "-q", "-p", "capcat-conform", "--message-format=json"],
        cwd=REPO, capture_output=True, text=True)
    assert built.returncode == 0, f"cargo build -p capcat-conform failed:\n{built.stderr}"
    for line in built.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "capcat-conform" \
                and msg.get("executable"):
            return msg["executable"]
    return str(REPO / "target" / "debug" / "capcat-conform")


def run_kit(kit: str, driver: Path, *extra: str) -> subprocess.CompletedProcess:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(driver))}"
    return subprocess.run([kit, "--driver", command, *extra], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)


def test_kit_every_case_passes_against_the_python_driver(kit):
    run = run_kit(kit, DRIVER)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert "capcat-python" in summary and "every case passed" in summary, summary
    explored = re.search(r"(\d+) explored, (\d+) walks", summary)
    assert explored and int(explored.group(1)) > 0 and int(explored.group(2)) > 0, summary
    # Only machines this driver does not announce may be skipped.
    skipped = re.search(r"cases skipped: the driver does not implement (.*)$", summary)
    missing = set(skipped.group(1).split(", ")) if skipped else set()
    assert not missing & set(d.MACHINES), summary


def test_kit_seen_red_a_fence_without_its_lease_id_is_caught(kit, tmp_path):
    source = DRIVER.read_text()
    broken_guard = '"WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} "'
    assert source.count(broken_guard) == 1, "the mutation must match the fence exactly once"
    mutant = tmp_path / "driver.py"
    mutant.write_text(source.replace(broken_guard, '"WHERE term = {lease_term:UInt64} "'))
    assert mutant.read_text() != source
    run = run_kit(kit, mutant)
    report = run.stdout + run.stderr
    assert run.returncode != 0, report[-3000:]
    assert re.search(r"publish\.insert_manifest|publish\.insert_commit_row|lease\.release",
                     report), report[-3000:]
    assert "expected" in report and "actual" in report, report[-3000:]
    assert "--case" in report, report[-3000:]
