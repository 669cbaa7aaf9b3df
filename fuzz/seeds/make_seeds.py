#!/usr/bin/env python3
"""Writes the committed seed corpus of every fuzz target into fuzz/seeds/.

Run from anywhere: python3 fuzz/seeds/make_seeds.py. Deterministic: the
same script writes the same bytes. Packs are written the way
docs/pack-format.md specifies, in format 2 and again in format 1 (the golden
packs are copied as they are); when the format changes they stay useful as
near-valid inputs, and this script is where to update them. Keep the corpus small: a few KB to a few hundred KB
per target.
"""

import hashlib
import json
import random
import struct
from pathlib import Path

SEEDS = Path(__file__).resolve().parent
ROOT = SEEDS.parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden" / "pack.safetensors"
# The format-1 golden pack: readers still open and verify it.
GOLDEN_V1 = ROOT / "tests" / "data" / "golden" / "v1" / "pack.safetensors"

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U8": 1, "BOOL": 1}
# Descending alignment, then name: the order the writer lays payloads out.
LAYOUT = ["I64", "F64", "F32", "I32", "BF16", "F16", "I16", "I8", "U8", "BOOL"]


def write(target, name, data):
    d = SEEDS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes), laid out in list order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = compact(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def described(records):
    """The descriptor's record objects, fields in the writer's order."""
    out = []
    for meta, dtype, shape, payload in records:
        r = dict(meta)
        r["dtype"] = dtype
        r["shape"] = shape
        r["tags"] = dict(sorted(meta.get("tags", {}).items()))
        r["payload_sha256"] = hashlib.sha256(payload).hexdigest()
        order = ["tenant_id", "experiment_id", "run_id", "captured_at_ns", "capture_id",
                 "model", "module_path", "hook", "step", "tensor_name", "dtype", "shape",
                 "tags", "payload_sha256"]
        out.append({k: r[k] for k in order})
    return out


def laid_out(records):
    """The tensors of `records` in the writer's data order."""
    tensors = [(f"record/{i:08}", dtype, shape, payload)
               for i, (_, dtype, shape, payload) in enumerate(records)]
    tensors.sort(key=lambda t: (LAYOUT.index(t[1]), t[0]))
    return tensors


def pack_v1(pack_id, records):
    """A format-1 pack (docs/pack-format.md, "Reading older packs")."""
    descriptor = compact({"format_version": 1, "pack_id": pack_id,
                          "records": described(records)})
    envelope = compact({"format_version": 1,
                        "descriptor_sha256": hashlib.sha256(descriptor.encode()).hexdigest(),
                        "descriptor": descriptor})
    return safetensors(laid_out(records), {"capcat": envelope})


def pack(pack_id, records):
    """A format-2 pack, as docs/pack-format.md sections 1, 2 and 4 define
    it: `__metadata__` first with the pack digest its first key (offset
    47), the descriptor escaped once, the digest the SHA-256 of the header
    with its own 64 digits read as `0`."""
    descriptor = compact({"format_version": 2, "pack_id": pack_id,
                          "records": described(records)})
    head = safetensors(laid_out(records),
                       {"capcat_pack_sha256": "0" * 64, "capcat": descriptor})
    n = struct.unpack("<Q", head[:8])[0]
    assert head[8:47] == b'{"__metadata__":{"capcat_pack_sha256":"', head[:60]
    digest = hashlib.sha256(head[:8 + n]).hexdigest().encode()
    return head[:47] + digest + head[111:]


def meta(i, module_path="model.layers.0.mlp", tensor="output", tenant="tenant-seed"):
    return {"tenant_id": tenant, "experiment_id": "exp", "run_id": "run-0001",
            "captured_at_ns": 1_764_000_000_000_000_000 + i,
            "capture_id": f"00000000-0000-4000-8000-{i:012x}", "model": "Qwen/Qwen2.5-0.5B",
            "module_path": module_path, "hook": "forward_output", "step": i,
            "tensor_name": tensor, "tags": {"source": "seed"}}


def payload(dtype, shape, seed):
    count = 1
    for d in shape:
        count *= d
    rng = random.Random(seed)
    if dtype == "BOOL":
        return bytes(rng.randrange(2) for _ in range(count))
    return bytes(rng.randrange(256) for _ in range(count * SIZES[dtype]))


def packs():
    t = "pack_reader"
    write(t, "golden.safetensors", GOLDEN.read_bytes())
    write(t, "golden-v1.safetensors", GOLDEN_V1.read_bytes())
    # Each pack below in format 2, and again in format 1, which readers
    # still open and verify.
    # Demo-shaped: Qwen2.5-0.5B module paths, BF16 hidden states of width
    # 896 cut to 16 so the seed stays small, one record per hook site.
    demo = []
    for i, (path, tensor) in enumerate([("model.embed_tokens", "output"),
                                        ("model.layers.0.self_attn", "attn_output"),
                                        ("model.layers.0.mlp", "output"),
                                        ("model.layers.23.mlp", "output"),
                                        ("model.norm", "output"),
                                        ("lm_head", "logits")]):
        demo.append((meta(i, path, tensor), "BF16", [1, 16], payload("BF16", [1, 16], i)))
    write(t, "demo-shaped.pack", pack("00000000-0000-4000-8000-00000000d3e0", demo))
    write(t, "demo-shaped-v1.pack", pack_v1("00000000-0000-4000-8000-00000000d3e0", demo))
    every = [(meta(i), d, [2, 1] if i % 2 else [3], payload(d, [2, 1] if i % 2 else [3], i))
             for i, d in enumerate(LAYOUT)]
    write(t, "every-dtype.pack", pack("00000000-0000-4000-8000-0000000000ad", every))
    write(t, "every-dtype-v1.pack", pack_v1("00000000-0000-4000-8000-0000000000ad", every))
    edge = [(meta(0), "F32", [], payload("F32", [], 0)),          # a scalar
            (meta(1), "I64", [0, 5], b""),                        # an empty tensor
            (meta(2, tenant="other"), "BOOL", [4], bytes([0, 1, 1, 0]))]
    write(t, "edge-shapes.pack", pack("00000000-0000-4000-8000-0000000000ed", edge))
    write(t, "edge-shapes-v1.pack", pack_v1("00000000-0000-4000-8000-0000000000ed", edge))
    write(t, "no-records.pack", pack("00000000-0000-4000-8000-000000000000", []))
    write(t, "no-records-v1.pack", pack_v1("00000000-0000-4000-8000-000000000000", []))
    write(t, "empty", b"")
    write(t, "prefix-only", struct.pack("<Q", 0))
    write(t, "length-past-end", struct.pack("<Q", 1 << 40) + b"{}")
    write(t, "empty-header", safetensors([]))
    write(t, "plain-safetensors", safetensors([("x", "F32", [2], b"\0" * 8)]))
    # pack_structured reads records and mutations through `arbitrary`: any
    # bytes are an input; these give it records to start from.
    rng = random.Random(7)
    for n in (64, 256, 1024, 2048):
        write("pack_structured", f"random-{n}", bytes(rng.randrange(256) for _ in range(n)))


def ingest():
    t = "ingest"
    write(t, "golden.safetensors", GOLDEN.read_bytes())
    for d in LAYOUT:
        write(t, f"one-{d.lower()}.safetensors",
              safetensors([(f"t.{d.lower()}", d, [2, 2], payload(d, [2, 2], 3))]))
    write(t, "several.safetensors", safetensors(
        [("b.weight", "F32", [3], payload("F32", [3], 1)),
         ("a.bias", "BF16", [2], payload("BF16", [2], 2)),
         ("c.mask", "BOOL", [3], bytes([1, 0, 1]))], {"format": "pt"}))
    write(t, "bool-byte-2.safetensors", safetensors([("m", "BOOL", [2], bytes([1, 2]))]))
    write(t, "unsupported-u16.safetensors", safetensors([("u", "U16", [1], b"\1\0")]))
    write(t, "zero-size.safetensors", safetensors([("z", "F32", [0, 3], b"")]))
    write(t, "scalar.safetensors", safetensors([("s", "I64", [], payload("I64", [], 4))]))
    write(t, "empty", b"")


def text_seeds():
    t = "cursor"
    write(t, "plain", "c1:12:1764000000000000000:0dd5a1e5-0000-4000-8000-000000010000:tenant:exp:run")
    write(t, "escapes", "c1:0:0:00000000-0000-0000-0000-000000000000:a%3Ab:%25:%253A")
    write(t, "bad-escape", "c1:1:2:00000000-0000-0000-0000-000000000001:a%3:b:c")
    write(t, "wrong-version", "c2:1:2:00000000-0000-0000-0000-000000000001:a:b:c")
    write(t, "too-few", "c1:1:2")
    write(t, "unicode", "c1:18446744073709551615:1:00000000-0000-0000-0000-000000000001:té%:ü:✓")

    t = "demand_codec"
    write(t, "doc-example", '{"v":1,"sealed":12,"sealed_epoch":2,"merged":8,"merged_epoch":1,'
                            '"bytes":4096,"sealed_times":[[9,1000],[10,1100]]}')
    write(t, "nulls", '{"v":0,"sealed":null,"sealed_epoch":null,"merged":null,'
                      '"merged_epoch":null,"bytes":0,"sealed_times":[]}')
    times = ",".join(f"[{g},{1000 + g}]" for g in range(1, 65))
    write(t, "full", '{"v":1,"sealed":64,"sealed_epoch":1,"merged":null,"merged_epoch":null,'
                     f'"bytes":18446744073709551615,"sealed_times":[{times}]}}')
    write(t, "spaced", '{ "v" : 1 , "sealed" : 3 , "sealed_epoch" : 1 , "merged" : 1 , '
                       '"merged_epoch" : 1 , "bytes" : 7 , "sealed_times" : [ [ 2 , 5 ] ] }\n')
    write(t, "newer", '{"v":2,"anything":true}')
    write(t, "half-mark", '{"v":1,"sealed":3,"sealed_epoch":null,"merged":null,'
                          '"merged_epoch":null,"bytes":0,"sealed_times":[]}')

    t = "config"
    # Byte 0 even: the rest is TOML text; odd: a document built from the
    # field names by `arbitrary`.
    write(t, "defaults", b"\0")
    write(t, "operations", b"\0" + b"""spool_dir = "/var/lib/capcat/spool"
catalog_prefix = "capcat"
store_id = "s3-main"
holder = "capcat-service@host"
poll_interval_s = 0.05
max_backoff_s = 30
lease_ttl_s = 30
publish_timeout_s = 10
close_flush_timeout_s = 30
catalog_url = "http://127.0.0.1:8123"
s3_endpoint = "http://127.0.0.1:9000"
allow_insecure_http = true
reconcile_interval_s = 300
max_pack_records = 4096
max_pack_payload_bytes = 1073741824
read_byte_limit = 4294967296
read_request_limit = 100000
""")
    write(t, "nan", b"\0poll_interval_s = nan\n")
    write(t, "huge", b"\0close_flush_timeout_s = 1e19\nlease_ttl_s = 1e18\n")
    write(t, "unknown", b"\0lease_tll_s = 9\n")
    rng = random.Random(11)
    for n in (32, 128, 512):
        write(t, f"random-{n}", bytes([1]) + bytes(rng.randrange(256) for _ in range(n)))

    t = "status"
    status = {"format": 1, "pid": 4242, "written_at": 1764000000000, "holder": "capcat-service",
              "catalog_prefix": "capcat", "closed": False,
              "snapshot": {"uploaded": 3, "indexed": 2, "pending_index": 1, "spool_ready": 0,
                           "replays_skipped": 0,
                           "rejected_packs": [{"pack_id": "0dd5a1e5-0000-4000-8000-000000010000",
                                               "reason": "refused 5 times"}],
                           "batch_splits": 0, "reconcile_skipped_objects": 0,
                           "reconcile_head_errors": 0, "reconcile_recovered": 0, "cycles": 9,
                           "failed_cycles": 1, "lease_renewals": 4, "lease_renewal_failures": 0,
                           "lease_held": True, "last_error": "catalog outage", "drained": False,
                           "status_write_failures": 0,
                           "demand": {"published": 4, "dropped_full": 0, "failed": 0,
                                      "timed_out": 0, "scan_unchanged": 0,
                                      "scan_abandoned": 0}}}
    write(t, "running.json", json.dumps(status, indent=2))
    write(t, "older-build.json", compact({**status, "snapshot": {"uploaded": 1}}))
    write(t, "newer.json", '{"format": 99, "something": "new"}')
    write(t, "torn.json", json.dumps(status)[:120])
    write(t, "deep.json", "[" * 200 + "]" * 200)


def rows():
    t = "rows"
    # Byte 0: width - 1; then a type byte and a spelling byte per column
    # (types: 0 UInt64, 1 Int64, 2 String, 3 UUID, 4 Nullable(UInt64)); then
    # the mode (even: the rest is the answer; odd: rows built by arbitrary).
    head = bytes([3, 0, 2, 3, 4, 0, 0, 0, 0, 0])
    write(t, "four-columns", head + b"n\ts\tu\tmaybe\nUInt8\tString\tUUID\tNullable(UInt64)\n"
          b"7\ta\\tb\\nc\\\\d\\'\t00000000-0000-0000-0000-000000000001\t\\N\n"
          b"8\t\t00000000-0000-0000-0000-000000000002\t9\n")
    write(t, "header-only", head + b"n\ts\tu\tmaybe\nUInt64\tString\tUUID\tNullable(UInt64)\n")
    write(t, "truncated", head + b"n\ts\tu\tmaybe\nUInt64\tString\tUUID\tUInt64\n1\ta")
    lease = bytes([4, 0, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0])
    write(t, "lease-head", lease + b"n\ts\tu\tmaybe\tlease_id\nUInt64\tUUID\tString\tUInt64\tUInt64\n"
          b"1\t00000000-0000-0000-0000-000000000001\ta\t99\t1\n")
    write(t, "exception", bytes([0, 0, 0, 0]) + b"Code: 159. DB::Exception: Timeout exceeded: "
          b"elapsed 1.2 seconds. (TIMEOUT_EXCEEDED) (version 24.10.1.2812 (official build))\n")
    write(t, "exception-libchdb", bytes([0, 0, 0, 0]) + b"Code: 46. DB::Exception: Function "
          b"with name `nosuchfunc` does not exist. (UNKNOWN_FUNCTION)")
    rng = random.Random(13)
    write(t, "round-trip", bytes([3, 0, 1, 2, 4, 0, 1, 1, 0, 1]) +
          bytes(rng.randrange(256) for _ in range(256)))


def unstructured():
    # Targets that read everything through `arbitrary`: random bytes of a
    # few lengths, and the leading byte that picks a machine or a mode.
    rng = random.Random(17)
    for which in range(12):
        write("machines", f"machine-{which:02}",
              bytes([which]) + bytes(rng.randrange(256) for _ in range(200)))
    for mode in range(3):
        for n in (64, 512):
            write("http_front", f"mode{mode}-{n}",
                  bytes([mode]) + bytes(rng.randrange(256) for _ in range(n)))


if __name__ == "__main__":
    packs()
    ingest()
    text_seeds()
    rows()
    unstructured()
