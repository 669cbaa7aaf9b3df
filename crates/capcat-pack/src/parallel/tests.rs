//! The cut into runs, the thread helpers, and seal and open giving the same
//! bytes and the same verdicts on any number of threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;

use super::*;
use crate::reader::Ahead;
use crate::test_packs::{mixed_pack, pack_of};
use crate::{Dtype, PackReader};

proptest! {
    #[test]
    fn runs_tile_the_items_in_order_and_share_the_bytes(
        lengths in prop::collection::vec(0u64..5_000, 0..60),
        runs in 0usize..8,
    ) {
        let cut = runs_by_bytes(&lengths, runs);
        // At least one run; never more than asked, nor more than items.
        prop_assert!(!cut.is_empty());
        prop_assert!(cut.len() <= runs.max(1));
        prop_assert!(cut.len() <= lengths.len().max(1));
        // The runs tile 0..n in order, and only an empty list has an empty
        // run.
        let mut next = 0;
        for run in &cut {
            prop_assert_eq!(run.start, next);
            prop_assert!(run.end > run.start || lengths.is_empty());
            next = run.end;
        }
        prop_assert_eq!(next, lengths.len());
        // No run holds more than its share by more than one item.
        let total: u64 = lengths.iter().sum();
        let largest = lengths.iter().copied().max().unwrap_or(0);
        for run in &cut {
            let bytes: u64 = lengths[run.clone()].iter().sum();
            prop_assert!(bytes <= total / cut.len() as u64 + largest + 1, "{bytes} of {total}");
        }
    }
}

#[test]
fn equal_items_are_cut_into_equal_runs() {
    let cut = runs_by_bytes(&[10; 12], 4);
    assert_eq!(cut, vec![0..3, 3..6, 6..9, 9..12]);
    assert_eq!(runs_by_bytes(&[10; 3], 8), vec![0..1, 1..2, 2..3]);
    assert_eq!(runs_by_bytes(&[], 4), vec![0..0]);
    // One large item takes a run of its own.
    assert_eq!(runs_by_bytes(&[1, 100, 1, 1], 2), vec![0..2, 2..4]);
}

#[test]
fn every_job_is_done_once_and_its_result_taken_in_any_order() {
    for threads in 1..=5 {
        for count in 0..9usize {
            for backwards in [false, true] {
                let done = AtomicUsize::new(0);
                let order: Vec<usize> = if backwards {
                    (0..count).rev().collect()
                } else {
                    (0..count).collect()
                };
                let results = share(
                    threads,
                    count,
                    |job| {
                        done.fetch_add(1, Ordering::Relaxed);
                        job * 10
                    },
                    |jobs| order.iter().map(|&job| jobs.take(job)).collect::<Vec<_>>(),
                );
                let expected: Vec<usize> = order.iter().map(|job| job * 10).collect();
                assert_eq!(results, expected, "{threads} threads, {count} jobs");
                assert_eq!(done.into_inner(), count, "{threads} threads, {count} jobs");
            }
        }
    }
}

#[test]
fn jobs_nobody_took_are_not_done_once_the_caller_returns() {
    let done = AtomicUsize::new(0);
    // One thread: the caller's, which takes no job.
    share(1, 100, |_| done.fetch_add(1, Ordering::Relaxed), |_| ());
    assert_eq!(done.into_inner(), 0);
}

#[test]
fn what_the_caller_leaves_is_dropped_by_the_time_share_returns() {
    for threads in 1..=3 {
        for count in [0, 1, 40] {
            let value = std::sync::Arc::new(());
            share(
                threads,
                count,
                |_| (),
                |jobs| {
                    jobs.leave(std::sync::Arc::clone(&value));
                    (0..count).for_each(|job| jobs.take(job));
                },
            );
            assert_eq!(std::sync::Arc::strong_count(&value), 1, "{threads} threads");
        }
    }
}

#[test]
fn helpers_take_jobs_while_the_caller_does_its_own_work() {
    // The caller's own work waits until a job has been done on a helper:
    // it can only end if the helpers start on the jobs at once.
    let (sender, receiver) = std::sync::mpsc::channel();
    let sender = std::sync::Mutex::new(sender);
    let helped = share(
        2,
        4,
        |_| {
            let name = std::thread::current().name().map(str::to_owned);
            let _ = sender.lock().expect("not poisoned").send(name);
        },
        |_| receiver.recv_timeout(std::time::Duration::from_secs(30)),
    );
    assert_eq!(
        helped.expect("a helper did a job").as_deref(),
        Some(THREAD_NAME)
    );
}

#[test]
fn both_gives_both_results() {
    let (first, second) = both(
        || std::thread::current().name().map(str::to_owned),
        || std::thread::current().name().map(str::to_owned),
    );
    assert_ne!(first.as_deref(), Some(THREAD_NAME));
    assert_eq!(second.as_deref(), Some(THREAD_NAME));
}

#[test]
#[should_panic(expected = "a job panicked")]
fn a_panic_in_a_job_reaches_the_caller() {
    share(
        2,
        8,
        |job| assert!(job != 5, "a job panicked"),
        |jobs| (0..8).for_each(|job| jobs.take(job)),
    );
}

#[test]
fn a_pack_sealed_on_any_number_of_threads_is_the_same_pack() {
    let one = mixed_pack().seal_on(1).expect("seals");
    for threads in 2..=7 {
        let many = mixed_pack().seal_on(threads).expect("seals");
        assert_eq!(many.bytes, one.bytes, "{threads} threads");
        assert_eq!(many.info, one.info, "{threads} threads");
    }
    // And it is the pack any reader accepts, its CRC that of its bytes.
    assert_eq!(one.info.crc64nvme, crate::crc64nvme(&one.bytes));
    PackReader::from_bytes_expecting(one.bytes.clone(), one.info.pack_sha256).expect("verifies");
}

/// What opening `bytes` on `threads` threads says, as text.
fn verdict(bytes: &[u8], threads: usize) -> String {
    verdict_with(bytes, threads, Ahead::UntilParsed)
}

/// What opening `bytes` on `threads` threads, hashing payloads ahead of the
/// parse as `ahead` says, says as text.
fn verdict_with(bytes: &[u8], threads: usize, ahead: Ahead) -> String {
    match PackReader::open_with(bytes::Bytes::copy_from_slice(bytes), threads, ahead) {
        Ok(reader) => format!("ok {}", reader.pack_sha256()),
        Err(error) => format!("{error:?}"),
    }
}

#[test]
fn an_open_on_any_number_of_threads_gives_the_same_verdict() {
    let sealed = mixed_pack().seal_on(1).expect("seals");
    let bytes = sealed.bytes.to_vec();
    // Every 97th byte, header and data, changed one way.
    for at in (0..bytes.len()).step_by(97) {
        let mut changed = bytes.clone();
        changed[at] ^= 0x20;
        let expected = verdict(&changed, 1);
        for threads in 2..=5 {
            assert_eq!(
                verdict(&changed, threads),
                expected,
                "byte {at}, {threads} threads"
            );
            assert_eq!(
                verdict_with(&changed, threads, Ahead::Everything),
                expected,
                "byte {at}, {threads} threads, every payload hashed ahead"
            );
        }
    }
}

#[test]
fn the_first_bad_record_is_reported_whatever_the_threads() {
    let sealed = mixed_pack().seal_on(1).expect("seals");
    let mut bytes = sealed.bytes.to_vec();
    // Two bad payloads: record 43 (F64) comes early in the file, stored
    // before every narrower dtype, and record 2 (U8) late, so only the
    // record order says which one an open must name.
    for index in [43, 2] {
        let locator = &sealed.info.records[index];
        assert!(locator.length > 0);
        bytes[locator.offset as usize] ^= 0x01;
    }
    assert!(sealed.info.records[43].offset < sealed.info.records[2].offset);
    for threads in 1..=5 {
        for ahead in [Ahead::UntilParsed, Ahead::Everything] {
            let error =
                PackReader::open_with(bytes::Bytes::copy_from_slice(&bytes), threads, ahead)
                    .expect_err("two payloads are bad");
            assert!(
                matches!(
                    error,
                    crate::PackError::PayloadChecksumMismatch { index: 2, .. }
                ),
                "{threads} threads, {ahead:?}: {error}"
            );
        }
    }
}

fn dtypes() -> impl Strategy<Value = Dtype> {
    prop::sample::select(vec![
        Dtype::F64,
        Dtype::F32,
        Dtype::BF16,
        Dtype::I64,
        Dtype::U8,
        Dtype::BOOL,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_pack_seals_and_opens_alike_on_any_number_of_threads(
        records in prop::collection::vec((dtypes(), 0u64..300), 0..24),
        changes in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        threads in 2usize..6,
    ) {
        let one = pack_of(&records).seal_on(1).expect("seals");
        let many = pack_of(&records).seal_on(threads).expect("seals");
        prop_assert_eq!(&many.bytes, &one.bytes);
        prop_assert_eq!(&many.info, &one.info);
        let mut bytes = one.bytes.to_vec();
        for (at, xor) in changes {
            let at = at.index(bytes.len());
            bytes[at] ^= xor;
        }
        let one = verdict(&bytes, 1);
        prop_assert_eq!(verdict(&bytes, threads), one.clone());
        prop_assert_eq!(verdict_with(&bytes, threads, Ahead::Everything), one);
    }
}
