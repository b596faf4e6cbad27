//! The dense (full-cache) entmax decode: two kernels, their tile configuration, launch geometry
//! and workspace.
//!
//! 1. `decode_dense_score`, grid (splits, kv heads, batch): each CTA scores one split of
//!    `split_len` tokens for every query head of a GQA group (K read once per group), finds a
//!    rigorous lower bound on its split's entmax threshold (Newton from `max − 1`, which never
//!    overshoots), and writes the split's candidates — tokens whose score clears the bound — to
//!    the workspace. Any token in the global support is a candidate of its split, because the
//!    threshold of a subset never exceeds the threshold of the whole (spec §1, issue #3 fact a).
//! 2. `decode_dense_finish`, grid (query heads, batch): gathers a head's candidates, solves the
//!    exact threshold τ over them (closed forms for α = 2 and 3/2 once the active set settles,
//!    bracketed Newton otherwise), and writes `o = Σ p_j v_j / Σ p_j`, τ and the support size.

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::spec::{DecodeSpec, SpecError};
use serde::{Deserialize, Serialize};

/// Tile configuration of the dense decode (the autotuner searches these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DenseTile {
    /// Threads per CTA of the score pass.
    pub threads: u32,
    /// Lanes that share one token's dot product (each loads `head_dim / lanes_per_token` dims).
    pub lanes_per_token: u32,
    /// Tokens each lane group scores per CTA (held in registers).
    pub tokens_per_group: u32,
    /// Newton steps of the per-split threshold bound (0 = use `max − 1`).
    pub newton_steps: u32,
    /// Occupancy hint for the score pass (`.minnctapersm`; 0 = none). Without a hint ptxas
    /// may cap registers for occupancy and spill the per-head registers of large GQA groups.
    pub score_min_blocks: u32,
    /// Threads per CTA of the finish pass.
    pub finish_threads: u32,
    /// Candidates the finish pass stages in shared memory; more fall back to global memory.
    pub finish_capacity: u32,
}

impl DenseTile {
    pub fn default_for(spec: &DecodeSpec) -> DenseTile {
        // 16-byte loads: 8 half-precision values per lane.
        let lanes_per_token = (spec.head_dim * spec.kv_dtype.size_bytes() / 16).max(1);
        let tokens_per_group = match spec.group {
            1 => 16,
            2 => 8,
            3 | 4 => 4,
            _ => 2,
        };
        DenseTile {
            threads: 256,
            lanes_per_token,
            tokens_per_group,
            newton_steps: 3,
            score_min_blocks: if spec.group >= 4 { 2 } else { 0 },
            finish_threads: 256,
            finish_capacity: 4096,
        }
    }

    /// Tokens one score CTA covers.
    pub fn split_len(&self) -> u32 {
        self.threads / self.lanes_per_token * self.tokens_per_group
    }

    /// Lane groups per finish CTA accumulating V rows (each group loads one row).
    pub fn finish_row_lanes(&self, spec: &DecodeSpec) -> u32 {
        (spec.head_dim * spec.kv_dtype.size_bytes() / 16).max(1)
    }

    /// `t256_l4_r16_n3_m0_f256_c4096`.
    pub fn tag(&self) -> String {
        format!(
            "t{}_l{}_r{}_n{}_m{}_f{}_c{}",
            self.threads,
            self.lanes_per_token,
            self.tokens_per_group,
            self.newton_steps,
            self.score_min_blocks,
            self.finish_threads,
            self.finish_capacity
        )
    }

    pub fn check(&self, spec: &DecodeSpec) -> Result<(), SpecError> {
        let bad = |reason: String| SpecError::BadTile {
            kernel: "decode_dense",
            reason,
        };
        for (name, t) in [("threads", self.threads), ("finish_threads", self.finish_threads)] {
            if !(32..=1024).contains(&t) || t % 32 != 0 {
                return Err(bad(format!("{name} = {t} must be a multiple of 32 in 32..=1024")));
            }
        }
        let l = self.lanes_per_token;
        if !l.is_power_of_two() || l > 32 || spec.head_dim % l != 0 {
            return Err(bad(format!(
                "lanes_per_token = {l} must be a power of two ≤ 32 dividing head_dim {}",
                spec.head_dim
            )));
        }
        let dims = spec.head_dim / l;
        let elem = spec.kv_dtype.size_bytes();
        if dims * elem > 16 * 16 {
            return Err(bad(format!("{dims} dims per lane is too many registers")));
        }
        if self.tokens_per_group == 0 || self.tokens_per_group * spec.group > 64 {
            return Err(bad(format!(
                "tokens_per_group × group = {} must be in 1..=64 (registers)",
                self.tokens_per_group * spec.group
            )));
        }
        if self.score_min_blocks > 32 {
            return Err(bad("score_min_blocks must be ≤ 32".into()));
        }
        if self.newton_steps > 16 {
            return Err(bad("newton_steps must be ≤ 16".into()));
        }
        if self.finish_capacity < 32 || self.finish_capacity > 4096 {
            return Err(bad("finish_capacity must be in 32..=4096".into()));
        }
        Ok(())
    }
}

/// Shapes of one dense decode call (contiguous cache `[batch, kv_heads, n, head_dim]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseShape {
    pub batch: u32,
    pub kv_heads: u32,
    pub n: u64,
}

impl DenseShape {
    pub fn q_heads(&self, spec: &DecodeSpec) -> u32 {
        self.kv_heads * spec.group
    }
}

/// Element counts of the workspace buffers the two kernels share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseWorkspace {
    pub splits: u32,
    /// `cand_z` (f32) and `cand_idx` (i32): `[batch, q_heads, splits, split_len]`.
    pub cand_elems: u64,
    /// `cand_count` (i32) and `cand_lb` (f32): `[batch, q_heads, splits]`.
    pub split_elems: u64,
}

impl DenseWorkspace {
    pub fn bytes(&self) -> u64 {
        self.cand_elems * 8 + self.split_elems * 8
    }
}

pub fn dense_workspace(spec: &DecodeSpec, tile: &DenseTile, shape: &DenseShape) -> DenseWorkspace {
    let splits = dense_splits(tile, shape.n);
    let heads = shape.batch as u64 * shape.q_heads(spec) as u64;
    DenseWorkspace {
        splits,
        cand_elems: heads * splits as u64 * tile.split_len() as u64,
        split_elems: heads * splits as u64,
    }
}

pub fn dense_splits(tile: &DenseTile, n: u64) -> u32 {
    ceil_div(n.max(1), tile.split_len() as u64) as u32
}

pub fn dense_score_geometry(tile: &DenseTile, shape: &DenseShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [dense_splits(tile, shape.n), shape.kv_heads, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

pub fn dense_finish_geometry(spec: &DecodeSpec, tile: &DenseTile, shape: &DenseShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.q_heads(spec), shape.batch, 1],
        block: tile.finish_threads,
        shared_bytes: 0,
    }
}

/// Entry names: `decode_dense_score__<spec>__<tile>` and `decode_dense_finish__<spec>__<tile>`.
pub fn dense_entry_names(spec: &DecodeSpec, tile: &DenseTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.tag(), tile.tag());
    (
        format!("decode_dense_score__{suffix}"),
        format!("decode_dense_finish__{suffix}"),
    )
}
