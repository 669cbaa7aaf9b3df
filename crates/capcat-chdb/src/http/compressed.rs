//! ClickHouse's compressed block framing, as the HTTP interface speaks it with
//! `decompress=1` (request bodies) and `compress=1` (responses).
//!
//! A body is a sequence of blocks, each:
//!
//! ```text
//! checksum: 16 bytes   CityHash128 (v1.0.2) of everything after it, as two
//!                      little-endian u64 halves, low half first
//! method:    1 byte    0x82 LZ4, 0x02 none
//! compressed_size: u32 LE, counting the 9 header bytes (method + sizes)
//! decompressed_size: u32 LE
//! payload: compressed_size - 9 bytes
//! ```
//!
//! This is what the `clickhouse` crate (0.15, feature `lz4`) sends for
//! inserts; its encoder is used in the tests as the reference.

/// Method byte of an LZ4 block.
const METHOD_LZ4: u8 = 0x82;
/// Method byte of a stored (uncompressed) block.
const METHOD_NONE: u8 = 0x02;
const CHECKSUM_LEN: usize = 16;
const HEADER_LEN: usize = 9;
/// Largest decompressed block accepted; ClickHouse writes at most 1 MiB
/// blocks by default, so this leaves ample room while bounding memory.
pub(crate) const MAX_BLOCK: usize = 128 << 20;
/// The most bytes LZ4 decodes from one byte of a block: a match length is
/// extended 255 at a time.
const LZ4_MAX_RATIO: usize = 255;
/// Block size of responses framed for `compress=1`.
const RESPONSE_BLOCK: usize = 1 << 20;

/// Why a framed body was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum FrameError {
    /// The body ends inside a block.
    #[error("compressed body truncated at byte {offset}")]
    Truncated {
        /// Offset of the incomplete block.
        offset: usize,
    },
    /// A block's checksum does not match its bytes.
    #[error("checksum mismatch in the compressed block at byte {offset}")]
    Checksum {
        /// Offset of the block.
        offset: usize,
    },
    /// A method byte this front does not decode (e.g. 0x90, ZSTD).
    #[error("unsupported compression method 0x{method:02x} at byte {offset}")]
    Method {
        /// The method byte.
        method: u8,
        /// Offset of the block.
        offset: usize,
    },
    /// A size field is impossible or over the bound.
    #[error(
        "bad block sizes at byte {offset}: compressed {compressed}, decompressed {decompressed}"
    )]
    Size {
        /// Offset of the block.
        offset: usize,
        /// The compressed size field.
        compressed: u32,
        /// The decompressed size field.
        decompressed: u32,
    },
    /// The LZ4 payload is corrupt or does not decode to the stated size.
    #[error("LZ4 block at byte {offset} is corrupt: {reason}")]
    Lz4 {
        /// Offset of the block.
        offset: usize,
        /// lz4_flex's message.
        reason: String,
    },
    /// The decompressed body would exceed the given limit.
    #[error("decompressed body exceeds {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
}

pub(crate) fn checksum(bytes: &[u8]) -> u128 {
    // ClickHouse stores the (low, high) halves of CityHash128 as two LE u64s;
    // cityhash-rs returns them as one u128 with the high half first.
    cityhash_rs::cityhash_102_128(bytes).rotate_right(64)
}

fn read_u32(bytes: &[u8]) -> u32 {
    let mut b = [0_u8; 4];
    b.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(b)
}

/// Decodes a whole framed body, at most `limit` bytes once decompressed.
pub(crate) fn decode(body: &[u8], limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    let mut offset = 0;
    // Bounded: every iteration consumes at least one whole header.
    while offset < body.len() {
        let rest = &body[offset..];
        if rest.len() < CHECKSUM_LEN + HEADER_LEN {
            return Err(FrameError::Truncated { offset });
        }
        let header = &rest[CHECKSUM_LEN..CHECKSUM_LEN + HEADER_LEN];
        let method = header[0];
        let compressed = read_u32(&header[1..]);
        let decompressed = read_u32(&header[5..]);
        let size_error = FrameError::Size {
            offset,
            compressed,
            decompressed,
        };
        let compressed_len = usize::try_from(compressed).map_err(|_| size_error.clone())?;
        let decompressed_len = usize::try_from(decompressed).map_err(|_| size_error.clone())?;
        if compressed_len < HEADER_LEN || decompressed_len > MAX_BLOCK {
            return Err(size_error);
        }
        let Some(block) = rest.get(CHECKSUM_LEN..CHECKSUM_LEN + compressed_len) else {
            return Err(FrameError::Truncated { offset });
        };
        let mut stored = [0_u8; CHECKSUM_LEN];
        stored.copy_from_slice(&rest[..CHECKSUM_LEN]);
        if u128::from_le_bytes(stored) != checksum(block) {
            return Err(FrameError::Checksum { offset });
        }
        if out.len().saturating_add(decompressed_len) > limit {
            return Err(FrameError::TooLarge { limit });
        }
        let payload = &block[HEADER_LEN..];
        match method {
            METHOD_LZ4 => {
                // LZ4 turns one input byte into at most 255 output bytes, so
                // a larger declared size is a lie, refused before it is
                // allocated.
                if decompressed_len > payload.len().saturating_mul(LZ4_MAX_RATIO) {
                    return Err(size_error);
                }
                let start = out.len();
                out.resize(start + decompressed_len, 0);
                let written = lz4_flex::block::decompress_into(payload, &mut out[start..])
                    .map_err(|e| FrameError::Lz4 {
                        offset,
                        reason: e.to_string(),
                    })?;
                if written != decompressed_len {
                    return Err(FrameError::Lz4 {
                        offset,
                        reason: format!("decoded {written} bytes, header says {decompressed_len}"),
                    });
                }
            }
            METHOD_NONE => {
                if payload.len() != decompressed_len {
                    return Err(size_error);
                }
                out.extend_from_slice(payload);
            }
            other => {
                return Err(FrameError::Method {
                    method: other,
                    offset,
                });
            }
        }
        offset += CHECKSUM_LEN + compressed_len;
    }
    Ok(out)
}

/// Frames `data` as LZ4 blocks of at most 1 MiB each.
pub(crate) fn encode(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    for chunk in data.chunks(RESPONSE_BLOCK) {
        let payload = lz4_flex::block::compress(chunk);
        let start = out.len();
        out.extend_from_slice(&[0_u8; CHECKSUM_LEN]);
        out.push(METHOD_LZ4);
        let compressed = u32::try_from(HEADER_LEN + payload.len())
            .expect("a 1 MiB chunk compresses to well under 4 GiB");
        let decompressed =
            u32::try_from(chunk.len()).expect("chunks are at most 1 MiB, under 4 GiB");
        out.extend_from_slice(&compressed.to_le_bytes());
        out.extend_from_slice(&decompressed.to_le_bytes());
        out.extend_from_slice(&payload);
        let sum = checksum(&out[start + CHECKSUM_LEN..]);
        out[start..start + CHECKSUM_LEN].copy_from_slice(&sum.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1 << 30;

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| u8::try_from((i * 7 + i / 13) % 251).expect("< 256"))
            .collect()
    }

    #[test]
    fn decodes_what_the_clickhouse_crate_encodes() {
        let data = sample(300_000);
        let framed = clickhouse::_priv::lz4_compress(&data).expect("reference encoder");
        assert_eq!(decode(&framed, LIMIT).expect("decode"), data);
        // Several blocks back to back, as a chunked insert body carries them.
        let mut two = framed.to_vec();
        two.extend_from_slice(&clickhouse::_priv::lz4_compress(b"tail").expect("encode"));
        let mut expected = data.clone();
        expected.extend_from_slice(b"tail");
        assert_eq!(decode(&two, LIMIT).expect("decode two"), expected);
    }

    #[test]
    fn encode_round_trips_across_block_boundaries() {
        for len in [
            0,
            1,
            RESPONSE_BLOCK - 1,
            RESPONSE_BLOCK,
            RESPONSE_BLOCK * 2 + 5,
        ] {
            let data = sample(len);
            assert_eq!(
                decode(&encode(&data), LIMIT).expect("decode"),
                data,
                "len {len}"
            );
        }
    }

    #[test]
    fn our_encoding_matches_the_clickhouse_crate_byte_for_byte() {
        let data = sample(10_000);
        let reference = clickhouse::_priv::lz4_compress(&data).expect("reference encoder");
        assert_eq!(encode(&data), reference.to_vec());
    }

    #[test]
    fn corruption_is_refused_not_decoded() {
        let framed = encode(&sample(5_000));
        let mut flipped = framed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(
            decode(&flipped, LIMIT),
            Err(FrameError::Checksum { offset: 0 })
        );
        assert_eq!(
            decode(&framed[..framed.len() - 1], LIMIT),
            Err(FrameError::Truncated { offset: 0 })
        );
        assert_eq!(
            decode(&framed[..10], LIMIT),
            Err(FrameError::Truncated { offset: 0 })
        );
        assert_eq!(
            decode(&framed, 100),
            Err(FrameError::TooLarge { limit: 100 })
        );
    }

    /// Found by the fuzz target `http_front`: a 26-byte body whose block
    /// declared 100 MiB of output allocated all of it before LZ4 said the
    /// one payload byte decodes to nothing. A block can decode to at most
    /// 255 bytes per payload byte, so more is refused up front.
    #[test]
    fn a_block_declaring_more_than_its_payload_can_decode_to_is_refused() {
        let declared: u32 = 100 << 20;
        let mut block = vec![METHOD_LZ4];
        block.extend_from_slice(&10_u32.to_le_bytes());
        block.extend_from_slice(&declared.to_le_bytes());
        block.push(0);
        let mut framed = checksum(&block).to_le_bytes().to_vec();
        framed.extend_from_slice(&block);
        assert_eq!(
            decode(&framed, LIMIT),
            Err(FrameError::Size {
                offset: 0,
                compressed: 10,
                decompressed: declared
            })
        );
        // The densest block LZ4 writes still decodes.
        let zeros = vec![0_u8; 1 << 20];
        assert_eq!(decode(&encode(&zeros), LIMIT).expect("decodes"), zeros);
    }

    #[test]
    fn unknown_methods_and_bad_sizes_are_typed_errors() {
        let mut framed = encode(b"hello");
        framed[CHECKSUM_LEN] = 0x90;
        let sum = checksum(&framed[CHECKSUM_LEN..]);
        framed[..CHECKSUM_LEN].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            decode(&framed, LIMIT),
            Err(FrameError::Method {
                method: 0x90,
                offset: 0
            })
        );
        let mut tiny = encode(b"hello");
        tiny[CHECKSUM_LEN + 1..CHECKSUM_LEN + 5].copy_from_slice(&3_u32.to_le_bytes());
        assert!(matches!(decode(&tiny, LIMIT), Err(FrameError::Size { .. })));
    }
}
