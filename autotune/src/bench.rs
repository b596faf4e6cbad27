//! `entkv bench-dense`: time the dense decode's two kernels separately for a list of tile
//! configs on one device-generated `paper`-shape cache, checking every variant's output against
//! the first variant's (finite, and within `VARIANT_DIFF_TOL`; otherwise the command fails).

use crate::device::{device_fill, time_ms, DenseBuffers, DevTensor, Kernels, SEED_K, SEED_V};
use crate::record::summarize;
use anyhow::{bail, Result};
use entkv_abi::{DType, DecodeSpec, DenseShape, DenseTile};
use entkv_kernels::check::{DataKind, DenseCase};
use entkv_kernels::data::{normal, Tensor};
use entkv_runtime::Gpu;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct VariantTiming {
    pub tile: String,
    pub score_ms: f64,
    pub finish_ms: f64,
    pub step_ms: f64,
    pub candidates_per_head: f64,
    pub splits: u32,
    pub chunks_per_split: u32,
    /// Max |τ − τ_first| over heads (0 for the first variant).
    pub tau_diff: f64,
    pub out_diff: f64,
}

/// Parse `threads,lanes,tokens,newton,min_blocks,ctas_per_sm,finish_threads,capacity` and
/// trailing flags (`tc`: the dot products on the tensor cores; see the loop for the others).
pub fn parse_tile(spec: &DecodeSpec, s: &str) -> Result<DenseTile> {
    let mut parts: Vec<&str> = s.split(',').map(str::trim).collect();
    // Trailing flags, as the tags' suffixes: `tc` (`mma`), `h` (`share_bound`), `seed`, `pw`
    // (`pruned_walk`), `la` (`lookahead`), `im` (`sketch_mma`).
    let (mut mma, mut share_bound, mut seed, mut pruned_walk, mut lookahead, mut sketch_mma) =
        (false, false, false, false, false, false);
    while let Some(flag) = parts.last().filter(|p| p.parse::<u32>().is_err()) {
        match *flag {
            "tc" => mma = true,
            "h" => share_bound = true,
            "seed" => seed = true,
            "pw" => pruned_walk = true,
            "la" => lookahead = true,
            "im" => sketch_mma = true,
            other => bail!("tile `{s}`: unknown flag `{other}` (tc, h, seed, pw, la, im)"),
        }
        parts.pop();
    }
    let v: Vec<u32> = parts.iter().map(|x| x.parse()).collect::<Result<_, _>>()?;
    if v.len() != 8 {
        bail!(
            "tile `{s}`: expected threads,lanes,tokens,newton,min_blocks,ctas_per_sm,finish_threads,capacity[,tc][,h][,seed][,pw][,la][,im]"
        );
    }
    let t = DenseTile {
        threads: v[0],
        lanes_per_token: v[1],
        tokens_per_group: v[2],
        newton_steps: v[3],
        score_min_blocks: v[4],
        ctas_per_sm: v[5],
        finish_threads: v[6],
        finish_capacity: v[7],
        share_bound,
        mma,
        seed,
        pruned_walk,
        lookahead,
        sketch_mma,
    };
    t.check(spec)?;
    Ok(t)
}

pub fn bench_dense(n: u64, tiles: &[DenseTile], iters: usize) -> Result<Vec<VariantTiming>> {
    let gpu = Gpu::open(0)?;
    let spec = DecodeSpec::new(1.5, 32, 1, DType::F16)?;
    let shape = DenseShape {
        batch: 8,
        kv_heads: 24,
        n,
    };
    let mut kernels = Kernels::new(&gpu);
    let d = spec.head_dim as u64;
    let kv_len = shape.batch as u64 * shape.kv_heads as u64 * n * d;
    let heads = (shape.batch * shape.q_heads(&spec)) as usize;
    let q = Tensor::from_f64(spec.q_dtype, &normal(2026, heads * d as usize));
    let k = DevTensor::alloc(&gpu, spec.kv_dtype, kv_len as usize)?;
    let v = DevTensor::alloc(&gpu, spec.kv_dtype, kv_len as usize)?;
    device_fill(&gpu, &mut kernels, &k, spec.kv_dtype, kv_len, SEED_K)?;
    device_fill(&gpu, &mut kernels, &v, spec.kv_dtype, kv_len, SEED_V)?;
    let (mut k, mut v) = (Some(k), Some(v));
    let mut first: Option<(Vec<f64>, Vec<f64>)> = None;
    let mut rows = Vec::new();
    for tile in tiles {
        let case = DenseCase {
            spec,
            tile: *tile,
            shape,
            seed: 2026,
            data: DataKind::Normal,
            sm_count: gpu.info().sm_count,
        };
        let bufs = DenseBuffers::new(
            &gpu,
            &case,
            DevTensor::upload(&gpu, &q)?,
            k.take().unwrap(),
            v.take().unwrap(),
        )?;
        let fns = kernels.dense(&spec, tile)?;
        let score = time_ms(&gpu, 3, iters, |s| bufs.launch_score(fns, &case, s))?;
        let finish = time_ms(&gpu, 3, iters, |s| bufs.launch_finish(fns, &case, s))?;
        let step = time_ms(&gpu, 3, iters, |s| bufs.launch(fns, &case, s))?;
        gpu.synchronize()?;
        let out = bufs.outputs(&case)?;
        let cand: i64 = bufs.cand_count.to_host()?.iter().map(|&c| c as i64).sum();
        if !out.out.iter().chain(&out.tau).all(|x| x.is_finite()) {
            bail!("tile {}: non-finite τ or output", tile.tag());
        }
        let (tau_diff, out_diff) = match &first {
            None => {
                first = Some((out.tau.clone(), out.out.clone()));
                (0.0, 0.0)
            }
            Some((t0, o0)) => (max_diff(t0, &out.tau), max_diff(o0, &out.out)),
        };
        if !(tau_diff <= VARIANT_DIFF_TOL && out_diff <= VARIANT_DIFF_TOL) {
            bail!(
                "tile {} disagrees with the first variant: Δτ {tau_diff:.1e}, Δo {out_diff:.1e} (> {VARIANT_DIFF_TOL:e})",
                tile.tag()
            );
        }
        let row = VariantTiming {
            tile: tile.tag(),
            score_ms: summarize(&score).0,
            finish_ms: summarize(&finish).0,
            step_ms: summarize(&step).0,
            candidates_per_head: cand as f64 / heads as f64,
            splits: bufs.plan.splits,
            chunks_per_split: bufs.plan.chunks_per_split,
            tau_diff,
            out_diff,
        };
        println!(
            "{:<40} {:>4}x{:<3} score {:>7.3} ms  finish {:>7.3} ms  step {:>7.3} ms  cand/head {:>8.1}  Δτ {:.1e} Δo {:.1e}",
            row.tile,
            row.splits,
            row.chunks_per_split,
            row.score_ms,
            row.finish_ms,
            row.step_ms,
            row.candidates_per_head,
            row.tau_diff,
            row.out_diff
        );
        rows.push(row);
        k = Some(bufs.k);
        v = Some(bufs.v);
    }
    Ok(rows)
}

/// Largest |a − b|; a NaN on either side is an infinite difference (`f64::max` would drop it).
fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| entkv_kernels::check::nan_as_inf((x - y).abs()))
        .fold(0.0, f64::max)
}

/// Largest Δτ or Δo a variant may show against the first: tiles differ only in the order of
/// their f32 sums (~1e-6 at `paper`'s unit-scale data), so this flags a wrong variant, not
/// rounding.
const VARIANT_DIFF_TOL: f64 = 1e-3;

#[cfg(test)]
mod tests {
    use super::parse_tile;
    use entkv_abi::{DType, DecodeSpec};

    #[test]
    fn tile_flags_parse_in_any_order_and_unknown_ones_are_refused() {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let t = parse_tile(&spec, "256,1,4,2,2,2,256,2048,h,seed").unwrap();
        assert!(t.share_bound && t.seed && !t.mma);
        assert_eq!(t.tag(), "t256_l1_r4_n2_m2_c2_f256_s2048_h_seed");
        let t = parse_tile(&spec, "256,1,4,2,2,2,256,2048,seed,h").unwrap();
        assert!(t.share_bound && t.seed);
        let t = parse_tile(&spec, "256,1,4,2,2,2,256,2048").unwrap();
        assert!(!t.share_bound && !t.seed && !t.mma && !t.lookahead);
        let t = parse_tile(&spec, "256,1,4,2,2,2,256,2048,la,tc").unwrap();
        assert!(t.lookahead && t.mma);
        assert_eq!(t.tag(), "t256_l1_r4_n2_m2_c2_f256_s2048_tc_la");
        let e = parse_tile(&spec, "256,1,4,2,2,2,256,2048,fast").unwrap_err();
        assert!(e.to_string().contains("unknown flag `fast`"), "{e}");
        let e = parse_tile(&spec, "256,1,4,2,2,2,h").unwrap_err();
        assert!(e.to_string().contains("expected threads"), "{e}");
    }
}
