//! Page metadata (`page_meta`): the kernels that keep `meta_bounds`, `meta_moments`, `sketch`
//! and the page box sketch `meta_box` (layouts in `crate::paged`) for the full pages of the
//! cache, and the exact definitions of the quantized key sketch and of the page box sketch that
//! every consumer decodes.
//!
//! 1. `page_meta_build`, grid (list entries, kv heads): for every physical page in a list
//!    (`pages`, i32, e.g. every full page after prefill, see [`full_pages`]) and every KV head,
//!    writes that (page, head)'s `meta_bounds`, `meta_moments` and `sketch` rows from `k_pool`.
//! 2. `page_meta_update`, grid (batch, kv heads): on append, for each sequence whose newest
//!    token completed a page (`seq_len % P == 0`) rebuilds that page (logical page
//!    `seq_len/P − 1`, see [`completed_pages`]); other sequences do nothing. O(page) work.
//!
//! Neither kernel reads or writes any other page. One CTA owns one (page, head) block: the
//! `P·d` keys are read once, with 16-byte loads whose consecutive threads cover consecutive
//! bytes, reduced in registers, shuffles and (for more than one warp) shared memory, and the
//! sketch is quantized from the same registers. Per (page, head) it reads `P·d·s` bytes of K
//! (`s` = K dtype size) and writes `4·d·s` bytes of metadata and `P·d·bits/8` of sketch codes
//! (plus `4·P` of range words at 4 bits) and a `meta_box` block (64 bytes at d = 32): at
//! P = 16, d = 32, f16, 4 bits, 1024 B read and 640 B written ([`meta_bytes`]); the update
//! also reads 8 bytes per (sequence, head) (its length and block-table entry).
//!
//! ## Statistics (spec §2.3), per dimension `i` over the page's `P` keys
//! - `min_i`, `max_i`: exact key values (stored in the K dtype without rounding).
//! - `mean_i`, and the population standard deviation clamped to `≥ 1e-6`: computed in f32
//!   (pairwise mean/M2 merges, no `Σk² − n·mean²` cancellation), rounded to the K dtype.
//!
//! ## The sketch code and how to decode it
//! `bits` ∈ {4, 8}; `L = 2^bits − 1` levels. A consumer computes, in f32 with IEEE rounding,
//! from the *stored* (K-dtype) bounds converted exactly to f32:
//!
//! ```text
//! step_i = (max_i − min_i) · c_bits        c_bits = 1/L rounded to f32        (sketch_step)
//! k̂_i    = min_i + code_i · step_i                                          (exact value)
//! ```
//!
//! where `code_i` is bits `(i·bits) mod 32 ..` of word `i·bits/32` of the token's sketch row
//! (low bits first, [`sketch_word_shift`]). The kernel chooses codes (the nearest code, up to f32
//! rounding in the encoder: `round((k_i − min_i)/step_i)`, 0 when `step_i = 0`) such that, for
//! every key with `|k| < 2^126`,
//!
//! ```text
//! |k_i − k̂_i| ≤ step_i/2 + 2⁻²²·(max_i − min_i) + 2⁻¹²⁶                    (sketch_error_bound)
//! ```
//!
//! (`max_i − min_i ≤ |min_i| + |max_i|`, so the bound is also `step_i/2 + 2⁻²²·(|min_i| +
//! |max_i|) + 2⁻¹²⁶`.) Why: with `t' = (k − min)/step` exactly, `k − k̂ = step·(t' − code)`.
//! The encoder computes `t = fl(fl(k − min)·fl(1/step))` (operands scaled by 2⁶⁴ when `step` is
//! below 2⁻⁶⁴ so `1/step` cannot overflow; power-of-two scaling is exact), three roundings,
//! so `step·|t − t'| ≤ 3.000001·2⁻²⁴·(k − min) ≤ 3.000001·2⁻²⁴·(max − min)`; `code =
//! min(⌊fl(t + 0.5)⌋, L)` is within `1/2 + ulp(t + 0.5)/2` of `t`, and `step·ulp(t+0.5)/2 ≤
//! step·2^(bits−1)·2⁻²⁴ ≤ 0.54·2⁻²⁴·(max − min)`; a clamped code is within `3.000001·2⁻²⁴·L`
//! of `t'`. Together ≤ `step/2 + 3.55·2⁻²⁴·(max − min)`. The `2⁻¹²⁶` term matters only when
//! `step` is subnormal in f32 (`max − min < 2⁻¹¹⁸`, impossible for f16 keys), where the
//! decoder's `step` itself is off by up to 2⁻¹⁵⁰, i.e. `L·step` by up to `2⁻¹⁴²`. A constant
//! dimension (`max = min`) has `step = 0`, code 0 and `k̂ = k` exactly.
//!
//! ## The page box sketch (`meta_box`)
//! Per (page, head) the min row `min_i` and the max row `max_i` above (stored K-dtype values,
//! exact in f32), each as 4-bit codes on the row's own grid: `lo`, `hi` = the row's smallest
//! and largest value rounded outward to bf16 (a range word, [`pack_sketch_range`]),
//! `s = (hi − lo)·c_4` ([`sketch_step`], f32), grid values `g(c) = lo + c·s` (exact
//! arithmetic). The codes are rounded *outward*, so the decoded box contains the page's keys:
//!
//! ```text
//! g(cmin_i) ≤ min_i + ε        g(cmax_i) ≥ max_i − ε        ε = BOX_CODE_SLACK·(hi − lo)
//! ```
//!
//! (`cmin_i = ⌊(min_i − lo)/s⌋`, `cmax_i = min(⌈(max_i − lo)/s⌉, 15)`, 0 when `s = 0`;
//! [`box_row`] is the exact encoder). `ε = 2⁻²⁰·(hi − lo)` covers the device encoder's f32
//! quotient (three roundings: at most `3.0001·2⁻²⁴·15` of a step off) and the clamp (`15·s`
//! falls short of `hi − lo` by at most `2⁻²³·(hi − lo)`). Every key of the page lies in
//! `[lo_min, hi_max]` (the min row's `lo`, the max row's `hi`). Bounds over the box need no
//! other error term, and cost a reader integer dot products of the codes (`page_bounds`).
//!
//! At 4 bits the grid is per token (`crate::paged`): `min_i`, `max_i` above are, for every
//! dimension, the token's range word unpacked ([`pack_sketch_range`]: its min rounded down and
//! its max rounded up to bf16). Nothing in the argument above needs the range to be per
//! dimension, only `min_i ≤ k_i ≤ max_i` and the decoder's use of the same stored values.

use crate::geometry::LaunchGeometry;
use crate::paged::{check_batch, PagedShape, PagedSpec};
use crate::signature::{ArgKind, ArgSpec, Elem};
use crate::spec::SpecError;
use serde::{Deserialize, Serialize};

/// Dimensions one thread covers per key row: one 16-byte load of f16/bf16 (two of f32), one
/// 32-bit sketch word at 4 bits, two at 8.
pub const META_CHUNK_DIMS: u32 = 8;
/// Most key chunks a thread holds in registers: at 8 (64 keys) ptxas spills one-warp CTAs.
pub const MAX_META_CHUNKS_PER_THREAD: u32 = 4;
/// Most threads per CTA (the cross-warp partials take `warps·4·d` f32 of shared memory).
pub const MAX_META_THREADS: u32 = 512;
/// Lower clamp of the stored standard deviation (spec §2.3).
pub const META_STD_FLOOR: f64 = 1e-6;
/// Sketch error bound, relative part: `2⁻²²·(max_i − min_i)` (see the module docs).
pub const SKETCH_REL_SLACK: f64 = 1.0 / 4_194_304.0;
/// Sketch error bound, absolute part: `2⁻¹²⁶`, the smallest normal f32 (only matters when
/// `step_i` is subnormal).
pub const SKETCH_ABS_SLACK: f64 = f32::MIN_POSITIVE as f64;

const KERNEL: &str = "page_meta";

/// Bits a code of the page box sketch (`meta_box`; see the module docs).
pub const BOX_BITS: u32 = 4;
/// `ε/(hi − lo)` of the page box sketch's outward codes (module docs): `2⁻²⁰`.
pub const BOX_CODE_SLACK: f64 = 1.0 / 1_048_576.0;

/// Tile of both metadata kernels: one CTA per (page, head) block of `P·d` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MetaTile {
    /// Threads per CTA: a power of two in `32..=min(512, P·d/8)`; each thread holds
    /// `P·d/(8·threads)` chunks of 8 dims ([`MetaTile::chunks_per_thread`]).
    pub threads: u32,
}

impl MetaTile {
    /// [`MAX_META_CHUNKS_PER_THREAD`] chunks (16-byte loads in flight) per thread, with at
    /// least one warp and at most 256 threads: at d = 128, P = 32 the tuner chose 128 threads
    /// over 256 (two chunks a thread), 1.29× faster at 32k–1M (results/2026-11-30-jit-pool/
    /// 4-wide-8b73548). Small pages get one-warp CTAs (two chunks a thread at P·d = 512),
    /// which need no shared memory or barriers at all.
    pub fn default_for(spec: &PagedSpec) -> MetaTile {
        let chunks = spec.page_size * spec.decode.head_dim / META_CHUNK_DIMS;
        MetaTile {
            threads: (chunks / MAX_META_CHUNKS_PER_THREAD).clamp(32, 256),
        }
    }

    /// 8-dim chunks of one (page, head) block.
    pub fn chunks(spec: &PagedSpec) -> u32 {
        spec.page_size * spec.decode.head_dim / META_CHUNK_DIMS
    }

    /// Chunks (key rows × 8 dims) each thread loads.
    pub fn chunks_per_thread(&self, spec: &PagedSpec) -> u32 {
        Self::chunks(spec) / self.threads
    }

    /// `t64`.
    pub fn tag(&self) -> String {
        format!("t{}", self.threads)
    }

    pub fn check(&self, spec: &PagedSpec) -> Result<(), SpecError> {
        let chunks = Self::chunks(spec);
        let t = self.threads;
        let most = chunks.min(MAX_META_THREADS);
        if !t.is_power_of_two() || t < 32 || t > most {
            return Err(SpecError::BadTile {
                kernel: KERNEL,
                reason: format!(
                    "threads = {t} must be a power of two in 32..={most} (P·d/8 = {chunks} chunks, at most {MAX_META_THREADS})"
                ),
            });
        }
        if chunks / t > MAX_META_CHUNKS_PER_THREAD {
            return Err(SpecError::BadTile {
                kernel: KERNEL,
                reason: format!(
                    "threads = {t} leaves {} chunks per thread (at most {MAX_META_CHUNKS_PER_THREAD}: registers)",
                    chunks / t
                ),
            });
        }
        Ok(())
    }
}

/// Entry names: `page_meta_build__<spec.sketch_tag()>__<tile>` and
/// `page_meta_update__<spec.sketch_tag()>__<tile>`.
pub fn meta_entry_names(spec: &PagedSpec, tile: &MetaTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.sketch_tag(), tile.tag());
    (
        format!("page_meta_build__{suffix}"),
        format!("page_meta_update__{suffix}"),
    )
}

fn buf(name: &'static str, elem: Elem, writes: bool) -> ArgSpec {
    ArgSpec {
        name,
        kind: ArgKind::Buffer { elem, writes },
    }
}

/// The four outputs, in the order both kernels take them.
fn meta_outputs(spec: &PagedSpec) -> [ArgSpec; 4] {
    let kd = spec.decode.kv_dtype.into();
    [
        buf("meta_bounds", kd, true),
        buf("meta_moments", kd, true),
        buf("sketch", Elem::U32, true),
        buf("meta_box", Elem::U32, true),
    ]
}

/// `page_meta_build(k_pool, pages, meta_bounds, meta_moments, sketch, meta_box, num_list)`:
/// `pages[e]` for `e < num_list` are the physical pages to build.
pub fn meta_build_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    let mut v = vec![
        buf("k_pool", spec.decode.kv_dtype.into(), false),
        buf("pages", Elem::I32, false),
    ];
    v.extend(meta_outputs(spec));
    v.push(ArgSpec {
        name: "num_list",
        kind: ArgKind::I32,
    });
    v
}

/// `page_meta_update(k_pool, block_table, seq_lens, meta_bounds, meta_moments, sketch,
/// meta_box, max_pages)`.
pub fn meta_update_signature(spec: &PagedSpec) -> Vec<ArgSpec> {
    let mut v = vec![
        buf("k_pool", spec.decode.kv_dtype.into(), false),
        buf("block_table", Elem::I32, false),
        buf("seq_lens", Elem::I32, false),
    ];
    v.extend(meta_outputs(spec));
    v.push(ArgSpec {
        name: "max_pages",
        kind: ArgKind::I32,
    });
    v
}

fn check_grid(what: &str, x: u64, kv_heads: u32) -> Result<(), SpecError> {
    if x == 0 || x > i32::MAX as u64 || kv_heads == 0 || kv_heads > 65_535 {
        return Err(SpecError::BadShape(format!(
            "{what} = {x} must be in 1..=2^31−1 and kv_heads = {kv_heads} in 1..=65535 (an empty list needs no launch)"
        )));
    }
    Ok(())
}

/// Grid (list entries, kv heads) of `page_meta_build` for a list of `list_len` pages.
pub fn meta_build_geometry(
    tile: &MetaTile,
    shape: &PagedShape,
    list_len: u64,
) -> Result<LaunchGeometry, SpecError> {
    check_grid("page list length", list_len, shape.kv_heads)?;
    Ok(LaunchGeometry {
        grid: [list_len as u32, shape.kv_heads, 1],
        block: tile.threads,
        shared_bytes: 0,
    })
}

/// Grid (batch, kv heads) of `page_meta_update`.
pub fn meta_update_geometry(tile: &MetaTile, shape: &PagedShape) -> Result<LaunchGeometry, SpecError> {
    check_grid("batch", shape.batch as u64, shape.kv_heads)?;
    Ok(LaunchGeometry {
        grid: [shape.batch, shape.kv_heads, 1],
        block: tile.threads,
        shared_bytes: 0,
    })
}

/// The physical pages that have metadata for this batch: logical pages `0..len/P` (the full
/// ones) of every sequence, in sequence order — the list `page_meta_build` takes after prefill.
pub fn full_pages(
    spec: &PagedSpec,
    shape: &PagedShape,
    seq_lens: &[i32],
    block_table: &[i32],
) -> Result<Vec<i32>, SpecError> {
    check_batch(spec, shape, seq_lens, block_table)?;
    let p = spec.page_size as usize;
    let mut out = Vec::new();
    for (b, &len) in seq_lens.iter().enumerate() {
        let row = &block_table[b * shape.max_pages as usize..];
        out.extend_from_slice(&row[..len as usize / p]);
    }
    Ok(out)
}

/// The physical pages `page_meta_update` rebuilds for these lengths: the page each sequence's
/// newest token completed, if any.
pub fn completed_pages(
    spec: &PagedSpec,
    shape: &PagedShape,
    seq_lens: &[i32],
    block_table: &[i32],
) -> Result<Vec<i32>, SpecError> {
    check_batch(spec, shape, seq_lens, block_table)?;
    let p = spec.page_size as usize;
    Ok(seq_lens
        .iter()
        .enumerate()
        .filter(|(_, &len)| len as usize % p == 0)
        .map(|(b, &len)| block_table[b * shape.max_pages as usize + len as usize / p - 1])
        .collect())
}

/// Bytes one (page, head) costs: (read, written).
pub fn meta_bytes(spec: &PagedSpec) -> (u64, u64) {
    let (p, d) = (spec.page_size as u64, spec.decode.head_dim as u64);
    let s = spec.decode.kv_dtype.size_bytes() as u64;
    let written = 4 * d * s + 4 * (spec.sketch_block_words() + spec.box_block_words()) as u64;
    (p * d * s, written)
}

/// `2^bits − 1`, the largest code.
pub fn sketch_levels(bits: u32) -> u32 {
    (1u32 << bits) - 1
}

/// `c_bits = 1/(2^bits − 1)` rounded to f32, the constant of [`sketch_step`].
pub fn sketch_inv_levels(bits: u32) -> f32 {
    1.0 / sketch_levels(bits) as f32
}

/// `step_i = (max_i − min_i)·c_bits` in f32, exactly as every consumer computes it from the
/// stored bounds (converted to f32, which is exact).
pub fn sketch_step(bits: u32, min: f32, max: f32) -> f32 {
    (max - min) * sketch_inv_levels(bits)
}

/// Word (within a token's sketch row) and bit shift of dimension `dim`'s code.
pub fn sketch_word_shift(bits: u32, dim: u32) -> (u32, u32) {
    (dim * bits / 32, (dim * bits) % 32)
}

/// The range word of a 4-bit sketch row (per-token grid, `crate::paged`): the token's `min`
/// rounded down and its `max` rounded up to bf16, packed as the high halves of their f32 bits
/// (`min` in bits 0–15, `max` in bits 16–31). Every key of the token lies in the unpacked
/// range, which the encoder and every consumer use as `(min_i, max_i)` for all dimensions.
pub fn pack_sketch_range(min: f32, max: f32) -> u32 {
    (bf16_bits_outward(min, false) >> 16) | (bf16_bits_outward(max, true) & 0xFFFF_0000)
}

/// `(min, max)` of a range word, exactly (bf16 values are f32 values).
pub fn unpack_sketch_range(word: u32) -> (f32, f32) {
    (f32::from_bits(word << 16), f32::from_bits(word & 0xFFFF_0000))
}

/// f32 bits of `x` rounded to bf16 (low 16 bits zero) toward +∞ (`up`) or −∞; `x` finite.
fn bf16_bits_outward(x: f32, up: bool) -> u32 {
    let bits = x.to_bits();
    let truncated = bits & 0xFFFF_0000;
    // Truncation rounds the magnitude down: toward −∞ for positives, toward +∞ for negatives.
    let away = if up { x > 0.0 } else { x < 0.0 };
    if truncated != bits && away {
        truncated + 0x1_0000
    } else {
        truncated
    }
}

/// The page box sketch of one bound row (`vals`, the row's f32 values; `up`: the max row, whose
/// codes round up, else the min row, whose codes round down): its range word and its `d` codes,
/// exactly as the module docs define them (in f64, so the guarantee holds with `ε = 0`).
pub fn box_row(vals: &[f32], up: bool) -> (u32, Vec<u32>) {
    let lo = vals.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let hi = vals.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let word = pack_sketch_range(lo, hi);
    let (glo, ghi) = unpack_sketch_range(word);
    let step = sketch_step(BOX_BITS, glo, ghi) as f64;
    let top = sketch_levels(BOX_BITS) as f64;
    let codes = vals
        .iter()
        .map(|&v| {
            if step == 0.0 {
                return 0;
            }
            let t = (v as f64 - glo as f64) / step;
            (if up { t.ceil() } else { t.floor() }).clamp(0.0, top) as u32
        })
        .collect();
    (word, codes)
}

/// The value `g(c) = lo + c·s` of code `code` on the grid of range word `word` (module docs), in
/// f64 (exact: `s` is an f32 and `c ≤ 15`).
pub fn box_grid_value(word: u32, code: u32) -> f64 {
    let (lo, hi) = unpack_sketch_range(word);
    lo as f64 + code as f64 * sketch_step(BOX_BITS, lo, hi) as f64
}

/// The guaranteed `|k_i − k̂_i|` bound: `step/2 + 2⁻²²·(max − min) + 2⁻¹²⁶` (in f64).
pub fn sketch_error_bound(step: f32, min: f32, max: f32) -> f64 {
    0.5 * step as f64 + SKETCH_REL_SLACK * (max as f64 - min as f64) + SKETCH_ABS_SLACK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DType, DecodeSpec, SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES};

    fn spec(d: u32, p: u32, dt: DType, bits: u32) -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(1.5, d, 1, dt).unwrap(), p, false, bits).unwrap()
    }

    #[test]
    fn default_tiles_are_valid_and_named() {
        for d in SUPPORTED_HEAD_DIMS {
            for p in SUPPORTED_PAGE_SIZES {
                for dt in [DType::F16, DType::BF16, DType::F32] {
                    let s = spec(d, p, dt, 4);
                    let t = MetaTile::default_for(&s);
                    t.check(&s).unwrap();
                    assert!((1..=4).contains(&t.chunks_per_thread(&s)), "{d} {p}");
                }
            }
        }
        let s = spec(32, 16, DType::F16, 4);
        let t = MetaTile::default_for(&s);
        assert_eq!(t.threads, 32);
        let (b, u) = meta_entry_names(&s, &t);
        assert_eq!(b, "page_meta_build__a1p5_d32_g1_f16q_f16kv_f32o_p16_nb_s4__t32");
        assert_eq!(u, "page_meta_update__a1p5_d32_g1_f16q_f16kv_f32o_p16_nb_s4__t32");
        assert_eq!(meta_bytes(&s), (1024, 576 + 64));
        assert_eq!(
            (s.box_code_words(), s.box_block_words(), s.box_read_bytes()),
            (8, 16, 64)
        );
    }

    #[test]
    fn bad_tiles_are_errors() {
        let s = spec(32, 16, DType::F16, 4);
        for threads in [0, 16, 48, 128, 1024] {
            assert!(matches!(
                MetaTile { threads }.check(&s),
                Err(SpecError::BadTile { .. })
            ));
        }
        let big = spec(128, 64, DType::F16, 8);
        assert!(
            MetaTile { threads: 128 }.check(&big).is_err(),
            "8 chunks per thread"
        );
        assert!(MetaTile { threads: 256 }.check(&big).is_ok());
        assert!(MetaTile { threads: 1024 }.check(&big).is_err(), "shared memory");
    }

    #[test]
    fn signatures_and_geometry() {
        let s = spec(64, 32, DType::BF16, 8);
        let b = meta_build_signature(&s);
        let names: Vec<&str> = b.iter().map(|a| a.name).collect();
        assert_eq!(
            names,
            [
                "k_pool",
                "pages",
                "meta_bounds",
                "meta_moments",
                "sketch",
                "meta_box",
                "num_list"
            ]
        );
        assert_eq!(
            b[0].kind,
            ArgKind::Buffer {
                elem: Elem::BF16,
                writes: false
            }
        );
        let u = meta_update_signature(&s);
        assert_eq!(u.len(), 8);
        assert_eq!(u[7].kind, ArgKind::I32);
        let shape = PagedShape {
            batch: 3,
            kv_heads: 4,
            num_pages: 20,
            max_pages: 5,
        };
        let t = MetaTile::default_for(&s);
        assert_eq!(meta_build_geometry(&t, &shape, 7).unwrap().grid, [7, 4, 1]);
        assert_eq!(meta_update_geometry(&t, &shape).unwrap().grid, [3, 4, 1]);
        assert!(meta_build_geometry(&t, &shape, 0).is_err());
    }

    #[test]
    fn page_lists() {
        let s = spec(32, 16, DType::F16, 4);
        let shape = PagedShape {
            batch: 3,
            kv_heads: 1,
            num_pages: 9,
            max_pages: 3,
        };
        let bt = [4, 2, 7, 1, -1, -1, 0, 8, 3];
        assert_eq!(
            full_pages(&s, &shape, &[48, 15, 32], &bt).unwrap(),
            vec![4, 2, 7, 0, 8]
        );
        assert_eq!(
            completed_pages(&s, &shape, &[48, 15, 32], &bt).unwrap(),
            vec![7, 8]
        );
        assert_eq!(
            completed_pages(&s, &shape, &[47, 1, 17], &bt).unwrap(),
            Vec::<i32>::new()
        );
        assert!(full_pages(&s, &shape, &[49, 1, 1], &bt).is_err());
    }

    #[test]
    fn box_rows_round_outward_and_tight() {
        let rows: [&[f32]; 4] = [
            &[-1.25, 0.3, 2.0, -0.7, 1.1, 1.1, -2.9, 0.0],
            &[0.5; 8],
            &[-3.0, -1.0e-3, -2.5, -0.125, -1.75, -3.0, -0.5, -2.0],
            &[1.0e-3, 7.5, 3.25, 60000.0, 0.0, 12.0, 5.0, 9.0],
        ];
        for vals in rows {
            for up in [false, true] {
                let (word, codes) = box_row(vals, up);
                let step = {
                    let (lo, hi) = unpack_sketch_range(word);
                    sketch_step(BOX_BITS, lo, hi) as f64
                };
                for (&v, &c) in vals.iter().zip(&codes) {
                    let g = box_grid_value(word, c);
                    assert!(c <= 15);
                    // Outward, and one step from the value at most (tight).
                    if up {
                        assert!(
                            g >= v as f64
                                && (c == 0 || step == 0.0 || box_grid_value(word, c - 1) < v as f64),
                            "{v} {c}"
                        );
                    } else {
                        assert!(
                            g <= v as f64
                                && (c == 15 || step == 0.0 || box_grid_value(word, c + 1) > v as f64),
                            "{v} {c}"
                        );
                    }
                    assert!((g - v as f64).abs() <= step, "{v} {g}");
                }
            }
        }
        // A constant row: step 0, every code 0, the exact value.
        let (word, codes) = box_row(&[0.5; 8], true);
        assert!(codes.iter().all(|&c| c == 0) && box_grid_value(word, 0) == 0.5);
    }

    #[test]
    fn sketch_range_words_round_outward() {
        for (lo, hi) in [
            (-1.2345f32, 2.6173f32),
            (0.5, 0.5),
            (-3.0, -1.0e-3),
            (1.0e-40, 65504.0),
            (0.0, -0.0),
        ] {
            let (a, b) = unpack_sketch_range(pack_sketch_range(lo, hi));
            assert!(a <= lo && b >= hi, "{lo} {hi} -> {a} {b}");
            assert!(
                (lo - a).abs() <= lo.abs() / 128.0 + f32::MIN_POSITIVE,
                "{lo} -> {a}"
            );
            assert!(
                (b - hi).abs() <= hi.abs() / 128.0 + f32::MIN_POSITIVE,
                "{hi} -> {b}"
            );
        }
        // bf16 values come back exactly.
        assert_eq!(unpack_sketch_range(pack_sketch_range(-1.5, 3.0)), (-1.5, 3.0));
    }

    #[test]
    fn sketch_constants() {
        assert_eq!(sketch_levels(4), 15);
        assert_eq!(sketch_word_shift(4, 9), (1, 4));
        assert_eq!(sketch_word_shift(8, 9), (2, 8));
        assert_eq!(sketch_step(4, -1.0, 2.0), 3.0f32 * (1.0f32 / 15.0));
        assert_eq!(sketch_step(8, 0.5, 0.5), 0.0);
    }
}
