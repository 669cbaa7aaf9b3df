//! Reading a user's `.safetensors` file for `capcat ingest`: the bytes of a
//! file Capcat did not write, turned into records a pack accepts.
//!
//! The fuzz target `ingest` (fuzz/fuzz_targets/ingest.rs) compiles this file
//! by path, so it depends on nothing but capcat-pack, safetensors, bytes and
//! thiserror, and names nothing else of the CLI.

use std::str::FromStr as _;

use bytes::Bytes;
use capcat_pack::Dtype;

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
}

/// Parses a safetensors file into its tensors, in name order: one of the
/// ten dtypes a pack stores, and the payload the file holds for it.
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
        out.push(IngestTensor {
            name: name.to_owned(),
            dtype,
            shape,
            payload: Bytes::copy_from_slice(payload),
        });
    }
    Ok(out)
}

