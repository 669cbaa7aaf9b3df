"""Capture -> queryable from Python for the demo's 12,288 records, beside
the `capcat demo` figure measured in the same run.

    python crates/capcat-py/bench/capture_to_queryable.py \
        --capcat target/release/capcat [--runs 3]

Build both in release first (docs/python.md): `cargo build --release -p
capcat-cli` and `maturin build --release -m crates/capcat-py/Cargo.toml`,
with the wheel installed in this interpreter. Each run uses a fresh
directory: the demo's and the Python capture's flushes both start from an
empty catalog and store.

Reported, per run: the demo's `capture -> queryable` (its records are
built in Rust and sealed one pack per core, at most four at once); the
Python capture (every `Service.capture` call, the sealing of full packs
included), the flush, and their sum; and the Python overhead per record:
the time of turning arrays into dtype, shape and bytes
(`capcat._tensors.to_raw`) alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import capcat  # noqa: E402
from capcat._tensors import to_raw  # noqa: E402
from qwen import RECORDS_PER_STEP, step_tensors  # noqa: E402

STEPS = 128
RECORDS = STEPS * RECORDS_PER_STEP


def demo_seconds(capcat_bin: str, directory: Path) -> float:
    out = subprocess.run(
        [capcat_bin, "demo", "--dir", str(directory)],
        check=True, capture_output=True, text=True,
    ).stdout
    if "release" not in out:
        sys.exit("the capcat binary is a debug build; pass a release one (--capcat)")
    match = re.search(r"capture -> queryable\s+([0-9.]+)(ms|s)", out)
    if match is None:
        sys.exit(f"no capture -> queryable line in the demo's output:\n{out}")
    value, unit = float(match.group(1)), match.group(2)
    return value / 1000 if unit == "ms" else value


def python_run(directory: Path, steps: list) -> dict:
    with capcat.Service(
        catalog=f"embedded:{directory / 'catalog'}",
        store=f"local:{directory / 'store'}",
        spool=directory / "spool",
        prefix="bench",
    ) as service:
        started = time.perf_counter()
        for step, tensors in enumerate(steps):
            service.capture("bench", "qwen", step, tensors, experiment="qwen2.5-0.5b",
                            model="Qwen/Qwen2.5-0.5B", hook="forward_output")
        captured = time.perf_counter()
        service.flush(timeout=600)
        flushed = time.perf_counter()
    return {"capture": captured - started, "flush": flushed - captured,
            "total": flushed - started}


def conversion_seconds(steps: list) -> float:
    started = time.perf_counter()
    for tensors in steps:
        for name, value in tensors.items():
            to_raw(name, value)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capcat", required=True, help="a release build of the capcat binary")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("CAPCAT_LOG", "error")
    steps = [step_tensors(step) for step in range(STEPS)]
    rows = []
    for run in range(args.runs):
        # A process can open one embedded catalog path, and each run has a
        # fresh one: every Python capture runs in a child interpreter.
        with tempfile.TemporaryDirectory() as tmp:
            demo = demo_seconds(args.capcat, Path(tmp) / "demo")
            py = child_run(Path(tmp) / "python")
        convert = conversion_seconds(steps)
        rows.append((demo, py, convert))
        print(
            f"run {run + 1}: demo capture -> queryable {demo * 1000:7.1f} ms | python capture "
            f"{py['capture'] * 1000:7.1f} ms + flush {py['flush'] * 1000:7.1f} ms = "
            f"{py['total'] * 1000:7.1f} ms | to_raw {convert / RECORDS * 1e6:5.2f} us/record | "
            f"capture() {py['capture'] / RECORDS * 1e6:5.2f} us/record"
        )
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(
        f"median of {args.runs}: demo {med([r[0] for r in rows]) * 1000:.1f} ms, python "
        f"{med([r[1]['total'] for r in rows]) * 1000:.1f} ms "
        f"(capture {med([r[1]['capture'] for r in rows]) * 1000:.1f} ms, flush "
        f"{med([r[1]['flush'] for r in rows]) * 1000:.1f} ms), "
        f"python overhead {med([r[2] for r in rows]) / RECORDS * 1e6:.2f} us/record"
    )


def child_run(directory: Path) -> dict:
    code = (
        "import json, sys; from pathlib import Path; "
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
        "import capture_to_queryable as b; "
        "steps = [b.step_tensors(s) for s in range(b.STEPS)]; "
        "print(json.dumps(b.python_run(Path(sys.argv[1]), steps)))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(directory)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
