//! BENCH.md `peaked` keys generated on the device, and their bit-exact host twin.
//!
//! The host generator of `paged_data` (`KeyData::Peaked`) walks the page centroids with a
//! sequential AR(1) and a seeded shuffle: fine for the suites' thousands of tokens, hopeless for
//! `entkv bench`'s caches (8 sequences × 24 KV heads × up to 1M tokens). This is the same
//! structure, counter-based like [`crate::fill`], so one kernel launch writes a whole paged pool
//! and the host regenerates any row without the rest:
//!
//! - **Centroids.** Per (sequence `b`, KV head `h`) the centroid of logical page `j` is a
//!   stationary AR(1) with ρ = 0.9 and unit variance per dimension, written as its moving-average
//!   form `c_j = √(1−ρ²)·Σ_{m≥0} ρ^m·w_{j−m}` over iid normals `w` and truncated to
//!   [`WALK_TERMS`] terms, so every page's centroid is computed on its own (no sequential
//!   recursion over 65536 pages). The neglected tail has variance ρ^(2M) = 0.0097 (M = 22): the
//!   centroids have variance 0.990 instead of 1 and a lag-1 correlation of 0.898 instead of 0.9,
//!   both far below what the 0.3 token noise (variance 0.09) already blurs. The walk extends
//!   M − 1 pages before the first, so page 0 is as stationary as any other.
//! - **Keys.** Token `t` of page `j`: `k = c_j + 0.3·n_t` with `n_t` a counter-based normal.
//! - **Hot pages.** Chosen by a hash of (seed, b, h, j) with probability 1/200, plus two distinct
//!   pages chosen by hashes of (seed, b, h) so that every (sequence, KV head) has at least two
//!   (one when the sequence has a single page). A hot page's centroid is `2.5·q̂·√d`, q̂ the
//!   normalized query of the group's first query head, read from the `q` buffer the keys will be
//!   scored against: its keys score ≈ 2.5·‖q‖ where the others score ≈ ‖q‖·N(0, 1.08/d), so
//!   page bounds are informative and the entmax support sits in the hot pages.
//!
//! All normals are [`normal_at`] (the device code is [`normal_dsl`]); the streams are
//! separated by seed: `seed` for the token noise, `seed ^ WALK_SALT` for the walk, and a hash
//! key derived from `seed ^ HOT_SALT` for the hot pages. Noise and walk are indexed by logical
//! position (sequence, head, token or page, dimension) in 64 bits, not by pool address, so the
//! keys of a sequence do not depend on where its pages sit in the pool.
//!
//! **Host twin, not a read-back.** The float64 reference of `entkv bench` regenerates the
//! sampled heads' keys on the host ([`PeakedKeys::rows`]) instead of reading them from the
//! device: a read-back would have to gather 1 KB pages scattered over a 13 GB pool, and would
//! make the check trust the generator it is checking. The twin is bit-exact because every
//! float operation is correctly rounded on both sides and done in the same order: the kernel
//! uses explicit `fma` (PTX `fma.rn.f32`) exactly where the host calls `f32::mul_add`, and
//! nothing else can be fused (codegen emits `mul.rn`/`add.rn`, which LLVM and ptxas never
//! contract; see `entkv-codegen`'s `lower.rs`, and `entkv-autotune`'s device test that reads
//! this kernel's PTX). Conversions to the KV dtype round the f32 itself
//! ([`crate::data::round_to`] of the f32). The interpreter-vs-twin test below pins it all.
//!
//! Cost on the device: one thread per (sequence, KV head, page, dimension) computes the page's
//! centroid once (22 normals) and writes the page's `page_size` tokens (one normal each), about
//! 2.4× the work of [`crate::fill`] for the same pool.

use crate::data::Tensor;
use crate::fill::{fmix32, fmix32_dsl, normal_at, normal_dsl};
use crate::program::Call;
use crate::{scalar_of, KernelGenError};
use entkv_abi::{check_batch, ArgRef, BatchError, DType, LaunchGeometry, PagedShape, PagedSpec};
use entkv_dsl::*;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use thiserror::Error;

/// AR(1) coefficient of the centroid walk along the sequence (BENCH.md).
pub const RHO: f64 = 0.9;
/// Terms of the truncated moving-average sum: the smallest M with ρ^(2M) < 1% of the variance.
pub const WALK_TERMS: usize = 22;
/// Scale of each token's noise around its page centroid.
pub const NOISE: f32 = 0.3;
/// A hot page's centroid is `HOT_GAIN·√d·q̂`.
pub const HOT_GAIN: f32 = 2.5;
/// About one page in `HOT_ONE_IN` is hot (besides the two every head gets).
pub const HOT_ONE_IN: u32 = 200;
/// Seed salts of the walk and of the hot-page hash (the token noise uses the seed itself).
pub const WALK_SALT: u32 = 0x7777_7777;
pub const HOT_SALT: u32 = 0x4242_4242;
/// Salts of the two guaranteed hot pages: above 2³¹, so they never equal a page index.
const PICK_A: u32 = 0xa5a5_a5a5;
const PICK_B: u32 = 0xc3c3_c3c3;
/// Floor of ‖q‖² before the division (a zero query gives a zero hot centroid, not NaN).
const MIN_NORM2: f32 = 1.0e-30;
pub const PEAKED_THREADS: u32 = 256;

/// `fmix32(h) < HOT_THRESHOLD` with probability 1/[`HOT_ONE_IN`].
pub const HOT_THRESHOLD: u32 = ((1u64 << 32) / HOT_ONE_IN as u64) as u32;

/// The walk's coefficients `√(1−ρ²)·ρ^m`, rounded to f32 once here: the kernel bakes these
/// constants and the twin multiplies by them. Powers by repeated IEEE multiplication (not
/// `powi`, whose rounding is up to the compiler), so every build generates the same keys.
pub fn walk_coefficients() -> [f32; WALK_TERMS] {
    let s = (1.0 - RHO * RHO).sqrt();
    let mut out = [0.0f32; WALK_TERMS];
    let mut power = 1.0f64;
    for c in &mut out {
        *c = (s * power) as f32;
        power *= RHO;
    }
    out
}

/// `√(1−ρ²)·Σ_m ρ^m·w_{j−m}` from `w(m) = w_{j−m}`: m ascending, one rounding per term (the
/// kernel's `fma` chain, in the same order).
fn walk_sum(coef: &[f32; WALK_TERMS], w: impl Fn(usize) -> f32) -> f32 {
    coef.iter()
        .enumerate()
        .fold(0.0f32, |acc, (m, c)| c.mul_add(w(m), acc))
}

/// The stored values of the first query head of KV head `kvh`'s group in sequence `b` (`q`
/// `[batch, q_heads, d]`): the direction of that head's hot pages.
pub fn first_query(spec: &PagedSpec, shape: &PagedShape, q: &Tensor, b: usize, kvh: usize) -> Vec<f32> {
    let d = spec.decode.head_dim as usize;
    let h0 = b * shape.q_heads(spec) as usize + kvh * spec.decode.group as usize;
    q.values[h0 * d..][..d].iter().map(|&x| x as f32).collect()
}

/// Why a layout cannot be filled.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeakedError {
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// Two owned logical pages map to one pool page: the twin could not say which write won.
    #[error("pool page {page} is owned twice (sequence {first_seq} page {first_page}, sequence {seq} page {logical})")]
    SharedPage {
        page: i32,
        first_seq: usize,
        first_page: usize,
        seq: usize,
        logical: usize,
    },
    /// A size does not fit the kernel's 32-bit parameters.
    #[error("{what} = {value} does not fit the generator's 32-bit parameters")]
    TooLarge { what: &'static str, value: u64 },
    /// The query given to the twin is not one head of `head_dim` values.
    #[error("the query has {got} values, the head dimension is {need}")]
    QueryLength { got: usize, need: usize },
    /// A token past the end of the block table's pages.
    #[error("token {token} is past the {max_tokens} tokens of a sequence's pages")]
    TokenOutOfRange { token: usize, max_tokens: u64 },
}

/// The peaked-key generator of one paged layout: everything the kernel takes besides buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakedKeys {
    pub kv_dtype: DType,
    pub q_dtype: DType,
    pub batch: u32,
    pub kv_heads: u32,
    /// Query heads per KV head.
    pub group: u32,
    pub head_dim: u32,
    pub page_size: u32,
    pub max_pages: u32,
    pub seed: u32,
}

impl PeakedKeys {
    pub fn new(spec: &PagedSpec, shape: &PagedShape, seed: u32) -> PeakedKeys {
        PeakedKeys {
            kv_dtype: spec.decode.kv_dtype,
            q_dtype: spec.decode.q_dtype,
            batch: shape.batch,
            kv_heads: shape.kv_heads,
            group: spec.decode.group,
            head_dim: spec.decode.head_dim,
            page_size: spec.page_size,
            max_pages: shape.max_pages,
            seed,
        }
    }

    /// Check that the kernel can fill `block_table`/`seq_lens` (a valid batch whose owned pages
    /// are distinct, sizes within the kernel's parameters), so a launch writes in bounds and
    /// the twin describes every written element.
    pub fn check(
        &self,
        spec: &PagedSpec,
        shape: &PagedShape,
        seq_lens: &[i32],
        block_table: &[i32],
    ) -> Result<(), PeakedError> {
        check_batch(spec, shape, seq_lens, block_table)?;
        let mut owner: HashMap<i32, (usize, usize)> = HashMap::new();
        let p = self.page_size as usize;
        for (seq, &len) in seq_lens.iter().enumerate() {
            for logical in 0..(len as usize).div_ceil(p) {
                let page = block_table[seq * self.max_pages as usize + logical];
                if let Some(&(first_seq, first_page)) = owner.get(&page) {
                    return Err(PeakedError::SharedPage {
                        page,
                        first_seq,
                        first_page,
                        seq,
                        logical,
                    });
                }
                owner.insert(page, (seq, logical));
            }
        }
        let fits = |what, value: u64| {
            if value > i32::MAX as u64 {
                Err(PeakedError::TooLarge { what, value })
            } else {
                Ok(())
            }
        };
        fits("batch", self.batch as u64)?;
        fits("kv_heads × group", self.kv_heads as u64 * self.group as u64)?;
        fits("head_dim", self.head_dim as u64)?;
        fits("page_size", self.page_size as u64)?;
        fits("max_pages", self.max_pages as u64)?;
        Ok(())
    }

    fn pages_of(&self, len: i64) -> u32 {
        let p = self.page_size as i64;
        ((len + p - 1) / p).max(1) as u32
    }

    /// The hash key of (sequence, KV head) `r = b·kv_heads + h`.
    fn hot_key(&self, r: u32) -> u32 {
        fmix32(fmix32(self.seed ^ HOT_SALT) ^ r)
    }

    /// Whether logical page `j` of KV head `kvh` of sequence `b` (`len` tokens) is hot.
    pub fn is_hot(&self, b: u32, kvh: u32, len: u32, j: u32) -> bool {
        // Truncated to 32 bits, as the kernel's `r.u32()`.
        let key = self.hot_key((b as u64 * self.kv_heads as u64 + kvh as u64) as u32);
        let pages = self.pages_of(len as i64);
        let a = fmix32(key ^ PICK_A) % pages;
        let c = (a + 1 + fmix32(key ^ PICK_B) % (pages - 1).max(1)) % pages;
        j == a || j == c || fmix32(key ^ j) < HOT_THRESHOLD
    }

    /// The hot pages of (b, kvh) among the first `ceil(len / page_size)`.
    pub fn hot_pages(&self, b: u32, kvh: u32, len: u32) -> Vec<u32> {
        (0..self.pages_of(len as i64))
            .filter(|&j| self.is_hot(b, kvh, len, j))
            .collect()
    }

    /// Walk normal of page `jj` (≥ −(M − 1)), dimension `i`, of (sequence, KV head) `r`.
    fn walk(&self, r: u64, jj: i64, i: u64) -> f32 {
        let span = self.max_pages as u64 + WALK_TERMS as u64 - 1;
        let at = (r * span + (jj + WALK_TERMS as i64 - 1) as u64) * self.head_dim as u64 + i;
        normal_at(self.seed ^ WALK_SALT, at)
    }

    /// The walk centroid (what a page that is not hot gets) of page `j`, dimension `i`, of
    /// (sequence, KV head) `r = b·kv_heads + h`.
    pub fn walk_centroid(&self, r: u64, j: u32, i: u32) -> f32 {
        walk_sum(&walk_coefficients(), |m| {
            self.walk(r, j as i64 - m as i64, i as u64)
        })
    }

    /// A hot page's centroid `2.5·√d·q/‖q‖` for query `q` (f32 values as stored).
    pub fn hot_centroid(&self, q: &[f32]) -> Vec<f32> {
        let mut ss = 0.0f32;
        for &x in q {
            ss = x.mul_add(x, ss);
        }
        let gain = (HOT_GAIN * (self.head_dim as f32).sqrt()) / ss.max(MIN_NORM2).sqrt();
        q.iter().map(|&x| x * gain).collect()
    }

    /// The keys of `tokens` (logical positions) of KV head `kvh` of sequence `b` (`len` tokens),
    /// rounded to the KV dtype, as exact f64: what the kernel wrote. `q` is the group's first
    /// query head (its stored values). Centroids are computed once per page, from walk normals
    /// drawn once over the span of pages the tokens touch.
    pub fn rows(
        &self,
        q: &[f32],
        b: u32,
        kvh: u32,
        len: u32,
        tokens: &[usize],
    ) -> Result<Vec<Vec<f64>>, PeakedError> {
        let (d, p) = (self.head_dim as usize, self.page_size as usize);
        if q.len() != d {
            return Err(PeakedError::QueryLength {
                got: q.len(),
                need: d,
            });
        }
        let max_tokens = self.max_pages as u64 * p as u64;
        if let Some(&token) = tokens.iter().find(|&&t| t as u64 >= max_tokens) {
            return Err(PeakedError::TokenOutOfRange { token, max_tokens });
        }
        let r = b as u64 * self.kv_heads as u64 + kvh as u64;
        let pages: BTreeSet<usize> = tokens.iter().map(|&t| t / p).collect();
        let (Some(&lo), Some(&hi)) = (pages.first(), pages.last()) else {
            return Ok(Vec::new());
        };
        // w[(jj − first)·d + i] for jj in first..=hi, first = lo − (M − 1).
        let first = lo as i64 - (WALK_TERMS as i64 - 1);
        let w: Vec<f32> = (first..=hi as i64)
            .flat_map(|jj| (0..d as u64).map(move |i| (jj, i)))
            .map(|(jj, i)| self.walk(r, jj, i))
            .collect();
        let coef = walk_coefficients();
        let hot = self.hot_centroid(q);
        let centroids: HashMap<usize, Vec<f32>> = pages
            .iter()
            .map(|&j| {
                let c = if self.is_hot(b, kvh, len, j as u32) {
                    hot.clone()
                } else {
                    (0..d)
                        .map(|i| walk_sum(&coef, |m| w[(j as i64 - m as i64 - first) as usize * d + i]))
                        .collect()
                };
                (j, c)
            })
            .collect();
        Ok(tokens
            .iter()
            .map(|&t| {
                let c = &centroids[&(t / p)];
                let base = (r * max_tokens + t as u64) * d as u64;
                c.iter()
                    .enumerate()
                    .map(|(i, &ci)| {
                        let k = NOISE.mul_add(normal_at(self.seed, base + i as u64), ci);
                        crate::data::round_to(self.kv_dtype, k as f64).1
                    })
                    .collect()
            })
            .collect())
    }

    /// Threads of one launch: one per (sequence, KV head, page, dimension).
    pub fn threads(&self) -> u64 {
        self.batch as u64 * self.kv_heads as u64 * self.max_pages as u64 * self.head_dim as u64
    }

    /// The launch that fills the program/device buffer `k_pool` from `q`, `block_table` and
    /// `seq_lens` (the names the paged pipelines use), on `blocks` blocks (any count works: the
    /// kernel strides over the grid). Check the layout with [`PeakedKeys::check`] first.
    pub fn call(&self, blocks: u32) -> Result<Call, KernelGenError> {
        Ok(Call {
            kernel: Rc::new(peaked_kernel(self.kv_dtype, self.q_dtype)?),
            geometry: LaunchGeometry::linear(blocks.max(1), PEAKED_THREADS),
            args: vec![
                ArgRef::buf("k_pool"),
                ArgRef::buf("q"),
                ArgRef::buf("block_table"),
                ArgRef::buf("seq_lens"),
                ArgRef::I32(self.batch as i32),
                ArgRef::I32(self.kv_heads as i32),
                ArgRef::I32(self.group as i32),
                ArgRef::I32(self.head_dim as i32),
                ArgRef::I32(self.page_size as i32),
                ArgRef::I32(self.max_pages as i32),
                ArgRef::U32(self.seed),
            ],
        })
    }
}

/// `fill_peaked_keys_<kv>_q<q>(k_pool, q, block_table, seq_lens, batch, kv_heads, group,
/// head_dim, page_size, max_pages, seed)`: every owned page of the pool `[num_pages, kv_heads,
/// page_size, head_dim]` (logical pages `j < ceil(len / page_size)` of each sequence, through
/// the block table `[batch, max_pages]`) gets the keys [`PeakedKeys::rows`] describes, all its
/// slots included; pages nobody owns are not written. Grid-stride over one thread per
/// (sequence, KV head, page, dimension), dimension fastest, so a warp's stores of one token
/// are contiguous. Indices are 64-bit (a 1M-token pool has more than 2³² elements).
pub fn peaked_kernel(kv: DType, q_dtype: DType) -> Result<Kernel, KernelGenError> {
    let mut k = KernelBuilder::new(
        format!("fill_peaked_keys_{}_q{}", kv.name(), q_dtype.name()),
        PEAKED_THREADS,
    );
    let out = k.buffer("k_pool", scalar_of(kv), Access::Write);
    let q = k.buffer("q", scalar_of(q_dtype), Access::Read);
    let table = k.buffer("block_table", Scalar::I32, Access::Read);
    let lens = k.buffer("seq_lens", Scalar::I32, Access::Read);
    let batch = k.scalar_param("batch", Scalar::I32);
    let hkv = k.scalar_param("kv_heads", Scalar::I32);
    let group = k.scalar_param("group", Scalar::I32);
    let d32 = k.scalar_param("head_dim", Scalar::I32);
    let p32 = k.scalar_param("page_size", Scalar::I32);
    let mp32 = k.scalar_param("max_pages", Scalar::I32);
    let seed = k.scalar_param("seed", Scalar::U32);
    let coef = walk_coefficients();
    let (d, p, mp) = (
        k.let_("d", d32.clone().i64()),
        k.let_("p", p32.clone().i64()),
        k.let_("mp", mp32.clone().i64()),
    );
    let h = k.let_("hkv", hkv.clone().i64());
    let total = k.let_("total", batch.i64() * h * mp * d);
    let stride = k.let_("stride", k.grid_dim(Axis::X).i64() * PEAKED_THREADS as i64);
    let start = k.let_("start", k.global_thread_id().i64());
    let hot_seed = fmix32_dsl(&mut k, seed.clone() ^ HOT_SALT);
    // 2.5·√d, rounded as the twin rounds it.
    let hot_norm = k.let_("hot_norm", f32c(HOT_GAIN as f64) * d32.clone().f32().sqrt());
    k.for_("g", start, total, stride, |k, g| {
        let i = k.let_("i", g.clone() % d);
        let rest = k.let_("rest", g / d);
        let j = k.let_("j", rest % mp);
        let r = k.let_("r", rest / mp);
        let kvh = k.let_("kvh", r % h);
        let b = k.let_("b", r / h);
        let len = k.let_("len", lens.at(b).i64());
        let pages = k.let_("pages", ((len + p - 1i64) / p).max(1i64));
        k.if_(j.lt(pages), |k| {
            let phys = k.let_("phys", table.at(b * mp + j).i64());
            // Hot pages: the same integer hashes as `PeakedKeys::is_hot`.
            let key = fmix32_dsl(k, hot_seed ^ r.u32());
            let pu = k.let_("pu", pages.u32());
            let pick_a = fmix32_dsl(k, key ^ PICK_A);
            let a = k.let_("a", pick_a % pu);
            let pick_b = fmix32_dsl(k, key ^ PICK_B);
            let c = k.let_("c", (a + 1u32 + pick_b % (pu - 1u32).max(1u32)) % pu);
            let ju = k.let_("ju", j.u32());
            let roll = fmix32_dsl(k, key ^ ju);
            let hot = k.let_("hot", ju.eq_(a).or(ju.eq_(c)).or(roll.lt(HOT_THRESHOLD)));
            let centroid = k.var("centroid", Scalar::F32);
            k.if_else(
                hot,
                |k| {
                    // 2.5·√d·q̂ of the group's first query head.
                    let qb = k.let_(
                        "qb",
                        (b * (h * group.clone().i64()) + kvh * group.clone().i64()) * d,
                    );
                    let ss = k.let_typed("ss", Scalar::F32, 0.0);
                    k.for_("e", 0i64, d, 1i64, |k, e| {
                        let x = k.let_("qx", q.at(qb + e).f32());
                        k.assign(ss, fma(x, x, ss));
                    });
                    let gain = k.let_("gain", hot_norm / ss.max(f32c(MIN_NORM2 as f64)).sqrt());
                    k.assign(centroid, q.at(qb + i).f32() * gain);
                },
                |k| {
                    // √(1−ρ²)·Σ_m ρ^m·w_{j−m}, m ascending, one rounding per term.
                    let span = k.let_("span", mp + (WALK_TERMS as i64 - 1));
                    let w0 = k.let_("w0", (r * span + j + (WALK_TERMS as i64 - 1)) * d + i);
                    let acc = k.let_typed("acc", Scalar::F32, 0.0);
                    for (m, cm) in coef.iter().enumerate() {
                        let w = normal_dsl(k, seed.clone() ^ WALK_SALT, w0 - d * m as i64);
                        k.assign(acc, fma(f32c(*cm as f64), w, acc));
                    }
                    k.assign(centroid, acc);
                },
            );
            let out0 = k.let_("out0", (phys * h + kvh) * p * d + i);
            let noise0 = k.let_("noise0", (r * mp + j) * p * d + i);
            k.for_("t", 0i64, p, 1i64, |k, t| {
                let n = normal_dsl(k, seed.clone(), noise0 + t.clone() * d);
                k.store(
                    out,
                    out0 + t * d,
                    fma(f32c(NOISE as f64), n, centroid).cast(out.elem),
                );
            });
        });
    });
    Ok(k.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::normal;
    use crate::decode_checks::host_tensor;
    use crate::program::Program;
    use crate::reference::{entmax, scores};
    use entkv_abi::DecodeSpec;
    use entkv_dsl::interp::HostBuffer;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    /// A paged layout with the sequences' pages shuffled over a pool with `spare` unowned pages.
    struct Layout {
        spec: PagedSpec,
        shape: PagedShape,
        seq_lens: Vec<i32>,
        block_table: Vec<i32>,
        q: Tensor,
    }

    fn layout(dtype: DType, d: u32, p: u32, group: u32, kv_heads: u32, lens: &[i32], spare: u32) -> Layout {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, d, group, dtype).unwrap(), p, false, 8).unwrap();
        let pages: Vec<u32> = lens.iter().map(|&l| (l as u32).div_ceil(p)).collect();
        let max_pages = pages.iter().copied().max().unwrap_or(1);
        let used: u32 = pages.iter().sum();
        let shape = PagedShape {
            batch: lens.len() as u32,
            kv_heads,
            num_pages: used + spare,
            max_pages,
        };
        let mut perm: Vec<i32> = (0..shape.num_pages as i32).collect();
        perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(5));
        let mut block_table = vec![-1; (shape.batch * max_pages) as usize];
        let mut next = perm.iter();
        for (b, &n) in pages.iter().enumerate() {
            for j in 0..n {
                block_table[(b as u32 * max_pages + j) as usize] = *next.next().unwrap();
            }
        }
        let q_heads = (kv_heads * group) as usize;
        let q = Tensor::from_f64(dtype, &normal(9, lens.len() * q_heads * d as usize));
        Layout {
            spec,
            shape,
            seq_lens: lens.to_vec(),
            block_table,
            q,
        }
    }

    impl Layout {
        fn gen(&self, seed: u32) -> PeakedKeys {
            PeakedKeys::new(&self.spec, &self.shape, seed)
        }
        fn q_first(&self, b: usize, kvh: usize) -> Vec<f32> {
            first_query(&self.spec, &self.shape, &self.q, b, kvh)
        }
    }

    /// The kernel, run in the interpreter on a few blocks (so the grid stride loops), writes
    /// exactly what the twin computes, bit for bit, on every slot of every owned page, and
    /// leaves unowned pages alone.
    #[test]
    fn kernel_matches_the_host_twin_bit_for_bit() {
        for (dtype, d, p, group, kv_heads, lens) in [
            (DType::F16, 32, 16, 1, 2, vec![1, 37, 250]),
            (DType::BF16, 64, 32, 2, 2, vec![300, 64]),
            (DType::F32, 32, 16, 3, 1, vec![17]),
        ] {
            let l = layout(dtype, d, p, group, kv_heads, &lens, 3);
            let gen = l.gen(0x1234_5678);
            gen.check(&l.spec, &l.shape, &l.seq_lens, &l.block_table).unwrap();
            let mut prog = Program::new();
            prog.buffer("q", host_tensor(&l.q));
            prog.buffer("block_table", HostBuffer::I32(l.block_table.clone()));
            prog.buffer("seq_lens", HostBuffer::I32(l.seq_lens.clone()));
            prog.poisoned("k_pool", scalar_of(dtype), l.shape.pool_elems(&l.spec) as usize);
            prog.calls.push(gen.call(3).unwrap());
            prog.run_interp().unwrap();
            let pool = prog.get("k_pool").to_f64_vec();
            let (d, p, mp) = (d as usize, p as usize, l.shape.max_pages as usize);
            let mut owned = vec![false; l.shape.num_pages as usize];
            let (mut hot, mut cold) = (0, 0);
            for (b, &len) in lens.iter().enumerate() {
                for kvh in 0..kv_heads as usize {
                    let pages = (len as usize).div_ceil(p);
                    let tokens: Vec<usize> = (0..pages * p).collect();
                    let rows = gen
                        .rows(&l.q_first(b, kvh), b as u32, kvh as u32, len as u32, &tokens)
                        .unwrap();
                    for (t, row) in rows.iter().enumerate() {
                        owned[l.block_table[b * mp + t / p] as usize] = true;
                        let at = l.shape.row_offset(&l.spec, &l.block_table, b, kvh, t) as usize;
                        for (i, (&got, &want)) in pool[at..at + d].iter().zip(row).enumerate() {
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{dtype:?}: seq {b} head {kvh} token {t} dim {i}: {got} vs {want}"
                            );
                        }
                    }
                    for j in 0..pages as u32 {
                        if gen.is_hot(b as u32, kvh as u32, len as u32, j) {
                            hot += 1;
                        } else {
                            cold += 1;
                        }
                    }
                }
            }
            // Both kinds of page were compared (every multi-page head has two hot pages).
            assert!(
                hot >= 1 && (cold >= 1 || lens == [17]),
                "{dtype:?}: {hot} hot, {cold} cold"
            );
            let page_elems = kv_heads as usize * p * d;
            for (page, &o) in owned.iter().enumerate() {
                if !o {
                    assert!(pool[page * page_elems..][..page_elems].iter().all(|v| v.is_nan()));
                }
            }
        }
    }

    /// The walk centroids are the stationary AR(1) the truncation promises: variance
    /// Σ c_m² = 1 − ρ^(2M) ≈ 0.990, lag-1 correlation ≈ 0.898, decaying like ρ^lag.
    #[test]
    fn centroids_drift_as_a_stationary_ar1() {
        let l = layout(DType::F16, 32, 16, 1, 4, &[400 * 16; 2], 0);
        let gen = l.gen(7);
        let coef = walk_coefficients();
        let var: f64 = coef.iter().map(|&c| c as f64 * c as f64).sum();
        assert!((var - (1.0 - RHO.powi(2 * WALK_TERMS as i32))).abs() < 1e-6);
        assert!(RHO.powi(2 * WALK_TERMS as i32) < 0.01 && RHO.powi(2 * (WALK_TERMS as i32 - 1)) >= 0.01);
        let lag = |k: usize| -> f64 {
            coef.iter()
                .zip(&coef[k..])
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
                / var
        };
        let pages = 400usize;
        let series: Vec<Vec<f64>> = (0..8u64)
            .flat_map(|r| (0..32u32).map(move |i| (r, i)))
            .map(|(r, i)| {
                (0..pages as u32)
                    .map(|j| gen.walk_centroid(r, j, i) as f64)
                    .collect()
            })
            .collect();
        let all: Vec<f64> = series.iter().flatten().copied().collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let v = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / all.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((v - var).abs() < 0.06, "variance {v}, expected {var}");
        for k in [1usize, 10] {
            let c: f64 = series
                .iter()
                .map(|s| {
                    s.iter()
                        .zip(&s[k..])
                        .map(|(a, b)| (a - mean) * (b - mean))
                        .sum::<f64>()
                })
                .sum::<f64>()
                / (series.len() * (pages - k)) as f64
                / v;
            assert!((c - lag(k)).abs() < 0.04, "lag {k}: {c}, expected {}", lag(k));
        }
        // Page 0 is no special case: its centroid is as wide as any other.
        let first: Vec<f64> = series.iter().map(|s| s[0]).collect();
        let v0 = first.iter().map(|x| x * x).sum::<f64>() / first.len() as f64;
        assert!(v0 > 0.6 && v0 < 1.5, "page-0 variance {v0}");
    }

    /// About one page in 200 is hot, plus two per (sequence, KV head); a one-page sequence has
    /// its single page hot.
    #[test]
    fn hot_pages_are_rare_and_at_least_two() {
        let l = layout(DType::F16, 32, 16, 1, 16, &[2000 * 16, 2000 * 16 - 5, 16, 1], 0);
        let gen = l.gen(11);
        let mut hashed = 0usize;
        for (b, &len) in l.seq_lens.iter().enumerate() {
            for kvh in 0..16u32 {
                let hot = gen.hot_pages(b as u32, kvh, len as u32);
                let pages = (len as u32).div_ceil(16);
                if pages == 1 {
                    assert_eq!(hot, vec![0]);
                } else {
                    assert!(hot.len() >= 2, "seq {b} head {kvh}: {hot:?}");
                    hashed += hot.len() - 2;
                }
                assert!(hot.iter().all(|&j| j < pages));
            }
        }
        // 32 heads × 2000 pages / 200 = 320 expected (a few pages of the hashed set may be the
        // two picked ones, so slightly fewer).
        assert!((250..=390).contains(&hashed), "{hashed} hashed hot pages");
        // Another seed picks other pages.
        let other = l.gen(12);
        assert_ne!(gen.hot_pages(0, 0, 32_000), other.hot_pages(0, 0, 32_000));
    }

    /// BENCH.md's point of `peaked` (as `paged_data`'s `peaked_keys_concentrate_the_support`
    /// shows for the host generator): the float64 entmax support of each head lies in its hot
    /// pages, a few percent of the pages at most, and carries all the probability mass there.
    #[test]
    fn peaked_keys_concentrate_the_support() {
        let len = 8000usize;
        let l = layout(DType::F16, 32, 16, 1, 4, &[len as i32; 2], 0);
        let gen = l.gen(0x1234_5678);
        let alpha = l.spec.decode.alpha;
        let tokens: Vec<usize> = (0..len).collect();
        for b in 0..2usize {
            for kvh in 0..4usize {
                let qf = l.q_first(b, kvh);
                let keys = gen.rows(&qf, b as u32, kvh as u32, len as u32, &tokens).unwrap();
                let kr: Vec<&[f64]> = keys.iter().map(|k| k.as_slice()).collect();
                let q: Vec<f64> = qf.iter().map(|&x| x as f64).collect();
                let z: Vec<f64> = scores(&q, &kr, &[])
                    .into_iter()
                    .map(|s| (alpha.value() - 1.0) * s)
                    .collect();
                let (probs, _) = entmax(&z, alpha);
                let hot: BTreeSet<usize> = gen
                    .hot_pages(b as u32, kvh as u32, len as u32)
                    .into_iter()
                    .map(|j| j as usize)
                    .collect();
                let support: BTreeSet<usize> = probs
                    .iter()
                    .enumerate()
                    .filter(|(_, &p)| p > 0.0)
                    .map(|(t, _)| t / 16)
                    .collect();
                let in_hot: f64 = probs
                    .iter()
                    .enumerate()
                    .filter(|(t, _)| hot.contains(&(t / 16)))
                    .map(|(_, p)| p)
                    .sum();
                assert!(
                    support.is_subset(&hot),
                    "head ({b}, {kvh}): support pages {support:?}, hot {hot:?}"
                );
                assert!(support.len() <= 10, "support over {} of 500 pages", support.len());
                assert!((in_hot - 1.0).abs() < 1e-9, "mass in hot pages {in_hot}");
            }
        }
    }

    #[test]
    fn bad_layouts_are_typed_errors() {
        let l = layout(DType::F16, 32, 16, 1, 2, &[40, 20], 1);
        let gen = l.gen(1);
        let mut shared = l.block_table.clone();
        let mp = l.shape.max_pages as usize;
        shared[mp] = shared[0];
        assert!(matches!(
            gen.check(&l.spec, &l.shape, &l.seq_lens, &shared),
            Err(PeakedError::SharedPage {
                seq: 1,
                logical: 0,
                ..
            })
        ));
        let mut out = l.block_table.clone();
        out[1] = l.shape.num_pages as i32;
        assert!(matches!(
            gen.check(&l.spec, &l.shape, &l.seq_lens, &out),
            Err(PeakedError::Batch(BatchError::PageOutOfPool { .. }))
        ));
        assert!(gen.check(&l.spec, &l.shape, &[40], &l.block_table).is_err());
        assert!(gen.check(&l.spec, &l.shape, &l.seq_lens, &l.block_table).is_ok());
        // The twin refuses what it cannot describe instead of panicking.
        let q = l.q_first(0, 0);
        assert_eq!(
            gen.rows(&q[..5], 0, 0, 40, &[0]),
            Err(PeakedError::QueryLength { got: 5, need: 32 })
        );
        assert_eq!(
            gen.rows(&q, 0, 0, 40, &[3, 48]),
            Err(PeakedError::TokenOutOfRange {
                token: 48,
                max_tokens: 48
            })
        );
        assert_eq!(gen.rows(&q, 0, 0, 40, &[]), Ok(Vec::new()));
        assert_eq!(gen.rows(&q, 0, 0, 40, &[47]).unwrap().len(), 1);
    }
}
