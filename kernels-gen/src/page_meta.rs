//! Page metadata kernels (`page_meta_build`, `page_meta_update`), the sketch helpers other
//! kernels read the sketch with, their float64 reference, and their checks. The contract
//! (layouts, the sketch decode formula and its error bound, tiles, signatures, geometry) is
//! `entkv_abi::meta`.
//!
//! One CTA owns one (page, head) block of `P·d` contiguous keys. Thread `t` loads 8-dim chunks
//! `t, t + threads, …` of the block (16-byte loads; consecutive threads, consecutive bytes), so
//! it always holds the same 8 dimensions (`chunk = t mod d/8`) of `P·d/(8·threads)` key rows.
//! Per dimension it reduces min, max, mean and M2 over its rows, merges them with the lanes
//! holding the same dimensions (xor shuffles, then, with more than one warp, per-dimension
//! threads over the warps' partials in shared memory), and finally quantizes its own rows from
//! the registers it loaded: K is read exactly once. Merges are pairwise with equal counts
//! (`mean = (a + b)/2`, `M2 = M2a + M2b + δ²·n/2`), symmetric in the two sides, so every lane of
//! a group ends with bit-identical statistics.

use crate::data::Tensor;
use crate::paged_data::{KeyData, PagedCase, PagedInputs};
use crate::program::{ArgRef, Program};
use crate::suite::{KernelCheck, Outcome, SuiteError};
use crate::{scalar_of, KernelGenError, KernelModule};
use entkv_abi::{
    box_grid_value, box_row, completed_pages, full_pages, meta_build_geometry, meta_entry_names,
    meta_update_geometry, pack_sketch_range, sketch_error_bound, sketch_inv_levels, sketch_levels,
    sketch_step, sketch_word_shift, unpack_sketch_range, DType, DecodeSpec, MetaTile, PagedSpec, SpecError,
    BOX_BITS, BOX_CODE_SLACK, META_CHUNK_DIMS, META_STD_FLOOR,
};
use entkv_dsl::*;
use std::collections::BTreeSet;
use std::rc::Rc;

/// `step` below this gets its operands scaled by [`SCALE_UP`] before `1/step` (which would
/// overflow below 2⁻¹²⁸); the scaling is a power of two, so it is exact.
const TINY_STEP: f64 = 5.421_010_862_427_522e-20; // 2⁻⁶⁴
const SCALE_UP: f64 = 18_446_744_073_709_551_616.0; // 2⁶⁴

// ---------------------------------------------------------------------------------------------
// Kernels

/// The metadata outputs.
#[derive(Clone, Copy)]
struct MetaOut {
    bounds: Buf,
    moments: Buf,
    sketch: Buf,
    page_box: Buf,
}

impl MetaOut {
    fn declare(k: &mut KernelBuilder, spec: &PagedSpec) -> MetaOut {
        let kd = scalar_of(spec.decode.kv_dtype);
        MetaOut {
            bounds: k.buffer("meta_bounds", kd, Access::Write),
            moments: k.buffer("meta_moments", kd, Access::Write),
            sketch: k.buffer("sketch", Scalar::U32, Access::Write),
            page_box: k.buffer("meta_box", Scalar::U32, Access::Write),
        }
    }
}

/// Shared memory of CTAs with more than one warp: the warps' partial statistics
/// `[warp][min, max, mean, M2][d]`, the finished quantization parameters `[param][d]` and the
/// page's bounds `[min, max][d]` (for the page box sketch).
#[derive(Clone, Copy)]
struct Scratch {
    partial: Buf,
    quant: Buf,
    bounds: Buf,
}

/// Running statistics of one dimension over `n` keys (f32 registers).
#[derive(Clone, Copy)]
struct Stats {
    min: Var,
    max: Var,
    mean: Var,
    m2: Var,
}

impl Stats {
    fn parts(&self) -> [Var; 4] {
        [self.min, self.max, self.mean, self.m2]
    }

    /// Merge two disjoint sets of `n` keys each. Symmetric: `merge(a, b)` and `merge(b, a)`
    /// round identically.
    fn merge(k: &mut KernelBuilder, a: &Stats, b: &Stats, n: u32) -> Stats {
        let delta = k.let_("delta", b.mean - a.mean);
        Stats {
            min: k.let_("mn", a.min.min(b.min)),
            max: k.let_("mx", a.max.max(b.max)),
            mean: k.let_("mean", (a.mean + b.mean) * 0.5f32),
            m2: k.let_("m2", (a.m2 + b.m2) + delta * delta * (0.5 * n as f64)),
        }
    }
}

/// What the quantizer needs per dimension: the page's min, `1/(step·scale)` (0 when
/// `step = 0`) and, for K dtypes whose steps can be tiny, the operand scale.
#[derive(Clone, Copy)]
struct Quant {
    min: Var,
    inv: Var,
    scale: Option<Var>,
}

/// Whether steps below 2⁻⁶⁴ can occur: f16 keys differ by at least 2⁻²⁴ when they differ.
fn needs_scale(spec: &PagedSpec) -> bool {
    spec.decode.kv_dtype != DType::F16
}

/// Quantization parameters kept per dimension (min, inv and maybe scale).
fn quant_params(spec: &PagedSpec) -> u32 {
    if needs_scale(spec) {
        3
    } else {
        2
    }
}

/// `step_i = (max_i − min_i)·c_bits` in f32 from the stored bounds (as f32), exactly as
/// `entkv_abi::sketch_step` defines it.
pub fn emit_sketch_step(bits: u32, min: impl IntoExpr, max: impl IntoExpr) -> Expr {
    let min = min.into_expr(Some(Scalar::F32));
    (max.into_expr(Some(Scalar::F32)) - min) * sketch_inv_levels(bits) as f64
}

/// Finish one dimension: the four stored values (K dtype: min, max, mean, std) and its
/// quantization parameters.
fn finish_dim(k: &mut KernelBuilder, spec: &PagedSpec, s: &Stats) -> ([Expr; 4], Quant) {
    let kd = scalar_of(spec.decode.kv_dtype);
    let var = s.m2 * (1.0 / spec.page_size as f64);
    let std = k.let_("std", var.sqrt().max(META_STD_FLOOR));
    let stored = [s.min.cast(kd), s.max.cast(kd), s.mean.cast(kd), std.cast(kd)];
    (stored, quant_for(k, spec, spec.sketch_bits, s.min, s.max))
}

/// Quantization parameters of the `bits`-bit grid `[min, max]` (f32 values a consumer reads
/// back exactly).
fn quant_for(k: &mut KernelBuilder, spec: &PagedSpec, bits: u32, min: Var, max: Var) -> Quant {
    let step = grid_step(k, bits, min, max);
    quant_of_step(k, spec, min, step)
}

/// The step of the `bits`-bit grid `[min, max]` (`entkv_abi::sketch_step`).
fn grid_step(k: &mut KernelBuilder, bits: u32, min: Var, max: Var) -> Var {
    k.let_("step", emit_sketch_step(bits, min, max))
}

/// [`quant_for`] of a grid whose step is known.
fn quant_of_step(k: &mut KernelBuilder, spec: &PagedSpec, min: Var, step: Var) -> Quant {
    let positive = step.gt(0.0f32);
    let (inv, scale) = if needs_scale(spec) {
        let scale = k.let_("qscale", select(step.lt(TINY_STEP), SCALE_UP, 1.0));
        (select(positive, (step * scale).rcp(), 0.0f32), Some(scale))
    } else {
        (select(positive, step.rcp(), 0.0f32), None)
    };
    Quant {
        min,
        inv: k.let_("qinv", inv),
        scale,
    }
}

/// `(x − min)·scale·inv`: `x` in steps above the grid's bottom (f32).
fn grid_offset(x: Var, q: &Quant) -> Expr {
    let a = x - q.min;
    let a = match q.scale {
        Some(s) => a * s,
        None => a,
    };
    a * q.inv
}

/// The code of `x` (f32): `min(⌊(x − min)·scale·inv + 0.5⌋, 2^bits − 1)`.
fn quantize(x: Var, q: &Quant, bits: u32) -> Expr {
    (grid_offset(x, q) + 0.5f32)
        .cast(Scalar::U32)
        .min(sketch_levels(bits))
}

/// The page box sketch's outward code of `x` (f32, on or above the grid's bottom): rounded up
/// (`up`, the max row) or down, at most `2^bits − 1` (`entkv_abi::meta`).
fn quantize_outward(x: Var, q: &Quant, bits: u32, up: bool) -> Expr {
    let t = grid_offset(x, q);
    let t = if up { t.ceil() } else { t.floor() };
    t.cast(Scalar::U32).min(sketch_levels(bits))
}

/// `bits`-bit codes packed into u32 words, low bits first (`entkv_abi::sketch_word_shift`).
fn pack_words(codes: &[Expr], bits: u32) -> Vec<Expr> {
    codes
        .chunks((32 / bits) as usize)
        .map(|cs| {
            cs.iter()
                .enumerate()
                .fold(u32c(0), |w, (i, c)| w | (c.clone() << (i as u32 * bits)))
        })
        .collect()
}

/// The bf16 grid of a row spread over `lanes` adjacent threads (`vals` this thread's part, f32):
/// the row's min and max over every value rounded outward (`entkv_abi::pack_sketch_range`), as
/// the packed range word and the grid's f32 ends. Shuffles over the lane group: every thread of
/// the warp must call it.
fn row_grid(k: &mut KernelBuilder, vals: &[Var], lanes: u32) -> (Expr, Var, Var) {
    let mut lo = k.let_("row_lo", vals[1..].iter().fold(vals[0].e(), |m, x| m.min(*x)));
    let mut hi = k.let_("row_hi", vals[1..].iter().fold(vals[0].e(), |m, x| m.max(*x)));
    let mut off = 1;
    while off < lanes {
        let olo = k.shuffle(ShuffleMode::Xor, lo, u32c(off as u64));
        let ohi = k.shuffle(ShuffleMode::Xor, hi, u32c(off as u64));
        lo = k.let_("row_lo", lo.min(olo));
        hi = k.let_("row_hi", hi.max(ohi));
        off *= 2;
    }
    let lo_bits = bf16_bits_outward(k, lo, false);
    let hi_bits = bf16_bits_outward(k, hi, true);
    let lo = k.let_("grid_lo", lo_bits.e().bitcast(Scalar::F32));
    let hi = k.let_("grid_hi", hi_bits.e().bitcast(Scalar::F32));
    ((lo_bits >> 16u32) | hi_bits, lo, hi)
}

/// Smallest grid step whose token gets a finite residual norm: below it the scaled errors'
/// arithmetic could leave the normal f32 range (the pass then uses the L1 bound alone).
const NORM_MIN_STEP: f64 = 8.673617379884035e-19; // 2⁻⁶⁰

/// An f32 `r ≥ ‖k − k̂‖₂` over a token's row (`vals` and `codes` this thread's part, spread over
/// `lanes` adjacent threads; `k̂_i = lo + code_i·step` in reals, `step` the grid's), or +∞ for a
/// step below [`NORM_MIN_STEP`] (`entkv_abi::paged`'s norm words). In steps, so that no square
/// underflows: `u_i = (k_i − fma(code_i, step, lo))·(1/step)`, `r = step·√Σu_i²` grown by
/// `2⁻¹⁵` relative (the sum's, the root's and the products' roundings: at most `(d + 6)·2⁻²⁴`
/// for d ≤ 256) plus `√d·2⁻²⁰·max(|lo|, |hi|) + 2⁻¹²⁵` absolute (the reconstruction's
/// roundings, `≤ 2⁻²³·max(|lo|, |hi|)` a dimension, and a flushed product). Shuffles over the
/// lane group: every thread of the warp must call it.
fn residual_norm(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    vals: &[Var],
    codes: &[Var],
    (lo, hi, step): (Var, Var, Var),
    lanes: u32,
) -> Var {
    let finite = k.let_("n_finite", step.ge(NORM_MIN_STEP));
    let inv = k.let_("n_inv", select(finite, step.rcp(), 0.0f32));
    let mut ss = k.let_(
        "n_ss",
        vals.iter().zip(codes).fold(f32c(0.0), |acc, (x, c)| {
            let u = (*x - fma(c.cast(Scalar::F32), step, lo)) * inv;
            fma(u.clone(), u, acc)
        }),
    );
    let mut off = 1;
    while off < lanes {
        let other = k.shuffle(ShuffleMode::Xor, ss, u32c(off as u64));
        ss = k.let_("n_ss", ss + other);
        off *= 2;
    }
    let d = spec.decode.head_dim as f64;
    let abs_err = lo.abs().max(hi.abs()) * (d.sqrt() * (2.0f64).powi(-20)) + (2.0f64).powi(-125);
    let r = step * ss.sqrt() * (1.0 + (2.0f64).powi(-15)) + abs_err;
    k.let_("n_r", select(finite, r, f32c(f64::INFINITY)))
}

/// Store `vals` (consecutive elements from `at`, `at` a multiple of the vector length) with
/// the widest vector stores that fit.
pub(crate) fn store_run(k: &mut KernelBuilder, buf: Buf, at: Expr, vals: &[Expr]) {
    let vec = (16 / buf.elem.size_bytes()).min(vals.len() as u32).max(1) as usize;
    for (i, part) in vals.chunks(vec).enumerate() {
        if part.len() == 1 {
            k.store(buf, at.clone() + (i * vec) as i64, part[0].clone());
        } else {
            k.store_vec(buf, at.clone() + (i * vec) as i64, part.to_vec());
        }
    }
}

/// Store one run of dimensions' metadata: `vals[q]` are the stored values of quantity `q`
/// (min, max, mean, std) for dims `dim0..` of (page, head) `ph`.
fn store_meta(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    out: &MetaOut,
    ph: Var,
    dim0: Expr,
    vals: &[[Expr; 4]],
) {
    let d = spec.decode.head_dim as i64;
    let row0 = k.let_("meta_at", ph * (2 * d) + dim0.i64());
    for (q, (buf, row)) in [
        (out.bounds, 0),
        (out.bounds, 1),
        (out.moments, 0),
        (out.moments, 1),
    ]
    .into_iter()
    .enumerate()
    {
        let run: Vec<Expr> = vals.iter().map(|v| v[q].clone()).collect();
        store_run(k, buf, row0 + row * d, &run);
    }
}

/// The metadata of (page, head) `ph` (i64: `page·kv_heads + head`): statistics, stored rows and
/// the sketch. Every thread of the CTA must call it (it may contain barriers).
fn emit_page_head(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    tile: &MetaTile,
    keys: Buf,
    out: &MetaOut,
    scratch: Option<Scratch>,
    ph: Var,
) {
    let (d, p, bits) = (spec.decode.head_dim, spec.page_size, spec.sketch_bits);
    let threads = tile.threads;
    let lanes = d / META_CHUNK_DIMS; // threads per key row
    let chunks = tile.chunks_per_thread(spec);
    let vec = 16 / keys.elem.size_bytes();
    let cd = META_CHUNK_DIMS as usize;
    let tid = k.let_("tid", k.thread_idx());
    let chunk = k.let_("chunk", tid % lanes);

    // All loads first: chunk j of this thread is the block's chunk `tid + j·threads`.
    let at = k.let_("k_at", ph * (p * d) as i64 + (tid * META_CHUNK_DIMS).i64());
    let mut raw = Vec::new();
    for j in 0..chunks {
        let mut row = Vec::new();
        for part in 0..META_CHUNK_DIMS / vec {
            let off = ((j * threads) * META_CHUNK_DIMS + part * vec) as i64;
            row.extend(k.load_vec("k", keys, at + off, vec));
        }
        raw.push(row);
    }
    let rows: Vec<Vec<Var>> = raw
        .iter()
        .map(|r| r.iter().map(|x| k.let_("kf", x.f32())).collect())
        .collect();

    // This thread's rows, per dimension: two passes over registers for the mean and M2.
    let mut stats: Vec<Stats> = (0..cd)
        .map(|i| {
            let col: Vec<Var> = rows.iter().map(|r| r[i]).collect();
            let min = k.let_("mn", col[1..].iter().fold(col[0].e(), |m, x| m.min(*x)));
            let max = k.let_("mx", col[1..].iter().fold(col[0].e(), |m, x| m.max(*x)));
            let sum = col[1..].iter().fold(col[0].e(), |s, x| s + *x);
            let mean = k.let_("mean", sum * (1.0 / chunks as f64));
            let m2 = col.iter().fold(f32c(0.0), |s, x| s + (*x - mean) * (*x - mean));
            let m2 = k.let_("m2", m2);
            Stats { min, max, mean, m2 }
        })
        .collect();

    // Lanes holding the same dimensions: xor butterflies over the lane groups of the warp.
    let mut n = chunks; // keys per side
    let mut off = lanes;
    while off < WARP {
        stats = stats
            .iter()
            .map(|s| {
                let o = s
                    .parts()
                    .map(|v| k.shuffle(ShuffleMode::Xor, v, u32c(off as u64)));
                let other = Stats {
                    min: o[0],
                    max: o[1],
                    mean: o[2],
                    m2: o[3],
                };
                Stats::merge(k, s, &other, n)
            })
            .collect();
        n *= 2;
        off *= 2;
    }

    let row0 = k.let_("row0", tid.lt(lanes)); // the lanes of key row 0 store the metadata
                                              // The quantization parameters of this thread's dimensions, and their page min and max rows.
    let (quant, bound_rows): (Vec<Quant>, [Vec<Var>; 2]) = match scratch {
        None => {
            // One warp: every lane has the page's statistics of its dimensions.
            let (stored, quant): (Vec<[Expr; 4]>, Vec<Quant>) =
                stats.iter().map(|s| finish_dim(k, spec, s)).unzip();
            k.if_(row0, |k| {
                store_meta(k, spec, out, ph, chunk * META_CHUNK_DIMS, &stored)
            });
            let rows = [
                stats.iter().map(|s| s.min).collect(),
                stats.iter().map(|s| s.max).collect(),
            ];
            (quant, rows)
        }
        Some(sc) => {
            let warps = threads / WARP;
            let lane = k.let_("lane", tid % WARP);
            let warp = k.let_("warp", tid / WARP);
            let st = stats.clone();
            k.if_(lane.lt(lanes), |k| {
                for q in 0..4u32 {
                    let vals: Vec<Expr> = st.iter().map(|s| s.parts()[q as usize].e()).collect();
                    let at = (warp * 4 + q) * d + chunk * META_CHUNK_DIMS;
                    store_run(k, sc.partial, at, &vals);
                }
            });
            k.barrier();
            // One thread per dimension merges the warps' partials (a fixed tree) and finishes it.
            let nq = quant_params(spec);
            for pass in 0..d.div_ceil(threads) {
                let dim = k.let_("dim", tid + pass * threads);
                k.if_(dim.lt(d), |k| {
                    let mut level: Vec<Stats> = (0..warps)
                        .map(|w| {
                            let ld = |k: &mut KernelBuilder, q: u32| {
                                k.let_("part", sc.partial.at(dim + (w * 4 + q) * d))
                            };
                            Stats {
                                min: ld(k, 0),
                                max: ld(k, 1),
                                mean: ld(k, 2),
                                m2: ld(k, 3),
                            }
                        })
                        .collect();
                    let mut n = chunks * WARP / lanes;
                    while level.len() > 1 {
                        level = level
                            .chunks(2)
                            .map(|pair| Stats::merge(k, &pair[0], &pair[1], n))
                            .collect();
                        n *= 2;
                    }
                    let (stored, q) = finish_dim(k, spec, &level[0]);
                    store_meta(k, spec, out, ph, dim.e(), &[stored]);
                    k.store(sc.bounds, dim.e(), level[0].min);
                    k.store(sc.bounds, dim + d, level[0].max);
                    let params = [Some(q.min), Some(q.inv), q.scale];
                    for (i, v) in params.iter().take(nq as usize).enumerate() {
                        if let Some(v) = v {
                            k.store(sc.quant, dim + i as u32 * d, *v);
                        }
                    }
                });
            }
            k.barrier();
            let at = k.let_("q_at", chunk * META_CHUNK_DIMS);
            let mut params: Vec<Vec<Var>> = Vec::new();
            for i in 0..nq {
                let mut v = Vec::new();
                for half in 0..2u32 {
                    v.extend(k.load_vec("qp", sc.quant, at + (i * d + half * 4), 4));
                }
                params.push(v);
            }
            let quant = (0..cd)
                .map(|i| Quant {
                    min: params[0][i],
                    inv: params[1][i],
                    scale: params.get(2).map(|s| s[i]),
                })
                .collect();
            let mut rows = [Vec::new(), Vec::new()];
            for (r, row) in rows.iter_mut().enumerate() {
                for half in 0..2u32 {
                    row.extend(k.load_vec("pb", sc.bounds, at + (r as u32 * d + half * 4), 4));
                }
            }
            (quant, rows)
        }
    };

    // The page box sketch: the min and the max row, each on its own 4-bit grid with codes
    // rounded outward (`entkv_abi::meta`); words `2·chunk` (min) and `2·chunk + 1` (max) hold
    // this thread's dimensions, the range words follow the codes.
    let box_block = k.let_("box_block", ph * spec.box_block_words() as i64);
    let mut box_words = Vec::new();
    let mut box_ranges = Vec::new();
    for (r, row) in bound_rows.iter().enumerate() {
        let (range, lo, hi) = row_grid(k, row, lanes);
        let q = quant_for(k, spec, BOX_BITS, lo, hi);
        let codes: Vec<Expr> = row
            .iter()
            .map(|x| quantize_outward(*x, &q, BOX_BITS, r == 1))
            .collect();
        box_words.extend(pack_words(&codes, BOX_BITS));
        box_ranges.push(range);
    }
    k.if_(row0, |k| {
        k.store_vec(out.page_box, box_block + (chunk * 2u32).i64(), box_words)
    });
    k.if_(tid.eq_(0u32), |k| {
        k.store_vec(out.page_box, box_block + spec.box_code_words() as i64, box_ranges)
    });

    // The sketch of this thread's rows: chunk `c = tid + j·threads` of the block is code
    // word(s) `c·bits/4` of its block (8 codes per 4-bit word), token `c / lanes`.
    let words_per_chunk = bits / 4;
    let block = k.let_("sk_block", ph * spec.sketch_block_words() as i64);
    let sk_at = k.let_("sk_at", block + tid.i64() * words_per_chunk as i64);
    for (j, row) in rows.iter().enumerate() {
        let mut grid = None;
        let row_quant: Vec<Quant> = if spec.sketch_token_grid() {
            // The token's own range: its row is spread over `lanes` adjacent threads.
            let (range, lo, hi) = row_grid(k, row, lanes);
            let slot = k.let_("sk_slot", (tid + j as u32 * threads) / lanes);
            k.if_(chunk.eq_(0u32), |k| {
                k.store(out.sketch, sketch_range_from(spec, block.e(), slot.i64()), range);
            });
            let step = grid_step(k, bits, lo, hi);
            grid = Some((lo, hi, step, slot));
            let q = quant_of_step(k, spec, lo, step);
            (0..cd).map(|_| q).collect()
        } else {
            quant.clone()
        };
        let mut codes: Vec<Expr> = row
            .iter()
            .zip(&row_quant)
            .map(|(x, q)| quantize(*x, q, bits))
            .collect();
        if let (true, Some((lo, hi, step, slot))) = (spec.sketch_norm(), grid) {
            // The norm reads the codes: bound once, so it and the words see the same values.
            let bound: Vec<Var> = codes.into_iter().map(|c| k.let_("code", c)).collect();
            let r = residual_norm(k, spec, row, &bound, (lo, hi, step), lanes);
            k.if_(chunk.eq_(0u32), |k| {
                let at = sketch_norm_from(spec, block.e(), slot.i64());
                k.store(out.sketch, at, r.e().bitcast(Scalar::U32));
            });
            codes = bound.iter().map(|c| c.e()).collect();
        }
        let words = pack_words(&codes, bits);
        let off = (j as u32 * threads * words_per_chunk) as i64;
        store_run(k, out.sketch, sk_at + off, &words);
    }
}

/// Declares the CTA's shared scratch when it has more than one warp.
fn declare_scratch(k: &mut KernelBuilder, spec: &PagedSpec, tile: &MetaTile) -> Option<Scratch> {
    let warps = tile.threads / WARP;
    let d = spec.decode.head_dim;
    (warps > 1).then(|| Scratch {
        partial: k.shared("partial", Scalar::F32, warps * 4 * d),
        quant: k.shared("quant", Scalar::F32, quant_params(spec) * d),
        bounds: k.shared("page_bounds", Scalar::F32, 2 * d),
    })
}

/// `page_meta_build`: grid (list entries, kv heads). Parameters as
/// `entkv_abi::meta_build_signature`.
pub fn build_kernel(spec: &PagedSpec, tile: &MetaTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let (name, _) = meta_entry_names(spec, tile);
    let mut k = KernelBuilder::new(name, tile.threads);
    let keys = k.buffer("k_pool", scalar_of(spec.decode.kv_dtype), Access::Read);
    let pages = k.buffer("pages", Scalar::I32, Access::Read);
    let out = MetaOut::declare(&mut k, spec);
    let num_list = k.scalar_param("num_list", Scalar::I32);
    let scratch = declare_scratch(&mut k, spec, tile);
    let entry = k.let_("entry", k.block_idx(Axis::X).i32());
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    // Uniform per CTA, so the barriers inside are reached by all of its threads.
    k.if_(entry.lt(num_list), |k| {
        let page = pages.at(entry);
        let ph = k.let_("ph", page.i64() * kv_heads.i64() + kvh.i64());
        emit_page_head(k, spec, tile, keys, &out, scratch, ph);
    });
    Ok(k.finish()?)
}

/// `page_meta_update`: grid (batch, kv heads). Parameters as
/// `entkv_abi::meta_update_signature`.
pub fn update_kernel(spec: &PagedSpec, tile: &MetaTile) -> Result<Kernel, KernelGenError> {
    tile.check(spec)?;
    let (_, name) = meta_entry_names(spec, tile);
    let p = spec.page_size as i32;
    let mut k = KernelBuilder::new(name, tile.threads);
    let keys = k.buffer("k_pool", scalar_of(spec.decode.kv_dtype), Access::Read);
    let block_table = k.buffer("block_table", Scalar::I32, Access::Read);
    let seq_lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let out = MetaOut::declare(&mut k, spec);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let scratch = declare_scratch(&mut k, spec, tile);
    let b = k.let_("b", k.block_idx(Axis::X));
    let kvh = k.let_("kvh", k.block_idx(Axis::Y));
    let kv_heads = k.let_("kv_heads", k.grid_dim(Axis::Y));
    let len = k.let_("len", seq_lens.at(b));
    // Only a sequence whose newest token completed a page; uniform per CTA.
    k.if_(len.ge(p).and((len % p).eq_(0i32)), |k| {
        let entry = b.i64() * max_pages.i64() + (len / p - 1i32).i64();
        let page = block_table.at(entry);
        let ph = k.let_("ph", page.i64() * kv_heads.i64() + kvh.i64());
        emit_page_head(k, spec, tile, keys, &out, scratch, ph);
    });
    Ok(k.finish()?)
}

/// The metadata pair for one tile.
pub fn module(spec: &PagedSpec, tile: &MetaTile) -> Result<KernelModule, KernelGenError> {
    Ok(KernelModule {
        name: "page_meta",
        kernels: vec![build_kernel(spec, tile)?, update_kernel(spec, tile)?],
    })
}

/// `page_meta` with the default tile.
pub fn modules(spec: &PagedSpec) -> Result<Vec<KernelModule>, KernelGenError> {
    Ok(vec![module(spec, &MetaTile::default_for(spec))?])
}

// ---------------------------------------------------------------------------------------------
// Reading the sketch (for the kernels that consume it)

/// Sketch row of token `slot` of (page, head) `ph = page·kv_heads + head` (its K row / d):
/// its code words start at [`sketch_code_at`].
pub fn sketch_row(spec: &PagedSpec, ph: impl IntoExpr, slot: impl IntoExpr) -> Expr {
    let ph = ph.into_expr(Some(Scalar::I64)).i64();
    ph * spec.page_size as i64 + slot.into_expr(Some(Scalar::I64)).i64()
}

/// Word index of sketch row `row`'s first code word, as `PagedSpec::sketch_code_at`.
pub fn sketch_code_at(spec: &PagedSpec, row: impl IntoExpr) -> Expr {
    let row = row.into_expr(Some(Scalar::I64)).i64();
    if spec.sketch_token_grid() {
        let (block, slot) = block_and_slot(spec, row);
        sketch_code_in(spec, block, slot)
    } else {
        row * spec.sketch_words() as i64
    }
}

/// Word index of sketch row `row`'s range word (per-token grid), as
/// `PagedSpec::sketch_range_at`.
pub fn sketch_range_at(spec: &PagedSpec, row: impl IntoExpr) -> Expr {
    let (block, slot) = block_and_slot(spec, row.into_expr(Some(Scalar::I64)).i64());
    sketch_range_in(spec, block, slot)
}

/// `(row / P, row mod P)` of a sketch row (≥ 0; P is a power of two).
pub fn block_and_slot(spec: &PagedSpec, row: Expr) -> (Expr, Expr) {
    let p = spec.page_size as i64;
    (row.clone() >> p.trailing_zeros() as i64, row & (p - 1))
}

/// Word index of the first code word of slot `slot` (i64) in (page, KV head) block `block`
/// (i64, `page·kv_heads + head`): the same place as [`sketch_code_at`], without the divisions.
pub fn sketch_code_in(spec: &PagedSpec, block: Expr, slot: Expr) -> Expr {
    block * spec.sketch_block_words() as i64 + slot * spec.sketch_words() as i64
}

/// Word index of slot `slot`'s range word in block `block` (per-token grid), as
/// [`sketch_range_at`].
pub fn sketch_range_in(spec: &PagedSpec, block: Expr, slot: Expr) -> Expr {
    sketch_range_from(spec, block * spec.sketch_block_words() as i64, slot)
}

/// Word index of slot `slot`'s range word in the block whose first word is `block_word`.
fn sketch_range_from(spec: &PagedSpec, block_word: Expr, slot: Expr) -> Expr {
    block_word + (spec.page_size * spec.sketch_words()) as i64 + slot
}

/// Word index of slot `slot`'s norm word in block `block` (`PagedSpec::sketch_norm`), as
/// `PagedSpec::sketch_norm_at`.
pub fn sketch_norm_in(spec: &PagedSpec, block: Expr, slot: Expr) -> Expr {
    sketch_norm_from(spec, block * spec.sketch_block_words() as i64, slot)
}

/// Word index of slot `slot`'s norm word in the block whose first word is `block_word`: the
/// norm words follow the page's range words.
fn sketch_norm_from(spec: &PagedSpec, block_word: Expr, slot: Expr) -> Expr {
    sketch_range_from(spec, block_word + spec.page_size as i64, slot)
}

/// Word index of sketch row `row`'s norm word, as `PagedSpec::sketch_norm_at`.
pub fn sketch_norm_at(spec: &PagedSpec, row: impl IntoExpr) -> Expr {
    sketch_range_at(spec, row) + spec.page_size as i64
}

/// `(min, max)` (f32) of a range word (`entkv_abi::unpack_sketch_range`).
pub fn unpack_range(k: &mut KernelBuilder, word: impl IntoExpr) -> (Var, Var) {
    let w = k.let_("range_w", word.into_expr(Some(Scalar::U32)));
    (
        k.let_("range_lo", (w << 16u32).bitcast(Scalar::F32)),
        k.let_("range_hi", (w & 0xFFFF_0000u32).bitcast(Scalar::F32)),
    )
}

/// f32 `x` rounded to a bf16 value toward +∞ (`up`) or −∞ (`entkv_abi::pack_sketch_range`),
/// as its f32 bits.
fn bf16_bits_outward(k: &mut KernelBuilder, x: Var, up: bool) -> Var {
    let bits = k.let_("xb", x.e().bitcast(Scalar::U32));
    let truncated = k.let_("xt", bits & 0xFFFF_0000u32);
    let away = if up { x.gt(0.0f32) } else { x.lt(0.0f32) };
    let bump = truncated.ne_(bits).and(away);
    k.let_("xo", select(bump, truncated + 0x1_0000u32, truncated))
}

/// The code (u32) of dimension `dim` (any integer expression) of sketch row `row` (an integer
/// expression, see [`sketch_row`]): one scalar load.
pub fn emit_sketch_code(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    row: impl IntoExpr,
    dim: impl IntoExpr,
) -> Expr {
    let bits = spec.sketch_bits;
    let dim = k.let_("sk_dim", dim.into_expr(Some(Scalar::U32)).u32());
    let row = row.into_expr(Some(Scalar::I64)).i64();
    // dim·bits/32 and (dim·bits) mod 32 with bits a power of two.
    let per_word = 32 / bits;
    let word = sketch.at(sketch_code_at(spec, row) + (dim / per_word).i64());
    (word >> ((dim % per_word) * bits)) & sketch_levels(bits)
}

/// Codes (u32) of dimensions `first..first + count` of sketch row `row`, loading the words
/// that hold them with vector loads of up to 16 bytes. `first` and `count` must cover whole
/// words (multiples of `32/bits` dimensions) inside the head.
pub fn emit_sketch_codes(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    row: impl IntoExpr,
    first: u32,
    count: u32,
) -> Result<Vec<Expr>, KernelGenError> {
    let per_word = 32 / spec.sketch_bits;
    if first % per_word != 0 || count % per_word != 0 || count == 0 || first + count > spec.decode.head_dim {
        return Err(SpecError::BadShape(format!(
            "sketch dims {first}..{} must be whole {}-bit words inside head dim {}",
            first + count,
            spec.sketch_bits,
            spec.decode.head_dim
        ))
        .into());
    }
    let at = k.let_("sk_at", sketch_code_at(spec, row) + (first / per_word) as i64);
    // Row starts are 16-byte aligned (sketch_words and a block's range words are multiples of
    // 4), so a vector of n words
    // is aligned when its offset in the row is a multiple of n.
    Ok(load_codes(k, spec, sketch, at, count, |w, n| {
        (first / per_word + w) % n == 0
    }))
}

/// Like [`emit_sketch_codes`] with a run-time first dimension (e.g. a lane's slice of the
/// head): `first` must be a multiple of `count`, and `count` a multiple of `32/bits` dividing
/// the head dim.
pub fn emit_sketch_codes_at(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    row: impl IntoExpr,
    first: impl IntoExpr,
    count: u32,
) -> Result<Vec<Expr>, KernelGenError> {
    let words = emit_sketch_words_at(k, spec, sketch, row, first, count)?;
    Ok(split_codes(spec, &words, count))
}

/// The raw sketch words (`32/bits` codes each, dimension `first + j·(32/bits) + n` in bits
/// `n·bits..`) of dimensions `first..first + count`; the same rules as
/// [`emit_sketch_codes_at`].
pub fn emit_sketch_words_at(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    row: impl IntoExpr,
    first: impl IntoExpr,
    count: u32,
) -> Result<Vec<Var>, KernelGenError> {
    emit_sketch_words_from(k, spec, sketch, sketch_code_at(spec, row), first, count)
}

/// [`emit_sketch_words_at`] of the code row starting at word `code_at` (e.g. from
/// [`sketch_code_in`]).
pub fn emit_sketch_words_from(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    code_at: impl IntoExpr,
    first: impl IntoExpr,
    count: u32,
) -> Result<Vec<Var>, KernelGenError> {
    let per_word = 32 / spec.sketch_bits;
    if count % per_word != 0 || count == 0 || spec.decode.head_dim % count != 0 {
        return Err(SpecError::BadShape(format!(
            "{count} sketch dims must be whole {}-bit words dividing head dim {}",
            spec.sketch_bits, spec.decode.head_dim
        ))
        .into());
    }
    let first = first.into_expr(Some(Scalar::U32)).u32();
    let at = k.let_(
        "sk_at",
        code_at.into_expr(Some(Scalar::I64)) + (first / per_word).i64(),
    );
    // `first` is a multiple of `count`, so the slice starts on a multiple of its word count:
    // vectors whose length divides it stay aligned.
    let n_words = count / per_word;
    Ok(load_words(k, sketch, at, n_words, |w, n| {
        w % n == 0 && n_words % n == 0
    }))
}

/// Load the `count/(32/bits)` words starting at word index `at` and split them into codes.
fn load_codes(
    k: &mut KernelBuilder,
    spec: &PagedSpec,
    sketch: Buf,
    at: Var,
    count: u32,
    aligned: impl Fn(u32, u32) -> bool,
) -> Vec<Expr> {
    let words = load_words(k, sketch, at, count * spec.sketch_bits / 32, aligned);
    split_codes(spec, &words, count)
}

/// Load `n_words` words starting at word index `at`, with the longest vectors that
/// `aligned(word offset, length)` allows.
fn load_words(
    k: &mut KernelBuilder,
    sketch: Buf,
    at: Var,
    n_words: u32,
    aligned: impl Fn(u32, u32) -> bool,
) -> Vec<Var> {
    let mut w = 0;
    let mut words = Vec::new();
    while w < n_words {
        let n = [4u32, 2, 1]
            .into_iter()
            .find(|&n| aligned(w, n) && w + n <= n_words)
            .unwrap_or(1);
        words.extend(k.load_vec("sk", sketch, at + w as i64, n));
        w += n;
    }
    words
}

/// The first `count` codes held by `words`.
fn split_codes(spec: &PagedSpec, words: &[Var], count: u32) -> Vec<Expr> {
    let bits = spec.sketch_bits;
    let per_word = 32 / bits;
    (0..count)
        .map(|i| {
            let word = words[(i / per_word) as usize];
            (word >> ((i % per_word) * bits)) & sketch_levels(bits)
        })
        .collect()
}

/// Host decoder: the codes of one token's sketch row (`sketch_words` u32).
pub fn sketch_codes(spec: &PagedSpec, words: &[u32]) -> Vec<u32> {
    let bits = spec.sketch_bits;
    (0..spec.decode.head_dim)
        .map(|i| {
            let (w, s) = sketch_word_shift(bits, i);
            (words[w as usize] >> s) & sketch_levels(bits)
        })
        .collect()
}

/// Host decoder: `k̂_i = min_i + code_i·step_i` of one token (exact in f64 for K-dtype bounds),
/// from its sketch row and its page's stored bounds.
pub fn decode_sketch(spec: &PagedSpec, words: &[u32], min: &[f64], max: &[f64]) -> Vec<f64> {
    sketch_codes(spec, words)
        .iter()
        .zip(min.iter().zip(max))
        .map(|(&c, (&lo, &hi))| lo + c as f64 * sketch_step(spec.sketch_bits, lo as f32, hi as f32) as f64)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Float64 reference

/// Exact statistics of one (page, head) per dimension (before rounding to the K dtype).
#[derive(Clone, Debug, PartialEq)]
pub struct MetaReference {
    pub min: Vec<f64>,
    pub max: Vec<f64>,
    pub mean: Vec<f64>,
    /// Population standard deviation clamped to ≥ 1e-6.
    pub std: Vec<f64>,
    /// `max_j |k_{j,i}|`, the scale of the f32 arithmetic errors.
    pub max_abs: Vec<f64>,
}

/// Statistics of a page's keys (`keys[j]` is token `j`, `d` values).
pub fn meta_reference(keys: &[&[f64]]) -> MetaReference {
    let d = keys.first().map_or(0, |k| k.len());
    let n = keys.len() as f64;
    let col = |i: usize| keys.iter().map(move |k| k[i]);
    let mean: Vec<f64> = (0..d).map(|i| col(i).sum::<f64>() / n).collect();
    MetaReference {
        min: (0..d).map(|i| col(i).fold(f64::INFINITY, f64::min)).collect(),
        max: (0..d).map(|i| col(i).fold(f64::NEG_INFINITY, f64::max)).collect(),
        std: (0..d)
            .map(|i| {
                let var = col(i).map(|x| (x - mean[i]) * (x - mean[i])).sum::<f64>() / n;
                var.sqrt().max(META_STD_FLOOR)
            })
            .collect(),
        max_abs: (0..d)
            .map(|i| col(i).fold(0.0f64, |m, x| m.max(x.abs())))
            .collect(),
        mean,
    }
}

/// The nearest code to `k` on `[min, max]` (f64, with the f32 step of `entkv_abi::sketch_step`),
/// and the distance of `(k − min)/step` from the nearest rounding tie (∞ when `step = 0`).
pub fn nearest_code(bits: u32, k: f64, min: f64, max: f64) -> (u32, f64) {
    let step = sketch_step(bits, min as f32, max as f32) as f64;
    if step == 0.0 {
        return (0, f64::INFINITY);
    }
    let t = (k - min) / step;
    let code = (t.round() as u32).min(sketch_levels(bits));
    (code, ((t - t.floor()) - 0.5).abs())
}

/// Spacing of the K dtype at `|x|` (one ulp).
pub fn dtype_ulp(dtype: DType, x: f64) -> f64 {
    let (mant, emin) = match dtype {
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        DType::F32 => (23, -126),
    };
    let e = if x == 0.0 {
        emin
    } else {
        (x.abs().log2().floor() as i32).max(emin)
    };
    (2.0f64).powi(e - mant)
}

// ---------------------------------------------------------------------------------------------
// Checks

/// What a [`MetaCheck`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaRun {
    /// `page_meta_build` over every full page (listed in reverse, to show order does not matter).
    Build,
    /// `page_meta_update` alone: only the pages the newest tokens completed are written.
    Update,
    /// Prefill of `len − 1` tokens (build over its full pages), then the append of token
    /// `len` (update): every full page at `len` ends up built.
    PrefillThenAppend,
}

/// Word the sketch is poisoned with (`Program::poisoned` gives u32 buffers 0, a valid code word).
pub const SKETCH_POISON: u32 = 0xdead_beef;

/// Tolerances against the exact (f64) statistics: half the K dtype's spacing at the stored
/// value (rounding to nearest) plus the f32 arithmetic before it.
///
/// Mean: `2⁻²⁰·max|k|` covers the f32 sums and merges (≤ 16 roundings, each ≤ 2⁻²⁴·max|k|).
pub const MEAN_F32_SLACK: f64 = 1.0 / 1_048_576.0;
/// Std: `2⁻¹⁶·max|k|` covers f32 M2 merges (`δ` carries
/// the means' errors, ≲ 150·2⁻²⁴·max|k| on the std).
pub const STD_F32_SLACK: f64 = 1.0 / 65_536.0;

/// The floor `1e-6` is applied in f32 (`9.99999997e-7`).
pub const STD_FLOOR_SLACK: f64 = 1e-12;

/// One metadata test case.
#[derive(Clone, Debug)]
pub struct MetaCheck {
    pub case: PagedCase,
    pub run: MetaRun,
    pub tile: MetaTile,
    /// Make dimensions 0 and d/2 constant within every page (`max = min`, step 0).
    pub constant_dims: bool,
    /// Multiply the keys by this (then round to the K dtype): 2⁻¹²⁵ makes bf16 steps subnormal.
    pub scale: f64,
}

impl MetaCheck {
    pub fn new(case: PagedCase, run: MetaRun) -> MetaCheck {
        let tile = MetaTile::default_for(&case.spec);
        MetaCheck {
            case,
            run,
            tile,
            constant_dims: false,
            scale: 1.0,
        }
    }

    /// The case's inputs with this check's changes to the keys.
    pub fn inputs(&self) -> PagedInputs {
        let mut x = self.case.inputs();
        let spec = &self.case.spec;
        let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
        let hkv = self.case.kv_heads as usize;
        let mut v = x.k_pool.values.clone();
        if self.scale != 1.0 {
            v.iter_mut().for_each(|k| *k *= self.scale);
        }
        if self.constant_dims {
            for (b, &len) in x.seq_lens.iter().enumerate() {
                for t in 0..len as usize {
                    let page = x.block_table[b * x.shape.max_pages as usize + t / p] as usize;
                    for h in 0..hkv {
                        let block = (page * hkv + h) * p * d;
                        for i in [0, d / 2] {
                            v[block + (t % p) * d + i] = v[block + i];
                        }
                    }
                }
            }
        }
        x.k_pool = Tensor::from_f64(spec.decode.kv_dtype, &v);
        x
    }

    /// The list `page_meta_build` gets and the pages the run must write (and no others).
    fn plan(&self, x: &PagedInputs) -> Result<(Vec<i32>, BTreeSet<i32>), SpecError> {
        let spec = &self.case.spec;
        let p = spec.page_size as usize;
        let mp = x.shape.max_pages as usize;
        let full = full_pages(spec, &x.shape, &x.seq_lens, &x.block_table)?;
        let expected: BTreeSet<i32> = match self.run {
            MetaRun::Build | MetaRun::PrefillThenAppend => full.iter().copied().collect(),
            MetaRun::Update => completed_pages(spec, &x.shape, &x.seq_lens, &x.block_table)?
                .into_iter()
                .collect(),
        };
        let list = match self.run {
            MetaRun::Build => full.into_iter().rev().collect(),
            MetaRun::Update => Vec::new(),
            MetaRun::PrefillThenAppend => x
                .seq_lens
                .iter()
                .enumerate()
                .flat_map(|(b, &len)| x.block_table[b * mp..][..(len as usize - 1) / p].to_vec())
                .collect(),
        };
        Ok((list, expected))
    }
}

fn kv_buffer(t: &Tensor) -> HostBuffer {
    HostBuffer::from_f64_as(scalar_of(t.dtype), &t.values)
}

/// Largest `err / tol` seen and whether any exceeded 1.
#[derive(Default)]
struct Worst {
    ratio: f64,
    failures: usize,
}

impl Worst {
    fn see(&mut self, err: f64, tol: f64) {
        let r = crate::check::error_ratio(err, tol);
        self.ratio = self.ratio.max(r);
        if r > 1.0 {
            self.failures += 1;
        }
    }
}

impl KernelCheck for MetaCheck {
    fn name(&self) -> String {
        let c = &self.case;
        format!(
            "page_meta {:?} {} tile {} kv_heads {} lens {:?} {:?}{}{}",
            self.run,
            c.spec.sketch_tag(),
            self.tile.tag(),
            c.kv_heads,
            c.seq_lens,
            c.data,
            if self.constant_dims { " constant-dims" } else { "" },
            if self.scale != 1.0 {
                format!(" ×{:e}", self.scale)
            } else {
                String::new()
            }
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let spec = &self.case.spec;
        let x = self.inputs();
        let (list, _) = self.plan(&x).map_err(KernelGenError::from)?;
        let kd = scalar_of(spec.decode.kv_dtype);
        let mut p = Program::new();
        p.buffer("k_pool", kv_buffer(&x.k_pool))
            .buffer("pages", HostBuffer::I32(list.clone()))
            .buffer("block_table", HostBuffer::I32(x.block_table.clone()))
            .buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()))
            .poisoned("meta_bounds", kd, x.shape.meta_elems(spec) as usize)
            .poisoned("meta_moments", kd, x.shape.meta_elems(spec) as usize)
            .buffer(
                "sketch",
                HostBuffer::U32(vec![SKETCH_POISON; x.shape.sketch_words(spec) as usize]),
            )
            .buffer(
                "meta_box",
                HostBuffer::U32(vec![SKETCH_POISON; x.shape.box_words(spec) as usize]),
            );
        let outs = || ["meta_bounds", "meta_moments", "sketch", "meta_box"].map(ArgRef::buf);
        if !list.is_empty() {
            let kernel = Rc::new(build_kernel(spec, &self.tile)?);
            let g =
                meta_build_geometry(&self.tile, &x.shape, list.len() as u64).map_err(KernelGenError::from)?;
            let mut args = vec![ArgRef::buf("k_pool"), ArgRef::buf("pages")];
            args.extend(outs());
            args.push(ArgRef::I32(list.len() as i32));
            p.call(kernel, g, args);
        }
        if self.run != MetaRun::Build {
            let kernel = Rc::new(update_kernel(spec, &self.tile)?);
            let g = meta_update_geometry(&self.tile, &x.shape).map_err(KernelGenError::from)?;
            let mut args = vec![
                ArgRef::buf("k_pool"),
                ArgRef::buf("block_table"),
                ArgRef::buf("seq_lens"),
            ];
            args.extend(outs());
            args.push(ArgRef::I32(x.shape.max_pages as i32));
            p.call(kernel, g, args);
        }
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let spec = &self.case.spec;
        let x = self.inputs();
        let expected = match self.plan(&x) {
            Ok((_, e)) => e,
            Err(e) => return Outcome::new(false, e.to_string()),
        };
        let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
        let (hkv, words) = (self.case.kv_heads as usize, spec.sketch_words() as usize);
        let dt = spec.decode.kv_dtype;
        let bits = spec.sketch_bits;
        let bounds = ran.get("meta_bounds").to_f64_vec();
        let moments = ran.get("meta_moments").to_f64_vec();
        let Some(sketch) = ran.get("sketch").as_u32() else {
            return Outcome::new(false, "sketch is not a u32 buffer");
        };
        let Some(page_box) = ran.get("meta_box").as_u32() else {
            return Outcome::new(false, "meta_box is not a u32 buffer");
        };
        let box_block = spec.box_block_words() as usize;
        let (mut box_inward, mut box_loose) = (0usize, 0usize);
        let (mut bound_errors, mut untouched_errors, mut code_mismatches, mut near_ties) = (0, 0, 0, 0);
        let (mut mean_w, mut std_w, mut sketch_w) = (Worst::default(), Worst::default(), Worst::default());
        // Residual norms against their norm words, and the largest word above its norm (steps).
        let (mut norm_bad, mut norm_ratio, mut norm_excess) = (0usize, 0.0f64, 0.0f64);
        let mut excess = 0.0f64; // largest (|k − k̂| − step/2)/(max − min), in units of 2⁻²⁴
        for page in 0..x.shape.num_pages as usize {
            for h in 0..hkv {
                let ph = page * hkv + h;
                let meta = |buf: &[f64], row: usize| buf[(ph * 2 + row) * d..][..d].to_vec();
                let block_words = spec.sketch_block_words() as usize;
                let sk = &sketch[ph * block_words..][..block_words];
                let bx = &page_box[ph * box_block..][..box_block];
                if !expected.contains(&(page as i32)) {
                    let meta_left = [0, 1].iter().all(|&r| {
                        meta(&bounds, r).iter().all(|v| v.is_nan())
                            && meta(&moments, r).iter().all(|v| v.is_nan())
                    });
                    if !meta_left || sk.iter().chain(bx).any(|&w| w != SKETCH_POISON) {
                        untouched_errors += 1;
                    }
                    continue;
                }
                let block = &x.k_pool.values[ph * p * d..][..p * d];
                let keys: Vec<&[f64]> = block.chunks(d).collect();
                let r = meta_reference(&keys);
                let (min, max) = (meta(&bounds, 0), meta(&bounds, 1));
                let (mean, std) = (meta(&moments, 0), meta(&moments, 1));
                for i in 0..d {
                    if min[i] != r.min[i] || max[i] != r.max[i] {
                        bound_errors += 1;
                    }
                    // Rounding to nearest is within half the spacing at the result.
                    let half_ulp = |got: f64| 0.5 * dtype_ulp(dt, got);
                    mean_w.see(
                        (mean[i] - r.mean[i]).abs(),
                        half_ulp(mean[i]) + MEAN_F32_SLACK * r.max_abs[i],
                    );
                    std_w.see(
                        (std[i] - r.std[i]).abs(),
                        half_ulp(std[i]) + STD_F32_SLACK * r.max_abs[i] + STD_FLOOR_SLACK,
                    );
                }
                // The page box sketch: range words as defined, codes outward within
                // `BOX_CODE_SLACK` and at most one code from the exact encoder's (`box_row`),
                // and only where the value sits within 2⁻¹² of a step from a grid line.
                let code_words = spec.box_code_words() as usize;
                for (row, vals) in [&r.min, &r.max].into_iter().enumerate() {
                    let row_f32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
                    let (word, exact) = box_row(&row_f32, row == 1);
                    if bx[code_words + row] != word {
                        bound_errors += 1;
                    }
                    let (lo, hi) = unpack_sketch_range(word);
                    let (span, step) = (hi as f64 - lo as f64, sketch_step(BOX_BITS, lo, hi) as f64);
                    for i in 0..d {
                        let w = bx[2 * (i / 8) + row];
                        let c = (w >> (4 * (i % 8))) & sketch_levels(BOX_BITS);
                        let g = box_grid_value(word, c);
                        let eps = BOX_CODE_SLACK * span;
                        let inward = if row == 1 {
                            g < vals[i] - eps
                        } else {
                            g > vals[i] + eps
                        };
                        box_inward += usize::from(inward);
                        let off_line = ((vals[i] - lo as f64) / step.max(f64::MIN_POSITIVE)).fract();
                        let near_line = off_line.min(1.0 - off_line) <= 1.0 / 4096.0;
                        box_loose += usize::from(c != exact[i] && !(near_line && c.abs_diff(exact[i]) == 1));
                    }
                }
                for (slot, key) in keys.iter().enumerate() {
                    // The words' places are the ABI's (`PagedSpec::sketch_*_at`), not the kernel's.
                    let row = (ph * p + slot) as u64;
                    let codes = sketch_codes(spec, &sk[slot * words..][..words]);
                    // The grid: the page's bounds per dimension, or the token's range word.
                    let grid = |i: usize| -> (f64, f64) {
                        if spec.sketch_token_grid() {
                            let (lo, hi) =
                                key.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                                    (a.min(v), b.max(v))
                                });
                            let (lo, hi) = unpack_sketch_range(pack_sketch_range(lo as f32, hi as f32));
                            (lo as f64, hi as f64)
                        } else {
                            (r.min[i], r.max[i])
                        }
                    };
                    if spec.sketch_token_grid() {
                        let (lo, hi) = grid(0);
                        if sketch[spec.sketch_range_at(row) as usize]
                            != pack_sketch_range(lo as f32, hi as f32)
                        {
                            bound_errors += 1;
                        }
                    }
                    if spec.sketch_norm() {
                        // The norm word bounds ‖k − k̂‖₂ (float64, the stored codes and range),
                        // with no tolerance; +∞ only for a step too small to bound it so.
                        let (lo, hi) = grid(0);
                        let step = sketch_step(bits, lo as f32, hi as f32) as f64;
                        let norm = (0..d)
                            .map(|i| (key[i] - lo - codes[i] as f64 * step).powi(2))
                            .sum::<f64>()
                            .sqrt();
                        let word = f32::from_bits(sketch[spec.sketch_norm_at(row) as usize]) as f64;
                        let bounded = word >= norm && (word.is_finite() || step < NORM_MIN_STEP);
                        norm_bad += usize::from(!bounded);
                        if word.is_finite() && word > 0.0 {
                            norm_ratio = norm_ratio.max(norm / word);
                        }
                        if word.is_finite() && step > 0.0 {
                            norm_excess = norm_excess.max((word - norm) / step);
                        }
                    }
                    for i in 0..d {
                        let (lo, hi) = grid(i);
                        let step = sketch_step(bits, lo as f32, hi as f32);
                        let err = ((key[i] - lo) - codes[i] as f64 * step as f64).abs();
                        sketch_w.see(err, sketch_error_bound(step, lo as f32, hi as f32));
                        if hi > lo {
                            let ex = (err - 0.5 * step as f64) / (hi - lo);
                            excess = excess.max(ex * 16_777_216.0);
                        }
                        let (near, tie) = nearest_code(bits, key[i], lo, hi);
                        if codes[i] != near {
                            if tie <= 1.0 / 4096.0 {
                                near_ties += 1;
                            } else {
                                code_mismatches += 1;
                            }
                        }
                    }
                }
            }
        }
        let passed = bound_errors == 0
            && untouched_errors == 0
            && code_mismatches == 0
            && box_inward == 0
            && box_loose == 0
            && mean_w.failures == 0
            && std_w.failures == 0
            && sketch_w.failures == 0
            && norm_bad == 0;
        Outcome::new(
            passed,
            format!(
                "{} of {} pages built × {hkv} heads; min/max errors {bound_errors}; untouched (page, head)s \
                 changed {untouched_errors}; mean err/tol {:.3} ({} over); std err/tol {:.3} ({} over); \
                 sketch err/bound {:.6} ({} over), excess over step/2 {:.2}·2⁻²⁴·(max−min); \
                 codes off the nearest {code_mismatches} (+{near_ties} at rounding ties); page box \
                 codes inward {box_inward}, off the outward code {box_loose}; residual norms \
                 over their words {} (norm/word up to {:.6}, words above norms by ≤ {:.2e} steps)",
                expected.len(),
                x.shape.num_pages,
                mean_w.ratio,
                mean_w.failures,
                std_w.ratio,
                std_w.failures,
                sketch_w.ratio,
                sketch_w.failures,
                excess.max(0.0),
                norm_bad,
                norm_ratio,
                norm_excess,
            ),
        )
    }
}

fn paged(d: u32, p: u32, dt: DType, bits: u32) -> PagedSpec {
    let decode = DecodeSpec::new(1.5, d, 1, dt).expect("supported head dim");
    PagedSpec::new(decode, p, false, bits).expect("supported page size and sketch width")
}

/// Every metadata check: each head dim, page size, K dtype and sketch width at least once, one-
/// and multi-warp CTAs, all three runs, odd lengths (one token, one exact page, partial last
/// pages, different lengths per batch), constant dimensions, ties, ×300 and subnormal keys, the
/// norm words of 4-bit sketches at d = 128 at both ends of the f32 range.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    use DType::{BF16, F16, F32};
    use KeyData::*;
    use MetaRun::*;
    let mut v: Vec<MetaCheck> = vec![
        MetaCheck::new(
            PagedCase::new(paged(32, 16, F16, 4), 2, &[1, 16, 37, 100], Normal, 1),
            Build,
        ),
        MetaCheck::new(
            PagedCase::new(paged(32, 16, F16, 4), 2, &[16, 37, 64, 1, 48, 15], Normal, 2),
            Update,
        ),
        MetaCheck::new(
            PagedCase::new(paged(64, 32, BF16, 8), 3, &[64, 33, 96, 32, 7], Peaked, 3),
            PrefillThenAppend,
        ),
        MetaCheck::new(
            PagedCase::new(paged(128, 64, F16, 8), 2, &[64, 130], Extreme, 4),
            Build,
        ),
        MetaCheck::new(
            PagedCase::new(paged(128, 16, BF16, 4), 2, &[32, 16, 20], Ties, 5),
            Update,
        ),
        MetaCheck::new(
            PagedCase::new(paged(64, 16, F16, 8), 2, &[47, 48, 3], Dominant, 6),
            PrefillThenAppend,
        ),
        MetaCheck::new(
            PagedCase::new(paged(32, 16, F32, 4), 2, &[40, 16], Normal, 7),
            Build,
        ),
        MetaCheck::new(
            PagedCase::new(paged(128, 32, F16, 4), 2, &[96, 31], Peaked, 8),
            Update,
        ),
    ];
    let mut c = MetaCheck::new(
        PagedCase::new(paged(64, 64, BF16, 4), 2, &[128, 64, 70], Normal, 9),
        Build,
    );
    c.constant_dims = true;
    v.push(c);
    let mut c = MetaCheck::new(
        PagedCase::new(paged(32, 32, BF16, 8), 2, &[64, 40], Normal, 10),
        Build,
    );
    c.scale = (2.0f64).powi(-125);
    v.push(c);
    // The 4-bit sketch's norm words (d = 128): keys ×300, keys scaled just above the norm's
    // smallest step (2⁻⁵⁵: steps near 2⁻⁵⁷, whose errors' squares would be 2⁻¹¹⁶ unscaled)
    // and to subnormals (2⁻¹²⁵: a step below it, so +∞).
    v.push(MetaCheck::new(
        PagedCase::new(paged(128, 32, BF16, 4), 2, &[64, 40], Extreme, 21),
        Build,
    ));
    for (scale, seed) in [((2.0f64).powi(-55), 22), ((2.0f64).powi(-125), 23)] {
        let mut c = MetaCheck::new(
            PagedCase::new(paged(128, 16, BF16, 4), 2, &[32, 20], Normal, seed),
            Build,
        );
        c.scale = scale;
        v.push(c);
    }
    // Tiles: one warp holding 4 chunks a thread (d = 32: 4 lanes a row; d = 64: 8); 8 warps of
    // one chunk; 2 warps of 4 chunks; d > threads (two dimensions per finishing thread).
    for (spec, threads, lens) in [
        (paged(32, 32, F16, 8), 32, [65u32, 128]),
        (paged(64, 16, F16, 4), 32, [48, 32]),
        (paged(32, 64, BF16, 4), 256, [128, 64]),
        (paged(32, 64, F16, 8), 64, [64, 129]),
        (paged(128, 16, F16, 8), 64, [64, 32]),
    ] {
        let mut c = MetaCheck::new(
            PagedCase::new(spec, 3, &lens, Normal, 11 + threads as u64),
            PrefillThenAppend,
        );
        c.tile = MetaTile { threads };
        v.push(c);
    }
    v.into_iter()
        .map(|c| Box::new(c) as Box<dyn KernelCheck>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::{meta_build_signature, meta_update_signature, ArgKind, Elem};
    use entkv_dsl::ir::ParamKind;

    /// The generated parameter lists are the abi's signatures.
    #[test]
    fn kernels_follow_their_signatures() {
        let spec = paged(64, 32, DType::BF16, 8);
        let tile = MetaTile::default_for(&spec);
        for (kernel, sig) in [
            (build_kernel(&spec, &tile).unwrap(), meta_build_signature(&spec)),
            (update_kernel(&spec, &tile).unwrap(), meta_update_signature(&spec)),
        ] {
            assert_eq!(kernel.params.len(), sig.len(), "{}", kernel.name);
            for (p, a) in kernel.params.iter().zip(&sig) {
                assert_eq!(p.name, a.name);
                let ok = match (&p.kind, a.kind) {
                    (ParamKind::Buffer { elem, access }, ArgKind::Buffer { elem: e, writes }) => {
                        let want = match e {
                            Elem::F16 => Scalar::F16,
                            Elem::BF16 => Scalar::BF16,
                            Elem::F32 => Scalar::F32,
                            Elem::I32 => Scalar::I32,
                            Elem::U32 => Scalar::U32,
                            Elem::I64 => Scalar::I64,
                        };
                        *elem == want && (*access != Access::Read) == writes
                    }
                    (ParamKind::Scalar(Scalar::I32), ArgKind::I32) => true,
                    _ => false,
                };
                assert!(ok, "{}: parameter {}", kernel.name, p.name);
            }
        }
    }

    #[test]
    fn bad_tiles_are_errors_not_panics() {
        let spec = paged(32, 16, DType::F16, 4);
        let e = build_kernel(&spec, &MetaTile { threads: 128 }).unwrap_err();
        assert!(
            matches!(e, KernelGenError::Spec(SpecError::BadTile { .. })),
            "{e}"
        );
    }

    /// The device readers agree with the host decoder on every dimension of every token.
    #[test]
    fn sketch_readers_match_the_host_decoder() {
        for bits in [4, 8] {
            let spec = paged(64, 16, DType::F16, bits);
            let words = spec.sketch_words() as usize;
            let tokens = 5usize;
            let d = spec.decode.head_dim;
            let data: Vec<u32> = (0..tokens * words)
                .map(|i| crate::fill::fmix32(i as u32 + 17 * bits))
                .collect();
            let mut k = KernelBuilder::new("read_sketch", 32);
            let sketch = k.buffer("sketch", Scalar::U32, Access::Read);
            let one = k.buffer("one", Scalar::U32, Access::Write);
            let all = k.buffer("all", Scalar::U32, Access::Write);
            let row = k.let_("row", k.block_idx(Axis::X));
            let tid = k.let_("tid", k.thread_idx());
            for pass in 0..d / 32 {
                let dim = k.let_("dim", tid + pass * 32);
                let c = emit_sketch_code(&mut k, &spec, sketch, row.i64(), dim);
                k.store(one, row * d + dim, c);
            }
            let codes = emit_sketch_codes(&mut k, &spec, sketch, row.i64(), 8, d - 8).unwrap();
            k.if_(tid.eq_(0u32), |k| {
                for (i, c) in codes.into_iter().enumerate() {
                    k.store(all, row * d + 8 + i as u32, c);
                }
            });
            let kernel = Rc::new(k.finish().unwrap());
            let mut p = Program::new();
            // Poisoned with a value no code takes (codes are below 2^bits), as 0 is a code.
            p.buffer("sketch", HostBuffer::U32(data.clone()))
                .buffer("one", HostBuffer::U32(vec![u32::MAX; tokens * d as usize]))
                .buffer("all", HostBuffer::U32(vec![u32::MAX; tokens * d as usize]));
            let g = entkv_abi::LaunchGeometry::linear(tokens as u32, 32);
            p.call(kernel, g, ["sketch", "one", "all"].map(ArgRef::buf).to_vec());
            p.run_interp().unwrap();
            let one = p.get("one").as_u32().unwrap();
            let all = p.get("all").as_u32().unwrap();
            for t in 0..tokens {
                let host = sketch_codes(&spec, &data[t * words..][..words]);
                let d = d as usize;
                assert_eq!(&one[t * d..][..d], &host[..], "bits {bits} token {t}");
                assert_eq!(&all[t * d + 8..][..d - 8], &host[8..], "bits {bits} token {t}");
            }
            assert!(emit_sketch_codes(&mut KernelBuilder::new("x", 32), &spec, sketch, 0i64, 3, 8).is_err());
        }
    }

    #[test]
    fn reference_and_decoder_basics() {
        let keys: Vec<Vec<f64>> = vec![vec![1.0, 2.0], vec![3.0, 2.0], vec![5.0, 2.0], vec![7.0, 2.0]];
        let refs: Vec<&[f64]> = keys.iter().map(|k| k.as_slice()).collect();
        let r = meta_reference(&refs);
        assert_eq!((r.min[0], r.max[0], r.mean[0]), (1.0, 7.0, 4.0));
        assert!((r.std[0] - 5.0f64.sqrt()).abs() < 1e-15);
        assert_eq!(r.std[1], META_STD_FLOOR);
        assert_eq!(nearest_code(4, 2.0, 2.0, 2.0), (0, f64::INFINITY));
        assert_eq!(nearest_code(4, 7.0, 1.0, 7.0).0, 15);
        let spec = paged(32, 16, DType::F16, 4);
        let words = [0x0000_00f1u32, 0, 0, 0];
        let k = decode_sketch(&spec, &words, &[0.0; 32], &[15.0; 32]);
        assert_eq!((k[0], k[1], k[2]), (1.0, 15.0, 0.0));
        assert_eq!(dtype_ulp(DType::F16, 1.0), 1.0 / 1024.0);
        assert_eq!(dtype_ulp(DType::F16, 0.0), (2.0f64).powi(-24));
    }

    /// A verify catches an unwritten page, a wrong code and a written page it did not expect.
    #[test]
    fn verify_catches_mistakes() {
        let c = MetaCheck::new(
            PagedCase::new(paged(32, 16, DType::F16, 4), 1, &[32, 5], KeyData::Normal, 3),
            MetaRun::Build,
        );
        let mut p = c.program().unwrap();
        p.run_interp().unwrap();
        assert!(c.verify(&p).passed, "{}", c.verify(&p).detail);
        let x = c.inputs();
        let first = x.block_table[0] as usize; // logical page 0 of sequence 0, built
        let last = x.block_table[x.shape.max_pages as usize] as usize; // sequence 1's partial page
        let spec = c.case.spec;
        let code = |page: usize| spec.sketch_code_at(page as u64 * 16) as usize;
        let mut bad = p.clone();
        // Dimension 0's code moves by at least 4 (a code off by one at a rounding tie passes).
        bad.buffers.get_mut("sketch").unwrap().as_u32_mut().unwrap()[code(first)] ^= 0xC;
        assert!(!c.verify(&bad).passed);
        let mut bad = p.clone();
        bad.buffers.get_mut("sketch").unwrap().as_u32_mut().unwrap()[code(last)] = 0;
        assert!(!c.verify(&bad).passed);
        // A token's range word.
        let mut bad = p.clone();
        bad.buffers.get_mut("sketch").unwrap().as_u32_mut().unwrap()
            [spec.sketch_range_at(first as u64 * 16 + 3) as usize] ^= 0x1_0000;
        assert!(!c.verify(&bad).passed);
        let mut bad = p.clone();
        bad.buffers.insert(
            "meta_moments".into(),
            HostBuffer::filled_f64(Scalar::F16, x.shape.meta_elems(&c.case.spec) as usize, f64::NAN),
        );
        assert!(!c.verify(&bad).passed);
    }
}
