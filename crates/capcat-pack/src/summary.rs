//! Tensor summary, version 2: the statistics the catalog and the golden
//! manifest record for each payload.
//!
//! Which statistics are exact, and why:
//! - `minimum`, `maximum` and `abs_max` select an element; they combine
//!   nothing, so they can be exact. For integer dtypes (and `U8`, `BOOL`)
//!   they are integers ([`SummaryScalar::Int`], an `i128`): the seed system
//!   widened int64 to float64 first and reported `2^63-2` and `2^63-1` as the
//!   same float, a value neither element equals. `abs_max` of `i64::MIN` is
//!   `2^63`, which no `i64` holds, hence `i128`. For float dtypes they are
//!   `f64` ([`SummaryScalar::Float`]); every f16/bf16/f32 value converts to
//!   `f64` exactly.
//! - `mean` and `l2_norm` combine elements, so they are `f64` and
//!   approximate. For integer dtypes the sum behind `mean` is exact (`i128`)
//!   and rounded once; the squares behind `l2_norm` are summed in `f64`, so
//!   the norm of large integers is approximate.
//! - `zero_fraction` is a ratio, an `f64`.
//! - For float dtypes, NaN and infinities are counted and excluded from every
//!   other statistic, so each statistic is a finite number or absent. `-0.0`
//!   counts as a zero.

use serde::{Deserialize, Serialize};

use half::{bf16, f16};

use crate::dtype::Dtype;
use crate::error::PackError;
use crate::values::TensorValues;

/// The summary version: 2 since order statistics of integer dtypes became
/// exact integers.
pub const SUMMARY_VERSION: u32 = 2;

/// An order statistic: an exact integer for integer dtypes, an `f64` for
/// float dtypes. In JSON an `Int` is written without a fraction (`1`) and a
/// `Float` always with one (`1.0`), so the type survives a round trip.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SummaryScalar {
    /// The exact value of an integer element (or `2^63` for the `abs_max`
    /// of `i64::MIN`).
    Int(i128),
    /// The value of a float element, widened to `f64` exactly.
    Float(f64),
}

impl SummaryScalar {
    /// The value as an `f64` (rounded for integers beyond 2^53), for a
    /// consumer such as a `Float64` catalog column.
    #[expect(clippy::cast_precision_loss, reason = "documented as rounding")]
    pub fn as_f64(self) -> f64 {
        match self {
            SummaryScalar::Int(v) => v as f64,
            SummaryScalar::Float(v) => v,
        }
    }
}

/// By hand rather than `#[serde(untagged)]`: serde's untagged buffering has
/// no 128-bit integers and would turn `2^63` into a float, the very loss this
/// type exists to prevent. The JSON token decides the variant.
impl<'de> Deserialize<'de> for SummaryScalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl serde::de::Visitor<'_> for ScalarVisitor {
            type Value = SummaryScalar;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a float")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<SummaryScalar, E> {
                Ok(SummaryScalar::Int(i128::from(v)))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<SummaryScalar, E> {
                Ok(SummaryScalar::Int(i128::from(v)))
            }
            fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<SummaryScalar, E> {
                Ok(SummaryScalar::Int(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<SummaryScalar, E> {
                Ok(SummaryScalar::Float(v))
            }
        }
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// The statistics of one tensor. See the module documentation for which are
/// exact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorSummary {
    /// Always [`SUMMARY_VERSION`] when computed by this build.
    pub summary_version: u32,
    /// The dtype summarised.
    pub dtype: Dtype,
    /// Number of elements.
    pub element_count: u64,
    /// Smallest element (finite elements for floats); absent when there is
    /// none.
    pub minimum: Option<SummaryScalar>,
    /// Largest element (finite elements for floats); absent when there is
    /// none.
    pub maximum: Option<SummaryScalar>,
    /// Largest magnitude: `max(|minimum|, |maximum|)`.
    pub abs_max: Option<SummaryScalar>,
    /// Arithmetic mean (finite elements for floats); absent when there is
    /// none. Approximate.
    pub mean: Option<f64>,
    /// Euclidean norm (finite elements for floats); 0.0 for an empty tensor.
    /// Approximate; `+inf` only when the true norm exceeds `f64::MAX`.
    pub l2_norm: f64,
    /// Fraction of all elements equal to zero; absent for an empty tensor.
    pub zero_fraction: Option<f64>,
    /// NaN elements (always 0 for integer dtypes).
    pub nan_count: u64,
    /// `+inf` elements (always 0 for integer dtypes).
    pub pos_inf_count: u64,
    /// `-inf` elements (always 0 for integer dtypes).
    pub neg_inf_count: u64,
}

impl TensorSummary {
    /// Summarises little-endian `bytes` of `dtype`.
    pub fn of_payload(dtype: Dtype, bytes: &[u8]) -> Result<Self, PackError> {
        Self::of_le_bytes(dtype, bytes, "summary")
    }

    /// Summarises little-endian `bytes` of `dtype` straight from the bytes,
    /// element by element in the order [`TensorSummary::of_values`] takes
    /// them, so every statistic is the same to the bit; `context` names the
    /// tensor in errors.
    ///
    /// An index pass summarises every record of every pack it describes, so
    /// this path allocates nothing: decoding into a `Vec` first made the
    /// summaries cost three times the SHA-256 of the same bytes.
    pub(crate) fn of_le_bytes(
        dtype: Dtype,
        bytes: &[u8],
        context: &str,
    ) -> Result<Self, PackError> {
        if dtype == Dtype::BOOL || !bytes.len().is_multiple_of(dtype.size()) {
            // The decoder owns both refusals: a length that is not a whole
            // number of elements, and a bool byte other than 0 or 1.
            return Ok(Self::of_values(&TensorValues::from_le_bytes(
                dtype, bytes, context,
            )?));
        }
        Ok(match dtype {
            Dtype::F64 => floats(dtype, elements(bytes, f64::from_le_bytes)),
            Dtype::F32 => floats(dtype, elements(bytes, |b| f64::from(f32::from_le_bytes(b)))),
            Dtype::F16 => floats(dtype, elements(bytes, |b| f16::from_le_bytes(b).to_f64())),
            Dtype::BF16 => floats(dtype, elements(bytes, |b| bf16::from_le_bytes(b).to_f64())),
            Dtype::I64 => integers(
                dtype,
                elements(bytes, |b| i128::from(i64::from_le_bytes(b))),
            ),
            Dtype::I32 => integers(
                dtype,
                elements(bytes, |b| i128::from(i32::from_le_bytes(b))),
            ),
            Dtype::I16 => integers(
                dtype,
                elements(bytes, |b| i128::from(i16::from_le_bytes(b))),
            ),
            Dtype::I8 => integers(dtype, elements(bytes, |b| i128::from(i8::from_le_bytes(b)))),
            Dtype::U8 | Dtype::BOOL => integers(dtype, bytes.iter().map(|&b| i128::from(b))),
        })
    }

    /// Summarises decoded values.
    pub fn of_values(values: &TensorValues) -> Self {
        let dtype = values.dtype();
        match values {
            TensorValues::F64(v) => floats(dtype, v.iter().copied()),
            TensorValues::F32(v) => floats(dtype, v.iter().map(|&x| f64::from(x))),
            TensorValues::F16(v) => floats(dtype, v.iter().map(|x| x.to_f64())),
            TensorValues::BF16(v) => floats(dtype, v.iter().map(|x| x.to_f64())),
            TensorValues::I64(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
            TensorValues::I32(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
            TensorValues::I16(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
            TensorValues::I8(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
            TensorValues::U8(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
            TensorValues::Bool(v) => integers(dtype, v.iter().map(|&x| i128::from(x))),
        }
    }
}

/// One field in which two summaries differ: its JSON name, the expected
/// value and the actual one, each spelled as in JSON (`1` for an integer,
/// `1.0` for a float, `null` for an absent statistic).
pub(crate) struct SummaryDifference {
    pub(crate) field: &'static str,
    pub(crate) expected: String,
    pub(crate) actual: String,
}

impl TensorSummary {
    /// The first field, in declaration order, in which `self` differs from
    /// `expected`, or `None` when they are equal. Floats are compared bit
    /// for bit (so `-0.0` differs from `0.0`, as the order statistics can),
    /// and an integer statistic differs from a float of the same value: an
    /// integer dtype's order statistics are exact integers (docs/pack-format.md
    /// section 6).
    pub(crate) fn first_difference(&self, expected: &TensorSummary) -> Option<SummaryDifference> {
        fn float(v: f64) -> String {
            // `{:?}` keeps a fraction or an exponent (`1.0`, `1e300`), as
            // the JSON spelling does.
            format!("{v:?}")
        }
        fn scalar(v: Option<SummaryScalar>) -> String {
            match v {
                None => "null".to_owned(),
                Some(SummaryScalar::Int(i)) => i.to_string(),
                Some(SummaryScalar::Float(f)) => float(f),
            }
        }
        fn same_scalar(a: Option<SummaryScalar>, b: Option<SummaryScalar>) -> bool {
            match (a, b) {
                (Some(SummaryScalar::Float(x)), Some(SummaryScalar::Float(y))) => {
                    x.to_bits() == y.to_bits()
                }
                _ => a == b,
            }
        }
        fn same_float(a: Option<f64>, b: Option<f64>) -> bool {
            a.map(f64::to_bits) == b.map(f64::to_bits)
        }
        let opt_float = |v: Option<f64>| v.map_or_else(|| "null".to_owned(), float);
        let differs = |field, expected: String, actual: String| {
            Some(SummaryDifference {
                field,
                expected,
                actual,
            })
        };
        let (a, e) = (self, expected);
        if a.summary_version != e.summary_version {
            return differs(
                "summary_version",
                e.summary_version.to_string(),
                a.summary_version.to_string(),
            );
        }
        if a.dtype != e.dtype {
            return differs("dtype", e.dtype.to_string(), a.dtype.to_string());
        }
        if a.element_count != e.element_count {
            return differs(
                "element_count",
                e.element_count.to_string(),
                a.element_count.to_string(),
            );
        }
        for (field, x, y) in [
            ("minimum", a.minimum, e.minimum),
            ("maximum", a.maximum, e.maximum),
            ("abs_max", a.abs_max, e.abs_max),
        ] {
            if !same_scalar(x, y) {
                return differs(field, scalar(y), scalar(x));
            }
        }
        for (field, x, y) in [
            ("mean", a.mean, e.mean),
            ("l2_norm", Some(a.l2_norm), Some(e.l2_norm)),
            ("zero_fraction", a.zero_fraction, e.zero_fraction),
        ] {
            if !same_float(x, y) {
                return differs(field, opt_float(y), opt_float(x));
            }
        }
        for (field, x, y) in [
            ("nan_count", a.nan_count, e.nan_count),
            ("pos_inf_count", a.pos_inf_count, e.pos_inf_count),
            ("neg_inf_count", a.neg_inf_count, e.neg_inf_count),
        ] {
            if x != y {
                return differs(field, y.to_string(), x.to_string());
            }
        }
        None
    }
}

/// The fixed-width little-endian elements of `bytes`, each converted by
/// `from`. `bytes.len()` is a multiple of `N` (checked by the caller), so
/// `chunks_exact` leaves no remainder.
fn elements<const N: usize, T>(
    bytes: &[u8],
    from: impl Fn([u8; N]) -> T + Clone,
) -> impl Iterator<Item = T> + Clone {
    bytes.chunks_exact(N).map(move |chunk| {
        let mut array = [0u8; N];
        array.copy_from_slice(chunk);
        from(array)
    })
}

#[expect(
    clippy::cast_precision_loss,
    reason = "mean and l2_norm are documented approximations"
)]
fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// Integer dtypes: order statistics and the sum are exact in `i128`
/// (|x| <= 2^63 and at most 2^63 elements keep the sum below 2^127).
#[expect(
    clippy::cast_precision_loss,
    reason = "mean and l2_norm are documented approximations"
)]
fn integers(dtype: Dtype, values: impl Iterator<Item = i128>) -> TensorSummary {
    let mut count = 0u64;
    let mut zeros = 0u64;
    let mut sum = 0i128;
    let mut squares = 0f64;
    // The extremes start beyond every element, so the first element sets
    // both; they are reported only when there is one.
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for x in values {
        count += 1;
        zeros += u64::from(x == 0);
        sum += x;
        let xf = x as f64;
        squares += xf * xf;
        lo = lo.min(x);
        hi = hi.max(x);
    }
    let range = (count > 0).then_some((lo, hi));
    TensorSummary {
        summary_version: SUMMARY_VERSION,
        dtype,
        element_count: count,
        minimum: range.map(|(lo, _)| SummaryScalar::Int(lo)),
        maximum: range.map(|(_, hi)| SummaryScalar::Int(hi)),
        abs_max: range.map(|(lo, hi)| SummaryScalar::Int(lo.abs().max(hi.abs()))),
        mean: (count > 0).then(|| sum as f64 / count as f64),
        l2_norm: squares.sqrt(),
        zero_fraction: ratio(zeros, count),
        nan_count: 0,
        pos_inf_count: 0,
        neg_inf_count: 0,
    }
}

/// Float dtypes: non-finite elements are counted and set aside; the rest
/// are summarised in `f64`.
#[expect(
    clippy::cast_precision_loss,
    reason = "mean and l2_norm are documented approximations"
)]
fn floats(dtype: Dtype, values: impl Iterator<Item = f64> + Clone) -> TensorSummary {
    let mut count = 0u64;
    let mut finite = 0u64;
    let mut zeros = 0u64;
    let (mut nan, mut pos_inf, mut neg_inf) = (0u64, 0u64, 0u64);
    let mut sum = 0f64;
    let mut squares = 0f64;
    // The extremes start at the infinities, which no finite element passes,
    // so the first finite element sets both. A later element replaces one
    // only when strictly beyond it: of `-0.0` and `0.0` the first seen stays.
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in values.clone() {
        count += 1;
        if x.is_finite() {
            finite += 1;
            zeros += u64::from(x == 0.0);
            sum += x;
            squares += x * x;
            if x < lo {
                lo = x;
            }
            if x > hi {
                hi = x;
            }
        } else if x.is_nan() {
            nan += 1;
        } else if x > 0.0 {
            pos_inf += 1;
        } else {
            neg_inf += 1;
        }
    }
    let range = (finite > 0).then_some((lo, hi));
    let abs_max = range.map(|(lo, hi)| lo.abs().max(hi.abs()));
    let finite_values = || values.clone().filter(|x| x.is_finite());
    // The plain sums overflow only for elements near f64::MAX; then the
    // statistic is recomputed scaled, so it stays finite whenever it can be.
    let mean = (finite > 0).then(|| {
        if sum.is_finite() {
            sum / finite as f64
        } else {
            finite_values().map(|x| x / finite as f64).sum()
        }
    });
    let l2_norm = match abs_max {
        Some(scale) if !squares.is_finite() || (squares == 0.0 && scale > 0.0) => {
            let scaled: f64 = finite_values().map(|x| (x / scale) * (x / scale)).sum();
            scaled.sqrt() * scale
        }
        _ => squares.sqrt(),
    };
    TensorSummary {
        summary_version: SUMMARY_VERSION,
        dtype,
        element_count: count,
        minimum: range.map(|(lo, _)| SummaryScalar::Float(lo)),
        maximum: range.map(|(_, hi)| SummaryScalar::Float(hi)),
        abs_max: abs_max.map(SummaryScalar::Float),
        mean,
        l2_norm,
        zero_fraction: ratio(zeros, count),
        nan_count: nan,
        pos_inf_count: pos_inf,
        neg_inf_count: neg_inf,
    }
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};

    use super::*;

    /// The seed's int64 case: widening to float64 first reported 2^63-2 and
    /// 2^63-1 as the same 9.223372036854776e18. Both must stay distinct and
    /// exact.
    #[test]
    fn seed_int64_extremes_near_2_pow_63_stay_exact_and_distinct() {
        let summary = TensorSummary::of_values(&TensorValues::I64(vec![i64::MAX - 1, i64::MAX]));
        assert_eq!(
            summary.minimum,
            Some(SummaryScalar::Int(i128::from(i64::MAX - 1)))
        );
        assert_eq!(
            summary.maximum,
            Some(SummaryScalar::Int(i128::from(i64::MAX)))
        );
        assert_ne!(summary.minimum, summary.maximum);
        assert_eq!(
            summary.abs_max,
            Some(SummaryScalar::Int(i128::from(i64::MAX)))
        );
    }

    #[test]
    fn abs_max_of_i64_min_is_2_pow_63() {
        let summary = TensorSummary::of_values(&TensorValues::I64(vec![i64::MIN, i64::MIN]));
        assert_eq!(summary.abs_max, Some(SummaryScalar::Int(1i128 << 63)));
        assert_eq!(
            summary.minimum,
            Some(SummaryScalar::Int(i128::from(i64::MIN)))
        );
        assert_eq!(summary.mean, Some(-(2f64.powi(63))));
    }

    #[test]
    fn integer_order_statistics_serialize_as_json_integers_and_floats_as_floats() {
        let ints = TensorSummary::of_values(&TensorValues::U8(vec![1, 1]));
        let json = serde_json::to_value(&ints).expect("serializable");
        assert_eq!(json["minimum"], serde_json::json!(1));
        assert_ne!(json["minimum"], serde_json::json!(1.0));
        let floats = TensorSummary::of_values(&TensorValues::F32(vec![1.0, 1.0]));
        let json = serde_json::to_value(&floats).expect("serializable");
        assert_eq!(json["minimum"], serde_json::json!(1.0));
        assert_ne!(json["minimum"], serde_json::json!(1));
        // 2^63 survives a JSON round trip as an exact integer.
        let big = TensorSummary::of_values(&TensorValues::I64(vec![i64::MIN]));
        let text = serde_json::to_string(&big).expect("serializable");
        assert!(text.contains("\"abs_max\":9223372036854775808"), "{text}");
        let back: TensorSummary = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, big);
    }

    #[test]
    fn floats_count_non_finite_and_exclude_them() {
        let values = TensorValues::F32(vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            3.0,
            -4.0,
        ]);
        let s = TensorSummary::of_values(&values);
        assert_eq!((s.nan_count, s.pos_inf_count, s.neg_inf_count), (1, 1, 1));
        assert_eq!(s.element_count, 6);
        assert_eq!(s.minimum, Some(SummaryScalar::Float(-4.0)));
        assert_eq!(s.maximum, Some(SummaryScalar::Float(3.0)));
        assert_eq!(s.abs_max, Some(SummaryScalar::Float(4.0)));
        assert_eq!(s.mean, Some(-1.0 / 3.0));
        assert_eq!(s.l2_norm, 5.0);
        assert_eq!(s.zero_fraction, Some(1.0 / 6.0));
    }

    #[test]
    fn half_precision_extremes_are_exact_in_f64() {
        let s = TensorSummary::of_values(&TensorValues::F16(vec![f16::MAX, f16::from_bits(1)]));
        assert_eq!(s.maximum, Some(SummaryScalar::Float(65504.0)));
        assert_eq!(s.minimum, Some(SummaryScalar::Float(2f64.powi(-24))));
        let s = TensorSummary::of_values(&TensorValues::BF16(vec![bf16::MAX]));
        assert_eq!(s.maximum, Some(SummaryScalar::Float(bf16::MAX.to_f64())));
    }

    #[test]
    fn huge_floats_keep_mean_and_norm_finite() {
        let s = TensorSummary::of_values(&TensorValues::F64(vec![f64::MAX, f64::MAX]));
        assert_eq!(s.mean, Some(f64::MAX));
        assert!(s.l2_norm.is_infinite(), "true norm is sqrt(2) * MAX");
        let s = TensorSummary::of_values(&TensorValues::F64(vec![f64::MAX / 4.0, -f64::MAX / 4.0]));
        assert_eq!(s.mean, Some(0.0));
        assert!(s.l2_norm.is_finite() && s.l2_norm > f64::MAX / 4.0);
        let tiny = f64::from_bits(1);
        let s = TensorSummary::of_values(&TensorValues::F64(vec![tiny, tiny]));
        assert!(
            s.l2_norm > 0.0,
            "squares underflow; the scaled path keeps the norm"
        );
    }

    #[test]
    fn empty_and_all_nan_tensors_have_no_order_statistics() {
        let s = TensorSummary::of_values(&TensorValues::I32(vec![]));
        assert_eq!(
            (s.minimum, s.mean, s.zero_fraction, s.l2_norm),
            (None, None, None, 0.0)
        );
        let s = TensorSummary::of_values(&TensorValues::F64(vec![f64::NAN]));
        assert_eq!(
            (s.minimum, s.mean, s.zero_fraction),
            (None, None, Some(0.0))
        );
    }

    proptest::proptest! {
        /// Against an independent oracle: the order statistics of any
        /// integer tensor are its exact extremes, never a rounded float.
        #[test]
        fn integer_order_statistics_are_the_exact_extremes(
            values in proptest::collection::vec(proptest::num::i64::ANY, 1..64),
        ) {
            let s = TensorSummary::of_values(&TensorValues::I64(values.clone()));
            let lo = values.iter().copied().min().map(i128::from);
            let hi = values.iter().copied().max().map(i128::from);
            let magnitude = values.iter().map(|&v| i128::from(v).abs()).max();
            proptest::prop_assert_eq!(s.minimum, lo.map(SummaryScalar::Int));
            proptest::prop_assert_eq!(s.maximum, hi.map(SummaryScalar::Int));
            proptest::prop_assert_eq!(s.abs_max, magnitude.map(SummaryScalar::Int));
            let zeros = values.iter().filter(|&&v| v == 0).count();
            proptest::prop_assert_eq!(s.zero_fraction, Some(zeros as f64 / values.len() as f64));
        }

        /// Float summaries: every non-finite element is counted, and every
        /// statistic is finite or absent (so it survives JSON).
        #[test]
        fn float_statistics_are_finite_and_non_finite_elements_are_counted(
            bits in proptest::collection::vec(proptest::num::u32::ANY, 0..64),
        ) {
            let values: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
            let s = TensorSummary::of_values(&TensorValues::F32(values.clone()));
            let nan = values.iter().filter(|v| v.is_nan()).count() as u64;
            let inf = values.iter().filter(|v| v.is_infinite()).count() as u64;
            proptest::prop_assert_eq!(s.nan_count, nan);
            proptest::prop_assert_eq!(s.pos_inf_count + s.neg_inf_count, inf);
            for statistic in [s.minimum, s.maximum, s.abs_max].into_iter().flatten() {
                proptest::prop_assert!(statistic.as_f64().is_finite());
            }
            proptest::prop_assert!(s.mean.is_none_or(f64::is_finite));
            // f32 values are far below f64::MAX, so the norm is finite too.
            proptest::prop_assert!(s.l2_norm.is_finite());
        }
    }

    /// The summary as first written (decode into a `Vec`, then fold with an
    /// `Option` range), kept as the oracle of the allocation-free path.
    fn reference(dtype: Dtype, bytes: &[u8]) -> TensorSummary {
        fn ints(dtype: Dtype, values: Vec<i128>) -> TensorSummary {
            let mut range: Option<(i128, i128)> = None;
            let (mut zeros, mut sum, mut squares) = (0u64, 0i128, 0f64);
            for &x in &values {
                zeros += u64::from(x == 0);
                sum += x;
                squares += (x as f64) * (x as f64);
                range = Some(range.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
            }
            let count = values.len() as u64;
            TensorSummary {
                summary_version: SUMMARY_VERSION,
                dtype,
                element_count: count,
                minimum: range.map(|(lo, _)| SummaryScalar::Int(lo)),
                maximum: range.map(|(_, hi)| SummaryScalar::Int(hi)),
                abs_max: range.map(|(lo, hi)| SummaryScalar::Int(lo.abs().max(hi.abs()))),
                mean: (count > 0).then(|| sum as f64 / count as f64),
                l2_norm: squares.sqrt(),
                zero_fraction: ratio(zeros, count),
                nan_count: 0,
                pos_inf_count: 0,
                neg_inf_count: 0,
            }
        }
        let values = TensorValues::from_le_bytes(dtype, bytes, "t").expect("whole elements");
        let as_floats: Vec<f64> = match &values {
            TensorValues::F64(v) => v.clone(),
            TensorValues::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorValues::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorValues::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorValues::I64(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
            TensorValues::I32(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
            TensorValues::I16(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
            TensorValues::I8(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
            TensorValues::U8(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
            TensorValues::Bool(v) => return ints(dtype, v.iter().map(|&x| x.into()).collect()),
        };
        let (mut nan, mut pos_inf, mut neg_inf, mut finite, mut zeros) = (0, 0, 0, 0u64, 0);
        let (mut sum, mut squares) = (0f64, 0f64);
        let mut range: Option<(f64, f64)> = None;
        for &x in &as_floats {
            if x.is_nan() {
                nan += 1;
                continue;
            }
            if x.is_infinite() {
                if x > 0.0 {
                    pos_inf += 1;
                } else {
                    neg_inf += 1;
                }
                continue;
            }
            finite += 1;
            zeros += u64::from(x == 0.0);
            sum += x;
            squares += x * x;
            range = Some(range.map_or((x, x), |(lo, hi)| {
                (if x < lo { x } else { lo }, if x > hi { x } else { hi })
            }));
        }
        let abs_max = range.map(|(lo, hi)| lo.abs().max(hi.abs()));
        let finite_values = || as_floats.iter().copied().filter(|x| x.is_finite());
        TensorSummary {
            summary_version: SUMMARY_VERSION,
            dtype,
            element_count: as_floats.len() as u64,
            minimum: range.map(|(lo, _)| SummaryScalar::Float(lo)),
            maximum: range.map(|(_, hi)| SummaryScalar::Float(hi)),
            abs_max: abs_max.map(SummaryScalar::Float),
            mean: (finite > 0).then(|| {
                if sum.is_finite() {
                    sum / finite as f64
                } else {
                    finite_values().map(|x| x / finite as f64).sum()
                }
            }),
            l2_norm: match abs_max {
                Some(scale) if !squares.is_finite() || (squares == 0.0 && scale > 0.0) => {
                    let scaled: f64 = finite_values().map(|x| (x / scale) * (x / scale)).sum();
                    scaled.sqrt() * scale
                }
                _ => squares.sqrt(),
            },
            zero_fraction: ratio(zeros, as_floats.len() as u64),
            nan_count: nan,
            pos_inf_count: pos_inf,
            neg_inf_count: neg_inf,
        }
    }

    /// Bytes that decode to many special values: NaN payloads, infinities,
    /// both zeros, subnormals and extremes of every width, plus noise.
    fn special_heavy_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        // Whole 8-byte words, each read as one f64/i64, two f32/i32 or four
        // f16/bf16/i16 elements, so every width sees its own specials.
        let special: Vec<u64> = vec![
            0x0000_0000_0000_0000,
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0001,
            0x7fef_ffff_ffff_ffff,
            0x0000_0000_0000_0001,
            0x7f80_0000_7fc0_0001,
            0xff7f_ffff_0080_0000,
            0x7c00_fc00_7e01_8000,
            0x7f7f_ff80_0001_7bff,
            0x0000_8000_8000_0000,
        ];
        proptest::collection::vec(
            prop_oneof![any::<u64>(), proptest::sample::select(special)],
            0..48,
        )
        .prop_map(|words| words.iter().flat_map(|w| w.to_le_bytes()).collect())
    }

    proptest::proptest! {
        /// The allocation-free path gives the reference's summary to the
        /// bit, for every dtype, on bytes full of special values.
        #[test]
        fn summaries_from_bytes_equal_the_reference_bit_for_bit(
            mut bytes in special_heavy_bytes(),
            which in 0..Dtype::ALL.len(),
        ) {
            let dtype = Dtype::ALL[which];
            if dtype == Dtype::BOOL {
                bytes.iter_mut().for_each(|b| *b &= 1);
            }
            bytes.truncate(bytes.len() - bytes.len() % dtype.size());
            let fast = TensorSummary::of_payload(dtype, &bytes).expect("whole elements");
            let slow = reference(dtype, &bytes);
            if let Some(d) = fast.first_difference(&slow) {
                proptest::prop_assert!(false, "{dtype}: {} {} != {}", d.field, d.actual, d.expected);
            }
            proptest::prop_assert_eq!(
                (fast.nan_count, fast.pos_inf_count, fast.neg_inf_count),
                (slow.nan_count, slow.pos_inf_count, slow.neg_inf_count)
            );
        }
    }

    #[test]
    fn bools_summarise_as_integers() {
        let s = TensorSummary::of_values(&TensorValues::Bool(vec![true, false, false, true]));
        assert_eq!(s.maximum, Some(SummaryScalar::Int(1)));
        assert_eq!(s.zero_fraction, Some(0.5));
        assert_eq!(s.mean, Some(0.5));
    }
}
