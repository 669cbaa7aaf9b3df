//! Reading a user's `.safetensors` file for `capcat ingest`: the bytes of a
//! file Capcat did not write, turned into records a pack accepts.
//!
//! The fuzz target `ingest` (fuzz/fuzz_targets/ingest.rs) compiles this file
//! by path, so it depends on nothing but capcat-pack, safetensors, bytes and
//! thiserror, and names nothing else of the CLI.

use std::str::FromStr as _;

use bytes::Bytes;
use capcat_pack::{Dtype, TensorValues};

/// One tensor of an ingested file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IngestTensor {
    /// The tensor's name in the file.
    pub(crate) name: String,
    /// Its element type.
    pub(crate) dtype: Dtype,
    /// Its shape, outermost dimension first.
    pub(crate) shape: Vec<u64>,
    /// Its little-endian payload.
    pub(crate) payload: Bytes,
}

/// Why a file cannot be ingested.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IngestError {
    /// The bytes are not a safetensors file.
    #[error("not a safetensors file: {reason}")]
    NotSafetensors {
        /// What the safetensors parser said.
        reason: String,
    },
    /// A tensor the header lists cannot be read.
    #[error("tensor {name:?}: {reason}")]
    Tensor {
        /// The tensor.
        name: String,
        /// What the safetensors parser said.
        reason: String,
    },
    /// A tensor's dtype is not one of the ten a pack stores.
    #[error("tensor {name:?}: {source}")]
    Dtype {
        /// The tensor.
        name: String,
        /// The pack format's refusal.
        #[source]
        source: capcat_pack::PackError,
    },
    /// A tensor's payload is not one a pack stores: a `BOOL` byte other
    /// than 0 or 1 (the safetensors format accepts any byte there).
    #[error("tensor {name:?}: {source}")]
    Payload {
        /// The tensor.
        name: String,
        /// The pack format's refusal.
        #[source]
        source: capcat_pack::PackError,
    },
}

/// Parses a safetensors file into its tensors, in name order.
///
/// Every tensor returned is one [`capcat_pack::PackWriter::append`]
/// accepts (one of the ten dtypes, a payload of the length its dtype and
/// shape give, valid `BOOL` bytes), so a file is refused whole, before any
/// of it is appended, rather than half way through.
pub(crate) fn parse_safetensors(bytes: &[u8]) -> Result<Vec<IngestTensor>, IngestError> {
    let tensors =
        safetensors::SafeTensors::deserialize(bytes).map_err(|e| IngestError::NotSafetensors {
            reason: e.to_string(),
        })?;
    let mut names = tensors.names();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let view = tensors.tensor(name).map_err(|e| IngestError::Tensor {
            name: name.to_owned(),
            reason: e.to_string(),
        })?;
        let dtype = Dtype::from_str(&format!("{:?}", view.dtype())).map_err(|source| {
            IngestError::Dtype {
                name: name.to_owned(),
                source,
            }
        })?;
        let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
        let payload = view.data();
        if dtype == Dtype::BOOL {
            TensorValues::from_le_bytes(dtype, payload, name).map_err(|source| {
                IngestError::Payload {
                    name: name.to_owned(),
                    source,
                }
            })?;
        }
        out.push(IngestTensor {
            name: name.to_owned(),
            dtype,
            shape,
            payload: Bytes::copy_from_slice(payload),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of one tensor, written by hand.
    fn file(name: &str, dtype: &str, shape: &[u64], data: &[u8]) -> Vec<u8> {
        let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
        let header = format!(
            "{{\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[0,{}]}}}}",
            shape.join(","),
            data.len()
        );
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn a_file_of_every_pack_dtype_parses() {
        let tensors = parse_safetensors(&file("x", "I16", &[2], &[1, 0, 2, 0])).expect("parses");
        assert_eq!(
            tensors,
            vec![IngestTensor {
                name: "x".to_owned(),
                dtype: Dtype::I16,
                shape: vec![2],
                payload: Bytes::from_static(&[1, 0, 2, 0]),
            }]
        );
        assert!(matches!(
            parse_safetensors(&file("u", "U16", &[1], &[1, 0])),
            Err(IngestError::Dtype { .. })
        ));
        assert!(matches!(
            parse_safetensors(b"not a file"),
            Err(IngestError::NotSafetensors { .. })
        ));
    }

    /// Found by the fuzz target `ingest`: the safetensors crate accepts any
    /// byte in a BOOL tensor, a pack only 0 and 1, so such a file parsed and
    /// then failed at `append`, after the files before it were appended.
    #[test]
    fn a_bool_byte_other_than_zero_or_one_is_refused_by_the_parser() {
        let error = parse_safetensors(&file("m", "BOOL", &[2], &[1, 2]))
            .expect_err("a BOOL byte 2 is not a pack payload");
        assert!(
            matches!(error, IngestError::Payload { ref name, .. } if name == "m"),
            "{error}"
        );
        assert!(error.to_string().contains("byte 2"), "{error}");
        assert!(parse_safetensors(&file("m", "BOOL", &[2], &[1, 0])).is_ok());
    }
}
