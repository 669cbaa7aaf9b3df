"""A Python process killed with SIGKILL loses nothing it had sealed:
`capcat drain` uploads and indexes what it left in the spool.

The killed process and the checks run in processes of their own: libchdb
serves one data path per process, and this test's catalog is not the one
the test process has open.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import capcat_bin

RECORDS_PER_PACK = 16
PACKS = 10

CAPTURE = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import capcat
    catalog, store, spool = sys.argv[1:4]
    config = {"max_pack_records": %d, "lease_ttl_s": 3.0, "publish_timeout_s": 1.0}
    service = capcat.Service(catalog=catalog, store=store, spool=spool, prefix="killed", config=config)
    for step in range(%d):
        service.capture("acme", "killed", step,
                        {f"t{i}": np.full(4, step * 100 + i, np.int32) for i in range(%d)})
    print("captured", flush=True)
    time.sleep(600)
    """
) % (RECORDS_PER_PACK, PACKS, RECORDS_PER_PACK)

CHECK = textwrap.dedent(
    """
    import json, sys
    import capcat
    catalog, store = sys.argv[1:3]
    reader = capcat.Reader("acme", catalog=catalog, store=store, prefix="killed")
    captures = list(reader.captures(run="killed", page_size=1000))
    arrays = reader.hydrate([c.capture_id for c in captures])
    values = sorted(int(arrays[c.capture_id][0]) for c in captures)
    print(json.dumps({"count": len(captures), "values": values}))
    """
)


def test_a_killed_python_process_is_recovered_by_capcat_drain(tmp_path):
    binary = capcat_bin()
    if not binary:
        if os.environ.get("CAPCAT_REQUIRE_ENGINES") == "1":
            pytest.fail("CAPCAT_BIN is not set (cargo build -p capcat-cli)")
        pytest.skip("CAPCAT_BIN is not set (cargo build -p capcat-cli)")
    catalog = f"embedded:{tmp_path / 'catalog'}"
    store = f"local:{tmp_path / 'store'}"
    spool = tmp_path / "spool"
    child = subprocess.Popen(
        [sys.executable, "-c", CAPTURE, catalog, store, str(spool)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "captured"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    drain = subprocess.run(
        [binary, "drain", "--catalog", catalog, "--store", store,
         "--spool", str(spool), "--prefix", "killed"],
        capture_output=True, text=True, timeout=300,
    )
    assert drain.returncode == 0, drain.stdout + drain.stderr

    check = subprocess.run(
        [sys.executable, "-c", CHECK, catalog, store],
        capture_output=True, text=True, timeout=300,
    )
    assert check.returncode == 0, check.stderr
    found = json.loads(check.stdout)
    assert found["count"] == PACKS * RECORDS_PER_PACK
    assert found["values"] == sorted(
        step * 100 + i for step in range(PACKS) for i in range(RECORDS_PER_PACK)
    )
