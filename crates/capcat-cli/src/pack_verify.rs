//! `capcat pack verify FILE...`: check pack files written by any
//! implementation (Capcat's writer, a native C++ or Python one) on their
//! own, without a catalog or a store.
//!
//! Each file is opened with [`PackReader`], which checks, in this order and
//! stopping at the first failure: the framing (length prefix, header
//! length), the header JSON, the descriptor's presence and format version,
//! the tensor entries (dtypes, shapes against byte lengths, the tiling of
//! the data section), the pack digest, the descriptor, each record against
//! its tensor entry, then each record's payload digest and `BOOL` bytes
//! (docs/pack-format.md, "Reading a pack, step by step"). A pack carries
//! neither tensor summaries nor its CRC-64/NVME (docs/pack-format.md
//! sections 4 and 6), so those are compared only with `--manifest`: a
//! manifest as docs/pack-format.md section 7 describes it (the golden
//! vectors' `manifest.json`), whose pack facts, locators and summaries are
//! compared with the pack's, every summary recomputed from the payload
//! bytes.
//!
//! Each file gets one line: `ok` with a few facts, or `FAIL` with the first
//! difference found: the check, the record (index, tensor key, tensor name)
//! and the expected and actual values.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use capcat_pack::{Dtype, PackError, PackReader, Sha256Digest, TensorSummary, tensor_key};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::CliError;

/// A manifest (docs/pack-format.md section 7): what a pack must hold,
/// beyond what it carries itself.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format_version: u32,
    summary_version: u32,
    pack: ManifestPack,
    records: Vec<ManifestRecord>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestPack {
    /// The pack's file name next to the manifest; not compared (the file
    /// checked is the one named on the command line).
    #[serde(rename = "file")]
    _file: Option<String>,
    pack_id: Uuid,
    sha256: Sha256Digest,
    /// 16 lowercase hex digits; absent from a version-1 manifest.
    crc64nvme: Option<String>,
    byte_length: u64,
    record_count: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestRecord {
    index: usize,
    key: String,
    capture_id: Uuid,
    tensor_name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    offset: u64,
    length: u64,
    sha256: Sha256Digest,
    summary: TensorSummary,
}

/// The manifest at `path`, read and checked for consistency with itself.
fn read_manifest(path: &Path) -> Result<(Manifest, Option<u64>), CliError> {
    let bad = |reason: String| CliError::BadFlag {
        flag: "--manifest",
        value: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(CliError::at("read the manifest", path))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a pack manifest: {e}")))?;
    if manifest.pack.record_count != manifest.records.len() {
        return Err(bad(format!(
            "pack.record_count is {} but records lists {}",
            manifest.pack.record_count,
            manifest.records.len()
        )));
    }
    if let Some((position, record)) = manifest
        .records
        .iter()
        .enumerate()
        .find(|(i, r)| r.index != *i)
    {
        return Err(bad(format!(
            "records[{position}] has index {}",
            record.index
        )));
    }
    let crc = match &manifest.pack.crc64nvme {
        None => None,
        Some(text) => Some(
            Some(text)
                .filter(|t| t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|t| u64::from_str_radix(t, 16).ok())
                .ok_or_else(|| bad(format!("pack.crc64nvme {text:?} is not 16 hex digits")))?,
        ),
    };
    Ok((manifest, crc))
}

/// Why a file is not a valid pack: the first difference found.
#[derive(Debug)]
enum Problem {
    /// The file could not be read.
    Read(std::io::Error),
    /// The path is not a regular file (a FIFO would block the read).
    NotRegularFile,
    /// A check of the pack format failed, or a summary or CRC the manifest
    /// holds differs.
    Pack(PackError),
    /// A fact the manifest holds differs from the pack's.
    Manifest {
        /// The record it is about, if any.
        record: Option<usize>,
        /// The fact.
        what: &'static str,
        /// The manifest's value.
        expected: String,
        /// The pack's.
        actual: String,
    },
}

/// Opens `path` as a pack and, with a manifest, compares it; the reader on
/// success, otherwise the first problem described as `<check>: <detail>`
/// (the file's bytes, when they were read, name a failing record's tensor).
fn check(path: &Path, manifest: Option<&(Manifest, Option<u64>)>) -> Result<PackReader, String> {
    let failure = |problem: Problem, bytes: &[u8]| {
        let (what, detail) = describe(&problem, bytes);
        format!("{what}: {detail}")
    };
    match std::fs::metadata(path) {
        Err(e) => return Err(failure(Problem::Read(e), &[])),
        Ok(meta) if !meta.is_file() => return Err(failure(Problem::NotRegularFile, &[])),
        Ok(_) => {}
    }
    let bytes = Bytes::from(std::fs::read(path).map_err(|e| failure(Problem::Read(e), &[]))?);
    let reader =
        PackReader::from_bytes(bytes.clone()).map_err(|e| failure(Problem::Pack(e), &bytes))?;
    if let Some((manifest, crc)) = manifest {
        compare(&reader, manifest, *crc).map_err(|problem| failure(problem, &bytes))?;
    }
    Ok(reader)
}

/// The first difference between a verified pack and `manifest`: the pack's
/// facts, then record by record its locator and recomputed summary.
fn compare(reader: &PackReader, manifest: &Manifest, crc: Option<u64>) -> Result<(), Problem> {
    fn differs<T: PartialEq + ToString>(
        record: Option<usize>,
        what: &'static str,
        expected: &T,
        actual: &T,
    ) -> Result<(), Problem> {
        if expected == actual {
            Ok(())
        } else {
            Err(Problem::Manifest {
                record,
                what,
                expected: expected.to_string(),
                actual: actual.to_string(),
            })
        }
    }
    let pack = &manifest.pack;
    differs(
        None,
        "format version",
        &manifest.format_version,
        &reader.format_version(),
    )?;
    differs(
        None,
        "summary version",
        &manifest.summary_version,
        &capcat_pack::SUMMARY_VERSION,
    )?;
    differs(None, "pack id", &pack.pack_id, &reader.pack_id())?;
    differs(
        None,
        "byte length",
        &pack.byte_length,
        &(reader.bytes().len() as u64),
    )?;
    if pack.sha256 != reader.pack_sha256() {
        return Err(Problem::Pack(PackError::PackChecksumMismatch {
            expected: pack.sha256,
            actual: reader.pack_sha256(),
        }));
    }
    if let Some(crc) = crc {
        reader.verify_crc64nvme(crc).map_err(Problem::Pack)?;
    }
    differs(None, "record count", &manifest.records.len(), &reader.len())?;
    for (record, (locator, entry)) in manifest
        .records
        .iter()
        .zip(reader.locators().iter().zip(reader.records()))
    {
        let at = Some(locator.index);
        let metadata = &entry.metadata;
        differs(at, "key", &record.key, &tensor_key(locator.index))?;
        differs(
            at,
            "capture id",
            &record.capture_id,
            &metadata.identity.capture_id,
        )?;
        differs(
            at,
            "tensor name",
            &record.tensor_name,
            &metadata.tensor_name,
        )?;
        differs(at, "dtype", &record.dtype, &metadata.dtype)?;
        differs(
            at,
            "shape",
            &format!("{:?}", record.shape),
            &format!("{:?}", metadata.shape),
        )?;
        differs(at, "offset", &record.offset, &locator.offset)?;
        differs(at, "length", &record.length, &locator.length)?;
        differs(at, "payload digest", &record.sha256, &locator.sha256)?;
        reader
            .verify_summary(locator.index, &record.summary)
            .map_err(Problem::Pack)?;
    }
    Ok(())
}

/// Record `index` as a person finds it: its index, its tensor key, when the
/// descriptor can be read its tensor name, and the capture id when known.
fn record_label(bytes: &[u8], index: usize, capture_id: Option<&Uuid>) -> String {
    let mut label = format!("record {index} (`{}`", tensor_key(index));
    if let Some(name) = tensor_name(bytes, index) {
        label.push_str(&format!(", tensor `{name}`"));
    }
    if let Some(id) = capture_id {
        label.push_str(&format!(", capture {id}"));
    }
    label.push(')');
    label
}

/// The descriptor's `tensor_name` of record `index`, read loosely (no
/// check: this only names a record a failed check is about).
fn tensor_name(bytes: &[u8], index: usize) -> Option<String> {
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header: Value = serde_json::from_slice(bytes.get(8..8_usize.checked_add(n)?)?).ok()?;
    let text = header.get("__metadata__")?.get("capcat")?.as_str()?;
    let mut descriptor: Value = serde_json::from_str(text).ok()?;
    // A version-1 pack's `capcat` value is an envelope around the
    // descriptor text.
    if let Some(inner) = descriptor.get("descriptor").and_then(Value::as_str) {
        descriptor = serde_json::from_str(inner).ok()?;
    }
    descriptor
        .get("records")?
        .get(index)?
        .get("tensor_name")?
        .as_str()
        .map(str::to_owned)
}

/// The check that failed and the first difference, in plain words.
fn describe(problem: &Problem, bytes: &[u8]) -> (&'static str, String) {
    use PackError as E;
    let record = |index: usize| record_label(bytes, index, None);
    let error = match problem {
        Problem::Read(e) => return ("read", e.to_string()),
        Problem::NotRegularFile => return ("read", "not a regular file".to_owned()),
        Problem::Manifest {
            record: at,
            what,
            expected,
            actual,
        } => {
            let mut text = String::new();
            if let Some(index) = at {
                text.push_str(&format!("{}: ", record(*index)));
            }
            text.push_str(&format!(
                "{what}: expected {expected} (the manifest's), got {actual} (the pack's)"
            ));
            return ("manifest", text);
        }
        Problem::Pack(error) => error,
    };
    match error {
        E::Truncated { .. } | E::HeaderLengthPastEnd { .. } | E::HeaderTooLarge { .. } => {
            ("framing", error.to_string())
        }
        E::HeaderNotJson { .. } | E::MalformedHeader { .. } => ("header", error.to_string()),
        E::UnsupportedFormatVersion { .. } => ("format version", error.to_string()),
        E::MissingDescriptor | E::MalformedDescriptor { .. } | E::DuplicateCapture { .. } => {
            ("descriptor", error.to_string())
        }
        E::DescriptorChecksumMismatch { expected, actual } => (
            "descriptor digest",
            format!(
                "expected {expected} (descriptor_sha256 in the version-1 envelope), \
                 got {actual} (SHA-256 of the descriptor text)"
            ),
        ),
        E::UnknownDtype { .. }
        | E::OffsetOutOfRange { .. }
        | E::OffsetsNotContiguous { .. }
        | E::DataSectionNotCovered { .. } => ("tensor entries", error.to_string()),
        E::ShapeMismatch {
            context,
            dtype,
            shape,
            expected,
            actual,
        } => (
            "tensor entries",
            match expected {
                Some(needed) => format!(
                    "{context}: dtype {dtype} and shape {shape:?} need {needed} bytes, \
                     its data offsets give {actual}"
                ),
                None => format!(
                    "{context}: dtype {dtype} and shape {shape:?} need more bytes than \
                     64 bits count, its data offsets give {actual}"
                ),
            },
        ),
        E::HeaderChecksumMismatch { stored, actual } => (
            "pack digest",
            format!(
                "expected {stored} (capcat_pack_sha256 in the header), got {actual} \
                 (SHA-256 of file bytes 0..8+N with those 64 digits read as '0'): \
                 a header byte differs from the bytes the writer hashed"
            ),
        ),
        E::PackChecksumMismatch { expected, actual } => (
            "pack digest",
            format!("expected {expected} (the manifest's), got {actual} (the pack's)"),
        ),
        E::EntryDisagrees {
            index,
            field,
            entry,
            descriptor,
        } => (
            "records vs entries",
            format!(
                "{}: {field}: the descriptor says {descriptor}, the safetensors entry says {entry}",
                record(*index)
            ),
        ),
        E::MissingTensor { index, key } => (
            "records vs entries",
            format!(
                "{}: the descriptor lists it but the header has no tensor `{key}`",
                record(*index)
            ),
        ),
        E::UnexpectedTensor { key } => (
            "records vs entries",
            format!("the header has tensor `{key}` but no descriptor record describes it"),
        ),
        E::PayloadChecksumMismatch {
            index,
            capture_id,
            expected,
            actual,
        } => (
            "payload digest",
            format!(
                "{}: expected {expected} (payload_sha256 in the descriptor), \
                 got {actual} (SHA-256 of the payload bytes)",
                record_label(bytes, *index, Some(capture_id))
            ),
        ),
        E::InvalidBool {
            context,
            position,
            byte,
        } => {
            // The reader names the record `record N`.
            let which = context
                .strip_prefix("record ")
                .and_then(|i| i.parse().ok())
                .map_or_else(|| context.clone(), record);
            (
                "payload values",
                format!("{which}: BOOL element {position} is byte {byte}, expected 0 or 1"),
            )
        }
        E::SummaryMismatch {
            index,
            field,
            expected,
            actual,
            ..
        } => (
            "summary",
            format!(
                "{}: {field}: expected {expected} (the manifest's), got {actual} \
                 (recomputed from the payload)",
                record(*index)
            ),
        ),
        E::Crc64NvmeMismatch {
            expected, actual, ..
        } => (
            "CRC-64/NVME",
            format!("expected {expected:016x} (the manifest's), got {actual:016x} (the file's)"),
        ),
        E::Io { source, .. } => ("read", source.to_string()),
        _ => ("pack", error.to_string()),
    }
}

/// `capcat pack verify [--manifest M] FILE...`: one line per file; fails
/// when any file fails.
pub(crate) fn verify(files: &[PathBuf], manifest: Option<&Path>) -> Result<(), CliError> {
    let manifest = match manifest {
        None => None,
        Some(path) if files.len() == 1 => Some((read_manifest(path)?, path)),
        Some(path) => {
            return Err(CliError::BadFlag {
                flag: "--manifest",
                value: path.display().to_string(),
                reason: format!(
                    "a manifest describes one pack, but {} files are given",
                    files.len()
                ),
            });
        }
    };
    let mut failed = 0_usize;
    for path in files {
        match check(path, manifest.as_ref().map(|(m, _)| m)) {
            Ok(reader) => {
                let payload_bytes: u64 = reader.locators().iter().map(|l| l.length).sum();
                let mut line = format!(
                    "ok   {}: valid pack, format version {}, {} record(s), {payload_bytes} \
                     payload bytes, pack {}",
                    path.display(),
                    reader.format_version(),
                    reader.len(),
                    reader.pack_id()
                );
                if let Some(((_, crc), manifest_path)) = &manifest {
                    line.push_str(&format!(
                        "; matches {} (pack digest, {}locators and recomputed summaries)",
                        manifest_path.display(),
                        if crc.is_some() { "CRC-64/NVME, " } else { "" }
                    ));
                }
                println!("{line}");
            }
            Err(failure) => {
                failed += 1;
                println!("FAIL {}: {failure}", path.display());
            }
        }
    }
    if failed > 0 {
        return Err(CliError::PacksInvalid {
            failed,
            checked: files.len(),
        });
    }
    Ok(())
}
