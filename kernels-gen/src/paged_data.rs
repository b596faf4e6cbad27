//! Seeded paged-cache test problems (layout: `entkv_abi::paged`) and their float64 reference.
//!
//! Pages of every sequence are scattered over a pool larger than needed; pool pages no sequence
//! owns, and the slots past the end of every last page, hold NaN, so a kernel that reads a byte
//! it should not turns its output NaN and fails the check.

use crate::data::{normal, round_to, Tensor};
use crate::reference::{attend, DecodeReference};
use entkv_abi::seed::{is_seed_position, seed_samples};
use entkv_abi::{sketch_levels, sketch_step, PagedShape, PagedSpec};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// What the keys look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyData {
    /// q, K, V iid N(0, 1) (BENCH.md `paper`).
    Normal,
    /// BENCH.md `peaked`: keys coherent within a page (page centroid + noise 0.3), centroids
    /// drifting along the sequence (AR(1), ρ = 0.9), and a few pages (1 in 200, at least 2)
    /// whose centroid points along the group's first query, so page bounds are informative and
    /// the support sits in few pages.
    Peaked,
    /// Every key of a head is the same vector: all scores tie.
    Ties,
    /// One key per head points along q with a large norm: a support of one token.
    Dominant,
    /// Keys scaled by 300.
    Extreme,
    /// Keys scaled by 1e-35 (bf16 holds them; the certified pass's page weights fall below its
    /// quantization floor).
    Tiny,
    /// `Peaked` keys for KV head 0 of every sequence, `Normal` ones for the others: rows whose
    /// page bounds differ widely, so each (sequence, KV head) must be pruned with its own
    /// threshold bound.
    PeakedFirstHead,
    /// The key sketch's worst case: in every page, tokens 0 and 1 are −2 and +2 in every
    /// dimension (pinning the page's grid), and every other key lies just inside a code's cell on
    /// the side of the group's first query (`sign(q_i)`), near the grid's middle where the K
    /// dtype is finest. Their sketch errors add up to nearly `Σ|q'_i|·step/2`, the term the
    /// certified bounds must cover, so a bound even a few percent too tight fails the checks.
    /// On a per-token grid (4-bit) the two dimensions of smallest `|q_i|` pin each token's own
    /// grid at ±2 instead, and the codes also line up with the rounding of the integer query
    /// weights (`q_i·M/max|q|`, `M` the certified pass's largest integer weight, above its nearest
    /// integer: a high code, else a low one).
    SketchWorst,
    /// The page box's worst case: in every page, token 0 sits at the box corner that attains
    /// the upper bound for the group's first query head (`max_i` where `q_i ≥ 0`, else `min_i`)
    /// and token 1 at the one attaining the lower bound; every other key lies inside
    /// (−0.9, 0.9). The two dimensions of smallest `|q_i|` pin the page box sketch's grids at
    /// [1, 2] (max row) and [−2, −1] (min row); elsewhere the corners sit on grid lines (codes
    /// 0, 15, or 14 of the min row: its top line lies above −1), so the sketch is nearly exact.
    /// The corners alternate between KV heads so that in each bound exactly one of the four
    /// integer query weights meets a high code: a code rounded inward or a weight rounded the
    /// wrong way shows as a token scoring outside its page's bounds.
    BoxCorner,
    /// A decoy for the seeded certified pass (`entkv_abi::seed`): the tokens its samples read
    /// (`is_seed_position`) point along the group's first query (norm 4, z ≈ 4(α−1)), and the
    /// token after each run a little less (3.8): the samples over-represent high scores, so the
    /// estimate passes τ, the first pass drops support (the 3.8s), and only the repair gets
    /// the output right. Everything else is iid N(0, 1).
    SeedDecoy,
}

#[derive(Clone, Debug)]
pub struct PagedCase {
    pub spec: PagedSpec,
    pub kv_heads: u32,
    /// Tokens per sequence (the batch size is its length).
    pub seq_lens: Vec<u32>,
    pub seed: u64,
    pub data: KeyData,
    /// Pool pages beyond those the batch uses (unowned, NaN-filled).
    pub spare_pages: u32,
}

/// A paged cache and a batch of queries, as the GPU holds them, with exact f64 values.
#[derive(Clone, Debug)]
pub struct PagedInputs {
    pub shape: PagedShape,
    /// `[batch, q_heads, d]`.
    pub q: Tensor,
    /// `[num_pages, kv_heads, page_size, d]`.
    pub k_pool: Tensor,
    pub v_pool: Tensor,
    /// `[batch, max_pages]`, −1 past each sequence's last page.
    pub block_table: Vec<i32>,
    pub seq_lens: Vec<i32>,
    /// `[q_heads]`, empty without ALiBi.
    pub alibi_slopes: Vec<f32>,
}

impl PagedCase {
    /// A case with three unowned, NaN-filled pages in the pool (what the suites use).
    pub fn new(spec: PagedSpec, kv_heads: u32, seq_lens: &[u32], data: KeyData, seed: u64) -> PagedCase {
        PagedCase {
            spec,
            kv_heads,
            seq_lens: seq_lens.to_vec(),
            seed,
            data,
            spare_pages: 3,
        }
    }

    pub fn batch(&self) -> u32 {
        self.seq_lens.len() as u32
    }

    pub fn q_heads(&self) -> u32 {
        self.kv_heads * self.spec.decode.group
    }

    pub fn inputs(&self) -> PagedInputs {
        let spec = &self.spec;
        let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
        let hkv = self.kv_heads as usize;
        let group = spec.decode.group as usize;
        let pages_of = |len: u32| (len as usize).div_ceil(p);
        let max_pages = self
            .seq_lens
            .iter()
            .map(|&l| pages_of(l))
            .max()
            .unwrap_or(1)
            .max(1);
        let used: usize = self.seq_lens.iter().map(|&l| pages_of(l)).sum();
        let num_pages = used + self.spare_pages as usize;
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed ^ 0x9a9e);
        let mut perm: Vec<i32> = (0..num_pages as i32).collect();
        perm.shuffle(&mut rng);
        let mut block_table = vec![-1; self.seq_lens.len() * max_pages];
        let mut next = 0;
        for (b, &len) in self.seq_lens.iter().enumerate() {
            for j in 0..pages_of(len) {
                block_table[b * max_pages + j] = perm[next];
                next += 1;
            }
        }
        let q_heads = hkv * group;
        // The seeded pass samples every head as the step's longest (`max_pages` pages).
        let samples = seed_samples((max_pages * p) as u64);
        let q_raw = normal(self.seed, self.seq_lens.len() * q_heads * d);
        let pool_elems = num_pages * hkv * p * d;
        let mut k = vec![f64::NAN; pool_elems];
        let mut v = vec![f64::NAN; pool_elems];
        for (b, &len) in self.seq_lens.iter().enumerate() {
            let len = len as usize;
            for kvh in 0..hkv {
                let seed = self.seed ^ ((b * 1000 + kvh) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let qg = &q_raw[(b * q_heads + kvh * group) * d..][..d];
                let data = match self.data {
                    KeyData::PeakedFirstHead if kvh == 0 => KeyData::Peaked,
                    KeyData::PeakedFirstHead => KeyData::Normal,
                    other => other,
                };
                let keys = self.keys(data, seed, len, qg, samples);
                let vals = normal(seed ^ 0x5555, len * d);
                for t in 0..len {
                    let page = block_table[b * max_pages + t / p] as usize;
                    let at = ((page * hkv + kvh) * p + t % p) * d;
                    k[at..at + d].copy_from_slice(&keys[t * d..][..d]);
                    v[at..at + d].copy_from_slice(&vals[t * d..][..d]);
                }
            }
        }
        let alibi_slopes = if spec.alibi {
            (1..=q_heads)
                .map(|i| (-8.0 * i as f64 / q_heads as f64).exp2() as f32)
                .collect()
        } else {
            Vec::new()
        };
        PagedInputs {
            shape: PagedShape {
                batch: self.batch(),
                kv_heads: self.kv_heads,
                num_pages: num_pages as u32,
                max_pages: max_pages as u32,
            },
            q: Tensor::from_f64(spec.decode.q_dtype, &q_raw),
            k_pool: Tensor::from_f64(spec.decode.kv_dtype, &k),
            v_pool: Tensor::from_f64(spec.decode.kv_dtype, &v),
            block_table,
            seq_lens: self.seq_lens.iter().map(|&l| l as i32).collect(),
            alibi_slopes,
        }
    }

    /// Keys of one (sequence, KV head), `[len, d]` in logical order.
    /// `samples`: the seeded pass's samples a head (`entkv_abi::seed::seed_samples` of the
    /// step's longest sequence), which place [`KeyData::SeedDecoy`]'s decoys.
    fn keys(&self, data: KeyData, seed: u64, len: usize, q: &[f64], samples: u64) -> Vec<f64> {
        let d = self.spec.decode.head_dim as usize;
        let p = self.spec.page_size as usize;
        let mut k = normal(seed ^ 0xaaaa, len * d);
        match data {
            KeyData::Normal | KeyData::PeakedFirstHead => {}
            KeyData::Ties => {
                let first: Vec<f64> = k[..d].to_vec();
                for row in k.chunks_mut(d) {
                    row.copy_from_slice(&first);
                }
            }
            KeyData::Dominant => {
                let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
                let t = len / 2;
                for (x, qx) in k[t * d..][..d].iter_mut().zip(q) {
                    *x = 12.0 * qx / norm * (d as f64).sqrt();
                }
            }
            KeyData::SeedDecoy => {
                let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
                let sampled = |t: usize| is_seed_position(t as u64, samples);
                for t in 0..len {
                    let scale = if sampled(t) {
                        4.0
                    } else if t > 0 && sampled(t - 1) {
                        3.8
                    } else {
                        continue;
                    };
                    for (x, qx) in k[t * d..][..d].iter_mut().zip(q) {
                        *x = scale * qx / norm;
                    }
                }
            }
            KeyData::Extreme => k.iter_mut().for_each(|x| *x *= 300.0),
            KeyData::Tiny => k.iter_mut().for_each(|x| *x *= 1e-35),
            KeyData::SketchWorst => {
                const R: f64 = 2.0;
                let bits = self.spec.sketch_bits;
                let dtype = self.spec.decode.kv_dtype;
                let step = sketch_step(bits, -R as f32, R as f32) as f64;
                let mid = (sketch_levels(bits) / 2) as i64;
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
                if self.spec.sketch_token_grid() {
                    let levels = sketch_levels(bits) as i64;
                    let qmax = q.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                    let rounds_down: Vec<bool> = q
                        .iter()
                        .map(|x| {
                            let y = x / qmax * crate::certified::WEIGHT_MAX;
                            y > y.round()
                        })
                        .collect();
                    let mut by_size: Vec<usize> = (0..d).collect();
                    by_size.sort_by(|a, b| q[*a].abs().total_cmp(&q[*b].abs()));
                    let (lo_dim, hi_dim) = (by_size[0], by_size[1]);
                    for t in 0..len {
                        for i in 0..d {
                            k[t * d + i] = if i == lo_dim {
                                -R
                            } else if i == hi_dim {
                                R
                            } else {
                                let u = rng.gen_range(0i64..=1);
                                let code = if rounds_down[i] { levels - 1 - u } else { 1 + u };
                                let side = if q[i] >= 0.0 { 1.0 } else { -1.0 };
                                let half = -R + (code as f64 + 0.5 * side) * step;
                                inside_cell(dtype, half, -side)
                            };
                        }
                    }
                    return k;
                }
                for t in 0..len {
                    for i in 0..d {
                        k[t * d + i] = match t % p {
                            0 => -R,
                            1 => R,
                            _ => {
                                let code = mid + rng.gen_range(-4i64..=4);
                                let side = if q[i] >= 0.0 { 1.0 } else { -1.0 };
                                let half = -R + (code as f64 + 0.5 * side) * step;
                                inside_cell(dtype, half, -side)
                            }
                        };
                    }
                }
            }
            KeyData::BoxCorner => {
                let step = sketch_step(entkv_abi::BOX_BITS, -2.0, -1.0) as f64;
                // Just above the min row's line 14 (code 14 exactly, rounded down).
                let high_min = inside_cell(self.spec.decode.kv_dtype, -2.0 + 14.0 * step, 1.0);
                let mut by_size: Vec<usize> = (0..d).collect();
                by_size.sort_by(|a, b| q[*a].abs().total_cmp(&q[*b].abs()));
                // (max_i, min_i) of every dimension: the pins, then this head's corners (the
                // seed's parity is the KV head's, `inputs`).
                let bounds = |i: usize| -> (f64, f64) {
                    match (i == by_size[0], i == by_size[1], seed % 2 == 0) {
                        (true, _, _) => (1.0, -2.0),
                        (_, true, _) => (2.0, -1.0),
                        (_, _, true) => (
                            if q[i] >= 0.0 { 2.0 } else { 1.0 },
                            if q[i] >= 0.0 { high_min } else { -2.0 },
                        ),
                        (_, _, false) => (
                            if q[i] >= 0.0 { 1.0 } else { 2.0 },
                            if q[i] >= 0.0 { -2.0 } else { high_min },
                        ),
                    }
                };
                // Token 0's and token 1's value of every dimension: the corners attaining the
                // upper and the lower bound.
                let corners: Vec<(f64, f64)> = (0..d)
                    .map(|i| {
                        let (hi, lo) = bounds(i);
                        if q[i] >= 0.0 {
                            (hi, lo)
                        } else {
                            (lo, hi)
                        }
                    })
                    .collect();
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xb0c5);
                for t in 0..len {
                    for (i, &(upper, lower)) in corners.iter().enumerate() {
                        k[t * d + i] = match t % p {
                            0 => upper,
                            1 => lower,
                            _ => rng.gen_range(-0.9..0.9),
                        };
                    }
                }
            }
            KeyData::Peaked => {
                let pages = len.div_ceil(p);
                let walk = normal(seed ^ 0x7777, pages * d);
                let norm = q.iter().map(|x| x * x).sum::<f64>().sqrt();
                let hot = (pages / 200).max(2).min(pages);
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x4242);
                let mut order: Vec<usize> = (0..pages).collect();
                order.shuffle(&mut rng);
                let hot: Vec<usize> = order[..hot].to_vec();
                let (rho, noise) = (0.9f64, 0.3f64);
                let mut c = walk[..d].to_vec();
                for j in 0..pages {
                    if j > 0 {
                        for (ci, w) in c.iter_mut().zip(&walk[j * d..][..d]) {
                            *ci = rho * *ci + (1.0 - rho * rho).sqrt() * w;
                        }
                    }
                    let centroid: Vec<f64> = if hot.contains(&j) {
                        q.iter().map(|x| 2.5 * x / norm * (d as f64).sqrt()).collect()
                    } else {
                        c.clone()
                    };
                    for t in j * p..((j + 1) * p).min(len) {
                        for i in 0..d {
                            k[t * d + i] = centroid[i] + noise * k[t * d + i];
                        }
                    }
                }
            }
        }
        k
    }
}

/// The K-dtype value nearest `half` (a cell boundary of the sketch grid) strictly on the side
/// `dir` (±1) of it, so the encoder's rounding cannot take it across.
fn inside_cell(dtype: entkv_abi::DType, half: f64, dir: f64) -> f64 {
    let ulp = crate::page_meta::dtype_ulp(dtype, half);
    (0..8)
        .map(|j| round_to(dtype, half + dir * ulp * 0.25 * j as f64).1)
        .find(|&x| (x - half) * dir > 0.0)
        .expect("a representable value within two ulps")
}

impl PagedInputs {
    fn row<'a>(&self, pool: &'a Tensor, spec: &PagedSpec, b: usize, kvh: usize, t: usize) -> &'a [f64] {
        let d = spec.decode.head_dim as usize;
        let at = self.shape.row_offset(spec, &self.block_table, b, kvh, t) as usize;
        &pool.values[at..at + d]
    }
    pub fn key(&self, spec: &PagedSpec, b: usize, kvh: usize, t: usize) -> &[f64] {
        self.row(&self.k_pool, spec, b, kvh, t)
    }
    pub fn value(&self, spec: &PagedSpec, b: usize, kvh: usize, t: usize) -> &[f64] {
        self.row(&self.v_pool, spec, b, kvh, t)
    }
    /// ALiBi term (score units) of token `t` for query head `h` of a sequence of `len` tokens.
    pub fn alibi(&self, h: usize, t: usize, len: usize) -> f64 {
        self.alibi_slopes
            .get(h)
            .map_or(0.0, |&s| s as f64 * (t as f64 - (len as f64 - 1.0)))
    }
}

/// Full-cache entmax attention of every (sequence, query head) over the paged cache.
pub fn paged_reference(spec: &PagedSpec, x: &PagedInputs) -> DecodeReference {
    let d = spec.decode.head_dim as usize;
    let group = spec.decode.group as usize;
    let q_heads = x.shape.kv_heads as usize * group;
    let mut heads = Vec::new();
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let len = len as usize;
        for h in 0..q_heads {
            let kvh = h / group;
            let keys: Vec<&[f64]> = (0..len).map(|t| x.key(spec, b, kvh, t)).collect();
            let values: Vec<&[f64]> = (0..len).map(|t| x.value(spec, b, kvh, t)).collect();
            let bias: Vec<f64> = if x.alibi_slopes.is_empty() {
                Vec::new()
            } else {
                (0..len).map(|t| x.alibi(h, t, len)).collect()
            };
            let q = &x.q.values[(b * q_heads + h) * d..][..d];
            heads.push(attend(q, &keys, &values, &bias, spec.decode.alpha));
        }
    }
    DecodeReference { heads }
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::{check_batch, DType, DecodeSpec};

    fn case(data: KeyData) -> PagedCase {
        let decode = DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap();
        PagedCase {
            spec: PagedSpec::new(decode, 16, true, 4).unwrap(),
            kv_heads: 2,
            seq_lens: vec![1, 16, 37, 100],
            seed: 3,
            data,
            spare_pages: 5,
        }
    }

    #[test]
    fn layout_is_valid_and_unowned_memory_is_nan() {
        let c = case(KeyData::Normal);
        let x = c.inputs();
        assert_eq!(
            check_batch(&c.spec, &x.shape, &x.seq_lens, &x.block_table).unwrap(),
            100
        );
        assert_eq!(x.shape.num_pages, 1 + 1 + 3 + 7 + 5);
        // Every owned token is finite, every other pool element NaN.
        let finite = x.k_pool.values.iter().filter(|v| v.is_finite()).count();
        let tokens: u32 = c.seq_lens.iter().sum();
        assert_eq!(finite, tokens as usize * 2 * 32);
        assert_eq!(x.alibi_slopes.len(), 4);
        let r = paged_reference(&c.spec, &x);
        assert_eq!(r.heads.len(), 4 * 4);
        for h in &r.heads {
            assert!(h.out.iter().all(|v| v.is_finite()) && h.support >= 1);
        }
    }

    #[test]
    fn peaked_keys_concentrate_the_support() {
        let mut c = case(KeyData::Peaked);
        c.seq_lens = vec![4000];
        c.spec.alibi = false;
        let x = c.inputs();
        let r = paged_reference(&c.spec, &x);
        // The support of the group's first head lies in few pages.
        let h = &r.heads[0];
        let pages: std::collections::BTreeSet<usize> =
            h.z.iter()
                .enumerate()
                .filter(|(_, &z)| z > h.tau)
                .map(|(t, _)| t / 16)
                .collect();
        assert!(pages.len() <= 4, "support spread over {} pages", pages.len());
    }
}
