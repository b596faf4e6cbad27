//! Which tokens a decode step kept, read back from the buffers the step's kernels wrote — the
//! same reading on the GPU (workspace bytes) and in the interpreter (program buffers).
//!
//! - Top-k and Gaussian-aware: the selection (`sel_pages`, `sel_count`) per (sequence, KV
//!   head); every query head of the group keeps the selected pages' tokens.
//! - Certified-exact: the kernels keep per query head the candidates whose score upper bound
//!   clears a cut (`ub > cut`) and report only how many (`kept`). The candidates themselves stay
//!   in the workspace after the step (`select_certified` writes `cand_idx`, `cand_ub`,
//!   `cand_count` per (head, split) segment; `decode_certified` only reads them), and since the
//!   rule is a threshold on `ub`, the kept set is exactly the `kept` candidates with the largest
//!   `ub`. A tie across that boundary would contradict the rule and is reported as an error, so
//!   the set measured is the set the kernel used.

use entkv_abi::{KernelFamily, PagedSpec};
use entkv_runtime::engine::{BoundArg, Method, StepPlan};
use entkv_runtime::KernelArg;

use super::QualityError;
use crate::engine_bench::per_head_selection;

/// The batch's layout, as the step saw it.
#[derive(Clone, Copy, Debug)]
pub struct StepShape<'a> {
    pub spec: &'a PagedSpec,
    pub kv_heads: usize,
    pub max_pages: usize,
    pub seq_lens: &'a [i32],
}

impl StepShape<'_> {
    fn q_heads(&self) -> usize {
        self.kv_heads * self.spec.decode.group as usize
    }
}

/// A finished step's buffers by canonical name, widened to f64 (exact for i32 and f32).
pub type ReadBuffer<'a> = dyn Fn(&str) -> Result<Vec<f64>, QualityError> + 'a;

/// Kept-token flags per (sequence, query head), in `b·q_heads + h` order, one flag per token
/// of the sequence.
pub fn kept_tokens(
    plan: &StepPlan,
    shape: &StepShape,
    read: &ReadBuffer,
) -> Result<Vec<Vec<bool>>, QualityError> {
    match plan.method {
        Method::TopK { .. } | Method::Gaussian => selected_pages(plan.method, shape, read),
        Method::Certified => certified(plan, shape, read),
        m => Err(QualityError::Config(format!(
            "{} selects nothing to measure",
            m.name()
        ))),
    }
}

fn readback(method: Method, detail: String) -> QualityError {
    QualityError::Readback {
        method: method.name().to_string(),
        detail,
    }
}

fn ints(v: Vec<f64>) -> Vec<i32> {
    v.into_iter().map(|x| x as i32).collect()
}

/// Top-k and Gaussian: the selected pages of each KV head, checked (ascending, inside the
/// sequence, the last page last; top-k: exactly its budget), expanded to tokens for every query
/// head of the group.
fn selected_pages(
    method: Method,
    shape: &StepShape,
    read: &ReadBuffer,
) -> Result<Vec<Vec<bool>>, QualityError> {
    let per = per_head_selection(
        &ints(read("sel_pages")?),
        &ints(read("sel_count")?),
        shape.seq_lens,
        shape.spec.page_size as usize,
        shape.kv_heads,
        shape.max_pages,
    )
    .map_err(|e| readback(method, format!("{e:#}")))?;
    let p = shape.spec.page_size as usize;
    let group = shape.spec.decode.group as usize;
    let mut out = Vec::with_capacity(shape.seq_lens.len() * shape.q_heads());
    for (b, heads) in per.iter().enumerate() {
        let len = shape.seq_lens[b] as usize;
        let pages = len.div_ceil(p);
        for (kvh, row) in heads.iter().enumerate() {
            let bad = |why: &str| readback(method, format!("sequence {b}, KV head {kvh}: {why}: {row:?}"));
            if let Method::TopK { budget_pages } = method {
                let want = (budget_pages as usize).min(pages - 1) + 1;
                if row.len() != want {
                    return Err(bad(&format!("{} pages, the budget gives {want}", row.len())));
                }
            }
            let mut kept = vec![false; len];
            for &j in row {
                let j = j as usize;
                kept[j * p..((j + 1) * p).min(len)].fill(true);
            }
            for _ in 0..group {
                out.push(kept.clone());
            }
        }
    }
    Ok(out)
}

/// `splits` and `split_len` of the step's `decode_certified` launch: the two scalars after its
/// `kept` buffer (`entkv_abi::pipeline::decode_calls` spells the argument list out).
fn certified_split_plan(plan: &StepPlan) -> Result<(usize, usize), QualityError> {
    let bad = |why: &str| readback(Method::Certified, why.to_string());
    let call = plan
        .calls
        .iter()
        .find(|c| c.family == KernelFamily::DecodeCertified && c.entry.starts_with("decode_certified"))
        .ok_or_else(|| bad("the step has no decode_certified launch"))?;
    let at = call
        .args
        .iter()
        .position(|a| matches!(a, BoundArg::Region { name, .. } if name == "kept"))
        .ok_or_else(|| bad("decode_certified takes no `kept` buffer"))?;
    match (call.args.get(at + 1), call.args.get(at + 2)) {
        (Some(BoundArg::Scalar(KernelArg::I32(s))), Some(BoundArg::Scalar(KernelArg::I64(l))))
            if *s > 0 && *l > 0 =>
        {
            Ok((*s as usize, *l as usize))
        }
        other => Err(bad(&format!(
            "expected `splits` (i32) and `split_len` (i64) after `kept`, found {other:?}"
        ))),
    }
}

/// Certified-exact: each query head's kept set, rebuilt from its candidates (see the module
/// docs) and checked against the kernel's count.
fn certified(plan: &StepPlan, shape: &StepShape, read: &ReadBuffer) -> Result<Vec<Vec<bool>>, QualityError> {
    let (splits, split_len) = certified_split_plan(plan)?;
    let idx = ints(read("cand_idx")?);
    let ub = read("cand_ub")?;
    let count = ints(read("cand_count")?);
    let kept_count = ints(read("kept")?);
    let q_heads = shape.q_heads();
    let mut out = Vec::with_capacity(shape.seq_lens.len() * q_heads);
    for (b, &len) in shape.seq_lens.iter().enumerate() {
        let len = len as usize;
        for h in 0..q_heads {
            let head = b * q_heads + h;
            let bad = |why: String| readback(Method::Certified, format!("sequence {b}, head {h}: {why}"));
            let mut cands: Vec<(f64, usize)> = Vec::new();
            for s in 0..splits {
                let seg = head * splits + s;
                let n = *count
                    .get(seg)
                    .ok_or_else(|| bad(format!("no candidate count for segment {seg}")))?;
                if n < 0 || n as usize > split_len {
                    return Err(bad(format!("segment {s} holds {n} candidates of {split_len}")));
                }
                for e in seg * split_len..seg * split_len + n as usize {
                    let (t, u) = match (idx.get(e), ub.get(e)) {
                        (Some(&t), Some(&u)) => (t, u),
                        _ => return Err(bad(format!("candidate {e} is outside the workspace"))),
                    };
                    if t < 0 || t as usize >= len || u.is_nan() {
                        return Err(bad(format!("candidate token {t} (ub {u}) of {len}")));
                    }
                    cands.push((u, t as usize));
                }
            }
            let k = *kept_count.get(head).ok_or_else(|| bad("no kept count".into()))?;
            if k < 1 || k as usize > cands.len() {
                return Err(bad(format!("kept {k} of {} candidates", cands.len())));
            }
            let k = k as usize;
            cands.sort_by(|a, b| b.0.total_cmp(&a.0));
            if k < cands.len() && cands[k - 1].0 == cands[k].0 {
                return Err(bad(format!(
                    "kept {k} candidates but the upper bound {} is shared across that boundary",
                    cands[k].0
                )));
            }
            let mut kept = vec![false; len];
            for &(_, t) in &cands[..k] {
                if kept[t] {
                    return Err(bad(format!("token {t} is a candidate twice")));
                }
                kept[t] = true;
            }
            out.push(kept);
        }
    }
    Ok(out)
}
