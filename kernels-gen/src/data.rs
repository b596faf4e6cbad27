//! Seeded test data: inputs drawn once, rounded to the storage type, and kept both as the
//! storage bits (for the kernel) and as exact float64 values (for the reference).

use entkv_abi::DType;
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

/// Round one value to a storage dtype: (bits, exact value of the rounded number).
pub fn round_to(dtype: DType, v: f64) -> (u32, f64) {
    match dtype {
        DType::F16 => {
            let h = f16::from_f64(v);
            (h.to_bits() as u32, h.to_f64())
        }
        DType::BF16 => {
            let h = bf16::from_f64(v);
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
