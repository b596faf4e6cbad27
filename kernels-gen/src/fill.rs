//! Counter-based test data that the GPU and the CPU produce bit for bit: element `i` of a
//! tensor filled with seed `s` is the same value whether a kernel writes it on the device (so
//! gigabyte caches need no host upload) or the reference regenerates it on the host.
//!
//! Each value is an Irwin–Hall approximation of N(0, 1): the sum of 12 uniforms on [0, 1)
//! minus 6 (mean 0, variance 1, support ±6). The uniforms come from a 32-bit integer hash of
//! (seed, element, draw), converted with 24 exact bits, and are summed in f32 in a fixed order,
//! so both sides round identically.

use crate::{scalar_of, KernelGenError};
use entkv_abi::DType;
use entkv_dsl::*;

const DRAWS: u32 = 12;
pub const FILL_THREADS: u32 = 256;

/// Murmur3's 32-bit finaliser: a cheap, well-mixing bijection.
pub fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// The f32 value of element `i` for `seed` (before scaling and rounding to storage).
pub fn normal_at(seed: u32, i: u64) -> f32 {
    let lo = i as u32;
    let hi = (i >> 32) as u32;
    let key = fmix32(fmix32(hi ^ seed.wrapping_mul(0x9e37_79b9)) ^ lo);
    let mut s = 0.0f32;
    for j in 0..DRAWS {
        let h = fmix32(key ^ j.wrapping_mul(0x27d4_eb2f));
        s += (h >> 8) as f32 * (1.0 / 16_777_216.0);
    }
    s - 6.0
}

/// `scale * normal_at(seed, i)` rounded to `dtype` as the kernel rounds it, as an exact f64.
pub fn value_at(dtype: DType, seed: u32, scale: f32, i: u64) -> f64 {
    crate::data::round_to(dtype, (normal_at(seed, i) * scale) as f64).1
}

/// [`fmix32`] in the DSL.
pub fn fmix32_dsl(k: &mut KernelBuilder, h: Expr) -> Var {
    let h = k.let_("h", h);
    k.assign(h, h ^ (h >> 16u32));
    k.assign(h, h * 0x85eb_ca6bu32);
    k.assign(h, h ^ (h >> 13u32));
    k.assign(h, h * 0xc2b2_ae35u32);
    k.assign(h, h ^ (h >> 16u32));
    h
}

/// [`normal_at`] in the DSL: `seed` a `u32`, `i` a 64-bit index; the same hashes and the same
/// f32 sum in the same order. No fused multiply-add can change the result: the multiply by
/// 2⁻²⁴ is exact, so `a·b + c` rounds once whether or not a backend contracts it.
pub fn normal_dsl(k: &mut KernelBuilder, seed: Expr, i: Expr) -> Var {
    let lo = i.clone().cast(Scalar::U32);
    let hi = (i >> 32i64).cast(Scalar::U32);
    let a = fmix32_dsl(k, hi ^ (seed * 0x9e37_79b9u32));
    let key = fmix32_dsl(k, a ^ lo);
    let s = k.let_typed("s", Scalar::F32, 0.0);
    for j in 0..DRAWS {
        let h = fmix32_dsl(k, key ^ j.wrapping_mul(0x27d4_eb2f));
        k.assign(s, s + (h >> 8u32).f32() * (1.0 / 16_777_216.0));
    }
    k.let_("normal", s - 6.0f32)
}

/// `fill_normal_<dtype>(out, len, seed, scale)`: `out[i] = scale * normal_at(seed, i)`, grid-
/// stride over `len` elements (any grid size works).
pub fn fill_kernel(dtype: DType) -> Result<Kernel, KernelGenError> {
    let mut k = KernelBuilder::new(format!("fill_normal_{}", dtype.name()), FILL_THREADS);
    let out = k.buffer("out", scalar_of(dtype), Access::Write);
    let len = k.scalar_param("len", Scalar::I64);
    let seed = k.scalar_param("seed", Scalar::U32);
    let scale = k.scalar_param("scale", Scalar::F32);
    let stride = k.let_("stride", k.grid_dim(Axis::X).i64() * FILL_THREADS as i64);
    let start = k.let_("start", k.global_thread_id().i64());
    k.for_("i", start, len, stride, |k, i| {
        let x = normal_dsl(k, seed.clone(), i.clone());
        k.store(out, i, (x * scale.clone()).cast(out.elem));
    });
    Ok(k.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel in the interpreter writes `value_at`, bit for bit, in every dtype (a grid
    /// smaller than the tensor, so the stride loop runs).
    #[test]
    fn kernel_matches_value_at() {
        use entkv_dsl::interp::{run, Arg, HostBuffer, LaunchDims};
        for dtype in [DType::F16, DType::BF16, DType::F32] {
            let k = fill_kernel(dtype).unwrap();
            let len = 3 * FILL_THREADS as usize + 77;
            let mut out = HostBuffer::filled_f64(scalar_of(dtype), len, f64::NAN);
            let mut args = [
                Arg::Buf(&mut out),
                Arg::scalar(len as i64),
                Arg::scalar(0x0bad_cafeu32),
                Arg::scalar(1.5f32),
            ];
            run(&k, LaunchDims::linear(2, FILL_THREADS), &mut args).unwrap();
            for (i, got) in out.to_f64_vec().into_iter().enumerate() {
                let want = value_at(dtype, 0x0bad_cafe, 1.5, i as u64);
                assert_eq!(got.to_bits(), want.to_bits(), "{dtype:?} element {i}");
            }
        }
    }

    #[test]
    fn moments_are_standard_normal() {
        let n = 200_000u64;
        let xs: Vec<f64> = (0..n).map(|i| normal_at(11, i) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "var {var}");
        // Seeds and high counter bits change the stream.
        assert_ne!(normal_at(11, 5), normal_at(12, 5));
        assert_ne!(normal_at(11, 5), normal_at(11, 5 + (1u64 << 32)));
    }
}
