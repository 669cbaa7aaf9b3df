#!/usr/bin/env python3
"""Open the golden Capcat pack with Python's safetensors and numpy and compare
every tensor with the golden manifest.

Usage: check_golden.py [GOLDEN_DIR]   (default: the directory of this script)

It checks two packs: GOLDEN_DIR itself (the current format, version 2) and
GOLDEN_DIR/v1 (a version-1 pack as version 1 wrote it, which readers must
keep reading). For each, independently of the Rust code:
- the file length against the manifest, and for version 2 its CRC-64/NVME
  (computed here bit by bit);
- the header by hand (8-byte little-endian length, JSON) and the digests
  that cover it, as docs/pack-format.md specifies: for version 2 the pack
  digest (SHA-256 of the header with its own 64 digits read as '0') at its
  fixed offset; for version 1 the whole-file SHA-256 and the envelope's
  descriptor digest;
- for every record: safe_open(...).get_tensor(key) gives the manifest's dtype
  and shape, its bytes are the file's bytes at the manifest's offset/length
  and hash to the manifest's sha256, and the summary recomputed here equals
  the manifest's with type-strict equality (an int is not a float).

numpy has no bfloat16, so BF16 tensors are decoded from the header offsets
(uint16 << 16 viewed as float32); every other dtype comes from safe_open.
Exits non-zero naming each mismatch.
"""

import hashlib
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
from safetensors import safe_open

NUMPY_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": None,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}

failures = []

# The exact bytes a pack header begins with; the pack digest follows them.
HEADER_PREFIX = b'{"__metadata__":{"capcat_pack_sha256":"'


def crc64nvme(data):
    """CRC-64/NVME as docs/pack-format.md defines it: reflected polynomial
    0x9a6c9329ac4bc9b5 (0xad93d23594c93659 reversed), initial value and final
    XOR all ones. Bitwise, so it shares no table or code with the Rust side."""
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x9A6C9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFFFFFFFFFF


def fail(where, message):
    failures.append(f"{where}: {message}")


def strict_equal(a, b):
    """Type-strict equality: 1 != 1.0, True != 1, NaN == NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    return a == b


def sum_in_order(values):
    """Left-to-right float64 sum (not math.fsum: the format sums in order)."""
    total = 0.0
    for x in values:
        total += x
    return total


def summarise(dtype, array):
    """Tensor summary version 2, computed the way docs/pack-format.md says:
    exact Python ints for integer order statistics, float64 elsewhere,
    non-finite floats counted and excluded, sums in element order."""
    flat = array.reshape(-1)
    count = int(flat.size)
    summary = {"summary_version": 2, "dtype": dtype, "element_count": count,
               "nan_count": 0, "pos_inf_count": 0, "neg_inf_count": 0}
    if dtype in FLOAT_DTYPES:
        values = [float(x) for x in flat.astype(np.float64)]
        finite = []
        for x in values:
            if math.isnan(x):
                summary["nan_count"] += 1
            elif math.isinf(x):
                summary["pos_inf_count" if x > 0 else "neg_inf_count"] += 1
            else:
                finite.append(x)
        lo = hi = None
        total = squares = 0.0
        zeros = 0
        for x in finite:
            lo = x if lo is None or x < lo else lo
            hi = x if hi is None or x > hi else hi
            total += x
            squares += x * x
            zeros += x == 0.0
        abs_max = None if lo is None else max(abs(lo), abs(hi))
        summary["minimum"] = lo
        summary["maximum"] = hi
        summary["abs_max"] = abs_max
        # The plain sums overflow only near the float64 limit; then the
        # statistic is recomputed scaled, exactly as the format specifies.
        if not finite:
            summary["mean"] = None
        elif math.isfinite(total):
            summary["mean"] = total / len(finite)
        else:
            summary["mean"] = sum_in_order(x / len(finite) for x in finite)
        if abs_max is not None and (math.isinf(squares) or (squares == 0.0 and abs_max > 0.0)):
            scaled = sum_in_order((x / abs_max) * (x / abs_max) for x in finite)
            summary["l2_norm"] = math.sqrt(scaled) * abs_max
        else:
            summary["l2_norm"] = math.sqrt(squares)
    else:
        values = [int(x) for x in flat.tolist()]
        zeros = sum(1 for x in values if x == 0)
        lo = min(values) if values else None
        hi = max(values) if values else None
        squares = 0.0
        for x in values:
            squares += float(x) * float(x)
        summary["minimum"] = lo
        summary["maximum"] = hi
        summary["abs_max"] = None if lo is None else max(abs(lo), abs(hi))
        summary["mean"] = float(sum(values)) / float(count) if count else None
        summary["l2_norm"] = math.sqrt(squares)
    summary["zero_fraction"] = zeros / count if count else None
    return summary


def check_header_v2(manifest, data, head, header):
    """Version 2: the pack digest at its fixed offset covers the header;
    returns the descriptor."""
    if f"{crc64nvme(data):016x}" != manifest["pack"]["crc64nvme"]:
        fail("pack", "whole-file CRC-64/NVME differs from the manifest")
    # The pack digest: at its fixed offset, over the header with its own
    # digits read as '0'.
    slot = 8 + len(HEADER_PREFIX)
    if not head[8:].startswith(HEADER_PREFIX):
        fail("header", "does not begin with the pack digest key")
    stored = head[slot:slot + 64].decode("ascii")
    recomputed = hashlib.sha256(head[:slot] + b"0" * 64 + head[slot + 64:]).hexdigest()
    if stored != header["__metadata__"]["capcat_pack_sha256"]:
        fail("header", "the digest at the fixed offset is not the parsed capcat_pack_sha256")
    if recomputed != stored:
        fail("header", "the header does not hash to the pack digest it carries")
    if recomputed != manifest["pack"]["sha256"]:
        fail("pack", "the pack digest differs from the manifest")
    if set(header["__metadata__"]) != {"capcat", "capcat_pack_sha256"}:
        fail("header", f"metadata keys {sorted(header['__metadata__'])}")
    return json.loads(header["__metadata__"]["capcat"])


def check_header_v1(manifest, data, header):
    """Version 1: the whole file's SHA-256 is the pack digest (kept outside
    the pack), and the envelope's digest covers the descriptor text;
    returns the descriptor."""
    if hashlib.sha256(data).hexdigest() != manifest["pack"]["sha256"]:
        fail("pack", "whole-file SHA-256 differs from the manifest")
    if set(header["__metadata__"]) != {"capcat"}:
        fail("header", f"metadata keys {sorted(header['__metadata__'])}")
    envelope = json.loads(header["__metadata__"]["capcat"])
    if set(envelope) != {"format_version", "descriptor_sha256", "descriptor"}:
        fail("envelope", f"fields {sorted(envelope)}")
    if envelope["format_version"] != 1:
        fail("envelope", f"format_version {envelope['format_version']}")
    descriptor_text = envelope["descriptor"]
    if hashlib.sha256(descriptor_text.encode("utf-8")).hexdigest() != envelope["descriptor_sha256"]:
        fail("envelope", "descriptor_sha256 does not match the descriptor")
    return json.loads(descriptor_text)


def check_pack(golden):
    """Checks the pack in `golden` against its manifest; returns the
    manifest."""
    manifest = json.loads((golden / "manifest.json").read_text())
    pack_path = golden / manifest["pack"]["file"]
    data = pack_path.read_bytes()

    if len(data) != manifest["pack"]["byte_length"]:
        fail("pack", f"{len(data)} bytes, manifest says {manifest['pack']['byte_length']}")

    # The header, read by hand as docs/pack-format.md describes it.
    (header_len,) = struct.unpack("<Q", data[:8])
    data_start = 8 + header_len
    head = data[:data_start]
    header = json.loads(data[8:data_start])
    if header_len % 8 != 0 or not data[8:data_start].rstrip(b" ").endswith(b"}"):
        fail("header", "not a JSON object padded with spaces to a multiple of 8")
    version = manifest["format_version"]
    if version == 2:
        descriptor = check_header_v2(manifest, data, head, header)
    elif version == 1:
        descriptor = check_header_v1(manifest, data, header)
    else:
        fail("manifest", f"format_version {version} is not one this script reads")
        return manifest
    if descriptor["format_version"] != version:
        fail("descriptor", f"format_version {descriptor['format_version']}")
    if descriptor["pack_id"] != manifest["pack"]["pack_id"]:
        fail("descriptor", "pack_id differs from the manifest")
    if len(descriptor["records"]) != manifest["pack"]["record_count"]:
        fail("descriptor", "record count differs from the manifest")

    with safe_open(str(pack_path), framework="numpy") as pack:
        if pack.metadata() != header["__metadata__"]:
            fail("safe_open", "metadata differs from the hand-read header")
        for expected in manifest["records"]:
            where = f"record {expected['index']} ({expected['tensor_name']})"
            key = expected["key"]
            if key != f"record/{expected['index']:08d}":
                fail(where, f"key {key} is not record/<index:08>")
            record = descriptor["records"][expected["index"]]
            for field in ("capture_id", "tensor_name", "dtype", "shape"):
                if not strict_equal(record[field], expected[field]):
                    fail(where, f"descriptor {field} {record[field]!r} != manifest {expected[field]!r}")
            if record["payload_sha256"] != expected["sha256"]:
                fail(where, "descriptor payload_sha256 differs from the manifest")

            entry = header[key]
            begin, end = entry["data_offsets"]
            if data_start + begin != expected["offset"] or end - begin != expected["length"]:
                fail(where, "header offsets differ from the manifest locator")
            raw = data[expected["offset"]:expected["offset"] + expected["length"]]
            if hashlib.sha256(raw).hexdigest() != expected["sha256"]:
                fail(where, "payload bytes do not hash to the manifest sha256")

            dtype = expected["dtype"]
            if dtype == "BF16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                array = bits.view(np.float32).reshape(expected["shape"])
            else:
                array = pack.get_tensor(key)
                if array.dtype != np.dtype(NUMPY_DTYPES[dtype]):
                    fail(where, f"safe_open dtype {array.dtype}, manifest {dtype}")
                if array.tobytes() != raw:
                    fail(where, "safe_open bytes differ from the file bytes at the locator")
            if list(array.shape) != expected["shape"]:
                fail(where, f"shape {list(array.shape)}, manifest {expected['shape']}")

            summary = summarise(dtype, array)
            for field, want in expected["summary"].items():
                got = summary.get(field, "<absent>")
                if not strict_equal(got, want):
                    fail(where, f"summary {field}: python {got!r} ({type(got).__name__}) "
                                f"!= manifest {want!r} ({type(want).__name__})")
            if summary.keys() != expected["summary"].keys():
                fail(where, f"summary fields {sorted(summary)} != {sorted(expected['summary'])}")

    return manifest


def main():
    golden = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    if crc64nvme(b"123456789") != 0xAE8B14860A799888:
        fail("crc64nvme", "this script's CRC-64/NVME misses the catalogued check value")
    checked = []
    for directory in (golden, golden / "v1"):
        before = len(failures)
        manifest = check_pack(directory)
        for i in range(before, len(failures)):
            failures[i] = f"{directory.name}/{manifest['pack']['file']}: {failures[i]}"
        checked.append(f"version {manifest['format_version']}: {len(manifest['records'])} "
                       f"records (pack {manifest['pack']['sha256'][:16]}...)")

    for line in failures:
        print(f"check_golden: {line}", file=sys.stderr)
    if failures:
        print(f"check_golden: {len(failures)} mismatch(es)", file=sys.stderr)
        return 1
    print(f"check_golden: every record matches its manifest; {'; '.join(checked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
