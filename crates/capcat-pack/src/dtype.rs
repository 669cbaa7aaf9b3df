//! The ten element types a capture payload may hold.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::PackError;

/// The element type of a capture payload.
///
/// The names are the safetensors dtype strings (`"F64"`, `"BF16"`, ...), so
/// the same string appears in the pack descriptor, in the safetensors header
/// entry and in the catalog's `dtype` column. Every element is stored little
/// endian; `BOOL` is one byte per element holding exactly 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dtype {
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16 (`half::f16`).
    F16,
    /// bfloat16: the top 16 bits of a binary32 (`half::bf16`).
    BF16,
    /// Two's complement 64-bit integer.
    I64,
    /// Two's complement 32-bit integer.
    I32,
    /// Two's complement 16-bit integer.
    I16,
    /// Two's complement 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// One byte per element, 0 for false and 1 for true; any other byte is
    /// refused.
    BOOL,
}

impl Dtype {
    /// Every dtype, in the order the documentation lists them.
    pub const ALL: [Dtype; 10] = [
        Dtype::F64,
        Dtype::F32,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I64,
        Dtype::I32,
        Dtype::I16,
        Dtype::I8,
        Dtype::U8,
        Dtype::BOOL,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::BF16 | Dtype::I16 => 2,
            Dtype::I8 | Dtype::U8 | Dtype::BOOL => 1,
        }
    }

    /// The safetensors / descriptor name of this dtype.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F64 => "F64",
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I64 => "I64",
            Dtype::I32 => "I32",
            Dtype::I16 => "I16",
            Dtype::I8 => "I8",
            Dtype::U8 => "U8",
            Dtype::BOOL => "BOOL",
        }
    }

    /// True for the four floating point dtypes.
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F64 | Dtype::F32 | Dtype::F16 | Dtype::BF16)
    }

    /// The matching `safetensors` dtype.
    pub(crate) const fn to_safetensors(self) -> safetensors::Dtype {
        match self {
            Dtype::F64 => safetensors::Dtype::F64,
            Dtype::F32 => safetensors::Dtype::F32,
            Dtype::F16 => safetensors::Dtype::F16,
            Dtype::BF16 => safetensors::Dtype::BF16,
            Dtype::I64 => safetensors::Dtype::I64,
            Dtype::I32 => safetensors::Dtype::I32,
            Dtype::I16 => safetensors::Dtype::I16,
            Dtype::I8 => safetensors::Dtype::I8,
            Dtype::U8 => safetensors::Dtype::U8,
            Dtype::BOOL => safetensors::Dtype::BOOL,
        }
    }

    /// The payload length in bytes of a tensor of this dtype and `shape`,
    /// or `None` when the product overflows `u64`.
    pub fn byte_length(self, shape: &[u64]) -> Option<u64> {
        let elements = element_count(shape)?;
        elements.checked_mul(self.size() as u64)
    }
}

/// The number of elements of `shape` (1 for a scalar, `[]`), or `None` when
/// the product overflows `u64`.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &dim| acc.checked_mul(dim))
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = PackError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dtype::ALL
            .into_iter()
            .find(|dtype| dtype.name() == s)
            .ok_or_else(|| PackError::UnknownDtype {
                found: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_safetensors() {
        for dtype in Dtype::ALL {
            assert_eq!(dtype.name().parse::<Dtype>().expect("known"), dtype);
            assert_eq!(dtype.to_safetensors().to_string(), dtype.name());
            assert_eq!(dtype.to_safetensors().bitsize(), dtype.size() * 8);
        }
    }

    #[test]
    fn unknown_dtype_is_a_typed_error() {
        assert!(matches!(
            "U16".parse::<Dtype>(),
            Err(PackError::UnknownDtype { found }) if found == "U16"
        ));
    }

    #[test]
    fn byte_length_overflow_is_none() {
        assert_eq!(Dtype::F32.byte_length(&[2, 3]), Some(24));
        assert_eq!(Dtype::F32.byte_length(&[]), Some(4));
        assert_eq!(Dtype::F32.byte_length(&[0, 7]), Some(0));
        assert_eq!(Dtype::F64.byte_length(&[u64::MAX / 4]), None);
        assert_eq!(Dtype::U8.byte_length(&[u64::MAX, 2]), None);
    }
}
