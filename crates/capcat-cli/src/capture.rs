//! The demo's capture stage: records sealed into packs on several threads,
//! each pack written into the spool in order as soon as it is sealed.
//!
//! Sealing is CPU work (digests and the header); the spool write is IO (a
//! write and an fsync). A capture engine with more than one core seals the
//! next packs while one is being written, and so does this stage: up to
//! [`width`] packs are sealing at once, and the one sealed first in pack
//! order is written while the others seal.
//!
//! Bounded: at most [`width`] packs are sealing or sealed and waiting, plus
//! the one being written. Packs reach the spool in pack order, so a run killed
//! half-way leaves a prefix of its packs `.ready`, as a sequential capture
//! would.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use bytes::Bytes;
use capcat_pack::{PackError, RecordMetadata, SealedPack};
use capcat_service::Spool;
use indicatif::ProgressBar;
use tokio::task::JoinHandle;

use crate::CliError;
use crate::workload;

/// The most packs sealing at once: one per core, at most 4 (beyond that the
/// spool write, not the sealing, is the limit).
pub(crate) fn width() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .clamp(1, 4)
}

/// What the capture stage did and where its time went.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Captured {
    /// Packs sealed and written.
    pub packs: u64,
    /// Their bytes in all.
    pub bytes: u64,
    /// Time spent sealing, summed over the threads (they overlap each other
    /// and the writes, so this can exceed the stage's wall time).
    pub seal_busy: Duration,
    /// Time spent writing into the spool, fsync included.
    pub write_busy: Duration,
}

/// A pack sealing on a blocking thread, with the time it took.
type Sealing = JoinHandle<Result<(SealedPack, Duration), PackError>>;

fn start_sealing(run: &str, index: u64, records: Vec<(RecordMetadata, Bytes)>) -> Sealing {
    let run = run.to_owned();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        workload::seal_records(&run, index, records).map(|sealed| (sealed, started.elapsed()))
    })
}

/// Seals `packs` (the records of each pack, in pack order) of `run` and
/// writes each into `spool`, advancing `progress` by the records of each
/// pack written.
///
/// # Errors
/// A record the pack writer refuses, a spool write that fails, or a thread
/// that did not complete. Packs written before the failure stay in the
/// spool, `.ready`; packs still sealing finish on their threads and are
/// dropped unwritten, as a capture killed at that moment would lose them.
pub(crate) async fn seal_into_spool(
    spool: &Spool,
    run: &str,
    packs: Vec<Vec<(RecordMetadata, Bytes)>>,
    progress: &ProgressBar,
) -> Result<Captured, CliError> {
    let width = width();
    let mut waiting = packs.into_iter().enumerate();
    let mut sealing: VecDeque<(u64, Sealing)> = VecDeque::with_capacity(width);
    // Keeps `width` packs sealing; they finish in any order, and are taken
    // in pack order below.
    let mut refill = |sealing: &mut VecDeque<(u64, Sealing)>| {
        while sealing.len() < width {
            let Some((index, records)) = waiting.next() else {
                break;
            };
            let count = records.len() as u64;
            sealing.push_back((count, start_sealing(run, index as u64, records)));
        }
    };
    let mut captured = Captured::default();
    refill(&mut sealing);
    while let Some((count, next)) = sealing.pop_front() {
        let (sealed, took) = next.await.map_err(|e| CliError::Other(e.to_string()))??;
        // The next pack starts sealing before this one is written, so every
        // core seals while the write waits on the disk.
        refill(&mut sealing);
        captured.seal_busy += took;
        captured.bytes += sealed.bytes.len() as u64;
        let writing = Instant::now();
        let to = spool.clone();
        tokio::task::spawn_blocking(move || to.write_sealed(sealed.info.pack_id, &sealed.bytes))
            .await
            .map_err(|e| CliError::Other(e.to_string()))??;
        captured.write_busy += writing.elapsed();
        captured.packs += 1;
        progress.inc(count);
    }
    Ok(captured)
}

#[cfg(test)]
mod tests {
    use capcat_pack::PackReader;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_pack_reaches_the_spool_whole_and_in_pack_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("spool");
        // Packs of different sizes, so they finish sealing out of order.
        let sizes = [40_u64, 1, 17, 2, 33, 5, 9];
        let mut first = 0;
        let packs: Vec<_> = sizes
            .iter()
            .map(|&count| {
                let records = workload::records("pipeline", first, count);
                first += count;
                records
            })
            .collect();
        let progress = ProgressBar::hidden();
        let captured = seal_into_spool(&spool, "pipeline", packs, &progress)
            .await
            .expect("capture");
        assert_eq!(captured.packs, sizes.len() as u64);
        assert_eq!(progress.position(), sizes.iter().sum::<u64>());
        let listing = spool.list_ready(100).expect("list");
        assert_eq!(listing.total_ready, sizes.len());
        let mut total_bytes = 0;
        let mut last_written = None;
        for (index, &count) in sizes.iter().enumerate() {
            let pack_id = workload::pack_id("pipeline", index as u64);
            let path = spool.ready_path(pack_id);
            let bytes = std::fs::read(&path).expect("a .ready file for every pack");
            total_bytes += bytes.len() as u64;
            let pack = PackReader::from_bytes(bytes).expect("a whole, valid pack");
            assert_eq!((pack.pack_id(), pack.len() as u64), (pack_id, count));
            // Written in pack order: each file is no newer than the next.
            let written = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .expect("mtime");
            assert!(last_written.is_none_or(|last| last <= written));
            last_written = Some(written);
        }
        assert_eq!(captured.bytes, total_bytes);
    }
}
