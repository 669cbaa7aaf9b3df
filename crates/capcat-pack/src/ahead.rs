//! Payload digests taken ahead of an open's parse.
//!
//! An open on two or more threads hashes the header on a second thread
//! while the caller's thread parses it ([`crate::parallel::both`]). The
//! header's digest takes about half as long as its parse, so the second
//! thread would then sit idle. Instead it goes on to the payloads: it finds
//! the tensor entries' `data_offsets` in the header bytes by their spelling,
//! without parsing, and hashes the payloads they name until the caller's
//! thread is done with the header. The open then hashes only what is left.
//!
//! Nothing found here is trusted. The scan may find a wrong range in a
//! header spelled another way, or in one made to mislead it. A digest taken
//! ahead is the SHA-256 of exactly the bytes `[offset, offset + length)` of
//! the file, so it is used only for a record whose parsed locator has that
//! very offset and length, where it is the digest a hash of the record's
//! payload gives. Every other record is hashed after the parse, as before.
//! The verdict is therefore the one an open without this gives.

use std::sync::atomic::{AtomicBool, Ordering};

use memchr::memmem;
use sha2::{Digest as _, Sha256};

use crate::digest::Sha256Digest;
use crate::writer::MAX_RECORDS_CEILING;

/// The spelling of an entry's offsets that the scan looks for. The writer
/// writes it (docs/pack-format.md, section 1.1). Inside a JSON string every
/// `"` is escaped, so in a valid header it is found only in a tensor entry.
const OFFSETS_KEY: &[u8] = br#""data_offsets":["#;

/// The bytes hashed between two looks at the stop flag: tens of
/// microseconds of SHA-256, which is as long as the caller's thread may
/// wait for this thread once its parse is done.
const CHUNK_BYTES: usize = 64 << 10;

/// The most digits of a `u64`.
const MAX_DIGITS: usize = 20;

/// Payload digests taken ahead, each of the file bytes it names.
#[derive(Debug, Default)]
pub(crate) struct HashedAhead {
    /// `(offset, length, digest)`, sorted by offset and length, each range
    /// once: the digest of the file bytes `[offset, offset + length)`.
    digests: Vec<(u64, u64, Sha256Digest)>,
}

impl HashedAhead {
    /// The digest of the file bytes `[offset, offset + length)`, if it was
    /// taken ahead.
    pub(crate) fn digest(&self, offset: u64, length: u64) -> Option<Sha256Digest> {
        let at = self
            .digests
            .binary_search_by_key(&(offset, length), |&(begin, hashed, _)| (begin, hashed))
            .ok()?;
        Some(self.digests[at].2)
    }

    /// Digests said to be of the file bytes `[offset, offset + length)`,
    /// true or not, as a test hands them to an open.
    #[cfg(test)]
    pub(crate) fn from_digests(mut digests: Vec<(u64, u64, Sha256Digest)>) -> Self {
        digests.sort_by_key(|&(offset, length, _)| (offset, length));
        digests.dedup_by_key(|&mut (offset, length, _)| (offset, length));
        Self { digests }
    }

    /// How many payloads were hashed ahead.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.digests.len()
    }

    /// Bytes hashed ahead.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.digests.iter().map(|&(_, length, _)| length).sum()
    }
}

/// Hashes the payloads that the header of `file` appears to name, last
/// entry first, until `stop` is set or none is left.
///
/// `data_start` is where the data section begins (`8 + N`). Only ranges
/// inside it are hashed, and at most its length in all, so a header that
/// names one range many times hashes no more bytes than one pass over the
/// data. Tiny ranges cost a SHA-256 block each whatever their length, so
/// the time may be more than that pass; the stop flag still ends the scan
/// with the parse.
///
/// Empty ranges are left for the open (their digest costs nothing), and at
/// most [`MAX_RECORDS_CEILING`] digests are kept, as many as a pack may
/// have records: a header that names more ranges is refused by the parse,
/// and the digests it would make here stay bounded meanwhile. `stop` is
/// looked at between chunks of [`CHUNK_BYTES`]; a payload cut short by it
/// is dropped.
pub(crate) fn hash(file: &[u8], data_start: usize, stop: &AtomicBool) -> HashedAhead {
    hash_at_most(file, data_start, stop, MAX_RECORDS_CEILING)
}

/// [`hash`], keeping at most `most` digests.
fn hash_at_most(file: &[u8], data_start: usize, stop: &AtomicBool, most: usize) -> HashedAhead {
    let Some(header) = file.get(..data_start) else {
        return HashedAhead::default();
    };
    let data_len = (file.len() - data_start) as u64;
    let mut budget = data_len;
    let mut digests = Vec::new();
    // The writer puts the tensor entries after the metadata, at the end of
    // the header, so searching from the end finds them at once instead of
    // first reading through the descriptor. Each pass looks at one found
    // key, and there are fewer than the header's bytes.
    for found in memmem::rfind_iter(header, OFFSETS_KEY) {
        if stop.load(Ordering::Acquire) || digests.len() >= most {
            break;
        }
        let Some((begin, end)) = offsets(&header[found + OFFSETS_KEY.len()..]) else {
            continue;
        };
        let length = end - begin;
        if length == 0 || end > data_len || length > budget {
            continue;
        }
        budget -= length;
        let offset = data_start as u64 + begin;
        // In range: `end` is at most the data section's length.
        let payload = &file[data_start + begin as usize..data_start + end as usize];
        match digest_unless_stopped(payload, stop) {
            Some(digest) => digests.push((offset, length, digest)),
            None => break,
        }
    }
    // Found last entry first, so mostly in descending order, which the sort
    // sees as one run. A range named twice was hashed twice, to the same
    // digest; one copy is kept.
    digests.sort_by_key(|&(offset, length, _)| (offset, length));
    digests.dedup_by_key(|&mut (offset, length, _)| (offset, length));
    HashedAhead { digests }
}

/// `begin,end]` at the start of `text`, two JSON integers with `begin <=
/// end`, or `None`.
fn offsets(text: &[u8]) -> Option<(u64, u64)> {
    let (begin, rest) = integer(text)?;
    let (end, rest) = integer(rest.strip_prefix(b",")?)?;
    rest.starts_with(b"]").then_some(())?;
    (begin <= end).then_some((begin, end))
}

/// A JSON integer that fits a `u64` at the start of `text`, and the rest.
fn integer(text: &[u8]) -> Option<(u64, &[u8])> {
    let digits = text
        .iter()
        .take(MAX_DIGITS + 1)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > MAX_DIGITS || (digits > 1 && text[0] == b'0') {
        return None;
    }
    let value = text[..digits].iter().try_fold(0u64, |value, digit| {
        value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })?;
    Some((value, &text[digits..]))
}

/// The SHA-256 of `payload`, unless `stop` is set before it is done.
fn digest_unless_stopped(payload: &[u8], stop: &AtomicBool) -> Option<Sha256Digest> {
    let mut hasher = Sha256::new();
    for chunk in payload.chunks(CHUNK_BYTES) {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        hasher.update(chunk);
    }
    Some(Sha256Digest(hasher.finalize().into()))
}

#[cfg(test)]
mod tests;
