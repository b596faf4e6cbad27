//! Float64 oracles of the top-k path: page metadata as `entkv_abi::paged` defines it, the box
//! bound of every scored page, the top-k selection with the kernels' tie rule, and softmax
//! attention over a selection.

use crate::data::Tensor;
use crate::paged_data::PagedInputs;
use entkv_abi::{PagedShape, PagedSpec};
use std::cmp::Ordering;

/// Host mirror of `select::radix_key`: the order-preserving u32 key of an f32 (NaN largest).
pub fn radix_key(x: f32) -> u32 {
    if x.is_nan() {
        return u32::MAX;
    }
    let b = x.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// Pages of a sequence of `len` tokens.
pub fn pages_of(spec: &PagedSpec, len: i32) -> usize {
    (len.max(0) as usize).div_ceil(spec.page_size as usize)
}

/// The smallest shape that holds `seq_lens` (each sequence its own pages, none spare): what the
/// selection checks run on.
pub fn selection_shape(spec: &PagedSpec, kv_heads: u32, seq_lens: &[i32]) -> PagedShape {
    let max_pages = seq_lens
        .iter()
        .map(|&l| pages_of(spec, l))
        .max()
        .unwrap_or(1)
        .max(1) as u32;
    PagedShape {
        batch: seq_lens.len() as u32,
        kv_heads,
        num_pages: max_pages * seq_lens.len() as u32,
        max_pages,
    }
}

/// `meta_bounds` `[num_pages, kv_heads, 2, d]` in the K dtype: per dimension the min (row 0) and
/// max (row 1) of every full page's keys (exact key values, so rounding to the K dtype is
/// exact). Last pages and pages no sequence owns hold NaN: the contract says they are never
/// read, and NaN makes any read show.
pub fn meta_bounds(spec: &PagedSpec, x: &PagedInputs) -> Tensor {
    let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
    let hkv = x.shape.kv_heads as usize;
    let mut m = vec![f64::NAN; x.shape.meta_elems(spec) as usize];
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let pages = pages_of(spec, len);
        for j in 0..pages.saturating_sub(1) {
            let phys = x.block_table[b * x.shape.max_pages as usize + j] as usize;
            for kvh in 0..hkv {
                let at = (phys * hkv + kvh) * 2 * d;
                for i in 0..d {
                    let vals = (j * p..(j + 1) * p).map(|t| x.key(spec, b, kvh, t)[i]);
                    m[at + i] = vals.clone().fold(f64::INFINITY, f64::min);
                    m[at + d + i] = vals.fold(f64::NEG_INFINITY, f64::max);
                }
            }
        }
    }
    Tensor::from_f64(spec.decode.kv_dtype, &m)
}

/// One scored page's bound and what its check needs.
#[derive(Clone, Copy, Debug)]
pub struct PageBound {
    /// `max_h [Σ_i max(q_i·min_i, q_i·max_i)/√d + slope_h·((j+1)·P − len)]`, exact.
    pub bound: f64,
    /// `max_h [Σ_i |q_i·b_i|/√d + |ALiBi term|]` over the bounds `b_i` the sign trick picks: the
    /// magnitude every rounding error of the f32 bound is relative to.
    pub scale: f64,
    /// The largest true score of the page's tokens over the group's heads.
    pub true_max: f64,
}

/// The bound of every scored page (`j < pages − 1`) of every (batch, kv head), indexed
/// `[b·kv_heads + kvh][j]`, from the metadata tensor (as the kernel reads it).
pub fn page_bounds(spec: &PagedSpec, x: &PagedInputs, meta: &Tensor) -> Vec<Vec<PageBound>> {
    let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
    let hkv = x.shape.kv_heads as usize;
    let group = spec.decode.group as usize;
    let inv_sqrt_d = 1.0 / (d as f64).sqrt();
    let mut out = Vec::new();
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let pages = pages_of(spec, len);
        for kvh in 0..hkv {
            let mut row = Vec::new();
            for j in 0..pages.saturating_sub(1) {
                let phys = x.block_table[b * x.shape.max_pages as usize + j] as usize;
                let at = (phys * hkv + kvh) * 2 * d;
                let (lo, hi) = (&meta.values[at..at + d], &meta.values[at + d..at + 2 * d]);
                let mut pb = PageBound {
                    bound: f64::NEG_INFINITY,
                    scale: 0.0,
                    true_max: f64::NEG_INFINITY,
                };
                for g in 0..group {
                    let h = kvh * group + g;
                    let q = query(spec, x, b, h);
                    let (mut u, mut a) = (0.0, 0.0);
                    for i in 0..d {
                        let t = (q[i] * lo[i]).max(q[i] * hi[i]);
                        u += t;
                        a += t.abs();
                    }
                    let bias = x.alibi(h, (j + 1) * p - 1, len as usize);
                    pb.bound = pb.bound.max(u * inv_sqrt_d + bias);
                    pb.scale = pb.scale.max(a * inv_sqrt_d + bias.abs());
                    for t in j * p..(j + 1) * p {
                        pb.true_max = pb.true_max.max(score(spec, x, b, h, t));
                    }
                }
                row.push(pb);
            }
            out.push(row);
        }
    }
    out
}

/// Query head `h` of sequence `b`.
pub fn query<'a>(spec: &PagedSpec, x: &'a PagedInputs, b: usize, h: usize) -> &'a [f64] {
    let d = spec.decode.head_dim as usize;
    let q_heads = x.shape.q_heads(spec) as usize;
    &x.q.values[(b * q_heads + h) * d..][..d]
}

/// The true score `q·k/√d + ALiBi` of token `t` for query head `h` of sequence `b`.
pub fn score(spec: &PagedSpec, x: &PagedInputs, b: usize, h: usize, t: usize) -> f64 {
    let q = query(spec, x, b, h);
    let kvh = h / spec.decode.group as usize;
    let k = x.key(spec, b, kvh, t);
    let dot: f64 = q.iter().zip(k).map(|(a, b)| a * b).sum();
    dot / (q.len() as f64).sqrt() + x.alibi(h, t, x.seq_lens[b] as usize)
}

/// The `min(max(budget, 0), n)` best of `n` items under `better` (a strict "ranks before"
/// order; ties must already be broken), returned ascending.
fn top_by(n: usize, budget: i64, better: impl Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let k = (budget.max(0) as usize).min(n);
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| better(a, b));
    let mut top = idx[..k].to_vec();
    top.sort_unstable();
    top
}

/// The kernel's selection rule on its own f32 scores: largest radix key first, ties to the
/// lower page index. Scored pages only; the caller appends the last page.
pub fn select_top_f32(scores: &[f32], budget: i64) -> Vec<usize> {
    top_by(scores.len(), budget, |a, b| {
        radix_key(scores[b]).cmp(&radix_key(scores[a])).then(a.cmp(&b))
    })
}

/// The same rule on exact bounds.
pub fn select_top_f64(bounds: &[f64], budget: i64) -> Vec<usize> {
    top_by(bounds.len(), budget, |a, b| {
        bounds[b].total_cmp(&bounds[a]).then(a.cmp(&b))
    })
}

/// Softmax attention of query head `h` of sequence `b` over the tokens of `pages` (logical
/// pages; the sequence's last page only up to its end), in float64. Also returns the largest
/// score magnitude `Σ_i |q_i·k_i|/√d + |ALiBi|` over the tokens (the scale of f32 score errors).
pub fn softmax_over_pages(
    spec: &PagedSpec,
    x: &PagedInputs,
    b: usize,
    h: usize,
    pages: &[usize],
) -> (Vec<f64>, f64) {
    let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
    let len = x.seq_lens[b] as usize;
    let kvh = h / spec.decode.group as usize;
    let q = query(spec, x, b, h);
    let tokens: Vec<usize> = pages
        .iter()
        .flat_map(|&j| j * p..((j + 1) * p).min(len))
        .collect();
    let mut mag = 0.0f64;
    for &t in &tokens {
        let k = x.key(spec, b, kvh, t);
        let a: f64 = q.iter().zip(k).map(|(a, b)| (a * b).abs()).sum();
        mag = mag.max(a / (d as f64).sqrt() + x.alibi(h, t, len).abs());
    }
    let keys: Vec<&[f64]> = tokens.iter().map(|&t| x.key(spec, b, kvh, t)).collect();
    let values: Vec<&[f64]> = tokens.iter().map(|&t| x.value(spec, b, kvh, t)).collect();
    let bias: Vec<f64> = tokens.iter().map(|&t| x.alibi(h, t, len)).collect();
    (crate::reference::attend_softmax(q, &keys, &values, &bias), mag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_preserve_the_float_order() {
        let xs = [
            f32::NEG_INFINITY,
            -3.3e38,
            -1.0,
            -1e-40,
            -0.0,
            0.0,
            1e-40,
            1.0,
            1.5,
            3.4e38,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(radix_key(w[0]) < radix_key(w[1]), "{} vs {}", w[0], w[1]);
        }
        assert_eq!(radix_key(f32::NAN), u32::MAX);
    }

    #[test]
    fn selection_breaks_ties_by_lower_index() {
        let s = [1.0f32, 3.0, 3.0, 2.0, 3.0];
        assert_eq!(select_top_f32(&s, 2), vec![1, 2]);
        assert_eq!(select_top_f32(&s, 4), vec![1, 2, 3, 4]);
        assert_eq!(select_top_f32(&s, -1), Vec::<usize>::new());
        assert_eq!(select_top_f32(&s, 99), vec![0, 1, 2, 3, 4]);
        let f = [1.0f64, 3.0, 3.0, 2.0, 3.0];
        assert_eq!(select_top_f64(&f, 3), vec![1, 2, 4]);
    }
}
