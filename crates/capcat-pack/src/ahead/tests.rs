//! The scan for payloads to hash ahead, and an open's use of what it hashed.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;

use super::*;
use crate::header::{DIGEST_SLOT, head_end, header_digest};
use crate::reader::Ahead;
use crate::test_packs::{mixed_pack, pack_of};
use crate::{Dtype, PackError, PackReader};

/// Everything the scan hashes in `file`, never told to stop.
fn hash_all(file: &[u8]) -> HashedAhead {
    let data_start = head_end(file).expect("a header that fits the file");
    hash(file, data_start, &AtomicBool::new(false))
}

/// A file of `header` (its length prefix added) and `data`.
fn file_of(header: &str, data: &[u8]) -> Vec<u8> {
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}

#[test]
fn every_payload_a_written_pack_names_is_hashed_ahead() {
    let sealed = mixed_pack().seal_on(1).expect("seals");
    let ahead = hash_all(&sealed.bytes);
    let mut empty = 0;
    for record in &sealed.info.records {
        // An empty payload is left for the open: its digest costs nothing.
        let expected = (record.length > 0).then_some(record.sha256);
        empty += usize::from(record.length == 0);
        assert_eq!(
            ahead.digest(record.offset, record.length),
            expected,
            "record {}",
            record.index
        );
    }
    assert!(empty > 0, "the mixed pack has empty payloads");
    let payload_bytes: u64 = sealed.info.records.iter().map(|r| r.length).sum();
    assert_eq!(ahead.bytes(), payload_bytes);
    assert_eq!(ahead.len(), sealed.info.records.len() - empty);
}

#[test]
fn nothing_is_hashed_once_told_to_stop() {
    let sealed = mixed_pack().seal_on(1).expect("seals");
    let data_start = head_end(&sealed.bytes).expect("fits");
    let ahead = hash(&sealed.bytes, data_start, &AtomicBool::new(true));
    assert_eq!(ahead.len(), 0);
}

#[test]
fn only_the_offsets_of_a_tensor_entry_are_read_and_only_inside_the_data() {
    let data = b"01234567890123456789";
    // The key escaped inside a string is not the key. Leading zeros, a sign,
    // a fraction, spaces, a reversed range, a range past the data and a
    // number past u64 are not read. `[2,5]` is named twice and kept once.
    let header = concat!(
        r#"{"__metadata__":{"capcat":"{\"data_offsets\":[0,1]}"},"#,
        r#""a":{"data_offsets":[01,3]},"b":{"data_offsets":[-1,3]},"#,
        r#""c":{"data_offsets":[1.0,3]},"d":{"data_offsets": [1,3]},"#,
        r#""e":{"data_offsets":[5,4]},"f":{"data_offsets":[4,21]},"#,
        r#""g":{"data_offsets":[18446744073709551616,1]},"#,
        r#""h":{"data_offsets":[2,5]},"i":{"data_offsets":[2,5]},"#,
        r#""j":{"data_offsets":[6,10]}}"#,
    );
    let file = file_of(header, data);
    let ahead = hash_all(&file);
    let data_start = (8 + header.len()) as u64;
    assert_eq!(ahead.len(), 2);
    assert_eq!(
        ahead.digest(data_start + 2, 3),
        Some(Sha256Digest::of(b"234"))
    );
    assert_eq!(
        ahead.digest(data_start + 6, 4),
        Some(Sha256Digest::of(b"6789"))
    );
    // Not a range it hashed: another length, another offset.
    assert_eq!(ahead.digest(data_start + 2, 4), None);
    assert_eq!(ahead.digest(data_start + 3, 3), None);
}

#[test]
fn empty_ranges_are_not_kept_however_many_the_header_names() {
    let data = [7u8; 8];
    let entries: Vec<String> = (0..1_000)
        .map(|i| format!(r#""t{i}":{{"data_offsets":[{0},{0}]}}"#, i % 9))
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let ahead = hash_all(&file_of(&header, &data));
    assert_eq!(ahead.len(), 0);
}

#[test]
fn no_more_digests_are_kept_than_a_pack_may_have_records() {
    let data = [7u8; 64];
    let entries: Vec<String> = (0..20)
        .map(|i| format!(r#""t{i}":{{"data_offsets":[{i},{}]}}"#, i + 1))
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let file = file_of(&header, &data);
    let data_start = 8 + header.len();
    let ahead = hash_at_most(&file, data_start, &AtomicBool::new(false), 5);
    assert_eq!(ahead.len(), 5);
    // The last five entries, found first from the end.
    assert_eq!(
        ahead.digest(data_start as u64 + 15, 1),
        Some(Sha256Digest::of(&[7]))
    );
    assert_eq!(ahead.digest(data_start as u64 + 14, 1), None);
    assert_eq!(hash_all(&file).len(), 20);
}

#[test]
fn ranges_named_many_times_cost_at_most_one_pass_over_the_data() {
    let data = [7u8; 64];
    let entries: Vec<String> = (0..10)
        .map(|i| format!(r#""t{i}":{{"data_offsets":[0,{}]}}"#, 40 + i))
        .collect();
    let header = format!("{{{}}}", entries.join(","));
    let ahead = hash_all(&file_of(&header, &data));
    // Searching from the end, [0,49] comes first and leaves 15 bytes of
    // the 64: no other range fits in them.
    assert_eq!(ahead.len(), 1);
    assert_eq!(ahead.bytes(), 49);
}

#[test]
fn a_digest_taken_ahead_is_used_only_for_its_exact_range() {
    let sealed = mixed_pack().seal_on(1).expect("seals");
    let wrong = Sha256Digest([0xee; 32]);
    // Wrong digests beside every record's range, never on one.
    let beside: Vec<(u64, u64, Sha256Digest)> = sealed
        .info
        .records
        .iter()
        .flat_map(|r| {
            [
                (r.offset, r.length + 1, wrong),
                (r.offset + 1, r.length, wrong),
            ]
        })
        .filter(|&(offset, length, _)| {
            !sealed
                .info
                .records
                .iter()
                .any(|r| (r.offset, r.length) == (offset, length))
        })
        .collect();
    for threads in 1..=3 {
        let reader = PackReader::open_with_hashed_ahead(
            sealed.bytes.clone(),
            threads,
            HashedAhead::from_digests(beside.clone()),
        )
        .expect("no wrong digest names a record's range");
        assert_eq!(reader.pack_sha256(), sealed.info.pack_sha256);
    }
    // A wrong digest on a record's range is used, not hashed again: the open
    // names that record.
    let record = &sealed.info.records[17];
    assert!(record.length > 0);
    for threads in 1..=3 {
        let error = PackReader::open_with_hashed_ahead(
            sealed.bytes.clone(),
            threads,
            HashedAhead::from_digests(vec![(record.offset, record.length, wrong)]),
        )
        .expect_err("the digest taken ahead is wrong");
        assert!(
            matches!(
                error,
                PackError::PayloadChecksumMismatch { index: 17, actual, .. } if actual == wrong
            ),
            "{threads} threads: {error}"
        );
    }
}

/// `file` with its header text replaced by `edit` of it, padded again and
/// given the pack digest of the new header, so that an open gets past the
/// header digest to the payloads: a header made to mislead, as a writer
/// could make it.
fn with_header(file: &[u8], edit: impl Fn(&str) -> String) -> Vec<u8> {
    let end = head_end(file).expect("a header that fits the file");
    let text = std::str::from_utf8(&file[8..end]).expect("a UTF-8 header");
    let mut header = edit(text.trim_end_matches(' ')).into_bytes();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut edited = (header.len() as u64).to_le_bytes().to_vec();
    edited.extend_from_slice(&header);
    let head_len = edited.len();
    edited.extend_from_slice(&file[end..]);
    let digest = header_digest(&edited[..head_len]);
    edited[DIGEST_SLOT..DIGEST_SLOT + 64].copy_from_slice(digest.to_hex().as_bytes());
    edited
}

/// The verdict of an open of `file` on `threads` threads, as text.
fn verdict(file: &[u8], threads: usize, ahead: Ahead) -> String {
    match PackReader::open_with(bytes::Bytes::copy_from_slice(file), threads, ahead) {
        Ok(reader) => format!("opens: {}", reader.pack_sha256()),
        Err(error) => format!("{error:?}"),
    }
}

/// The one-thread verdict of `file`, after checking that every number of
/// threads, hashing ahead until the parse is done or everything it finds,
/// gives the same.
fn one_verdict(file: &[u8]) -> String {
    let one = verdict(file, 1, Ahead::UntilParsed);
    for threads in 2..=4 {
        for ahead in [Ahead::UntilParsed, Ahead::Everything] {
            assert_eq!(
                verdict(file, threads, ahead),
                one,
                "{threads} threads, {ahead:?}"
            );
        }
    }
    one
}

#[test]
fn swapped_offsets_under_a_good_header_digest_fail_on_the_same_record() {
    let sealed = pack_of(&[(Dtype::U8, 100); 8]).seal_on(1).expect("seals");
    let data_start = sealed.info.records[0].offset;
    let spelling = |index: usize| {
        let begin = sealed.info.records[index].offset - data_start;
        format!(r#""data_offsets":[{begin},{}]"#, begin + 100)
    };
    let (two, five) = (spelling(2), spelling(5));
    // The scan finds both entries and hashes the ranges they name; the
    // parse gives record 2 the range of record 5, whose digest differs.
    let swapped = with_header(&sealed.bytes, |text| {
        text.replace(&two, "@")
            .replace(&five, &two)
            .replace('@', &five)
    });
    let verdict = one_verdict(&swapped);
    assert!(
        verdict.starts_with("PayloadChecksumMismatch") && verdict.contains("index: 2"),
        "{verdict}"
    );
    // A spelling the scan does not find, which the parse reads: nothing is
    // hashed ahead, and the pack opens.
    let spaced = with_header(&sealed.bytes, |text| {
        text.replace(r#""data_offsets":["#, r#""data_offsets": ["#)
    });
    assert!(one_verdict(&spaced).starts_with("opens"));
    assert!(one_verdict(&with_header(&sealed.bytes, str::to_owned)).starts_with("opens"));
}

/// A header piece: bytes of anything, or the key followed by text that may
/// or may not be two offsets.
fn header_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..12),
        (
            0u64..40,
            0u64..40,
            prop::sample::select(vec!["]", ",", "", "]]", "1]"])
        )
            .prop_map(|(begin, end, close)| format!(
                r#""data_offsets":[{begin},{end}{close}"#
            )
            .into_bytes()),
        prop::sample::select(vec![
            br#""data_offsets":["#.to_vec(),
            br#""data_offsets":[0"#.to_vec(),
            br#""data_offsets":[99999999999999999999,1]"#.to_vec(),
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the header holds, the scan stays inside the data section,
    /// hashes at most its length, and every digest it gives is the digest
    /// of the bytes it names.
    #[test]
    fn every_digest_taken_ahead_is_of_the_bytes_it_names(
        pieces in prop::collection::vec(header_piece(), 0..24),
        data in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        let header = pieces.concat();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(&header);
        file.extend_from_slice(&data);
        let data_start = 8 + header.len();
        let ahead = hash(&file, data_start, &AtomicBool::new(false));
        prop_assert!(ahead.bytes() <= data.len() as u64);
        for &(offset, length, digest) in &ahead.digests {
            let begin = usize::try_from(offset).expect("small");
            let end = begin + usize::try_from(length).expect("small");
            prop_assert!(begin >= data_start && end <= file.len());
            prop_assert_eq!(digest, Sha256Digest::of(&file[begin..end]));
            prop_assert_eq!(ahead.digest(offset, length), Some(digest));
        }
        // Sorted, each range once, as the lookup needs.
        let ranges: Vec<(u64, u64)> = ahead.digests.iter().map(|&(o, l, _)| (o, l)).collect();
        let mut sorted = ranges.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(ranges, sorted);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Offsets moved, stretched or reversed under a good header digest: the
    /// open gives the one-thread verdict on any number of threads.
    #[test]
    fn edited_offsets_under_a_good_header_digest_give_the_one_thread_verdict(
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0usize..4, 0u64..600),
            1..4,
        ),
    ) {
        let sealed = mixed_pack().seal_on(1).expect("seals");
        let file = with_header(&sealed.bytes, |text| {
            let mut text = text.to_owned();
            for (which, how, n) in &edits {
                let starts: Vec<usize> = text
                    .match_indices(OFFSETS_KEY_TEXT)
                    .map(|(at, _)| at + OFFSETS_KEY_TEXT.len())
                    .collect();
                let start = starts[which.index(starts.len())];
                let close = start + text[start..].find(']').expect("a closed range");
                let (begin, end) = text[start..close].split_once(',').expect("two offsets");
                let begin: u64 = begin.parse().expect("an offset");
                let end: u64 = end.parse().expect("an offset");
                let edited = match how {
                    0 => format!("{n},{}", n + end.abs_diff(begin)),
                    1 => format!("{begin},{}", begin + n),
                    2 => format!("{n},{end}"),
                    _ => format!("{end},{begin}"),
                };
                text.replace_range(start..close, &edited);
            }
            text
        });
        let one = verdict(&file, 1, Ahead::UntilParsed);
        for threads in 2..=4 {
            prop_assert_eq!(verdict(&file, threads, Ahead::Everything), one.clone());
            prop_assert_eq!(verdict(&file, threads, Ahead::UntilParsed), one.clone());
        }
    }
}

/// [`OFFSETS_KEY`] as text.
const OFFSETS_KEY_TEXT: &str = r#""data_offsets":["#;
