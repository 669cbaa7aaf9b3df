"""Bad input gets a typed exception with the Rust error's kind and fields,
and loses nothing."""

from __future__ import annotations

import pickle
import struct
import uuid
from pathlib import Path

import numpy as np
import pytest

import capcat
from capcat import errors


@pytest.mark.parametrize(
    ("config", "kind", "field"),
    [
        ({"poll_interval_s": float("nan")}, "NotFinite", "poll_interval_s"),
        ({"lease_ttl_s": float("inf")}, "NotFinite", "lease_ttl_s"),
        ({"catalog_request_timeout_s": 0.0}, "NotPositive", "catalog_request_timeout_s"),
        ({"max_backoff_s": -1.0}, "NotPositive", "max_backoff_s"),
    ],
)
def test_invalid_numbers_in_the_configuration_are_refused_by_name(place, config, kind, field):
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**place.service_args(), config=config)
    assert raised.value.kind == kind
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)
    # Refused before anything was created.
    assert not place.spool.exists()


def test_unknown_configuration_keys_and_bad_types_are_refused(place, tmp_path):
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**place.service_args(), config={"poll_intervall_s": 1.0})
    assert raised.value.kind == "Parse" and "poll_intervall_s" in str(raised.value)
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**place.service_args(), config={"poll_interval_s": [1]})
    assert raised.value.kind == "Type" and raised.value.field == "poll_interval_s"
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**place.service_args(), config=tmp_path / "absent.toml")
    assert raised.value.kind == "Read"
    # A TOML file is read as the command reads it.
    good = tmp_path / "capcat.toml"
    good.write_text("poll_interval_s = 0.02\nmax_pack_records = 2\n")
    with capcat.Service(**place.service_args(), config=good) as service:
        service.capture("acme", "r", 0, {"a": np.zeros(1), "b": np.zeros(1), "c": np.zeros(1)})
        assert service.flush().packs == 2


def test_malformed_locations_are_refused(place):
    args = place.service_args()
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**{**args, "catalog": "clickhouse:9000"})
    assert (raised.value.kind, raised.value.argument) == ("Syntax", "catalog")
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**{**args, "store": "s3://bucket"})
    assert (raised.value.kind, raised.value.argument) == ("Syntax", "store")
    # A scheme-less endpoint is named as such.
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Service(**{**args, "store": "s3://bucket?endpoint=127.0.0.1:9000"})
    assert raised.value.kind == "EndpointScheme" and raised.value.field == "s3_endpoint"


def test_a_reader_of_a_missing_store_or_catalog_is_refused_not_created(place, tmp_path):
    with pytest.raises(capcat.ConfigError) as raised:
        capcat.Reader("acme", catalog=f"embedded:{tmp_path / 'nope'}", store=place.store)
    assert raised.value.kind == "Missing" and raised.value.what == "catalog"
    assert not (tmp_path / "nope").exists()


def test_a_catalog_with_nothing_under_the_prefix_says_so(place):
    with capcat.Service(**place.service_args()):
        pass
    reader = capcat.Reader("acme", **{**place.reader_args(), "prefix": "t_never_written"})
    with pytest.raises(capcat.CatalogError) as raised:
        next(reader.search())
    assert raised.value.kind == "NoSchema"


def test_a_refused_capture_appends_nothing(place):
    with capcat.Service(**place.service_args()) as service:
        with pytest.raises(capcat.CaptureError) as raised:
            service.capture("acme", "r", 0, {"good": np.zeros(3), "bad": np.zeros(2, np.complex64)})
        assert raised.value.kind == "UnknownDtype" and raised.value.tensor == "bad"
        with pytest.raises(capcat.CaptureError) as raised:
            service.capture("acme", "r", 0, {"objects": np.array([object()])})
        assert raised.value.tensor == "objects"
        with pytest.raises(capcat.CaptureError) as raised:
            service.capture("", "r", 0, {"x": np.zeros(1)})
        assert (raised.value.kind, raised.value.field) == ("BadName", "tenant")
        with pytest.raises(capcat.CaptureError) as raised:
            service.capture("acme", "r", 0, {"x": np.zeros(1), "a\nb": np.zeros(1)})
        assert raised.value.value == "a\nb"
        assert service.flush().packs == 0
        assert service.snapshot()["indexed"] == 0


def test_reads_refuse_bad_arguments_and_name_missing_ids(place):
    with capcat.Service(**place.service_args()) as service:
        ids = service.capture("acme", "r", 0, {"x": np.arange(3)})
        service.flush()
    reader = capcat.Reader("acme", **place.reader_args())
    with pytest.raises(capcat.QueryError) as raised:
        next(reader.search(page_size=0))
    assert raised.value.kind == "BadPageSize"
    with pytest.raises(capcat.QueryError) as raised:
        reader.get(["not-a-uuid"])
    assert raised.value.kind == "BadId" and raised.value.id == "not-a-uuid"
    with pytest.raises(capcat.QueryError):
        next(reader.search(cursor="garbage"))
    with pytest.raises(capcat.QueryError) as raised:
        next(reader.search(dtype="f8"))
    assert raised.value.kind == "UnknownDtype"
    absent = uuid.uuid4()
    with pytest.raises(capcat.NotFoundError) as raised:
        reader.hydrate([ids["x"], absent])
    assert raised.value.missing == [absent]
    assert isinstance(raised.value, LookupError)
    # missing_ok returns what was found.
    assert list(reader.hydrate([ids["x"], absent], missing_ok=True)) == [ids["x"]]
    # Another tenant sees none of it.
    with pytest.raises(capcat.NotFoundError):
        capcat.Reader("other", **place.reader_args()).get([ids["x"]])


def local_pack_files(store: str) -> list:
    root = Path(store.removeprefix("local:"))
    return [p for p in root.rglob("*") if p.is_file() and p.read_bytes().startswith(b"CAPCAT-OBJECT-1\n")]


def test_a_corrupted_pack_is_never_returned(place):
    with capcat.Service(**place.service_args()) as service:
        ids = service.capture("acme", "r", 0, {"x": np.arange(64, dtype=np.int64)})
        service.flush()
    reader = capcat.Reader("acme", **place.reader_args())
    capture = reader.get(ids.values())[ids["x"]]
    (pack,) = local_pack_files(place.store)
    raw = bytearray(pack.read_bytes())
    # The local store's envelope: 16 bytes of magic, a u32 header length,
    # the header, then the pack.
    (header_length,) = struct.unpack_from("<I", raw, 16)
    raw[20 + header_length + capture.payload_offset + 5] ^= 0x01
    pack.write_bytes(bytes(raw))
    with pytest.raises(capcat.IntegrityError) as raised:
        reader.hydrate(ids.values())
    assert raised.value.capture_id == str(ids["x"])


def test_a_closed_service_refuses_captures_and_a_second_close_does_nothing(place):
    service = capcat.Service(**place.service_args())
    assert service.close() is True
    assert service.closed
    with pytest.raises(capcat.ClosedError):
        service.capture("acme", "r", 0, {"x": np.zeros(1)})
    with pytest.raises(capcat.ClosedError):
        service.flush()
    assert service.close() is False


def test_a_second_service_on_a_spool_is_refused(place):
    with capcat.Service(**place.service_args()):
        with pytest.raises(capcat.SpoolBusyError) as raised:
            capcat.Service(**place.service_args())
        assert isinstance(raised.value, capcat.SpoolError)


def test_a_flush_timeout_must_be_a_positive_number(place):
    with capcat.Service(**place.service_args()) as service:
        for timeout in (0, -1, float("nan"), float("inf")):
            with pytest.raises(capcat.ConfigError) as raised:
                service.flush(timeout)
            assert raised.value.field == "timeout"


def test_errors_carry_their_fields_through_pickle():
    error = errors.FlushError("not drained", "NotDrained", pending=3, set_aside=[])
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is errors.FlushError
    assert (back.kind, back.pending, back.fields) == ("NotDrained", 3, error.fields)
    assert issubclass(errors.LeaseHeldError, errors.CatalogError)
    assert all(issubclass(getattr(errors, n), errors.CapcatError) for n in errors.__all__)


def test_the_spool_is_the_argument_else_the_configuration_else_the_commands(
    place, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    args = {**place.service_args(), "spool": None}
    with capcat.Service(**args, config={"spool_dir": str(tmp_path / "from-config")}):
        assert (tmp_path / "from-config" / ".owner.lock").exists()
    with capcat.Service(**args):
        assert (tmp_path / "capcat-data" / "spool" / ".owner.lock").exists()
    file = tmp_path / "capcat.toml"
    file.write_text("poll_interval_s = 0.05\n")
    with capcat.Service(**args, config=file):
        assert (tmp_path / "capcat-data" / "spool" / ".owner.lock").exists()
    with capcat.Service(**{**args, "spool": tmp_path / "explicit"}, config={"spool_dir": "x"}):
        assert (tmp_path / "explicit" / ".owner.lock").exists()
    assert not (tmp_path / "x").exists()
