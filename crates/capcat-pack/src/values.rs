//! Typed tensor values and their little-endian byte encoding.

use half::{bf16, f16};

use crate::dtype::Dtype;
use crate::error::PackError;

/// A payload decoded to typed values, row-major.
///
/// f16 and bf16 are kept as `half` values, so decoding is exact: no element
/// passes through a wider float on the way in or out.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorValues {
    /// `F64` elements.
    F64(Vec<f64>),
    /// `F32` elements.
    F32(Vec<f32>),
    /// `F16` elements.
    F16(Vec<f16>),
    /// `BF16` elements.
    BF16(Vec<bf16>),
    /// `I64` elements.
    I64(Vec<i64>),
    /// `I32` elements.
    I32(Vec<i32>),
    /// `I16` elements.
    I16(Vec<i16>),
    /// `I8` elements.
    I8(Vec<i8>),
    /// `U8` elements.
    U8(Vec<u8>),
    /// `BOOL` elements.
    Bool(Vec<bool>),
}

/// Decodes fixed-width little-endian elements. `bytes.len()` is a multiple
/// of `N` (checked by the caller), so `chunks_exact` leaves no remainder.
fn le<const N: usize, T>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut array = [0u8; N];
            array.copy_from_slice(chunk);
            from(array)
        })
        .collect()
}

impl TensorValues {
    /// The dtype of these values.
    pub fn dtype(&self) -> Dtype {
        match self {
            TensorValues::F64(_) => Dtype::F64,
            TensorValues::F32(_) => Dtype::F32,
            TensorValues::F16(_) => Dtype::F16,
            TensorValues::BF16(_) => Dtype::BF16,
            TensorValues::I64(_) => Dtype::I64,
            TensorValues::I32(_) => Dtype::I32,
            TensorValues::I16(_) => Dtype::I16,
            TensorValues::I8(_) => Dtype::I8,
            TensorValues::U8(_) => Dtype::U8,
            TensorValues::Bool(_) => Dtype::BOOL,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorValues::F64(v) => v.len(),
            TensorValues::F32(v) => v.len(),
            TensorValues::F16(v) => v.len(),
            TensorValues::BF16(v) => v.len(),
            TensorValues::I64(v) => v.len(),
            TensorValues::I32(v) => v.len(),
            TensorValues::I16(v) => v.len(),
            TensorValues::I8(v) => v.len(),
            TensorValues::U8(v) => v.len(),
            TensorValues::Bool(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes `bytes` as little-endian elements of `dtype`.
    ///
    /// `context` names the tensor in errors. Fails when the length is not a
    /// multiple of the element size, or when a `BOOL` byte is neither 0 nor 1.
    pub fn from_le_bytes(dtype: Dtype, bytes: &[u8], context: &str) -> Result<Self, PackError> {
        if !bytes.len().is_multiple_of(dtype.size()) {
            let elements = (bytes.len() / dtype.size()) as u64;
            return Err(PackError::ShapeMismatch {
                context: context.to_owned(),
                dtype,
                shape: vec![elements],
                expected: Some(elements * dtype.size() as u64),
                actual: bytes.len() as u64,
            });
        }
        Ok(match dtype {
            Dtype::F64 => TensorValues::F64(le(bytes, f64::from_le_bytes)),
            Dtype::F32 => TensorValues::F32(le(bytes, f32::from_le_bytes)),
            Dtype::F16 => TensorValues::F16(le(bytes, f16::from_le_bytes)),
            Dtype::BF16 => TensorValues::BF16(le(bytes, bf16::from_le_bytes)),
            Dtype::I64 => TensorValues::I64(le(bytes, i64::from_le_bytes)),
            Dtype::I32 => TensorValues::I32(le(bytes, i32::from_le_bytes)),
            Dtype::I16 => TensorValues::I16(le(bytes, i16::from_le_bytes)),
            Dtype::I8 => TensorValues::I8(le(bytes, i8::from_le_bytes)),
            Dtype::U8 => TensorValues::U8(bytes.to_vec()),
            Dtype::BOOL => TensorValues::Bool(decode_bools(bytes, context)?),
        })
    }

    /// Encodes the values as little-endian bytes (the payload layout).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        fn enc<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
            values.iter().flat_map(|&v| to(v)).collect()
        }
        match self {
            TensorValues::F64(v) => enc(v, f64::to_le_bytes),
            TensorValues::F32(v) => enc(v, f32::to_le_bytes),
            TensorValues::F16(v) => enc(v, f16::to_le_bytes),
            TensorValues::BF16(v) => enc(v, bf16::to_le_bytes),
            TensorValues::I64(v) => enc(v, i64::to_le_bytes),
            TensorValues::I32(v) => enc(v, i32::to_le_bytes),
            TensorValues::I16(v) => enc(v, i16::to_le_bytes),
            TensorValues::I8(v) => enc(v, i8::to_le_bytes),
            TensorValues::U8(v) => v.clone(),
            TensorValues::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        }
    }
}

/// Refuses any byte other than 0 or 1, so that one boolean tensor has one
/// byte encoding and a reader in any language decodes the same values.
pub(crate) fn decode_bools(bytes: &[u8], context: &str) -> Result<Vec<bool>, PackError> {
    bytes
        .iter()
        .enumerate()
        .map(|(position, &byte)| match byte {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(PackError::InvalidBool {
                context: context.to_owned(),
                position,
                byte,
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_decodes_bit_exactly() {
        // Subnormal, negative zero, NaN payload and infinity survive.
        let bits: [u16; 5] = [0x0001, 0x8000, 0x7e01, 0x7c00, 0x3c00];
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        for dtype in [Dtype::F16, Dtype::BF16] {
            let values = TensorValues::from_le_bytes(dtype, &bytes, "t").expect("even length");
            assert_eq!(values.to_le_bytes(), bytes, "{dtype}");
        }
        let TensorValues::F16(v) =
            TensorValues::from_le_bytes(Dtype::F16, &bytes, "t").expect("ok")
        else {
            panic!("decoded to the wrong variant")
        };
        assert_eq!(v[4], f16::ONE);
        assert_eq!(v[0].to_f64(), 2f64.powi(-24));
    }

    #[test]
    fn odd_length_is_a_shape_mismatch() {
        let error = TensorValues::from_le_bytes(Dtype::I32, &[1, 2, 3], "t").unwrap_err();
        assert!(
            matches!(error, PackError::ShapeMismatch { actual: 3, .. }),
            "{error}"
        );
    }

    #[test]
    fn bool_bytes_other_than_zero_or_one_are_refused() {
        let error = TensorValues::from_le_bytes(Dtype::BOOL, &[0, 1, 2], "t").unwrap_err();
        assert!(
            matches!(
                error,
                PackError::InvalidBool {
                    position: 2,
                    byte: 2,
                    ..
                }
            ),
            "{error}"
        );
    }
}
