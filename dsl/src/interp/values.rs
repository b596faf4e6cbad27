//! Host-side data: global buffers and scalar arguments, and the raw lane encoding the
//! interpreter computes with.
//!
//! Raw encoding: every lane value is a `u64` holding the value's bits zero-extended from its
//! width (`I32` as its two's-complement `u32` bits, `F32` as `f32::to_bits`, `F16`/`BF16` as
//! their 16 bits, `Bool` as 0/1). With this canonical form a bitcast is a no-op and bitwise
//! operations are type-agnostic.

use crate::ir::Scalar;
use half::{bf16, f16};

/// `x` rounded to f32 with round-to-odd: truncated toward zero, the last bit set when inexact.
/// Rounding that once more to a format with at least two fewer significand bits (f16: 11,
/// bf16: 8, against f32's 24) gives the correctly rounded result (no double-rounding error).
fn f32_round_to_odd(x: f64) -> f32 {
    let t = x as f32;
    if t.is_nan() || t.is_infinite() || t as f64 == x {
        return t;
    }
    let mut bits = t.to_bits();
    if (t as f64).abs() > x.abs() {
        bits -= 1; // one step toward zero (sign-magnitude: the magnitude bits)
    }
    f32::from_bits(bits | 1)
}

/// `x` rounded to nearest even f16, as the GPU's `cvt.rn.f16` rounds the exact value.
/// (`half`'s own conversion from f64 drops the low 32 bits of the f64 first, which can break
/// ties the wrong way.)
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to nearest even bf16 (`half`'s own conversion from f64 drops the low 32 bits of
/// the f64 first and misrounds about one value in 20 000).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// A typed host buffer bound to a global-buffer parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum HostBuffer {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
}

macro_rules! accessors {
    ($($variant:ident, $t:ty, $get:ident, $get_mut:ident);* $(;)?) => {
        $(
            #[doc = concat!("The elements if this is a `", stringify!($variant), "` buffer.")]
            pub fn $get(&self) -> Option<&[$t]> {
                match self {
                    HostBuffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
            #[doc = concat!("The elements, mutably, if this is a `", stringify!($variant), "` buffer.")]
            pub fn $get_mut(&mut self) -> Option<&mut [$t]> {
                match self {
                    HostBuffer::$variant(v) => Some(v),
                    _ => None,
                }
            }
        )*
    };
}

impl HostBuffer {
    accessors!(
        F16, f16, as_f16, as_f16_mut;
        BF16, bf16, as_bf16, as_bf16_mut;
        F32, f32, as_f32, as_f32_mut;
        I32, i32, as_i32, as_i32_mut;
        U32, u32, as_u32, as_u32_mut;
        I64, i64, as_i64, as_i64_mut;
        U64, u64, as_u64, as_u64_mut;
    );

    pub fn elem(&self) -> Scalar {
        match self {
            HostBuffer::F16(_) => Scalar::F16,
            HostBuffer::BF16(_) => Scalar::BF16,
            HostBuffer::F32(_) => Scalar::F32,
            HostBuffer::I32(_) => Scalar::I32,
            HostBuffer::U32(_) => Scalar::U32,
            HostBuffer::I64(_) => Scalar::I64,
            HostBuffer::U64(_) => Scalar::U64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            HostBuffer::F16(v) => v.len(),
            HostBuffer::BF16(v) => v.len(),
            HostBuffer::F32(v) => v.len(),
            HostBuffer::I32(v) => v.len(),
            HostBuffer::U32(v) => v.len(),
            HostBuffer::I64(v) => v.len(),
            HostBuffer::U64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes as it would be on the device.
    pub fn size_bytes(&self) -> u64 {
        self.len() as u64 * self.elem().size_bytes() as u64
    }

    /// A zero-filled buffer.
    ///
    /// # Panics
    /// If `elem` is `Bool` (there are no bool buffers).
    pub fn zeros(elem: Scalar, len: usize) -> Self {
        Self::filled_f64(elem, len, 0.0)
    }

    /// A buffer filled with `v` converted to `elem` (Rust `as` for integers, round to nearest
    /// for floats). Use `f64::NAN` to poison float outputs a kernel is supposed to overwrite.
    ///
    /// # Panics
    /// If `elem` is `Bool` (there are no bool buffers).
    pub fn filled_f64(elem: Scalar, len: usize, v: f64) -> Self {
        match elem {
            Scalar::F16 => HostBuffer::F16(vec![f16_from_f64(v); len]),
            Scalar::BF16 => HostBuffer::BF16(vec![bf16_from_f64(v); len]),
            Scalar::F32 => HostBuffer::F32(vec![v as f32; len]),
            Scalar::I32 => HostBuffer::I32(vec![v as i32; len]),
            Scalar::U32 => HostBuffer::U32(vec![v as u32; len]),
            Scalar::I64 => HostBuffer::I64(vec![v as i64; len]),
            Scalar::U64 => HostBuffer::U64(vec![v as u64; len]),
            Scalar::Bool => panic!("there are no bool buffers"),
        }
    }

    /// Convert `v` to `elem`: f16/bf16 round to nearest even, integers use Rust `as`.
    ///
    /// # Panics
    /// If `elem` is `Bool`.
    pub fn from_f32_as(elem: Scalar, v: &[f32]) -> Self {
        match elem {
            Scalar::F16 => HostBuffer::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            Scalar::BF16 => HostBuffer::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
            Scalar::F32 => HostBuffer::F32(v.to_vec()),
            Scalar::I32 => HostBuffer::I32(v.iter().map(|&x| x as i32).collect()),
            Scalar::U32 => HostBuffer::U32(v.iter().map(|&x| x as u32).collect()),
            Scalar::I64 => HostBuffer::I64(v.iter().map(|&x| x as i64).collect()),
            Scalar::U64 => HostBuffer::U64(v.iter().map(|&x| x as u64).collect()),
            Scalar::Bool => panic!("there are no bool buffers"),
        }
    }

    /// Like [`Self::from_f32_as`] from `f64` values (one rounding to the element type).
    ///
    /// # Panics
    /// If `elem` is `Bool`.
    pub fn from_f64_as(elem: Scalar, v: &[f64]) -> Self {
        match elem {
            Scalar::F16 => HostBuffer::F16(v.iter().map(|&x| f16_from_f64(x)).collect()),
            Scalar::BF16 => HostBuffer::BF16(v.iter().map(|&x| bf16_from_f64(x)).collect()),
            Scalar::F32 => HostBuffer::F32(v.iter().map(|&x| x as f32).collect()),
            Scalar::I32 => HostBuffer::I32(v.iter().map(|&x| x as i32).collect()),
            Scalar::U32 => HostBuffer::U32(v.iter().map(|&x| x as u32).collect()),
            Scalar::I64 => HostBuffer::I64(v.iter().map(|&x| x as i64).collect()),
            Scalar::U64 => HostBuffer::U64(v.iter().map(|&x| x as u64).collect()),
            Scalar::Bool => panic!("there are no bool buffers"),
        }
    }

    /// Every element as `f64` (exact for all types except 64-bit integers beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            HostBuffer::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            HostBuffer::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            HostBuffer::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostBuffer::I32(v) => v.iter().map(|&x| x as f64).collect(),
            HostBuffer::U32(v) => v.iter().map(|&x| x as f64).collect(),
            HostBuffer::I64(v) => v.iter().map(|&x| x as f64).collect(),
            HostBuffer::U64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    /// The elements' little-endian bytes, as a GPU holds them.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        macro_rules! bytes {
            ($v:expr) => {
                $v.iter().flat_map(|x| x.to_le_bytes()).collect()
            };
        }
        match self {
            HostBuffer::F16(v) => bytes!(v),
            HostBuffer::BF16(v) => bytes!(v),
            HostBuffer::F32(v) => bytes!(v),
            HostBuffer::I32(v) => bytes!(v),
            HostBuffer::U32(v) => bytes!(v),
            HostBuffer::I64(v) => bytes!(v),
            HostBuffer::U64(v) => bytes!(v),
        }
    }

    /// Overwrite the elements from little-endian bytes (as read back from a GPU). Returns
    /// `false`, leaving the buffer unchanged, when the byte count does not match.
    pub fn copy_from_le_bytes(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() as u64 != self.size_bytes() {
            return false;
        }
        macro_rules! fill {
            ($v:expr, $t:ty, $n:expr) => {
                for (x, c) in $v.iter_mut().zip(bytes.chunks_exact($n)) {
                    *x = <$t>::from_le_bytes(c.try_into().expect("chunk size"));
                }
            };
        }
        match self {
            HostBuffer::F16(v) => fill!(v, f16, 2),
            HostBuffer::BF16(v) => fill!(v, bf16, 2),
            HostBuffer::F32(v) => fill!(v, f32, 4),
            HostBuffer::I32(v) => fill!(v, i32, 4),
            HostBuffer::U32(v) => fill!(v, u32, 4),
            HostBuffer::I64(v) => fill!(v, i64, 8),
            HostBuffer::U64(v) => fill!(v, u64, 8),
        }
        true
    }

    /// Element `i` as `f64`.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        Some(match self {
            HostBuffer::F16(v) => v.get(i)?.to_f64(),
            HostBuffer::BF16(v) => v.get(i)?.to_f64(),
            HostBuffer::F32(v) => *v.get(i)? as f64,
            HostBuffer::I32(v) => *v.get(i)? as f64,
            HostBuffer::U32(v) => *v.get(i)? as f64,
            HostBuffer::I64(v) => *v.get(i)? as f64,
            HostBuffer::U64(v) => *v.get(i)? as f64,
        })
    }
}

macro_rules! from_vec {
    ($($variant:ident, $t:ty);*) => {$(
        impl From<Vec<$t>> for HostBuffer {
            fn from(v: Vec<$t>) -> Self {
                HostBuffer::$variant(v)
            }
        }
    )*};
}
from_vec!(F16, f16; BF16, bf16; F32, f32; I32, i32; U32, u32; I64, i64; U64, u64);

/// A scalar kernel argument. Its type must equal the parameter's type exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarValue {
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    Bool(bool),
    F16(f16),
    BF16(bf16),
}

impl ScalarValue {
    pub fn ty(&self) -> Scalar {
        match self {
            ScalarValue::I32(_) => Scalar::I32,
            ScalarValue::U32(_) => Scalar::U32,
            ScalarValue::I64(_) => Scalar::I64,
            ScalarValue::U64(_) => Scalar::U64,
            ScalarValue::F32(_) => Scalar::F32,
            ScalarValue::Bool(_) => Scalar::Bool,
            ScalarValue::F16(_) => Scalar::F16,
            ScalarValue::BF16(_) => Scalar::BF16,
        }
    }

    /// The raw lane encoding (see the module docs).
    pub(crate) fn raw(&self) -> u64 {
        match *self {
            ScalarValue::I32(v) => v as u32 as u64,
            ScalarValue::U32(v) => v as u64,
            ScalarValue::I64(v) => v as u64,
            ScalarValue::U64(v) => v,
            ScalarValue::F32(v) => v.to_bits() as u64,
            ScalarValue::Bool(v) => v as u64,
            ScalarValue::F16(v) => v.to_bits() as u64,
            ScalarValue::BF16(v) => v.to_bits() as u64,
        }
    }
}

macro_rules! scalar_from {
    ($($variant:ident, $t:ty);*) => {$(
        impl From<$t> for ScalarValue {
            fn from(v: $t) -> Self {
                ScalarValue::$variant(v)
            }
        }
    )*};
}
scalar_from!(I32, i32; U32, u32; I64, i64; U64, u64; F32, f32; Bool, bool; F16, f16; BF16, bf16);

/// One kernel argument, in parameter order.
#[derive(Debug)]
pub enum Arg<'a> {
    Buf(&'a mut HostBuffer),
    Scalar(ScalarValue),
}

impl<'a> From<&'a mut HostBuffer> for Arg<'a> {
    fn from(b: &'a mut HostBuffer) -> Self {
        Arg::Buf(b)
    }
}

impl From<ScalarValue> for Arg<'_> {
    fn from(v: ScalarValue) -> Self {
        Arg::Scalar(v)
    }
}

impl Arg<'_> {
    /// A scalar argument from any Rust value with a [`ScalarValue`] conversion.
    pub fn scalar(v: impl Into<ScalarValue>) -> Self {
        Arg::Scalar(v.into())
    }
}

// ----- raw encoding helpers ---------------------------------------------------------------

#[inline(always)]
pub(crate) fn f32_of(r: u64) -> f32 {
    f32::from_bits(r as u32)
}

#[inline(always)]
pub(crate) fn raw_f32(x: f32) -> u64 {
    x.to_bits() as u64
}

/// Mask of the raw bits used by a type.
pub(crate) fn width_mask(ty: Scalar) -> u64 {
    match ty {
        Scalar::Bool => 1,
        Scalar::F16 | Scalar::BF16 => 0xffff,
        Scalar::I32 | Scalar::U32 | Scalar::F32 => 0xffff_ffff,
        Scalar::I64 | Scalar::U64 => u64::MAX,
    }
}

/// An integer (or bool) raw value as a mathematical integer, by the type's signedness.
#[inline(always)]
pub(crate) fn int_value(r: u64, ty: Scalar) -> i128 {
    match ty {
        Scalar::I32 => r as u32 as i32 as i128,
        Scalar::I64 => r as i64 as i128,
        Scalar::U32 => (r as u32) as i128,
        _ => r as i128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `h` is the nearest (ties to even) of the representable values around the exact
    /// `x`, given `h`'s neighbours `below` and `above`. The differences are exact in f64 for the
    /// inputs used (f32 values and integers below 2^53 against ≤ 24-bit significands).
    fn nearest_even(x: f64, h: f64, below: f64, above: f64, even: bool) -> bool {
        let (d, db, da) = ((h - x).abs(), (below - x).abs(), (above - x).abs());
        d < db.min(da) || (d == db.min(da) && even)
    }

    /// `bits` (of a format read by `value`, NaN/∞ for non-finite) is the nearest-even rounding
    /// of `x`, judged against its two neighbours (zero and overflow are not judged).
    fn check_rounding(what: &str, x: f64, bits: u16, value: impl Fn(u16) -> f64) {
        let (h, below, above) = (value(bits), value(bits.wrapping_sub(1)), value(bits + 1));
        if !(h.is_finite() && below.is_finite() && above.is_finite()) || h == 0.0 {
            return;
        }
        let (lo, hi) = if h > 0.0 { (below, above) } else { (above, below) };
        assert!(
            nearest_even(x, h, lo, hi, bits & 1 == 0),
            "{what} of {x:e}: {h} ({bits:#x})"
        );
    }

    fn check_bf16(x: f64) {
        check_rounding("bf16", x, bf16_from_f64(x).to_bits(), |b| {
            bf16::from_bits(b).to_f64()
        });
    }

    fn check_f16(x: f64) {
        check_rounding("f16", x, f16_from_f64(x).to_bits(), |b| {
            f16::from_bits(b).to_f64()
        });
    }

    /// f64 → f16/bf16 rounds the exact value to nearest even, like `cvt.rn` on the GPU: from
    /// every 8191st f32 bit pattern (all exponents, both signs) and from integers up to 2^53,
    /// including the halfway-plus-sticky cases `half`'s own f64 conversion gets wrong.
    #[test]
    fn half_precision_from_f64_rounds_to_nearest_even() {
        // Just above the halfway point between two bf16 values: must round up.
        let x = f32::from_bits(0x3ea0_8001);
        assert_eq!(bf16_from_f64(x as f64), bf16::from_f32(x));
        assert_eq!(bf16_from_f64(x as f64).to_bits(), 0x3ea1);
        // 2049 + 2^-20 is above the f16 halfway point 2049 between 2048 and 2050.
        assert_eq!(f16_from_f64(2049.0 + 2f64.powi(-20)).to_f64(), 2050.0);
        assert_eq!(f16_from_f64(2049.0).to_f64(), 2048.0);
        for bits in (0..=u32::MAX).step_by(8191) {
            let x = f32::from_bits(bits);
            if x.is_finite() {
                check_bf16(x as f64);
                check_f16(x as f64);
                assert_eq!(bf16_from_f64(x as f64), bf16::from_f32(x), "{bits:#x}");
            }
        }
        let mut i: u64 = 1;
        while i < 1 << 53 {
            for x in [i, i + 1, i + (i >> 9) + 1, i | (i >> 1) | 1] {
                for s in [1.0, -1.0] {
                    check_bf16(s * x as f64);
                    check_f16(s * x as f64);
                }
            }
            i = i * 3 / 2 + 1;
        }
        assert!(f16_from_f64(1e6).is_infinite() && bf16_from_f64(1e39).is_infinite());
        assert!(bf16_from_f64(f64::NAN).is_nan() && f16_from_f64(-0.0).is_sign_negative());
    }
}
