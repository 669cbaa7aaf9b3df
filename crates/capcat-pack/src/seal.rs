//! Sealing a pack: laying out the file, hashing the payloads on a few
//! threads while the caller's thread writes the file, and the pack digest.
//!
//! The payloads are hashed where the caller handed them over, in jobs of
//! whole records that every thread shares ([`parallel::share`]): a digest
//! does not depend on where its bytes sit. Meanwhile the caller's thread
//! writes the header and copies the payloads after it, then fills in each
//! payload digest as its job is done and hashes the header up to it (the
//! digests sit in the header in record order), so the pack digest is
//! mostly taken while the last jobs are still hashing.

use std::cmp::Reverse;
use std::ops::Range;

use bytes::Bytes;
use uuid::Uuid;

use crate::descriptor::FORMAT_VERSION;
use crate::digest::{Crc64Nvme, CrcRun, Sha256Digest};
use crate::encode::{self, EncodedRecord, Skeleton};
use crate::error::PackError;
use crate::header::{HeaderHasher, LENGTH_PREFIX};
use crate::info::{PackInfo, RecordLocator, SealedPack};
use crate::parallel::{self, Jobs};
use crate::record::RecordMetadata;

/// One appended record, validated.
#[derive(Debug)]
pub(crate) struct PendingRecord {
    pub(crate) metadata: RecordMetadata,
    pub(crate) payload: Bytes,
}

/// What hashing one job's payloads gives: each payload's digest, in the
/// job's (file) order, and the CRC run of the payloads end to end.
type Hashed = (Vec<Sha256Digest>, CrcRun);

/// Seals `records` (whose payloads sum to `payload_total` bytes) into pack
/// `pack_id`, hashing on up to `threads` threads.
pub(crate) fn seal(
    pack_id: Uuid,
    records: Vec<PendingRecord>,
    payload_total: usize,
    threads: usize,
) -> Result<SealedPack, PackError> {
    let (metadata, payloads): (Vec<RecordMetadata>, Vec<Bytes>) =
        records.into_iter().map(|r| (r.metadata, r.payload)).unzip();
    let layout = Layout::of(&metadata, &payloads);
    let capture_ids: Vec<Uuid> = metadata.iter().map(|m| m.identity.capture_id).collect();
    let jobs = parallel::runs_by_bytes(
        &layout.lengths,
        parallel::jobs_for(payload_total as u64, threads),
    );
    let payloads = &payloads;
    let layout = &layout;
    let jobs = &jobs;
    let sealed = parallel::share(
        threads,
        jobs.len(),
        |job| hash_payloads(payloads, &layout.order[jobs[job].clone()]),
        |hashed| {
            let (mut bytes, skeleton) =
                write_file(pack_id, metadata, payloads, layout, payload_total, hashed)?;
            let data_start = LENGTH_PREFIX + skeleton.header_len;
            // The header is at most 100 MB (the skeleton's writer checks),
            // so its end is a `usize`.
            let head = &mut bytes[..data_start as usize];
            let (digests, pack_sha256, data_crc) =
                fill_header(head, &skeleton, layout, jobs, hashed);
            let crc64nvme = CrcRun::of(head).then(data_crc).crc();
            Ok::<_, PackError>((bytes, digests, pack_sha256, crc64nvme, data_start))
        },
    );
    let (bytes, digests, pack_sha256, crc64nvme, data_start) = sealed?;
    let records = capture_ids
        .into_iter()
        .zip(&layout.begins)
        .zip(payloads)
        .zip(digests)
        .enumerate()
        .map(
            |(index, (((capture_id, &begin), payload), sha256))| RecordLocator {
                index,
                capture_id,
                offset: data_start + begin,
                length: payload.len() as u64,
                sha256,
            },
        )
        .collect();
    let info = PackInfo {
        pack_id,
        format_version: FORMAT_VERSION,
        pack_sha256,
        crc64nvme,
        byte_length: bytes.len() as u64,
        records,
    };
    Ok(SealedPack {
        bytes: Bytes::from(bytes),
        info,
    })
}

/// Where each payload goes in the data section.
struct Layout {
    /// Record indexes in data-section order. safetensors orders the data
    /// section by descending dtype alignment, then by key; record keys sort
    /// in record order. The round-trip tests check that the safetensors
    /// crate reads these offsets back.
    order: Vec<usize>,
    /// Each record's offset in the data section, by record index.
    begins: Vec<u64>,
    /// Each payload's length in data-section order (`order`'s), which the
    /// hashing jobs are cut by.
    lengths: Vec<u64>,
}

impl Layout {
    fn of(metadata: &[RecordMetadata], payloads: &[Bytes]) -> Self {
        let mut order: Vec<usize> = (0..metadata.len()).collect();
        order.sort_by_key(|&i| (Reverse(metadata[i].dtype.to_safetensors()), i));
        let mut begins = vec![0u64; metadata.len()];
        let mut lengths = Vec::with_capacity(order.len());
        let mut next = 0u64;
        for &i in &order {
            let length = payloads[i].len() as u64;
            begins[i] = next;
            lengths.push(length);
            next += length;
        }
        Self {
            order,
            begins,
            lengths,
        }
    }
}

/// The file with every digest slot still `'0'`s: the header, then the
/// payloads. The metadata is needed no more once the header is written, so
/// it is left for a helper to free.
fn write_file(
    pack_id: Uuid,
    metadata: Vec<RecordMetadata>,
    payloads: &[Bytes],
    layout: &Layout,
    payload_total: usize,
    hashed: &Jobs<'_, Hashed>,
) -> Result<(Vec<u8>, Skeleton), PackError> {
    // One allocation for the whole file when the estimate holds (it is
    // generous for metadata that needs no escaping); the header writer
    // grows the buffer when it does not.
    let header_estimate = 256
        + metadata
            .iter()
            .map(|m| 640 + 2 * metadata_text_len(m))
            .sum::<usize>();
    let mut bytes = Vec::with_capacity(header_estimate + payload_total);
    let encoded: Vec<EncodedRecord<'_>> = metadata
        .iter()
        .zip(payloads)
        .zip(&layout.begins)
        .map(|((metadata, payload), &begin)| EncodedRecord {
            metadata,
            begin,
            end: begin + payload.len() as u64,
        })
        .collect();
    let skeleton = encode::write_skeleton(&mut bytes, pack_id, &encoded, &layout.order)?;
    drop(encoded);
    hashed.leave(metadata);
    for &i in &layout.order {
        bytes.extend_from_slice(&payloads[i]);
    }
    Ok((bytes, skeleton))
}

/// Fills in every payload digest, in record order, as its job is done, and
/// hashes the header up to each one; then writes the pack digest. Returns
/// the digests by record index, the pack digest, and the data section's CRC
/// run joined from the jobs' in file order.
fn fill_header(
    head: &mut [u8],
    skeleton: &Skeleton,
    layout: &Layout,
    jobs: &[Range<usize>],
    hashed: &Jobs<'_, Hashed>,
) -> (Vec<Sha256Digest>, Sha256Digest, CrcRun) {
    let mut header_sha = HeaderHasher::new(head);
    let mut taken: Vec<Option<Hashed>> = (0..jobs.len()).map(|_| None).collect();
    let mut digests = Vec::with_capacity(layout.begins.len());
    for (i, &(job, place)) in places(jobs, &layout.order).iter().enumerate() {
        let (job_digests, _) = taken[job].get_or_insert_with(|| hashed.take(job));
        let digest = job_digests[place];
        let slot = skeleton.payload_slots[i];
        encode::fill_slot(head, slot, &digest);
        header_sha.hash_to(head, slot + 64);
        digests.push(digest);
    }
    let pack_sha256 = encode::seal_header(head, header_sha);
    // A job without records (the one job of a pack without records) is
    // taken here.
    let mut data_crc = CrcRun::of(&[]);
    for (job, taken) in taken.into_iter().enumerate() {
        let (_, crc) = taken.unwrap_or_else(|| hashed.take(job));
        data_crc = data_crc.then(crc);
    }
    (digests, pack_sha256, data_crc)
}

/// For each record, by index: its job, and its place among the job's
/// records.
fn places(jobs: &[Range<usize>], order: &[usize]) -> Vec<(usize, usize)> {
    let mut places = vec![(0, 0); order.len()];
    for (job, run) in jobs.iter().enumerate() {
        for (place, &i) in order[run.clone()].iter().enumerate() {
            places[i] = (job, place);
        }
    }
    places
}

/// Hashes the payloads of `run` (record indexes, in file order).
fn hash_payloads(payloads: &[Bytes], run: &[usize]) -> Hashed {
    let mut digests = Vec::with_capacity(run.len());
    let mut crc = Crc64Nvme::new();
    for &i in run {
        digests.push(Sha256Digest::of(&payloads[i]));
        crc.update(&payloads[i]);
    }
    (digests, crc.finish())
}

/// Bytes of free text in `metadata`, for sizing the header buffer.
fn metadata_text_len(metadata: &RecordMetadata) -> usize {
    let id = &metadata.identity;
    id.tenant_id.len()
        + id.experiment_id.len()
        + id.run_id.len()
        + metadata.model.len()
        + metadata.module_path.len()
        + metadata.hook.len()
        + metadata.tensor_name.len()
        + metadata
            .tags
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>()
        + 24 * metadata.shape.len()
}
