//! `capcat pack verify`, run as a user runs it (the `capcat` binary; no
//! engine, no catalog, no store): it accepts the golden packs (and the fuzz
//! seeds, written by an independent Python writer), and refuses every
//! corruption `capcat-pack`'s own tests make (tests/bad_input.rs,
//! tests/golden.rs), each made here on a copy of the golden pack, naming the
//! check that failed, the record and the expected and actual values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use capcat_pack::{DIGEST_KEY, METADATA_KEY, Sha256Digest};
use serde_json::{Value, json};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/golden")
}

fn golden() -> Vec<u8> {
    std::fs::read(golden_dir().join("pack.safetensors")).unwrap()
}

fn golden_v1() -> Vec<u8> {
    std::fs::read(golden_dir().join("v1/pack.safetensors")).unwrap()
}

fn manifest() -> Value {
    serde_json::from_str(&std::fs::read_to_string(golden_dir().join("manifest.json")).unwrap())
        .unwrap()
}

/// Record `index`'s payload range in the golden pack, from its manifest.
fn payload_range(index: usize) -> std::ops::Range<usize> {
    let record = &manifest()["records"][index];
    let offset = record["offset"].as_u64().unwrap() as usize;
    offset..offset + record["length"].as_u64().unwrap() as usize
}

/// What one run printed: success, standard output, standard error.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn capcat(args: &[&str], files: &[&Path]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_capcat"))
        .args(["pack", "verify"])
        .args(args)
        .args(files)
        .output()
        .unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Writes `bytes` as `name` in `dir` and returns its path.
fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn accepted(dir: &Path, name: &str, bytes: &[u8]) {
    let path = write(dir, name, bytes);
    let run = capcat(&[], &[&path]);
    assert!(run.ok, "{name} was refused:\n{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .starts_with(&format!("ok   {}: valid pack", path.display())),
        "{name}: {}",
        run.stdout
    );
}

/// Runs `capcat pack verify [args] FILE` on `bytes` and checks it fails with
/// one `FAIL FILE: <check>: ...` line holding every one of `needles`.
fn refused_with(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    args: &[&str],
    check: &str,
    needles: &[&str],
) {
    let path = write(dir, name, bytes);
    let run = capcat(args, &[&path]);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(!run.ok, "{name} was accepted:\n{said}");
    let prefix = format!("FAIL {}: {check}: ", path.display());
    assert!(
        run.stdout.starts_with(&prefix) && run.stdout.lines().count() == 1,
        "{name}: expected one line starting {prefix:?}, got:\n{said}"
    );
    for needle in needles {
        assert!(
            run.stdout.contains(needle),
            "{name}: no {needle:?} in:\n{said}"
        );
    }
    assert!(
        run.stderr
            .contains("capcat: 1 of 1 pack file(s) failed verification"),
        "{name}: {said}"
    );
}

fn refused(dir: &Path, name: &str, bytes: &[u8], check: &str, needles: &[&str]) {
    refused_with(dir, name, bytes, &[], check, needles);
}

// The rewriting helpers of crates/capcat-pack/tests/bad_input.rs: an edit
// of the header, resealed, so that only the edit is wrong.

fn header_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

fn header_text(bytes: &[u8]) -> &str {
    std::str::from_utf8(&bytes[8..8 + header_len(bytes)])
        .unwrap()
        .trim_end()
}

/// Writes the pack digest of `head` (length prefix and header) into its
/// slot, as docs/pack-format.md section 4 defines it; leaves a header
/// without the slot as it is.
fn reseal(head: &mut [u8]) {
    let prefix = format!(r#"{{"__metadata__":{{"{DIGEST_KEY}":""#);
    if !head[8..].starts_with(prefix.as_bytes()) {
        return;
    }
    let slot = 8 + prefix.len();
    head[slot..slot + 64].fill(b'0');
    let digest = Sha256Digest::of(head);
    head[slot..slot + 64].copy_from_slice(digest.to_hex().as_bytes());
}

/// The header JSON `text` over the data section of `bytes`, resealed.
fn with_header_text(bytes: &[u8], text: &[u8]) -> Vec<u8> {
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    reseal(&mut out);
    out.extend(&bytes[8 + header_len(bytes)..]);
    out
}

/// The header rewritten by `edit`, the digest key first (when present).
fn with_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_str(header_text(bytes)).unwrap();
    edit(&mut header);
    let metadata = header.remove("__metadata__");
    let mut text = Vec::new();
    match metadata {
        Some(Value::Object(mut metadata)) if metadata.contains_key(DIGEST_KEY) => {
            metadata.remove(DIGEST_KEY);
            text.extend(
                format!(r#"{{"__metadata__":{{"{DIGEST_KEY}":"{}""#, "0".repeat(64)).bytes(),
            );
            for (key, value) in &metadata {
                text.extend(format!(",{}:{}", Value::from(key.as_str()), value).bytes());
            }
            text.push(b'}');
            for (key, value) in &header {
                text.extend(format!(",{}:{}", Value::from(key.as_str()), value).bytes());
            }
            text.push(b'}');
        }
        other => {
            if let Some(metadata) = other {
                header.insert("__metadata__".to_owned(), metadata);
            }
            text = serde_json::to_vec(&header).unwrap();
        }
    }
    with_header_text(bytes, &text)
}

/// The descriptor rewritten by `edit`, resealed.
fn with_descriptor(bytes: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    with_header(bytes, |header| {
        let text = header["__metadata__"][METADATA_KEY]
            .as_str()
            .unwrap()
            .to_owned();
        let mut descriptor: Value = serde_json::from_str(&text).unwrap();
        edit(&mut descriptor);
        header["__metadata__"][METADATA_KEY] = Value::String(descriptor.to_string());
    })
}

/// The digest the header carries (bytes 47..111).
fn stored_digest(bytes: &[u8]) -> String {
    String::from_utf8(bytes[47..111].to_vec()).unwrap()
}

/// The digest the header hashes to.
fn actual_digest(bytes: &[u8]) -> String {
    let mut head = bytes[..8 + header_len(bytes)].to_vec();
    reseal(&mut head);
    stored_digest(&head)
}

#[test]
fn the_golden_packs_and_the_fuzz_seed_packs_are_valid() {
    let dir = golden_dir();
    let run = capcat(
        &[],
        &[
            &dir.join("pack.safetensors"),
            &dir.join("v1/pack.safetensors"),
        ],
    );
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    for (line, version) in lines.iter().zip([2, 1]) {
        assert!(
            line.ends_with(&format!(
                ": valid pack, format version {version}, 13 record(s), 162 payload bytes, \
                 pack 0dd5a1e5-0000-4000-8000-000000000001"
            )),
            "{line}"
        );
    }
    // With their manifests: pack digest, CRC (version 2 only), locators and
    // every summary, recomputed.
    for (pack, manifest, crc) in [
        ("pack.safetensors", "manifest.json", true),
        ("v1/pack.safetensors", "v1/manifest.json", false),
    ] {
        let manifest = dir.join(manifest);
        let run = capcat(
            &["--manifest", manifest.to_str().unwrap()],
            &[&dir.join(pack)],
        );
        assert!(run.ok, "{pack}: {}{}", run.stdout, run.stderr);
        let expected = format!(
            "; matches {} (pack digest, {}locators and recomputed summaries)\n",
            manifest.display(),
            if crc { "CRC-64/NVME, " } else { "" }
        );
        assert!(run.stdout.ends_with(&expected), "{}", run.stdout);
    }
    // The fuzz seeds' packs come from fuzz/seeds/make_seeds.py, a writer
    // of docs/pack-format.md independent of capcat-pack.
    let seeds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/pack_reader");
    let mut packs: Vec<PathBuf> = std::fs::read_dir(&seeds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    packs.sort();
    assert_eq!(packs.len(), 8, "{packs:?}");
    let refs: Vec<&Path> = packs.iter().map(PathBuf::as_path).collect();
    let run = capcat(&[], &refs);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.matches("ok   ").count(), 8, "{}", run.stdout);
}

#[test]
fn the_rewriting_helpers_leave_a_valid_pack_valid() {
    // Guards the tests below: each corruption fails for its own reason, not
    // because rewriting the header broke the pack.
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    accepted(dir, "header.pack", &with_header(&golden(), |_| {}));
    accepted(dir, "descriptor.pack", &with_descriptor(&golden(), |_| {}));
    let padded = format!("{}{}", header_text(&golden()), " ".repeat(8));
    accepted(
        dir,
        "padded.pack",
        &with_header_text(&golden(), padded.as_bytes()),
    );
    accepted(dir, "v1-header.pack", &with_header(&golden_v1(), |_| {}));
}

#[test]
fn framing_and_header_corruptions_are_refused_naming_the_check() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pack = golden();
    let n = header_len(&pack);

    // Truncated: in the length prefix, in the header, just after it, and by
    // the last byte.
    refused(
        dir,
        "trunc-3.pack",
        &pack[..3],
        "framing",
        &["needs 8 bytes but only 3"],
    );
    refused(
        dir,
        "trunc-100.pack",
        &pack[..100],
        "framing",
        &["points past the end of a 100-byte pack"],
    );
    refused(
        dir,
        "trunc-header.pack",
        &pack[..8 + n],
        "tensor entries",
        &["outside the 0-byte data section"],
    );
    refused(
        dir,
        "trunc-1.pack",
        &pack[..pack.len() - 1],
        "tensor entries",
        &["outside the 161-byte data section"],
    );

    let mut bytes = pack.clone();
    bytes[..8].copy_from_slice(&(pack.len() as u64).to_le_bytes());
    refused(
        dir,
        "past-end.pack",
        &bytes,
        "framing",
        &["points past the end"],
    );
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    refused(
        dir,
        "huge.pack",
        &bytes,
        "framing",
        &["exceeds the 100000000-byte limit"],
    );

    let mut bytes = pack.clone();
    bytes[8] = b'[';
    refused(
        dir,
        "not-json.pack",
        &bytes,
        "header",
        &["header is not a JSON object"],
    );

    // The pack digest not at its fixed place (keys sorted), and absent.
    let sorted = serde_json::to_vec(
        &serde_json::from_str::<serde_json::Map<String, Value>>(header_text(&pack)).unwrap(),
    )
    .unwrap();
    refused(
        dir,
        "digest-elsewhere.pack",
        &with_header_text(&pack, &sorted),
        "header",
        &["__metadata__"],
    );
    let no_digest = with_header(&pack, |h| {
        h["__metadata__"]
            .as_object_mut()
            .unwrap()
            .remove(DIGEST_KEY);
    });
    refused(
        dir,
        "no-digest.pack",
        &no_digest,
        "header",
        &["__metadata__"],
    );

    // A repeated tensor entry and a repeated metadata key.
    let text = header_text(&pack);
    let first = text.find("\"record/").unwrap();
    let entry_end = first + text[first..].find('}').unwrap() + 1;
    let doubled = format!("{},{}", &text[..entry_end], &text[first..]);
    refused(
        dir,
        "dup-entry.pack",
        &with_header_text(&pack, doubled.as_bytes()),
        "header",
        &["twice"],
    );
    let at = text.find(r#","capcat":"#).unwrap();
    let doubled = format!("{}{}\"{{}}\"{}", &text[..at], r#","capcat":"#, &text[at..]);
    refused(
        dir,
        "dup-metadata.pack",
        &with_header_text(&pack, doubled.as_bytes()),
        "header",
        &["twice"],
    );

    let extra = with_header(&pack, |h| h["__metadata__"]["format"] = "pt".into());
    refused(
        dir,
        "extra-metadata.pack",
        &extra,
        "header",
        &["unexpected key `format`"],
    );
    let extra = with_header(&pack, |h| h["record/00000000"]["extra"] = 1.into());
    refused(
        dir,
        "extra-field.pack",
        &extra,
        "header",
        &["record/00000000"],
    );
    let five = with_header(&pack, |h| h["__metadata__"]["capcat"] = 5.into());
    refused(dir, "descriptor-number.pack", &five, "header", &[]);
}

#[test]
fn entry_and_layout_corruptions_are_refused_naming_the_record() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pack = golden();

    // Overlap: the last tensor in the data section (BOOL, 3 bytes) moved
    // onto the end of the one before it, its own bytes dropped.
    let (begin, end) = (payload_range(10).start, payload_range(10).end);
    let data = 8 + header_len(&pack);
    let (b, e) = ((begin - data) as u64, (end - data) as u64);
    let len = e - b;
    let mut bytes = with_header(&pack, |h| {
        h["record/00000010"]["data_offsets"] = json!([b - len, b]);
    });
    bytes.truncate(bytes.len() - len as usize);
    refused(
        dir,
        "overlap.pack",
        &bytes,
        "tensor entries",
        &["record/00000010", "overlap"],
    );

    let bytes = with_header(&pack, |h| {
        h["record/00000001"]["data_offsets"] = json!([40, 1_000_000]);
    });
    refused(
        dir,
        "out-of-range.pack",
        &bytes,
        "tensor entries",
        &["record/00000001", "outside"],
    );
    let bytes = with_header(&pack, |h| {
        h["record/00000001"]["data_offsets"] = json!([5, 2]);
    });
    refused(dir, "backwards.pack", &bytes, "tensor entries", &["[5, 2)"]);

    let bytes = with_header(&pack, |h| h["record/00000000"]["shape"] = json!([2, 4]));
    refused(
        dir,
        "shape-bytes.pack",
        &bytes,
        "tensor entries",
        &["record/00000000", "need 64 bytes, its data offsets give 48"],
    );
    let bytes = with_header(&pack, |h| h["record/00000000"]["dtype"] = "U16".into());
    refused(
        dir,
        "u16.pack",
        &bytes,
        "tensor entries",
        &["unknown dtype `U16`"],
    );

    // Same byte length, another dtype or shape: only the descriptor tells.
    let bytes = with_header(&pack, |h| h["record/00000001"]["dtype"] = "I32".into());
    refused(
        dir,
        "entry-dtype.pack",
        &bytes,
        "records vs entries",
        &[
            "record 1 (`record/00000001`, tensor `f32_non_finite`): dtype: \
         the descriptor says F32, the safetensors entry says I32",
        ],
    );
    let bytes = with_header(&pack, |h| h["record/00000000"]["shape"] = json!([6]));
    refused(
        dir,
        "entry-shape.pack",
        &bytes,
        "records vs entries",
        &["record 0 (`record/00000000`, tensor `f64`): shape: \
         the descriptor says [2, 3], the safetensors entry says [6]"],
    );

    // A record without its tensor, a tensor without its record.
    let bytes = with_header(&pack, |h| {
        let entry = h.remove("record/00000001").unwrap();
        h.insert("stray".to_owned(), entry);
    });
    refused(
        dir,
        "missing-tensor.pack",
        &bytes,
        "records vs entries",
        &["record 1 (`record/00000001`, tensor `f32_non_finite`): \
         the descriptor lists it but the header has no tensor `record/00000001`"],
    );
    let bytes = with_descriptor(&pack, |d| {
        d["records"].as_array_mut().unwrap().pop();
    });
    refused(
        dir,
        "unexpected-tensor.pack",
        &bytes,
        "records vs entries",
        &["the header has tensor `record/00000012` but no descriptor record describes it"],
    );
}

#[test]
fn descriptor_and_version_corruptions_are_refused_naming_the_check() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pack = golden();

    for version in [0, 3] {
        let bytes = with_descriptor(&pack, |d| d["format_version"] = version.into());
        refused(
            dir,
            &format!("version-{version}.pack"),
            &bytes,
            "format version",
            &[&format!("unsupported pack format version {version}")],
        );
    }
    // A later version whose entries this build cannot read: refused as a
    // version, not as a dtype.
    let bytes = with_header(&pack, |h| {
        let mut d: Value =
            serde_json::from_str(h["__metadata__"][METADATA_KEY].as_str().unwrap()).unwrap();
        d["format_version"] = 3.into();
        h["__metadata__"][METADATA_KEY] = Value::String(d.to_string());
        h["record/00000000"]["dtype"] = "U16".into();
    });
    refused(
        dir,
        "version-3-u16.pack",
        &bytes,
        "format version",
        &["version 3"],
    );

    let plain = with_header(&pack, |h| {
        h.remove("__metadata__");
    });
    refused(
        dir,
        "plain.pack",
        &plain,
        "descriptor",
        &["not a Capcat pack"],
    );
    let bytes = with_header(&pack, |h| h["__metadata__"]["capcat"] = "{".into());
    refused(
        dir,
        "descriptor-syntax.pack",
        &bytes,
        "descriptor",
        &["malformed descriptor"],
    );
    let bytes = with_descriptor(&pack, |d| d["records"][0]["step"] = (-1).into());
    refused(
        dir,
        "negative-step.pack",
        &bytes,
        "descriptor",
        &["malformed descriptor"],
    );
    let bytes = with_descriptor(&pack, |d| {
        d["records"][2]["capture_id"] = d["records"][0]["capture_id"].clone();
    });
    refused(
        dir,
        "duplicate-capture.pack",
        &bytes,
        "descriptor",
        &["0dd5a1e5-0000-4000-8000-000000010000 appears twice"],
    );

    // Version 1: its descriptor digest is checked.
    let bytes = with_header(&golden_v1(), |h| {
        let mut envelope: Value =
            serde_json::from_str(h["__metadata__"][METADATA_KEY].as_str().unwrap()).unwrap();
        let descriptor =
            envelope["descriptor"]
                .as_str()
                .unwrap()
                .replacen("run-golden", "RUN-golden", 1);
        envelope["descriptor"] = descriptor.into();
        h["__metadata__"][METADATA_KEY] = Value::String(envelope.to_string());
    });
    refused(
        dir,
        "v1-descriptor.pack",
        &bytes,
        "descriptor digest",
        &["(descriptor_sha256 in the version-1 envelope)"],
    );
}

#[test]
fn digest_corruptions_are_refused_with_the_expected_and_the_actual_digest() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pack = golden();
    let manifest = manifest();

    // A flipped payload byte (record 2, the F16 tensor).
    let mut bytes = pack.clone();
    let range = payload_range(2);
    bytes[range.start + 1] ^= 0x01;
    let expected = manifest["records"][2]["sha256"].as_str().unwrap();
    let actual = Sha256Digest::of(&bytes[range]).to_hex();
    refused(
        dir,
        "flipped-payload.pack",
        &bytes,
        "payload digest",
        &[
            "record 2 (`record/00000002`, tensor `f16`, \
             capture 0dd5a1e5-0000-4000-8000-000000010002): expected",
            &format!("expected {expected} (payload_sha256 in the descriptor)"),
            &format!("got {actual} (SHA-256 of the payload bytes)"),
        ],
    );
    // Two flipped payloads: the first record in record order is reported.
    let range = payload_range(0);
    bytes[range.start] ^= 0x01;
    refused(
        dir,
        "two-flipped.pack",
        &bytes,
        "payload digest",
        &["record 0 (`record/00000000`, tensor `f64`, capture "],
    );

    // A wrong payload digest in the descriptor, resealed.
    let wrong = Sha256Digest::of(b"not the payload").to_hex();
    let bytes = with_descriptor(&pack, |d| {
        d["records"][5]["payload_sha256"] = wrong.clone().into();
    });
    let right = manifest["records"][5]["sha256"].as_str().unwrap();
    refused(
        dir,
        "wrong-digest.pack",
        &bytes,
        "payload digest",
        &[
            "record 5 (`record/00000005`, tensor `i64_min`, capture ",
            &format!("expected {wrong}"),
            &format!("got {right}"),
        ],
    );

    // A changed header byte: in the descriptor, in the digest itself, and
    // in the padding (a tab is JSON whitespace too); the header no longer
    // hashes to the digest it carries.
    let padded = with_header_text(
        &pack,
        format!("{}{}", header_text(&pack), " ".repeat(8)).as_bytes(),
    );
    let text = header_text(&pack);
    let step = 8 + text.find(r#"\"step\":101,"#).unwrap() + 11;
    let digit = if pack[48] == b'0' { b'1' } else { b'0' };
    let edits = [
        ("descriptor", pack.clone(), step, b'7'),
        ("digest", pack.clone(), 48, digit),
        (
            "padding",
            padded.clone(),
            8 + header_len(&padded) - 1,
            b'\t',
        ),
    ];
    for (what, base, at, byte) in edits {
        let mut bytes = base;
        assert_ne!(bytes[at], byte, "{what}");
        bytes[at] = byte;
        refused(
            dir,
            &format!("tampered-{what}.pack"),
            &bytes,
            "pack digest",
            &[
                &format!(
                    "expected {} (capcat_pack_sha256 in the header)",
                    stored_digest(&bytes)
                ),
                &format!(
                    "got {} (SHA-256 of file bytes 0..8+N",
                    actual_digest(&bytes)
                ),
            ],
        );
    }

    // A BOOL byte other than 0 or 1, under a digest that matches it.
    let range = payload_range(10);
    let mut bytes = pack.clone();
    bytes[range.start] = 2;
    let digest = Sha256Digest::of(&bytes[range]).to_hex();
    let bytes = with_descriptor(&bytes, |d| {
        d["records"][10]["payload_sha256"] = digest.into();
    });
    refused(
        dir,
        "bool-2.pack",
        &bytes,
        "payload values",
        &[
            "record 10 (`record/00000010`, tensor `bool`): BOOL element 0 is byte 2, expected 0 or 1",
        ],
    );
}

#[test]
fn a_manifest_checks_what_the_pack_does_not_carry() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pack = golden();
    fn with_manifest(
        dir: &Path,
        name: &str,
        bytes: &[u8],
        edit: &dyn Fn(&mut Value),
        check: &str,
        needles: &[&str],
    ) {
        let mut manifest = manifest();
        edit(&mut manifest);
        let path = write(
            dir,
            &format!("{name}.json"),
            manifest.to_string().as_bytes(),
        );
        refused_with(
            dir,
            &format!("{name}.pack"),
            bytes,
            &["--manifest", path.to_str().unwrap()],
            check,
            needles,
        );
    }

    // A summary: an exact integer maximum one off, and the same value
    // spelled as a float.
    with_manifest(
        dir,
        "summary-int",
        &pack,
        &|m| {
            m["records"][4]["summary"]["maximum"] = json!(9_223_372_036_854_775_806_i64);
        },
        "summary",
        &[
            "record 4 (`record/00000004`, tensor `i64_seed_near_max`): maximum: \
             expected 9223372036854775806 (the manifest's), got 9223372036854775807 \
             (recomputed from the payload)",
        ],
    );
    with_manifest(
        dir,
        "summary-float",
        &pack,
        &|m| m["records"][9]["summary"]["maximum"] = json!(255.0),
        "summary",
        &[
            "record 9 (`record/00000009`, tensor `u8`): maximum: expected 255.0",
            "got 255 ",
        ],
    );
    // A float one unit in the last place off: compared bit for bit.
    let mean = manifest()["records"][0]["summary"]["mean"]
        .as_f64()
        .unwrap();
    let below = f64::from_bits(mean.to_bits() - 1);
    with_manifest(
        dir,
        "summary-mean",
        &pack,
        &|m| m["records"][0]["summary"]["mean"] = json!(below),
        "summary",
        &[
            "record 0",
            &format!("mean: expected {below:?} (the manifest's), got {mean:?}"),
            "got 1.6666666666666668e299",
        ],
    );
    // The whole-file CRC-64/NVME and the pack digest.
    with_manifest(
        dir,
        "crc",
        &pack,
        &|m| m["pack"]["crc64nvme"] = "0000000000000001".into(),
        "CRC-64/NVME",
        &["expected 0000000000000001 (the manifest's), got 4190c302e7339aaf (the file's)"],
    );
    let other = Sha256Digest::of(b"another pack").to_hex();
    with_manifest(
        dir,
        "pack-digest",
        &pack,
        &|m| m["pack"]["sha256"] = other.clone().into(),
        "pack digest",
        &[&format!("expected {other} (the manifest's), got 149650f3")],
    );
    // A locator and a name.
    with_manifest(
        dir,
        "offset",
        &pack,
        &|m| m["records"][3]["offset"] = json!(7561),
        "manifest",
        &[
            "record 3 (`record/00000003`, tensor `bf16`): offset: expected 7561 (the manifest's), got 7560",
        ],
    );
    with_manifest(
        dir,
        "tensor-name",
        &pack,
        &|m| m["records"][7]["tensor_name"] = "i16x".into(),
        "manifest",
        &["tensor name: expected i16x (the manifest's), got i16 (the pack's)"],
    );

    // Version 1: a changed padding byte is covered by the whole-file digest
    // only, which only the manifest holds.
    let v1 = golden_v1();
    let n = header_len(&v1);
    assert_eq!(v1[8 + n - 1], b' ', "the version-1 golden header is padded");
    let mut padded = v1.clone();
    padded[8 + n - 1] = b'\t';
    accepted(dir, "v1-padding-alone.pack", &padded);
    let v1_manifest = golden_dir().join("v1/manifest.json");
    refused_with(
        dir,
        "v1-padding.pack",
        &padded,
        &["--manifest", v1_manifest.to_str().unwrap()],
        "pack digest",
        &["(the manifest's)"],
    );
}

#[test]
fn several_files_are_each_reported_and_any_failure_fails_the_run() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let good = write(dir, "good.pack", &golden());
    let mut bytes = golden();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let bad = write(dir, "bad.pack", &bytes);
    let absent = dir.join("absent.pack");
    let run = capcat(&[], &[&good, &bad, &absent, dir]);
    assert!(!run.ok, "{}", run.stdout);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", run.stdout);
    assert!(lines[0].starts_with(&format!("ok   {}: valid pack", good.display())));
    assert!(
        lines[1].starts_with(&format!(
            "FAIL {}: payload digest: record 10 (`record/00000010`, tensor `bool`, capture ",
            bad.display()
        )),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with(&format!("FAIL {}: read: ", absent.display())),
        "{}",
        lines[2]
    );
    assert_eq!(
        lines[3],
        format!("FAIL {}: read: not a regular file", dir.display())
    );
    assert!(
        run.stderr
            .contains("capcat: 3 of 4 pack file(s) failed verification"),
        "{}",
        run.stderr
    );

    // A manifest describes one pack.
    let manifest = golden_dir().join("manifest.json");
    let run = capcat(&["--manifest", manifest.to_str().unwrap()], &[&good, &good]);
    assert!(!run.ok);
    assert!(
        run.stderr.contains("a manifest describes one pack"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn flipped_bytes_anywhere_in_the_golden_pack_are_refused() {
    // A sample of every region (length prefix, fixed prefix, digest,
    // descriptor, entries, every payload) in one run: a stride prime to
    // every field's width.
    let work = tempfile::tempdir().unwrap();
    let pack = golden();
    let paths: Vec<PathBuf> = (0..pack.len())
        .step_by(13)
        .map(|at| {
            let mut bytes = pack.clone();
            bytes[at] ^= 1 << (at % 8);
            write(work.path(), &format!("{at}.pack"), &bytes)
        })
        .collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let run = capcat(&[], &refs);
    assert!(!run.ok);
    assert_eq!(run.stdout.lines().count(), paths.len());
    let accepted: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.starts_with("FAIL "))
        .collect();
    assert!(accepted.is_empty(), "{accepted:?}");
    assert!(
        run.stderr.contains(&format!(
            "{n} of {n} pack file(s) failed verification",
            n = paths.len()
        )),
        "{}",
        run.stderr
    );
}
