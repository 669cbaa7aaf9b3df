"""The demo's Qwen-shaped workload captured from Python: flush, then every
record found by search and a sample hydrated byte for byte."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import capcat

from qwen import RECORDS_PER_STEP, step_tensors

STEPS = 128


def test_the_demo_workload_captured_from_python_is_searchable_and_verified(place):
    expected = {}
    with capcat.Service(**place.service_args()) as service:
        for step in range(STEPS):
            tensors = step_tensors(step)
            ids = service.capture(
                "demo", "qwen-python", step, tensors, experiment="qwen2.5-0.5b",
                model="Qwen/Qwen2.5-0.5B", hook="forward_output",
            )
            if step % 16 == 0:
                expected.update({ids[name]: value for name, value in tensors.items()})
        report = service.flush(timeout=300)
        snapshot = service.snapshot()
    total = STEPS * RECORDS_PER_STEP
    assert total == 12_288
    # 4,096 records a pack (the default), sealed as they fill.
    assert snapshot["indexed"] == 3 and report.packs >= 1

    reader = capcat.Reader("demo", **place.reader_args())
    pages = list(reader.search(run="qwen-python", page_size=5000))
    assert [len(p.captures) for p in pages] == [5000, 5000, 2288]
    assert len({p.pinned for p in pages}) == 1
    layer3 = list(reader.captures(run="qwen-python", tensor_prefix="model.layers.3.", dtype="BF16"))
    assert len(layer3) == 2 * STEPS

    arrays = reader.hydrate(expected)
    assert len(arrays) == len(expected) == 8 * RECORDS_PER_STEP
    for capture_id, value in expected.items():
        got = arrays[capture_id]
        assert got.dtype == value.dtype and got.shape == value.shape
        assert got.tobytes() == value.tobytes()
    assert any(a.dtype == np.dtype(ml_dtypes.bfloat16) for a in arrays.values())
