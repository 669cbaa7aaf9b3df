"""Waiting in capcat never stops other Python threads, and dropping a
service never blocks.

A ticker thread counts every 10 ms while the main thread waits in capcat.
With the GIL held through the wait the ticker could not run at all; the
thresholds are a small fraction of the ticks a free GIL gives, so a loaded
machine does not make them flaky.
"""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

import capcat

from conftest import Ticker


def test_a_flush_waiting_on_a_stalled_store_lets_other_threads_run(place, stalled):
    # The store hangs on every request, so the flush can only wait until
    # its timeout; reconciling at start would list the store, so it is off.
    place.store = f"s3://stalled?endpoint=http://127.0.0.1:{stalled.port}"
    config = {"reconcile_on_start": False, "close_flush_timeout_s": 1.0}
    service = capcat.Service(**place.service_args(), config=config)
    try:
        service.capture("acme", "r", 0, {"x": np.zeros(16, np.float32)})
        with Ticker() as ticker:
            started = time.monotonic()
            with pytest.raises(capcat.FlushError) as raised:
                service.flush(timeout=2.0)
            waited = time.monotonic() - started
        assert raised.value.kind == "NotDrained"
        assert raised.value.pending == 1
        assert waited >= 2.0
        assert ticker.ticks >= 40, f"the ticker ran {ticker.ticks} times in {waited:.1f} s"
    finally:
        del service
        gc.collect()


def test_starting_against_a_stalled_catalog_lets_other_threads_run(place, stalled):
    place.catalog = f"http://127.0.0.1:{stalled.port}"
    config = {"catalog_connect_timeout_s": 1.0, "catalog_request_timeout_s": 2.0}
    with Ticker() as ticker:
        started = time.monotonic()
        with pytest.raises(capcat.CatalogError):
            capcat.Service(**place.service_args(), config=config)
        waited = time.monotonic() - started
    assert waited >= 1.5
    assert ticker.ticks >= 40, f"the ticker ran {ticker.ticks} times in {waited:.1f} s"


def test_dropping_a_service_without_close_does_not_wait_for_its_flush(place, stalled):
    # close() would wait close_flush_timeout_s (30 s) on the stalled store;
    # a drop stops the service at once and leaves the pack in the spool.
    place.store = f"s3://stalled?endpoint=http://127.0.0.1:{stalled.port}"
    config = {
        "reconcile_on_start": False,
        "close_flush_timeout_s": 30.0,
        "lease_ttl_s": 3.0,
        "publish_timeout_s": 1.0,
    }
    service = capcat.Service(**place.service_args(), config=config)
    service.capture("acme", "r", 0, {"x": np.zeros(16, np.float32)})
    with Ticker() as ticker:
        started = time.monotonic()
        del service
        gc.collect()
        dropped = time.monotonic() - started
    assert dropped < 10.0, f"dropping the service took {dropped:.1f} s"
    # What it sealed is still in the spool for the next owner.
    assert sorted(p.suffix for p in place.spool.iterdir() if p.suffix == ".ready")
    # The spool's owner lock was released: a new service starts on it.
    place.store = f"local:{place.root / 'store'}"
    # The lease it did not release expires within its TTL, which the next
    # service waits out, then finishes what the dropped one sealed.
    with capcat.Service(**place.service_args(), lease_wait=10.0) as again:
        again.flush()
        assert again.snapshot()["indexed"] == 1


def test_threads_capture_into_one_service_at_once(place):
    import threading

    config = {"max_pack_records": 10}
    errors = []
    with capcat.Service(**place.service_args(), config=config) as service:

        def capture(thread: int) -> None:
            try:
                for step in range(25):
                    service.capture("acme", f"thread-{thread}", step,
                                    {"x": np.full(8, thread * 1000 + step, np.int64)})
            except Exception as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=capture, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        service.flush()
    assert errors == []
    reader = capcat.Reader("acme", **place.reader_args())
    captures = list(reader.captures(page_size=1000))
    assert len(captures) == 100
    arrays = reader.hydrate(c.capture_id for c in captures)
    assert sorted(int(a[0]) for a in arrays.values()) == sorted(
        t * 1000 + s for t in range(4) for s in range(25)
    )
