"""Every dtype round-trips bit for bit: NaN payloads, -0.0, subnormals,
infinities and extremes, through the embedded catalog and both stores."""

from __future__ import annotations

import uuid

import ml_dtypes
import numpy as np
import pytest

import capcat


def bits(values, unsigned, view):
    return np.array(values, dtype=unsigned).view(view)


def special_tensors() -> dict:
    """One tensor per dtype, each holding the values a float round trip
    would change (a NaN's sign and payload, -0.0, subnormals)."""
    return {
        "f64": bits(
            [0x7FF0000000000001, 0xFFF8000000000123, 0x8000000000000000,
             0x0000000000000001, 0x7FF0000000000000, 0xFFF0000000000000,
             0x7FEFFFFFFFFFFFFF, 0x3FF0000000000000],
            np.uint64, "<f8",
        ).reshape(2, 4),
        "f32": bits(
            [0x7F800001, 0xFFC00123, 0x80000000, 0x00000001, 0x7F800000, 0xFF7FFFFF],
            np.uint32, "<f4",
        ).reshape(3, 2),
        "f16": bits([0x7C01, 0xFE23, 0x8000, 0x0001, 0x7C00, 0x7BFF], np.uint16, "<f2"),
        "bf16": bits(
            [0x7F81, 0xFFC1, 0x8000, 0x0001, 0x7F80, 0x7F7F], np.uint16, ml_dtypes.bfloat16
        ).reshape(2, 3),
        "i64": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1], np.int64),
        "i32": np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max, 7], np.int32),
        "i16": np.array([np.iinfo(np.int16).min, np.iinfo(np.int16).max], np.int16),
        "i8": np.array([-128, 127, 0], np.int8),
        "u8": np.array([0, 255, 17], np.uint8),
        "bool": np.array([[True, False], [False, True]]),
        "scalar": np.float32(-0.0),
        "empty": np.zeros((0, 4), np.float16),
        # Not C-contiguous and big-endian: converted, values kept.
        "strided": np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2],
    }


def same_bits(expected: np.ndarray, actual: np.ndarray) -> bool:
    if expected.dtype.byteorder == ">":
        expected = expected.astype(expected.dtype.newbyteorder("<"))
    # tobytes() is C order whatever the strides, and keeps a 0-d shape.
    return (
        expected.shape == actual.shape
        and expected.dtype.itemsize == actual.dtype.itemsize
        and expected.tobytes() == actual.tobytes()
    )


def round_trip(service_args: dict, reader_args: dict) -> None:
    tensors = special_tensors()
    with capcat.Service(**service_args) as service:
        ids = service.capture("acme", "run-dtypes", 3, tensors, experiment="exp", model="m")
        service.flush(timeout=60)
    reader = capcat.Reader("acme", **reader_args)
    found = reader.get(ids.values())
    arrays = reader.hydrate(ids.values())
    assert set(arrays) == set(ids.values())
    for name, value in tensors.items():
        capture = found[ids[name]]
        array = arrays[ids[name]]
        assert capture.tensor_name == name
        assert capture.shape == tuple(np.shape(value))
        assert capture.step == 3 and capture.run_id == "run-dtypes"
        assert same_bits(np.asarray(value), array), name
    assert arrays[ids["bf16"]].dtype == np.dtype(ml_dtypes.bfloat16)
    assert found[ids["bf16"]].dtype == "BF16"
    assert found[ids["bool"]].dtype == "BOOL"
    assert arrays[ids["scalar"]].shape == ()
    assert np.signbit(arrays[ids["scalar"]])


def test_every_dtype_round_trips_bit_for_bit_through_the_local_store(place):
    round_trip(place.service_args(), place.reader_args())


def test_every_dtype_round_trips_bit_for_bit_through_the_s3_server(place, s3_server):
    place.store = s3_server.store
    round_trip(place.service_args(), place.reader_args())


def test_torch_tensors_round_trip_when_torch_is_installed(place):
    torch = pytest.importorskip("torch")
    tensors = {
        "bf16": torch.tensor([1.5, -0.0, float("nan")], dtype=torch.bfloat16),
        "f16": torch.tensor([[65504.0, -0.0]], dtype=torch.float16),
        "i64": torch.arange(4),
    }
    with capcat.Service(**place.service_args()) as service:
        ids = service.capture("acme", "run-torch", 0, tensors)
        service.flush()
    back = capcat.Reader("acme", **place.reader_args()).to_torch(ids.values())
    for name, tensor in tensors.items():
        got = back[ids[name]]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape
        assert torch.equal(got.view(torch.uint8), tensor.view(torch.uint8))


def test_search_pages_stay_at_one_pinned_version(place):
    with capcat.Service(**place.service_args()) as service:
        for step in range(5):
            service.capture("acme", "run-pages", step, {"x": np.full(3, step, np.int32)})
        service.flush()
        reader = capcat.Reader("acme", **place.reader_args())
        pages = reader.search(run="run-pages", page_size=2)
        first = next(pages)
        # Published after the first page: the search does not see it.
        service.capture("acme", "run-pages", 99, {"x": np.zeros(3, np.int32)})
        service.flush()
        rest = list(pages)
    steps = [c.step for page in [first, *rest] for c in page.captures]
    assert sorted(steps) == [0, 1, 2, 3, 4]
    assert {page.pinned for page in [first, *rest]} == {first.pinned}
    assert [len(p.captures) for p in [first, *rest]] == [2, 2, 1]
    assert rest[-1].cursor is None
    # A new search sees the later capture.
    assert len(list(reader.captures(run="run-pages"))) == 6
    # A cursor resumes a search, even in another reader.
    again = capcat.Reader("acme", **place.reader_args())
    resumed = list(again.search(run="run-pages", page_size=2, cursor=first.cursor))
    assert [c.step for p in resumed for c in p.captures] == [2, 3, 4]


def test_filters_narrow_a_search(place):
    with capcat.Service(**place.service_args()) as service:
        for step in range(4):
            service.capture(
                "acme", "run-filter", step,
                {"model.layers.0.mlp": np.zeros(2, np.float32),
                 "model.layers.1.mlp": np.zeros(2, ml_dtypes.bfloat16)},
            )
        service.capture("other", "run-filter", 0, {"x": np.zeros(1, np.int8)})
        service.flush()
    reader = capcat.Reader("acme", **place.reader_args())
    assert len(list(reader.captures(run="run-filter"))) == 8
    assert len(list(reader.captures(tensor_prefix="model.layers.1."))) == 4
    assert len(list(reader.captures(dtype="bf16"))) == 4
    assert [c.step for c in reader.captures(tensor_name="model.layers.0.mlp", step_from=1, step_until=2)] == [1, 2]
    # Another tenant's capture is never this reader's.
    assert all(c.tenant_id == "acme" for c in reader.captures())
    assert uuid.UUID(int=0) not in {c.capture_id for c in reader.captures()}
