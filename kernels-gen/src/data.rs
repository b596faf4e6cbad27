//! Seeded test data: inputs drawn once, rounded to the storage type, and kept both as the
//! storage bits (for the kernel) and as exact float64 values (for the reference).

use entkv_abi::DType;
use entkv_dsl::interp::values::{bf16_from_f64, f16_from_f64};
use half::{bf16, f16};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

/// A tensor in a storage dtype, with its exact float64 values.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub dtype: DType,
    /// Raw storage: f16/bf16 bit patterns (u16) or f32 bits (u32) widened to u32.
    pub bits: Vec<u32>,
    pub values: Vec<f64>,
}

impl Tensor {
    /// Round `x` to `dtype` and keep both forms.
    pub fn from_f64(dtype: DType, x: &[f64]) -> Tensor {
        let mut bits = Vec::with_capacity(x.len());
        let mut values = Vec::with_capacity(x.len());
        for &v in x {
            let (b, r) = round_to(dtype, v);
            bits.push(b);
            values.push(r);
        }
        Tensor { dtype, bits, values }
    }
    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    pub fn to_f16(&self) -> Vec<f16> {
        self.values.iter().map(|&v| f16::from_f64(v)).collect()
    }
    pub fn to_bf16(&self) -> Vec<bf16> {
        self.values.iter().map(|&v| bf16::from_f64(v)).collect()
    }
    pub fn to_f32(&self) -> Vec<f32> {
        self.values.iter().map(|&v| v as f32).collect()
    }
    /// Little-endian storage bytes, as the GPU holds them.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * self.dtype.size_bytes() as usize);
        for &b in &self.bits {
            match self.dtype {
                DType::F16 | DType::BF16 => out.extend_from_slice(&(b as u16).to_le_bytes()),
                DType::F32 => out.extend_from_slice(&b.to_le_bytes()),
            }
        }
        out
    }
}

/// Round one value to a storage dtype to nearest even, as the GPU's `cvt.rn` rounds it:
/// (bits, exact value of the rounded number). A host twin of a device generator rounds its f32
/// results with `round_to(dtype, x as f64)` (exact widening, then the same single rounding).
pub fn round_to(dtype: DType, v: f64) -> (u32, f64) {
    match dtype {
        DType::F16 => {
            let h = f16_from_f64(v);
            (h.to_bits() as u32, h.to_f64())
        }
        DType::BF16 => {
            let h = bf16_from_f64(v);
            (h.to_bits() as u32, h.to_f64())
        }
        DType::F32 => {
            let f = v as f32;
            (f.to_bits(), f as f64)
        }
    }
}

/// `len` iid N(0, 1) draws from a seeded generator.
pub fn normal(seed: u64, len: usize) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| StandardNormal.sample(&mut rng)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `round_to` rounds to nearest even on all of an f32's bits (0x3ea0_8001 is just above the
    /// halfway point between two bf16 values; `half`'s own f64 → bf16 conversion reads only the
    /// top 32 bits of the f64 and rounds it down), as `cvt.rn` and the f32 conversions do.
    #[test]
    fn f32_rounding_keeps_the_sticky_bits() {
        let x = f32::from_bits(0x3ea0_8001);
        assert_eq!(round_to(DType::BF16, x as f64).0, 0x3ea1);
        assert_eq!(
            round_to(DType::BF16, f32::from_bits(0x3ea0_8000) as f64).0,
            0x3ea0
        );
        assert_eq!(
            round_to(DType::BF16, f32::from_bits(0x3ea1_8000) as f64).0,
            0x3ea2
        );
        for b in (0x3e00_0000u32..0x3f80_0000).step_by(4099) {
            let x = f32::from_bits(b);
            assert_eq!(
                round_to(DType::F16, x as f64).0,
                f16::from_f32(x).to_bits() as u32
            );
            assert_eq!(
                round_to(DType::BF16, x as f64).0,
                bf16::from_f32(x).to_bits() as u32
            );
            assert_eq!(round_to(DType::F32, x as f64), (x.to_bits(), x as f64));
            let (bits, v) = round_to(DType::BF16, x as f64);
            assert!((v - x as f64).abs() <= (x as f64).abs() * 2f64.powi(-8), "{x}");
            assert_eq!(bf16::from_bits(bits as u16).to_f64(), v);
        }
    }
}
