//! Test cases for the dense decode, their seeded inputs, the float64 reference, and the
//! comparison with stated tolerances. The same code checks interpreter runs (CI) and GPU runs.
//!
//! Tolerances (f32 arithmetic against a float64 oracle on identical, already-rounded inputs):
//! - `z` carries the f32 rounding of q' = q·(α−1)/√d and a 32–128 term f32 dot product:
//!   |δz| ≲ d·2⁻²⁴·Σ|q'_i k_i| ≈ 1e-6 for unit-scale data.
//! - τ is solved to a few f32 ulps (relative 4·2⁻²³ ≈ 5e-7) on top of that, so we allow
//!   |τ − τ_ref| ≤ 1e-5·(1 + |τ|).
//! - A weight `p = (z − τ)^β` then has an absolute error ≲ β·|z − τ|^(β−1)·(|δz| + |δτ|) ≲ 4e-6,
//!   and `o = Σ p v / Σ p` sums a few dozen such terms against |v| ≈ √d: a relative output error
//!   of a few 1e-5 in the worst aligned case, ~1e-6 typically. We require ≤ 1e-4 for scores of
//!   unit scale. f32 rounding of `z` is relative to |z|, so for a head whose support scores reach
//!   |z| = Z the allowance is 1e-4·max(1, Z/8) (the `Extreme` data, keys ×300, reach Z ≈ 300).
//! - The support may differ only by tokens whose reference score is within the τ tolerance of
//!   τ (their weight is below 1e-10 either way).
//! - Any NaN or infinity in an output fails.

use crate::data::{normal, Tensor};
use crate::reference::{dense_decode, DecodeReference, DenseProblem};
use entkv_abi::{dense_plan, dense_workspace, DecodeSpec, DensePlan, DenseShape, DenseTile, SpecError};
use serde::{Deserialize, Serialize};

pub const OUT_REL_TOL: f64 = 1e-4;

/// An error that NaN cannot hide: `f64::max` drops a NaN operand and every comparison with NaN
/// is false, so a NaN error becomes +∞ before it is folded or compared.
pub fn nan_as_inf(e: f64) -> f64 {
    if e.is_nan() {
        f64::INFINITY
    } else {
        e
    }
}

/// An interpreter buffer's page ids as integers: a value that is no integer (NaN, a poison, a
/// fraction) becomes −1, which no selection row check (`entkv_abi::check_selection_row`)
/// accepts.
pub fn page_ids(values: &[f64]) -> Vec<i64> {
    values
        .iter()
        .map(|&v| {
            if v.fract() == 0.0 && v.abs() < 2f64.powi(53) {
                v as i64
            } else {
                -1
            }
        })
        .collect()
}

/// `err / tol` for a verdict (above 1 fails) that NaN cannot pass: a NaN error, or an infinite
/// error against an infinite tolerance (one taken from an infinite output), is +∞; an exact
/// result passes at any tolerance.
pub fn error_ratio(err: f64, tol: f64) -> f64 {
    if err == 0.0 {
        0.0
    } else {
        nan_as_inf(err / tol)
    }
}

#[cfg(test)]
mod nan_tests {
    use super::*;

    #[test]
    fn nan_and_infinite_errors_fail() {
        assert_eq!(nan_as_inf(f64::NAN), f64::INFINITY);
        assert_eq!(nan_as_inf(0.5), 0.5);
        assert_eq!(0.0f64.max(nan_as_inf(f64::NAN)), f64::INFINITY);
        // An infinite output whose tolerance came from it: inf / inf is NaN, and must not pass.
        assert!(error_ratio(f64::INFINITY, f64::INFINITY) > 1.0);
        assert!(error_ratio(f64::NAN, 1.0) > 1.0);
        assert!(error_ratio(1.0, 0.0) > 1.0);
        assert_eq!(error_ratio(0.0, 0.0), 0.0);
        assert_eq!(error_ratio(0.5, 1.0), 0.5);
    }
}
pub const TAU_REL_TOL: f64 = 1e-5;

/// What the keys look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataKind {
    /// q, K, V iid N(0, 1).
    Normal,
    /// Every key of a head is the same vector: all scores tie, the support is every token.
    Ties,
    /// One key per head points along q with a large norm: a support of one token.
    Dominant,
    /// Keys scaled by 300 (near the top of f16's comfortable range): huge score gaps.
    Extreme,
}

#[derive(Clone, Debug)]
pub struct DenseCase {
    pub spec: DecodeSpec,
    pub tile: DenseTile,
    pub shape: DenseShape,
    pub seed: u64,
    pub data: DataKind,
    /// SMs the split plan assumes (the device's count on a GPU; small in interpreter tests to
    /// get several chunks per split).
    pub sm_count: u32,
}

#[derive(Clone, Debug)]
pub struct DenseInputs {
    /// `[batch, q_heads, d]`.
    pub q: Tensor,
    /// `[batch, kv_heads, n, d]`.
    pub k: Tensor,
    pub v: Tensor,
}

impl DenseCase {
    pub fn q_heads(&self) -> usize {
        self.shape.q_heads(&self.spec) as usize
    }

    pub fn inputs(&self) -> DenseInputs {
        let d = self.spec.head_dim as usize;
        let (b, hkv, n) = (
            self.shape.batch as usize,
            self.shape.kv_heads as usize,
            self.shape.n as usize,
        );
        let q_raw = normal(self.seed, b * self.q_heads() * d);
        let v_raw = normal(self.seed ^ 0x5555, b * hkv * n * d);
        let mut k_raw = normal(self.seed ^ 0xaaaa, b * hkv * n * d);
        match self.data {
            DataKind::Normal => {}
            DataKind::Ties => {
                for head in k_raw.chunks_mut(n * d) {
                    let first: Vec<f64> = head[..d].to_vec();
                    for row in head.chunks_mut(d) {
                        row.copy_from_slice(&first);
                    }
                }
            }
            DataKind::Dominant => {
                // Token n/2 of each kv head gets 12·q̂ of its group's first query head.
                let group = self.spec.group as usize;
                for bi in 0..b {
                    for kvh in 0..hkv {
                        let q = &q_raw[(bi * self.q_heads() + kvh * group) * d..][..d];
                        let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
                        let row = &mut k_raw[((bi * hkv + kvh) * n + n / 2) * d..][..d];
                        for (r, qx) in row.iter_mut().zip(q) {
                            *r = 12.0 * qx / norm * (d as f64).sqrt();
                        }
                    }
                }
            }
            DataKind::Extreme => k_raw.iter_mut().for_each(|x| *x *= 300.0),
        }
        DenseInputs {
            q: Tensor::from_f64(self.spec.q_dtype, &q_raw),
            k: Tensor::from_f64(self.spec.kv_dtype, &k_raw),
            v: Tensor::from_f64(self.spec.kv_dtype, &v_raw),
        }
    }

    pub fn problem(&self, x: &DenseInputs) -> DenseProblem {
        DenseProblem {
            batch: self.shape.batch as usize,
            q_heads: self.q_heads(),
            kv_heads: self.shape.kv_heads as usize,
            n: self.shape.n as usize,
            d: self.spec.head_dim as usize,
            q: x.q.values.clone(),
            k: x.k.values.clone(),
            v: x.v.values.clone(),
        }
    }

    pub fn plan(&self) -> Result<DensePlan, SpecError> {
        dense_plan(&self.tile, &self.shape, self.sm_count)
    }

    pub fn workspace(&self, plan: &DensePlan) -> entkv_abi::DenseWorkspace {
        dense_workspace(&self.spec, &self.shape, plan)
    }
}

/// What a decode run produced, per (batch, query head).
#[derive(Clone, Debug, Default)]
pub struct DenseOutputs {
    pub out: Vec<f64>,
    pub tau: Vec<f64>,
    pub support: Vec<i64>,
}

impl DenseOutputs {
    /// A decode's `out`, `tau` and `support` buffers as read back from the interpreter.
    pub fn from_buffers(
        out: &entkv_dsl::interp::HostBuffer,
        tau: &entkv_dsl::interp::HostBuffer,
        support: &entkv_dsl::interp::HostBuffer,
    ) -> DenseOutputs {
        DenseOutputs {
            out: out.to_f64_vec(),
            tau: tau.to_f64_vec(),
            support: support.to_f64_vec().into_iter().map(|x| x as i64).collect(),
        }
    }

    /// [`DenseOutputs::from_buffers`] of a program that ran.
    pub fn of_program(ran: &crate::program::Program) -> DenseOutputs {
        DenseOutputs::from_buffers(ran.get("out"), ran.get("tau"), ran.get("support"))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DenseCheck {
    pub heads: usize,
    /// Max over heads of ‖o − o_ref‖ / ‖o_ref‖.
    pub max_rel_err: f64,
    /// Heads whose output error exceeds their allowance (see the module docs).
    pub out_failures: usize,
    /// Max over heads of |τ − τ_ref| / (1 + |τ_ref|).
    pub max_tau_err: f64,
    /// Heads whose support size differs by more than the tokens within tolerance of τ.
    pub support_mismatches: usize,
    pub non_finite: usize,
    /// Largest reference support size seen.
    pub max_support: usize,
    pub passed: bool,
}

/// Compare `got` with `reference` on the listed heads (indices into the reference's heads;
/// `got` holds them in that order), or all heads.
pub fn compare(reference: &DecodeReference, got: &DenseOutputs, heads: Option<&[usize]>) -> DenseCheck {
    let all: Vec<usize> = (0..reference.heads.len()).collect();
    let heads = heads.unwrap_or(&all);
    let mut c = DenseCheck {
        heads: heads.len(),
        max_rel_err: 0.0,
        out_failures: 0,
        max_tau_err: 0.0,
        support_mismatches: 0,
        non_finite: 0,
        max_support: 0,
        passed: false,
    };
    for (slot, &hd) in heads.iter().enumerate() {
        let r = &reference.heads[hd];
        let d = r.out.len();
        let o = &got.out[slot * d..][..d];
        c.non_finite += o.iter().filter(|x| !x.is_finite()).count();
        let tau = got.tau[slot];
        if !tau.is_finite() {
            c.non_finite += 1;
        }
        let diff = r
            .out
            .iter()
            .zip(o)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        let norm = r.out.iter().map(|a| a * a).sum::<f64>().sqrt();
        let rel = if norm > 0.0 { diff / norm } else { diff };
        let rel = nan_as_inf(rel);
        c.max_rel_err = c.max_rel_err.max(rel);
        let zmax =
            r.z.iter()
                .filter(|&&x| x > r.tau)
                .fold(0.0f64, |m, &x| m.max(x.abs()));
        if rel > OUT_REL_TOL * (zmax / 8.0).max(1.0) {
            c.out_failures += 1;
        }
        let terr = (tau - r.tau).abs() / (1.0 + r.tau.abs());
        c.max_tau_err = c.max_tau_err.max(nan_as_inf(terr));
        let band = TAU_REL_TOL * (1.0 + r.tau.abs());
        let ambiguous = r.z.iter().filter(|&&x| (x - r.tau).abs() <= band).count() as i64;
        c.max_support = c.max_support.max(r.support);
        if (got.support[slot] - r.support as i64).abs() > ambiguous {
            c.support_mismatches += 1;
        }
    }
    c.passed =
        c.non_finite == 0 && c.out_failures == 0 && c.max_tau_err <= TAU_REL_TOL && c.support_mismatches == 0;
    c
}

/// Reference results for a case.
pub fn reference(case: &DenseCase, inputs: &DenseInputs) -> DecodeReference {
    dense_decode(&case.problem(inputs), case.spec.alpha)
}

pub mod interp {
    //! Running a dense decode case in the CPU interpreter.

    use super::*;
    use crate::decode::contiguous_kernels;
    use crate::KernelGenError;
    use entkv_abi::{dense_finish_geometry, dense_score_geometry, DType};
    use entkv_dsl::interp::{run, Arg, HostBuffer, InterpError, LaunchDims, RunStats, ScalarValue};
    use entkv_dsl::Scalar;
    use thiserror::Error;

    #[derive(Debug, Error)]
    pub enum RunError {
        #[error(transparent)]
        Gen(#[from] KernelGenError),
        #[error(transparent)]
        Interp(#[from] InterpError),
    }

    fn host(t: &Tensor) -> HostBuffer {
        match t.dtype {
            DType::F16 => HostBuffer::F16(t.to_f16()),
            DType::BF16 => HostBuffer::BF16(t.to_bf16()),
            DType::F32 => HostBuffer::F32(t.to_f32()),
        }
    }

    /// Statistics of the two launches.
    #[derive(Debug)]
    pub struct DenseRunStats {
        pub score: RunStats,
        pub finish: RunStats,
    }

    /// Run both kernels in the interpreter with poisoned outputs and workspace.
    pub fn run_dense(case: &DenseCase, x: &DenseInputs) -> Result<(DenseOutputs, DenseRunStats), RunError> {
        let [score, finish] = contiguous_kernels(&case.spec, &case.tile)?;
        let plan = case.plan().map_err(KernelGenError::from)?;
        let ws = case.workspace(&plan);
        let heads = case.shape.batch as usize * case.q_heads();
        let d = case.spec.head_dim as usize;
        let mut q = host(&x.q);
        let mut k = host(&x.k);
        let mut v = host(&x.v);
        let mut cand_z = HostBuffer::filled_f64(Scalar::F32, ws.cand_elems as usize, f64::NAN);
        let mut cand_idx = HostBuffer::filled_f64(Scalar::I32, ws.cand_elems as usize, -7.0);
        let mut cand_count = HostBuffer::filled_f64(Scalar::I32, ws.split_elems as usize, -7.0);
        let mut cand_lb = HostBuffer::filled_f64(Scalar::F32, ws.split_elems as usize, f64::NAN);
        let out_elem = crate::scalar_of(case.spec.out_dtype);
        let mut out = HostBuffer::filled_f64(out_elem, heads * d, f64::NAN);
        let mut tau = HostBuffer::filled_f64(Scalar::F32, heads, f64::NAN);
        let mut support = HostBuffer::filled_f64(Scalar::I32, heads, -7.0);
        let n = ScalarValue::I64(case.shape.n as i64);

        let g = dense_score_geometry(&case.tile, &case.shape, &plan);
        let score_stats = run(
            &score,
            LaunchDims::new(g.grid, g.block),
            &mut [
                Arg::Buf(&mut q),
                Arg::Buf(&mut k),
                Arg::Buf(&mut cand_z),
                Arg::Buf(&mut cand_idx),
                Arg::Buf(&mut cand_count),
                Arg::Buf(&mut cand_lb),
                Arg::Scalar(n),
                Arg::Scalar(ScalarValue::I32(plan.chunks_per_split as i32)),
            ],
        )?;
        let g = dense_finish_geometry(&case.spec, &case.tile, &case.shape);
        let finish_stats = run(
            &finish,
            LaunchDims::new(g.grid, g.block),
            &mut [
                Arg::Buf(&mut cand_z),
                Arg::Buf(&mut cand_idx),
                Arg::Buf(&mut cand_count),
                Arg::Buf(&mut cand_lb),
                Arg::Buf(&mut v),
                Arg::Buf(&mut out),
                Arg::Buf(&mut tau),
                Arg::Buf(&mut support),
                Arg::Scalar(ScalarValue::I32(plan.splits as i32)),
                Arg::Scalar(ScalarValue::I64(plan.split_len as i64)),
                Arg::Scalar(n),
            ],
        )?;
        let outputs = DenseOutputs::from_buffers(&out, &tau, &support);
        Ok((
            outputs,
            DenseRunStats {
                score: score_stats,
                finish: finish_stats,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn page_ids_turn_non_integers_into_an_invalid_id() {
        let got = super::page_ids(&[0.0, 3.0, 2.5, f64::NAN, f64::INFINITY, -2.0, 1e300]);
        assert_eq!(got, [0, 3, -1, -1, -1, -2, -1]);
    }
}
