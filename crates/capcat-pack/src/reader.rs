//! Opening a pack: every check the format defines, before any record is
//! returned.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use uuid::Uuid;

use crate::ahead::{self, HashedAhead};
use crate::canonical;
use crate::descriptor::{self, DIGEST_KEY, FORMAT_VERSION, METADATA_KEY, tensor_key};
use crate::digest::{Sha256Digest, crc64nvme};
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::header;
use crate::info::{PackInfo, RecordLocator};
use crate::parallel;
use crate::record::{IdentitySet, RecordEntry};
use crate::summary::TensorSummary;
use crate::values::{TensorValues, decode_bools};

/// A pack whose header, descriptor and every payload checksum were
/// verified when it was opened.
#[derive(Clone, Debug)]
pub struct PackReader {
    bytes: Bytes,
    format_version: u32,
    pack_id: Uuid,
    pack_sha256: Sha256Digest,
    /// The CRC-64/NVME of the file, computed when first asked for: opening
    /// verifies with SHA-256 and needs no CRC.
    crc64nvme: OnceLock<u64>,
    /// Where the descriptor is, type-checked on open; the owned records
    /// are decoded from it when first asked for.
    descriptor: DescriptorText,
    records: OnceLock<Vec<RecordEntry>>,
    dtypes: Vec<Dtype>,
    locators: Vec<RecordLocator>,
}

/// Where an opened pack's descriptor text is.
#[derive(Clone, Debug)]
enum DescriptorText {
    /// In the file's header, escaped, spelled as the writer spells it (the
    /// common case): these file bytes, between the value's quotes. Nothing
    /// is copied out of the header on open.
    InHeader(Range<usize>),
    /// Any other spelling, or a version-1 envelope: the descriptor text,
    /// unescaped.
    Text(Arc<String>),
}

/// The descriptor as the header gave it.
enum Found<'a> {
    /// Parsed in place ([`header::InHeader`]).
    InHeader(header::InHeader<'a>),
    /// The `capcat` value, unescaped, still to be parsed.
    Value(String),
}

/// A pack that passed every check but its payload digests and `BOOL`
/// bytes.
struct Checked {
    format_version: u32,
    pack_id: Uuid,
    pack_sha256: Sha256Digest,
    descriptor: DescriptorText,
    dtypes: Vec<Dtype>,
    locators: Vec<RecordLocator>,
    /// Payload digests taken while the header was parsed.
    ahead: HashedAhead,
}

/// How long an open on two or more threads hashes payloads ahead of its
/// parse ([`ahead`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ahead {
    /// Until the header is parsed and examined: the payloads left are
    /// hashed after that.
    UntilParsed,
    /// Every payload the scan finds, however long the header takes, so
    /// that a test sees every digest used as taken ahead.
    #[cfg(test)]
    Everything,
}

impl Checked {
    /// Hashes every payload and compares its digest with the descriptor's,
    /// and checks every `BOOL` byte, in record order.
    ///
    /// A payload hashed ahead of the parse ([`ahead`]) is not hashed again:
    /// its digest is of exactly the locator's bytes. The records are cut
    /// into jobs of about equal bytes still to hash, which up to `threads`
    /// threads share ([`parallel::share`]). Each job stops at its first bad
    /// record and the jobs are in record order, so the error returned is the
    /// first bad record's, as a check on one thread finds.
    fn finish(self, bytes: &[u8], threads: usize) -> Result<Self, PackError> {
        let ahead: Vec<Option<Sha256Digest>> = self
            .locators
            .iter()
            .map(|l| self.ahead.digest(l.offset, l.length))
            .collect();
        let to_hash: Vec<u64> = self
            .locators
            .iter()
            .zip(&ahead)
            .map(|(l, ahead)| if ahead.is_some() { 0 } else { l.length })
            .collect();
        let total = to_hash.iter().sum();
        let threads = threads.min(parallel::threads_for(total));
        let jobs = parallel::runs_by_bytes(&to_hash, parallel::jobs_for(total, threads));
        parallel::share(
            threads,
            jobs.len(),
            |job| {
                let run = jobs[job].clone();
                let records = self.locators[run.clone()]
                    .iter()
                    .zip(&self.dtypes[run.clone()])
                    .zip(&ahead[run]);
                for ((locator, dtype), ahead) in records {
                    let payload = slice(bytes, locator);
                    let actual = ahead.unwrap_or_else(|| Sha256Digest::of(payload));
                    compare_payload_digest(locator, actual)?;
                    if *dtype == Dtype::BOOL {
                        decode_bools(payload, &format!("record {}", locator.index))?;
                    }
                }
                Ok::<(), PackError>(())
            },
            |verdicts| (0..jobs.len()).try_for_each(|job| verdicts.take(job)),
        )?;
        Ok(self)
    }
}

/// What parsing the header found, before its digest is compared.
struct Parsed<'a> {
    found: Found<'a>,
    format_version: u32,
    header: header::Header,
}

/// Reads the header and its descriptor's version: the checks of opening
/// before the header digest is compared.
fn parse(bytes: &[u8]) -> Result<Parsed<'_>, PackError> {
    let mut unchecked = header::read(bytes)?;
    // The version first, before the entries are checked: a pack of another
    // version is refused as such, whatever else differs in its header (a
    // dtype or a layout this build does not know). A descriptor parsed in
    // the header is of version 2.
    let found = match unchecked.descriptor.take() {
        Some(in_header) => Found::InHeader(in_header),
        None => Found::Value(
            unchecked
                .metadata
                .remove(METADATA_KEY)
                .ok_or(PackError::MissingDescriptor)?,
        ),
    };
    let format_version = match &found {
        Found::InHeader(_) => FORMAT_VERSION,
        Found::Value(value) => descriptor::check_version(value)?,
    };
    let header = unchecked.check()?;
    Ok(Parsed {
        found,
        format_version,
        header,
    })
}

/// The header bytes `[0, 8 + N)` of a parsed header.
fn head<'a>(bytes: &'a [u8], header: &header::Header) -> Result<&'a [u8], PackError> {
    let end = usize::try_from(header.data_start).map_err(|_| PackError::HeaderTooLarge {
        header_len: header.data_start,
        limit: header::MAX_HEADER_BYTES,
    })?;
    Ok(&bytes[..end])
}

/// What an open finds in a parsed header, with each error where an open
/// reports it: those of `digest_at` before the header digest is compared,
/// those of `located` after. Both are found before the digest is compared,
/// while another thread may still be hashing; neither has an effect, so
/// the order they are found in does not show.
struct Examined {
    format_version: u32,
    /// For version 2, the length of the header bytes `[0, 8 + N)` the pack
    /// digest covers; for version 1, none.
    digest_at: Result<Option<usize>, PackError>,
    located: Result<Located, PackError>,
}

/// The records a header and its descriptor agree on.
struct Located {
    pack_id: Uuid,
    descriptor: DescriptorText,
    dtypes: Vec<Dtype>,
    locators: Vec<RecordLocator>,
}

/// Parses the header of `bytes` and examines it ([`Examined`]).
fn examine(bytes: &[u8]) -> Result<Examined, PackError> {
    let Parsed {
        found,
        format_version,
        header,
    } = parse(bytes)?;
    let digest_at = if format_version == FORMAT_VERSION {
        only_metadata_keys(&header, &[DIGEST_KEY])
            .and_then(|()| head(bytes, &header))
            .map(|head| Some(head.len()))
    } else {
        // Version 1 has one metadata key and no pack digest in its header.
        only_metadata_keys(&header, &[]).map(|()| None)
    };
    Ok(Examined {
        format_version,
        digest_at,
        located: locate(found, format_version, header),
    })
}

/// Checks that the header's entries and the descriptor's records agree,
/// record for record, and locates each record's payload.
fn locate(
    found: Found<'_>,
    format_version: u32,
    header: header::Header,
) -> Result<Located, PackError> {
    // Declared here so that the facts can borrow it in one arm.
    let text: Arc<String>;
    let (facts, descriptor) = match found {
        Found::InHeader(in_header) => (
            descriptor::canonical_facts(in_header.parsed),
            DescriptorText::InHeader(in_header.range),
        ),
        Found::Value(value) => {
            text = Arc::new(descriptor::descriptor_text(value, format_version)?);
            (
                descriptor::facts(&text, format_version)?,
                DescriptorText::Text(Arc::clone(&text)),
            )
        }
    };
    let data_start = header.data_start;
    // Record entries sorted by index, consumed in descriptor order.
    let mut entries = header.records.into_iter().peekable();
    let mut locators = Vec::with_capacity(facts.records.len());
    let mut dtypes = Vec::with_capacity(facts.records.len());
    // The writer refuses a second record for one capture identity; so
    // does the reader, or the catalog would get two rows that collapse.
    let mut identities = IdentitySet::default();
    let records = &facts.records;
    for (index, record) in records.iter().enumerate() {
        if !identities.insert(&record.tenant_id, record.capture_id, index, |i| {
            &records[i].tenant_id
        }) {
            return Err(PackError::DuplicateCapture {
                tenant_id: record.tenant_id.clone().into_owned(),
                capture_id: record.capture_id,
            });
        }
        // Indexes are consumed in order, so the next entry is this
        // record's or the record has none.
        let entry = match entries.next_if(|(i, _)| *i == index) {
            Some((_, entry)) => entry,
            None => {
                return Err(PackError::MissingTensor {
                    index,
                    key: tensor_key(index),
                });
            }
        };
        if entry.dtype != record.dtype {
            return Err(PackError::EntryDisagrees {
                index,
                field: "dtype",
                entry: entry.dtype.to_string(),
                descriptor: record.dtype.to_string(),
            });
        }
        if entry.shape != record.shape {
            return Err(PackError::EntryDisagrees {
                index,
                field: "shape",
                entry: format!("{:?}", entry.shape),
                descriptor: format!("{:?}", record.shape),
            });
        }
        dtypes.push(record.dtype);
        locators.push(RecordLocator {
            index,
            capture_id: record.capture_id,
            offset: data_start + entry.begin,
            length: entry.end - entry.begin,
            sha256: record.payload_sha256,
        });
    }
    if let Some((index, _)) = entries.next() {
        return Err(PackError::UnexpectedTensor {
            key: tensor_key(index),
        });
    }
    if let Some((key, _)) = header.others.into_iter().next() {
        return Err(PackError::UnexpectedTensor { key });
    }
    Ok(Located {
        pack_id: facts.pack_id,
        descriptor,
        dtypes,
        locators,
    })
}

impl PackReader {
    /// Opens and verifies a pack held in memory.
    ///
    /// Verifies: the length prefix and header, the format version, the pack
    /// digest the header carries against the header's bytes, that the
    /// safetensors entries match the descriptor record for record (dtype,
    /// shape) and tile the data section, every payload's SHA-256, and every
    /// `BOOL` byte. Together these check every byte of the file (the pack
    /// digest covers the header, which holds every payload digest). Use
    /// [`PackReader::from_bytes_expecting`] to also compare the pack digest
    /// with the one the catalog or the store recorded at seal time.
    ///
    /// A version-1 pack is read too, with the checks version 1 defines:
    /// the descriptor's digest in its envelope, the entries against the
    /// descriptor, every payload's SHA-256 and every `BOOL` byte; its pack
    /// digest is the SHA-256 of the whole file, which only
    /// [`PackReader::from_bytes_expecting`] can compare (version 1 covers
    /// the header's padding and JSON spacing with nothing else).
    ///
    /// A pack of 2 MiB or more is hashed on up to four threads, the
    /// caller's included (one per MiB, at most the cores the process may
    /// use): the header and then payloads beside its parse, then the
    /// payloads left. The threads end before this returns, and the verdict,
    /// error included, is the one a single thread gives.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Result<Self, PackError> {
        Self::open(bytes.into())
    }

    /// Like [`PackReader::from_bytes`], and checks that the pack digest is
    /// `expected` (the `pack_sha256` of its [`PackInfo`]).
    pub fn from_bytes_expecting(
        bytes: impl Into<Bytes>,
        expected: Sha256Digest,
    ) -> Result<Self, PackError> {
        let reader = Self::open(bytes.into())?;
        if reader.pack_sha256 != expected {
            return Err(PackError::PackChecksumMismatch {
                expected,
                actual: reader.pack_sha256,
            });
        }
        Ok(reader)
    }

    /// Reads the file at `path` and opens it with [`PackReader::from_bytes`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PackError> {
        Self::from_bytes(read_file(path.as_ref())?)
    }

    /// Reads the file at `path` and opens it with
    /// [`PackReader::from_bytes_expecting`].
    pub fn from_file_expecting(
        path: impl AsRef<Path>,
        expected: Sha256Digest,
    ) -> Result<Self, PackError> {
        Self::from_bytes_expecting(read_file(path.as_ref())?, expected)
    }

    fn open(bytes: Bytes) -> Result<Self, PackError> {
        let threads = parallel::threads_for(bytes.len() as u64);
        Self::open_on(bytes, threads)
    }

    /// Opens `bytes` hashing on up to `threads` threads: with two or more,
    /// the header and then payloads beside its parse, then the payloads
    /// left.
    pub(crate) fn open_on(bytes: Bytes, threads: usize) -> Result<Self, PackError> {
        Self::open_with(bytes, threads, Ahead::UntilParsed)
    }

    /// Like [`PackReader::open_on`], hashing payloads ahead of the parse as
    /// `ahead` says.
    pub(crate) fn open_with(bytes: Bytes, threads: usize, ahead: Ahead) -> Result<Self, PackError> {
        let checked = Self::check(&bytes, threads, ahead)?;
        Self::finished(bytes, checked, threads)
    }

    /// Opens `bytes` with `hashed` in place of the digests its parse took
    /// ahead, to show what [`Checked::finish`] makes of digests it did not
    /// take itself.
    #[cfg(test)]
    pub(crate) fn open_with_hashed_ahead(
        bytes: Bytes,
        threads: usize,
        hashed: HashedAhead,
    ) -> Result<Self, PackError> {
        let checked = Self::check(&bytes, threads, Ahead::UntilParsed)?;
        Self::finished(
            bytes,
            Checked {
                ahead: hashed,
                ..checked
            },
            threads,
        )
    }

    /// The reader of `bytes`, once `checked` has checked their payloads.
    fn finished(bytes: Bytes, checked: Checked, threads: usize) -> Result<Self, PackError> {
        let opened = checked.finish(&bytes, threads)?;
        Ok(Self {
            bytes,
            format_version: opened.format_version,
            pack_id: opened.pack_id,
            pack_sha256: opened.pack_sha256,
            crc64nvme: OnceLock::new(),
            descriptor: opened.descriptor,
            records: OnceLock::new(),
            dtypes: opened.dtypes,
            locators: opened.locators,
        })
    }

    /// Every check of opening but the payload digests and `BOOL` bytes
    /// ([`Checked::finish`]).
    fn check(bytes: &[u8], threads: usize, ahead: Ahead) -> Result<Checked, PackError> {
        // A version-2 header's digest needs only the header's bytes, which
        // the length prefix bounds. With a second thread, the header is
        // hashed on it while this one parses and examines the header, and
        // then payloads are hashed on it until that is done (`ahead`). The
        // digest is compared where an open on one thread compares it, after
        // the parse and before what the examination found, so every error
        // is the one that open reports; a version-1 pack, or a header that
        // does not parse, discards it.
        let early = header::head_end(bytes).filter(|_| threads > 1);
        let (examined, early, hashed_ahead) = match early {
            Some(end) => {
                let header_done = AtomicBool::new(false);
                #[cfg(test)]
                let never = AtomicBool::new(false);
                let stop = match ahead {
                    Ahead::UntilParsed => &header_done,
                    #[cfg(test)]
                    Ahead::Everything => &never,
                };
                let (examined, (digests, hashed_ahead)) = parallel::both(
                    || {
                        let examined = examine(bytes);
                        header_done.store(true, Ordering::Release);
                        examined
                    },
                    || {
                        let digests = header::digests(&bytes[..end]);
                        // A header whose digest is wrong fails the open, so
                        // no payload is worth hashing.
                        let hashed_ahead = match &digests {
                            Ok(found) if found.actual == found.stored => {
                                ahead::hash(bytes, end, stop)
                            }
                            _ => HashedAhead::default(),
                        };
                        (digests, hashed_ahead)
                    },
                );
                (examined, Some((end, digests)), hashed_ahead)
            }
            None => (examine(bytes), None, HashedAhead::default()),
        };
        let Examined {
            format_version,
            digest_at,
            located,
        } = examined?;
        let pack_sha256 = match digest_at? {
            Some(head_len) => {
                let found = match early {
                    // The parse bounded the header as the prefix did.
                    Some((end, digests)) if end == head_len => digests?,
                    _ => header::digests(&bytes[..head_len])?,
                };
                if found.actual != found.stored {
                    return Err(PackError::HeaderChecksumMismatch {
                        stored: found.stored,
                        actual: found.actual,
                    });
                }
                found.stored
            }
            // Version 1: the pack's digest is the SHA-256 of the whole file,
            // which only a caller holding the recorded digest can compare
            // (the header's padding and JSON spacing are covered by nothing
            // else).
            None => Sha256Digest::of(bytes),
        };
        let Located {
            pack_id,
            descriptor,
            dtypes,
            locators,
        } = located?;
        Ok(Checked {
            format_version,
            pack_id,
            pack_sha256,
            descriptor,
            dtypes,
            locators,
            ahead: hashed_ahead,
        })
    }

    /// The pack's id.
    pub fn pack_id(&self) -> Uuid {
        self.pack_id
    }

    /// The format version the pack was written in: [`FORMAT_VERSION`], or
    /// an older version this build still reads (from
    /// [`crate::OLDEST_FORMAT_VERSION`]).
    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    /// The pack's SHA-256 identity as its format version defines it (see
    /// [`PackInfo::pack_sha256`]): for version 2 the pack digest, verified
    /// against the header's bytes; for version 1 the SHA-256 of the whole
    /// file, the digest version-1 catalogs and stores recorded.
    pub fn pack_sha256(&self) -> Sha256Digest {
        self.pack_sha256
    }

    /// CRC-64/NVME of the whole pack file, the checksum to declare when
    /// uploading it (see [`PackInfo::crc64nvme`]).
    pub fn crc64nvme(&self) -> u64 {
        *self.crc64nvme.get_or_init(|| crc64nvme(&self.bytes))
    }

    /// The pack file's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.locators.len()
    }

    /// True for a pack with no records.
    pub fn is_empty(&self) -> bool {
        self.locators.is_empty()
    }

    /// Every record's metadata and payload digest, in record order.
    ///
    /// Opening type-checks every descriptor field but keeps only what it
    /// verifies; the owned records are decoded from the descriptor text on
    /// the first call and kept.
    pub fn records(&self) -> &[RecordEntry] {
        self.records.get_or_init(|| {
            // Opening parsed this text with the same field types, so
            // decoding it again cannot fail: this rests on the borrowed view
            // opening uses (`descriptor::DescriptorView`) and the owned
            // `descriptor::Descriptor` accepting the same texts (the same
            // fields and types, both `deny_unknown_fields`). A field added to
            // one must be added to the other; the `pack_reader` and
            // `pack_structured` fuzz targets call this on every pack they
            // open.
            match &self.descriptor {
                DescriptorText::InHeader(range) => {
                    // Opening parsed these very bytes with this parser, so
                    // they are UTF-8, the closing quote follows them, and
                    // they parse again.
                    let text = std::str::from_utf8(&self.bytes[range.start..=range.end])
                        .expect("the header was UTF-8 when the pack was opened");
                    let (parsed, _) = canonical::parse_in_header(text, 0)
                        .expect("the descriptor parsed in place when the pack was opened");
                    descriptor::canonical_records(parsed)
                }
                DescriptorText::Text(text) => descriptor::records(text)
                    .expect("the descriptor was type-checked when the pack was opened"),
            }
        })
    }

    /// Every record's locator, in record order.
    pub fn locators(&self) -> &[RecordLocator] {
        &self.locators
    }

    /// The [`PackInfo`] sealing this pack reported.
    pub fn info(&self) -> PackInfo {
        PackInfo {
            pack_id: self.pack_id,
            format_version: self.format_version,
            pack_sha256: self.pack_sha256,
            crc64nvme: self.crc64nvme(),
            byte_length: self.bytes.len() as u64,
            records: self.locators.clone(),
        }
    }

    /// The verified payload bytes of record `index` (no copy).
    pub fn payload(&self, index: usize) -> Result<Bytes, PackError> {
        let locator = self.locator(index)?;
        let start =
            usize::try_from(locator.offset).expect("offsets were checked against the file length");
        let end = start
            + usize::try_from(locator.length)
                .expect("lengths were checked against the file length");
        Ok(self.bytes.slice(start..end))
    }

    /// Record `index` decoded to typed values.
    pub fn values(&self, index: usize) -> Result<TensorValues, PackError> {
        let dtype = self.locator(index).map(|_| self.dtypes[index])?;
        TensorValues::from_le_bytes(dtype, &self.payload(index)?, &format!("record {index}"))
    }

    /// The [`TensorSummary`] of record `index`.
    pub fn summary(&self, index: usize) -> Result<TensorSummary, PackError> {
        let dtype = self.locator(index).map(|_| self.dtypes[index])?;
        TensorSummary::of_le_bytes(dtype, &self.payload(index)?, &format!("record {index}"))
    }

    /// Recomputes record `index`'s [`TensorSummary`] from its payload bytes
    /// and compares it with `expected`, field by field: floats bit for bit,
    /// and an exact integer statistic never equals a float (see
    /// [`PackError::SummaryMismatch`]). Returns the recomputed summary.
    ///
    /// A pack carries no summaries (docs/pack-format.md section 6); this
    /// checks one a catalog row or a manifest recorded for the payload.
    pub fn verify_summary(
        &self,
        index: usize,
        expected: &TensorSummary,
    ) -> Result<TensorSummary, PackError> {
        let actual = self.summary(index)?;
        match actual.first_difference(expected) {
            None => Ok(actual),
            Some(difference) => Err(PackError::SummaryMismatch {
                index,
                field: difference.field,
                expected: difference.expected,
                actual: difference.actual,
            }),
        }
    }

    /// Checks the whole file's CRC-64/NVME against `expected` (see
    /// [`PackError::Crc64NvmeMismatch`]).
    pub fn verify_crc64nvme(&self, expected: u64) -> Result<(), PackError> {
        let actual = self.crc64nvme();
        if actual == expected {
            Ok(())
        } else {
            Err(PackError::Crc64NvmeMismatch { expected, actual })
        }
    }

    /// Record `index`'s metadata and digest.
    pub fn record(&self, index: usize) -> Result<&RecordEntry, PackError> {
        let records = self.records();
        records.get(index).ok_or(PackError::RecordIndexOutOfRange {
            index,
            count: records.len(),
        })
    }

    /// Record `index`'s locator.
    pub fn locator(&self, index: usize) -> Result<&RecordLocator, PackError> {
        self.locators
            .get(index)
            .ok_or(PackError::RecordIndexOutOfRange {
                index,
                count: self.locators.len(),
            })
    }
}

/// Checks that the header's `__metadata__` holds exactly `allowed` keys
/// besides `capcat` (which the caller took out): anything else in the
/// header would be bytes no reader of ours interprets.
fn only_metadata_keys(header: &header::Header, allowed: &[&str]) -> Result<(), PackError> {
    match header
        .metadata
        .keys()
        .find(|k| !allowed.contains(&k.as_str()))
    {
        Some(extra) => Err(PackError::MalformedHeader {
            key: "__metadata__".to_owned(),
            reason: format!(
                "unexpected key `{extra}`: a pack's metadata keys are {}",
                allowed
                    .iter()
                    .chain([&METADATA_KEY])
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        }),
        None => Ok(()),
    }
}

/// The payload a locator names. Only called with locators built from a
/// header whose offsets were checked against `bytes`.
fn slice<'a>(bytes: &'a [u8], locator: &RecordLocator) -> &'a [u8] {
    let start =
        usize::try_from(locator.offset).expect("offset was checked against the file length");
    let end = start
        + usize::try_from(locator.length).expect("length was checked against the file length");
    &bytes[start..end]
}

pub(crate) fn verify_payload_digest(
    locator: &RecordLocator,
    payload: &[u8],
) -> Result<(), PackError> {
    compare_payload_digest(locator, Sha256Digest::of(payload))
}

/// `actual`, the digest of the record's payload, against the descriptor's.
fn compare_payload_digest(locator: &RecordLocator, actual: Sha256Digest) -> Result<(), PackError> {
    if actual == locator.sha256 {
        Ok(())
    } else {
        Err(PackError::PayloadChecksumMismatch {
            index: locator.index,
            capture_id: locator.capture_id,
            expected: locator.sha256,
            actual,
        })
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, PackError> {
    std::fs::read(path).map_err(|source| PackError::Io {
        path: path.to_path_buf(),
        source,
    })
}
