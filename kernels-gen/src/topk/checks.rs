//! The top-k path's [`KernelCheck`]s. Each runs unchanged in the interpreter (CI) and on the GPU.
//!
//! - [`PipelineCheck`]: one `Program` running box scoring → top-k selection → softmax decode
//!   (score + finish) over a seeded paged cache (`PagedCase`: scattered pages, NaN in all pool
//!   memory no sequence owns). The metadata is the float64 reference written host-side (the
//!   metadata kernel is someone else's), with NaN in last pages, which must never be read.
//! - [`SelectCheck`]: `select_topk` alone on host-made scores (ties, signed zeros, infinities,
//!   more than 65536 pages).
//!
//! Tolerances (f32 against float64 on identical, already-rounded inputs; `u = 2⁻²⁴`):
//! - Box bound: the f32 bound is `d` FMAs, `log₂(lanes)` shuffle adds, the 1/√d scaling of q and
//!   one ALiBi FMA, each rounding adding at most `u` times a partial sum bounded by
//!   `A = Σ_i |q_i·b_i|/√d + |ALiBi|` (the page's `scale`). So `|U₃₂ − U| ≤ γ·A` with
//!   `γ = (d + 8)·u` is rigorous, and the check requires exactly that. Rigour of the bound: every
//!   token's true score must satisfy `s ≤ U₃₂ + γ·A` (the exact `U` is ≥ every score, so only
//!   rounding can take the f32 bound below one).
//! - Selection: identical, page for page, to the same rule (largest key, lower index on ties)
//!   applied to the f32 scores the kernel read, which is exact integer work. Against the
//!   float64 bounds, pages may differ only where both bounds are within their `γ·A` of the k-th
//!   bound (reported as `band` differences).
//! - Softmax decode: each weight `2^(s₂−m)` carries the score's rounding, `|δs| ≲ √d·u·A` for
//!   a typical dot (random rounding) and ≤ `d·u·A` at worst, plus `ex2.approx`'s 2 ulp on the
//!   GPU. The output `Σ p_j v_j` then moves by `Σ p_j ε_j (v_j − o)`: for independent `ε_j` its
//!   norm relative to `‖o‖` is about `max |ε_j|`, a few 1e-7 at unit scale. We require
//!   `‖o − o_ref‖/‖o_ref‖ ≤ 1e-5·max(1, A_max/16)`, where `A_max` is the largest score magnitude
//!   of the attended tokens (score errors are relative to it: the `Extreme` data reach ~300).
//!   The reference attends the selection the kernel produced, so the decode is checked on its
//!   own input; the selection is checked above.
//! - Every output must be finite; the poisoned workspace and NaN pool slots make any stray read
//!   or missing write fail.

use super::reference::{
    meta_bounds, page_bounds, pages_of, select_top_f32, select_top_f64, selection_shape, softmax_over_pages,
    PageBound,
};
use super::{score, select, softmax};
use crate::check::nan_as_inf;
use crate::paged_data::{KeyData, PagedCase, PagedInputs};
use crate::program::{ArgRef, Program};
use crate::suite::{KernelCheck, Outcome, SuiteError};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{
    check_batch, page_score_box_geometry, page_scores_elems, select_topk_geometry,
    softmax_topk_finish_geometry, softmax_topk_plan, softmax_topk_score_geometry, softmax_topk_workspace,
    BoxScoreTile, DType, DecodeSpec, PagedShape, PagedSpec, SelectTopkTile, SoftmaxTopkPlan, SoftmaxTopkTile,
};
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::Scalar;
use rand::{Rng, SeedableRng};
use std::rc::Rc;

/// Relative output error allowed for the softmax decode at unit score scale.
pub const OUT_REL_TOL: f64 = 1e-5;
/// Rounding steps of the f32 box bound beyond the `d` FMAs (see the module docs).
const BOUND_EXTRA_ROUNDINGS: f64 = 8.0;

fn spec_err(e: entkv_abi::SpecError) -> SuiteError {
    SuiteError::Gen(KernelGenError::from(e))
}

/// The whole top-k pipeline over one seeded paged cache.
#[derive(Clone, Debug)]
pub struct PipelineCheck {
    pub label: &'static str,
    pub case: PagedCase,
    pub budget_pages: i32,
    pub box_tile: BoxScoreTile,
    pub select_tile: SelectTopkTile,
    pub softmax_tile: SoftmaxTopkTile,
    /// SMs the split plan assumes (small in tests to get several splits and chunks).
    pub sm_count: u32,
}

impl PipelineCheck {
    pub fn new(label: &'static str, case: PagedCase, budget_pages: i32) -> PipelineCheck {
        let spec = case.spec;
        PipelineCheck {
            label,
            case,
            budget_pages,
            box_tile: BoxScoreTile::default_for(&spec),
            select_tile: SelectTopkTile::default_for(&spec),
            softmax_tile: SoftmaxTopkTile::default_for(&spec),
            sm_count: 2,
        }
    }

    fn plan(&self, shape: &PagedShape) -> Result<SoftmaxTopkPlan, SuiteError> {
        softmax_topk_plan(
            &self.case.spec,
            &self.softmax_tile,
            shape,
            self.budget_pages,
            self.sm_count,
        )
        .map_err(spec_err)
    }
}

/// Host buffer of a rounded tensor (its values are exact in the storage type).
fn host(t: &crate::data::Tensor) -> HostBuffer {
    HostBuffer::from_f64_as(scalar_of(t.dtype), &t.values)
}

impl KernelCheck for PipelineCheck {
    fn name(&self) -> String {
        format!(
            "topk_pipeline/{}/{}/kv{}/lens{:?}/budget{}/{:?}/seed{}/{}/{}/{}",
            self.label,
            self.case.spec.tag(),
            self.case.kv_heads,
            self.case.seq_lens,
            self.budget_pages,
            self.case.data,
            self.case.seed,
            self.box_tile.tag(),
            self.select_tile.tag(),
            self.softmax_tile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let spec = &self.case.spec;
        let x = self.case.inputs();
        let shape = x.shape;
        check_batch(spec, &shape, &x.seq_lens, &x.block_table).map_err(|e| spec_err(e.into()))?;
        let plan = self.plan(&shape)?;
        let ws = softmax_topk_workspace(spec, &shape, &plan);
        let box_k = Rc::new(score::box_kernel(spec, &self.box_tile)?);
        let sel_k = Rc::new(select::select_kernel(spec, &self.select_tile)?);
        let att_k = Rc::new(softmax::score_kernel(spec, &self.softmax_tile)?);
        let fin_k = Rc::new(softmax::finish_kernel(spec, &self.softmax_tile)?);
        let heads = shape.batch as usize * shape.q_heads(spec) as usize;
        let d = spec.decode.head_dim as usize;

        let mut p = Program::new();
        p.buffer("q", host(&x.q))
            .buffer("k_pool", host(&x.k_pool))
            .buffer("v_pool", host(&x.v_pool))
            .buffer("meta_bounds", host(&meta_bounds(spec, &x)))
            .buffer("block_table", HostBuffer::I32(x.block_table.clone()))
            .buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()))
            .poisoned("page_scores", Scalar::F32, page_scores_elems(&shape) as usize)
            .poisoned("sel_pages", Scalar::I32, shape.selection_elems() as usize)
            .poisoned("sel_count", Scalar::I32, (shape.batch * shape.kv_heads) as usize)
            .poisoned("part_ml", Scalar::F32, ws.ml_elems as usize)
            .poisoned("part_acc", Scalar::F32, ws.acc_elems as usize)
            .poisoned("out", scalar_of(spec.decode.out_dtype), heads * d);
        let alibi = spec.alibi.then(|| {
            p.buffer("alibi_slopes", HostBuffer::F32(x.alibi_slopes.clone()));
            ArgRef::buf("alibi_slopes")
        });
        let bufs = |names: &[&str]| -> Vec<ArgRef> { names.iter().map(|n| ArgRef::buf(n)).collect() };
        let mp = ArgRef::I32(shape.max_pages as i32);

        let mut args = bufs(&["q", "meta_bounds", "block_table", "seq_lens"]);
        args.extend(alibi.clone());
        args.extend([ArgRef::buf("page_scores"), mp.clone()]);
        p.call(box_k, page_score_box_geometry(spec, &self.box_tile, &shape), args);

        let mut args = bufs(&["page_scores", "seq_lens", "sel_pages", "sel_count"]);
        args.extend([mp.clone(), ArgRef::I32(self.budget_pages)]);
        p.call(sel_k, select_topk_geometry(&self.select_tile, &shape), args);

        let mut args = bufs(&[
            "q",
            "k_pool",
            "v_pool",
            "block_table",
            "seq_lens",
            "sel_pages",
            "sel_count",
        ]);
        args.extend(alibi);
        args.extend([
            ArgRef::buf("part_ml"),
            ArgRef::buf("part_acc"),
            mp,
            ArgRef::I32(plan.chunks_per_split as i32),
        ]);
        p.call(
            att_k,
            softmax_topk_score_geometry(&self.softmax_tile, &shape, &plan),
            args,
        );

        let mut args = bufs(&["part_ml", "part_acc", "sel_count", "seq_lens", "out"]);
        args.extend([
            ArgRef::I32(plan.splits as i32),
            ArgRef::I32(plan.split_len as i32),
        ]);
        p.call(
            fin_k,
            softmax_topk_finish_geometry(spec, &self.softmax_tile, &shape),
            args,
        );
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let spec = &self.case.spec;
        let x = self.case.inputs();
        let meta = meta_bounds(spec, &x);
        let bounds = page_bounds(spec, &x, &meta);
        let scores: Vec<f32> = ran
            .get("page_scores")
            .to_f64_vec()
            .iter()
            .map(|&v| v as f32)
            .collect();
        let box_res = verify_bounds(spec, &x, &bounds, &scores);
        let sel_res = verify_selection(
            spec,
            &x.shape,
            &x.seq_lens,
            &scores,
            Some(&bounds),
            self.budget_pages,
            ran,
        );
        let dec_res = match &sel_res.selections {
            Some(sel) => verify_decode(spec, &x, sel, ran),
            None => StageResult::fail("decode not checked: the selection is malformed".into()),
        };
        let passed = box_res.passed && sel_res.stage.passed && dec_res.passed;
        let plan = match self.plan(&x.shape) {
            Ok(p) => format!("{} splits × {} chunks", p.splits, p.chunks_per_split),
            Err(e) => format!("no plan ({e})"),
        };
        Outcome::new(
            passed,
            format!(
                "box: {}; select: {}; decode ({plan}): {}",
                box_res.detail, sel_res.stage.detail, dec_res.detail
            ),
        )
    }
}

struct StageResult {
    passed: bool,
    detail: String,
}

impl StageResult {
    fn fail(detail: String) -> StageResult {
        StageResult {
            passed: false,
            detail,
        }
    }
}

/// Box bounds: finite, within `γ·A` of the exact bound, and above every token's true score but
/// for that rounding.
fn verify_bounds(
    spec: &PagedSpec,
    x: &PagedInputs,
    bounds: &[Vec<PageBound>],
    scores: &[f32],
) -> StageResult {
    let gamma = (spec.decode.head_dim as f64 + BOUND_EXTRA_ROUNDINGS) * f64::powi(2.0, -24);
    let mp = x.shape.max_pages as usize;
    let (mut worst_err, mut worst_rigour, mut bad, mut pages) = (0.0f64, f64::NEG_INFINITY, 0usize, 0usize);
    for (row, pbs) in bounds.iter().enumerate() {
        for (j, pb) in pbs.iter().enumerate() {
            pages += 1;
            let got = scores[row * mp + j] as f64;
            let tol = (gamma * pb.scale).max(f64::MIN_POSITIVE);
            // NaN (a stray read of poisoned metadata) counts as infinitely wrong.
            let err = nan_as_inf((got - pb.bound).abs() / tol);
            // > 0 when a true score lies above the f32 bound (allowed up to the rounding).
            let rigour = nan_as_inf((pb.true_max - got) / tol);
            worst_err = worst_err.max(err);
            worst_rigour = worst_rigour.max(rigour);
            if !got.is_finite() || err > 1.0 || rigour > 1.0 {
                bad += 1;
            }
        }
    }
    StageResult {
        passed: bad == 0,
        detail: format!(
            "{pages} pages, max |U32−U|/(γA) {worst_err:.3}, max (s_true−U32)/(γA) {worst_rigour:.3}, {bad} bad"
        ),
    }
}

struct SelectionResult {
    stage: StageResult,
    /// Per (batch, kv head) the kernel's selection (logical pages), when well formed.
    selections: Option<Vec<Vec<usize>>>,
}

/// The selection: well formed (count, ascending, the last page last), identical to the kernel's
/// rule applied to its own f32 scores, and (with exact bounds) different from the float64
/// selection only inside the rounding band of the k-th bound.
fn verify_selection(
    spec: &PagedSpec,
    shape: &PagedShape,
    seq_lens: &[i32],
    scores: &[f32],
    bounds: Option<&[Vec<PageBound>]>,
    budget: i32,
    ran: &Program,
) -> SelectionResult {
    let gamma = (spec.decode.head_dim as f64 + BOUND_EXTRA_ROUNDINGS) * f64::powi(2.0, -24);
    let mp = shape.max_pages as usize;
    let hkv = shape.kv_heads as usize;
    let sel_pages: Vec<i64> = ran
        .get("sel_pages")
        .to_f64_vec()
        .iter()
        .map(|&v| v as i64)
        .collect();
    let sel_count: Vec<i64> = ran
        .get("sel_count")
        .to_f64_vec()
        .iter()
        .map(|&v| v as i64)
        .collect();
    let (mut malformed, mut mismatched, mut band_diffs, mut out_of_band) = (0, 0, 0, 0);
    let mut selections = Vec::new();
    let mut kept = 0usize;
    for (b, &len) in seq_lens.iter().enumerate() {
        let n = pages_of(spec, len).saturating_sub(1);
        for kvh in 0..hkv {
            let row = b * hkv + kvh;
            let want = select_top_f32(&scores[row * mp..row * mp + n], budget as i64);
            let count = sel_count[row];
            let ok_count = count == want.len() as i64 + 1;
            let got: Vec<i64> = if ok_count {
                sel_pages[row * mp..row * mp + count as usize].to_vec()
            } else {
                Vec::new()
            };
            let well_formed = ok_count && entkv_abi::check_selection_row(&got, n + 1).is_ok();
            if !well_formed {
                malformed += 1;
                selections.push(Vec::new());
                continue;
            }
            let got: Vec<usize> = got.iter().map(|&j| j as usize).collect();
            kept += got.len() - 1;
            if got[..got.len() - 1] != want[..] {
                mismatched += 1;
            }
            if let Some(bounds) = bounds {
                let exact: Vec<f64> = bounds[row].iter().map(|pb| pb.bound).collect();
                let reference = select_top_f64(&exact, budget as i64);
                if let Some(kth) = kth_page(&exact, budget as i64) {
                    let theta = &bounds[row][kth];
                    for j in symmetric_difference(&got[..got.len() - 1], &reference) {
                        band_diffs += 1;
                        let pb = &bounds[row][j];
                        if (pb.bound - theta.bound).abs() > gamma * (pb.scale + theta.scale) {
                            out_of_band += 1;
                        }
                    }
                }
            }
            selections.push(got);
        }
    }
    let passed = malformed == 0 && mismatched == 0 && out_of_band == 0;
    SelectionResult {
        stage: StageResult {
            passed,
            detail: format!(
                "{} heads, {kept} pages kept, {malformed} malformed, {mismatched} differ from the f32 rule, \
                 {band_diffs} f64 differences ({out_of_band} outside the band)",
                seq_lens.len() * hkv
            ),
        },
        selections: (malformed == 0).then_some(selections),
    }
}

/// The page holding the k-th largest exact bound (ties to the lower index), if k ≥ 1.
fn kth_page(bounds: &[f64], budget: i64) -> Option<usize> {
    let k = (budget.max(0) as usize).min(bounds.len());
    if k == 0 {
        return None;
    }
    let mut idx: Vec<usize> = (0..bounds.len()).collect();
    idx.sort_by(|&a, &b| bounds[b].total_cmp(&bounds[a]).then(a.cmp(&b)));
    Some(idx[k - 1])
}

fn symmetric_difference(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut d: Vec<usize> = a.iter().filter(|j| !b.contains(j)).copied().collect();
    d.extend(b.iter().filter(|j| !a.contains(j)));
    d
}

/// Softmax decode against float64 attention over the kernel's own selection.
fn verify_decode(spec: &PagedSpec, x: &PagedInputs, selections: &[Vec<usize>], ran: &Program) -> StageResult {
    let d = spec.decode.head_dim as usize;
    let group = spec.decode.group as usize;
    let q_heads = x.shape.q_heads(spec) as usize;
    let out = ran.get("out").to_f64_vec();
    let (mut worst, mut bad, mut non_finite) = (0.0f64, 0usize, 0usize);
    for b in 0..x.seq_lens.len() {
        for h in 0..q_heads {
            let sel = &selections[b * x.shape.kv_heads as usize + h / group];
            let (want, mag) = softmax_over_pages(spec, x, b, h, sel);
            let got = &out[(b * q_heads + h) * d..][..d];
            non_finite += got.iter().filter(|v| !v.is_finite()).count();
            let diff = want
                .iter()
                .zip(got)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            let norm = want.iter().map(|a| a * a).sum::<f64>().sqrt();
            let rel = diff / norm.max(f64::MIN_POSITIVE);
            let rel = nan_as_inf(rel);
            worst = worst.max(rel);
            if rel > OUT_REL_TOL * (mag / 16.0).max(1.0) {
                bad += 1;
            }
        }
    }
    StageResult {
        passed: bad == 0 && non_finite == 0,
        detail: format!(
            "{} heads, max rel err {worst:.2e}, {bad} over tolerance, {non_finite} non-finite",
            x.seq_lens.len() * q_heads
        ),
    }
}

/// How the scores of a [`SelectCheck`] are made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScorePattern {
    /// Uniform in [−8, 8): distinct keys.
    Random,
    /// Every page the same score: the first k pages win.
    AllEqual,
    /// Four score levels: large tie groups straddle the threshold.
    FewLevels,
    /// Signed zeros, infinities, subnormals and extremes mixed with ordinary values.
    Special,
    /// [`ScorePattern::Random`], except the pages a streamed head samples for its pivots
    /// (`select_topk`'s `⌊i·n/S⌋`, `S` the tile's sweep) all score 0: the pivots bracket
    /// nothing near the k-th score, and the search must stream instead.
    SampleDecoy,
}

/// `select_topk` alone on host-made scores for a batch of lengths and KV heads.
#[derive(Clone, Debug)]
pub struct SelectCheck {
    pub label: &'static str,
    pub spec: PagedSpec,
    pub kv_heads: u32,
    pub seq_lens: Vec<i32>,
    pub pattern: ScorePattern,
    pub budget_pages: i32,
    pub tile: SelectTopkTile,
    pub seed: u64,
}

impl SelectCheck {
    fn shape(&self) -> PagedShape {
        selection_shape(&self.spec, self.kv_heads, &self.seq_lens)
    }

    /// `[batch, kv_heads, max_pages]`, NaN past each sequence's scored pages (never read).
    fn scores(&self) -> Vec<f32> {
        let shape = self.shape();
        let mp = shape.max_pages as usize;
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let special = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
            -1e-45,
            f32::MAX,
            f32::MIN,
            1.0,
            -1.0,
        ];
        let mut s = vec![f32::NAN; shape.selection_elems() as usize];
        for (b, &len) in self.seq_lens.iter().enumerate() {
            let n = pages_of(&self.spec, len).saturating_sub(1);
            for kvh in 0..self.kv_heads as usize {
                let row = &mut s[(b * self.kv_heads as usize + kvh) * mp..][..n];
                for v in row.iter_mut() {
                    *v = match self.pattern {
                        ScorePattern::Random | ScorePattern::SampleDecoy => rng.gen_range(-8.0f32..8.0),
                        ScorePattern::AllEqual => 0.75,
                        ScorePattern::FewLevels => [-1.5f32, 0.25, 0.5, 2.0][rng.gen_range(0..4)],
                        ScorePattern::Special => {
                            if rng.gen_bool(0.5) {
                                special[rng.gen_range(0..special.len())]
                            } else {
                                rng.gen_range(-2.0f32..2.0)
                            }
                        }
                    };
                }
                let sweep = (self.tile.threads * self.tile.items_per_thread) as usize;
                if self.pattern == ScorePattern::SampleDecoy && n > sweep {
                    for i in 0..sweep {
                        row[i * n / sweep] = 0.0;
                    }
                }
            }
        }
        s
    }
}

impl KernelCheck for SelectCheck {
    fn name(&self) -> String {
        format!(
            "select_topk/{}/{}/kv{}/lens{:?}/{:?}/budget{}/{}",
            self.label,
            self.spec.tag(),
            self.kv_heads,
            self.seq_lens,
            self.pattern,
            self.budget_pages,
            self.tile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let shape = self.shape();
        let kernel = Rc::new(select::select_kernel(&self.spec, &self.tile)?);
        let mut p = Program::new();
        p.buffer("page_scores", HostBuffer::F32(self.scores()))
            .buffer("seq_lens", HostBuffer::I32(self.seq_lens.clone()))
            .poisoned("sel_pages", Scalar::I32, shape.selection_elems() as usize)
            .poisoned("sel_count", Scalar::I32, (shape.batch * shape.kv_heads) as usize);
        p.call(
            kernel,
            select_topk_geometry(&self.tile, &shape),
            vec![
                ArgRef::buf("page_scores"),
                ArgRef::buf("seq_lens"),
                ArgRef::buf("sel_pages"),
                ArgRef::buf("sel_count"),
                ArgRef::I32(shape.max_pages as i32),
                ArgRef::I32(self.budget_pages),
            ],
        );
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let r = verify_selection(
            &self.spec,
            &self.shape(),
            &self.seq_lens,
            &self.scores(),
            None,
            self.budget_pages,
            ran,
        );
        Outcome::new(r.stage.passed, r.stage.detail)
    }
}

fn paged_spec(d: u32, g: u32, p: u32, dtype: DType, alibi: bool) -> PagedSpec {
    let decode = DecodeSpec::new(1.5, d, g, dtype).expect("supported decode spec");
    PagedSpec::new(decode, p, alibi, 4).expect("supported paged spec")
}

/// Every check of the top-k path: each value of each specialization axis at least once (head
/// dim, page size, dtype, GQA ratio, ALiBi), one page, budget 0, budgets at and past the page
/// count, ties, mixed lengths in one batch, partial last pages, several splits and chunks.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    use DType::{BF16, F16};
    use KeyData::*;
    let pipe = |label, spec, kv, lens: &[u32], data, seed, budget| {
        PipelineCheck::new(label, PagedCase::new(spec, kv, lens, data, seed), budget)
    };
    let mut v: Vec<Box<dyn KernelCheck>> = Vec::new();
    for c in [
        // One token (only the last page), exactly one full page, partial and full last pages.
        pipe(
            "base",
            paged_spec(32, 1, 16, F16, false),
            2,
            &[1, 16, 37, 100, 301],
            Normal,
            1,
            3,
        ),
        pipe(
            "gqa2_p32_alibi",
            paged_spec(64, 2, 32, BF16, true),
            2,
            &[200, 33, 64],
            Normal,
            2,
            2,
        ),
        pipe(
            "gqa4_p64_budget_past_pages",
            paged_spec(128, 4, 64, F16, true),
            1,
            &[500, 129],
            Normal,
            3,
            100,
        ),
        pipe(
            "gqa3_budget0",
            paged_spec(32, 3, 16, BF16, false),
            2,
            &[90, 17],
            Normal,
            4,
            0,
        ),
        pipe(
            "gqa8_alibi",
            paged_spec(64, 8, 16, F16, true),
            1,
            &[150, 47],
            Normal,
            5,
            5,
        ),
        pipe(
            "budget_pages_minus_one",
            paged_spec(32, 2, 16, F16, true),
            1,
            &[161],
            Normal,
            6,
            9,
        ),
        pipe(
            "ties",
            paged_spec(32, 1, 16, F16, false),
            2,
            &[400, 50],
            Ties,
            7,
            6,
        ),
        pipe(
            "ties_alibi",
            paged_spec(32, 2, 16, BF16, true),
            1,
            &[300],
            Ties,
            8,
            4,
        ),
        pipe(
            "peaked",
            paged_spec(32, 1, 16, F16, false),
            1,
            &[3200, 500],
            Peaked,
            9,
            20,
        ),
        pipe(
            "dominant",
            paged_spec(64, 1, 32, BF16, false),
            1,
            &[700],
            Dominant,
            10,
            3,
        ),
        pipe(
            "extreme",
            paged_spec(32, 2, 16, F16, true),
            1,
            &[640],
            Extreme,
            11,
            8,
        ),
        pipe(
            "negative_budget",
            paged_spec(32, 1, 16, BF16, false),
            1,
            &[120],
            Normal,
            12,
            -4,
        ),
        // Default tiles over a long selection: several chunks per split, so the running max
        // rises between chunks and the per-thread rescaling is exercised.
        pipe(
            "long_selection",
            paged_spec(32, 1, 16, BF16, true),
            1,
            &[20_000, 3000],
            Normal,
            14,
            1000,
        ),
    ] {
        v.push(Box::new(c));
    }
    // The register-heaviest default tile (d = 128, G = 8: 32-token chunks) over a one-SM plan:
    // 11 splits of 2 chunks.
    let mut c = pipe(
        "gqa8_d128_splits",
        paged_spec(128, 8, 64, BF16, true),
        1,
        &[900],
        Normal,
        15,
        10,
    );
    c.sm_count = 1;
    v.push(Box::new(c));
    // Small tiles and a small plan: many splits, several chunks per split, idle trailing splits
    // for the shorter sequence, lanes sharing tokens, one token per lane group.
    let mut c = pipe(
        "many_splits",
        paged_spec(32, 2, 16, F16, true),
        2,
        &[2000, 90],
        Normal,
        13,
        60,
    );
    c.softmax_tile = SoftmaxTopkTile {
        threads: 64,
        lanes_per_token: 4,
        tokens_per_group: 1,
        ctas_per_sm: 1,
        finish_threads: 64,
    };
    c.box_tile = BoxScoreTile {
        threads: 64,
        pages_per_group: 1,
    };
    c.select_tile = SelectTopkTile {
        threads: 256,
        items_per_thread: 1,
    };
    // 8 SMs × 1 CTA × 4 waves over 4 (batch, kv head) groups: 8 chunks of 16 tokens per split.
    c.sm_count = 8;
    v.push(Box::new(c));

    let sel = |label, lens: Vec<i32>, pattern, budget, tile: Option<SelectTopkTile>, seed| {
        let spec = paged_spec(32, 1, 16, F16, false);
        Box::new(SelectCheck {
            label,
            spec,
            kv_heads: 2,
            seq_lens: lens,
            pattern,
            budget_pages: budget,
            tile: tile.unwrap_or_else(|| SelectTopkTile::default_for(&spec)),
            seed,
        }) as Box<dyn KernelCheck>
    };
    let small = SelectTopkTile {
        threads: 256,
        items_per_thread: 3,
    };
    v.push(sel(
        "mixed",
        vec![1, 17, 5000, 16 * 300],
        ScorePattern::Random,
        77,
        None,
        1,
    ));
    v.push(sel(
        "few_levels",
        vec![16 * 2001 + 5, 900],
        ScorePattern::FewLevels,
        700,
        Some(small),
        2,
    ));
    v.push(sel(
        "special",
        vec![16 * 1500, 33],
        ScorePattern::Special,
        400,
        Some(small),
        3,
    ));
    // Scored pages exactly one sweep (keys kept in registers) and one more (streamed sweeps).
    v.push(sel(
        "sweep_edge",
        vec![16 * 768 + 1, 16 * 769 + 1],
        ScorePattern::Random,
        200,
        Some(small),
        7,
    ));
    v.push(sel(
        "all_equal",
        vec![16 * 3000 + 1],
        ScorePattern::AllEqual,
        1234,
        None,
        4,
    ));
    // More than 65536 scored pages (a 1.1M-token sequence): the loops, not the shared memory, grow.
    let huge = vec![16 * 70_001 - 3];
    v.push(sel(
        "huge_random",
        huge.clone(),
        ScorePattern::Random,
        17_500,
        None,
        5,
    ));
    v.push(sel(
        "huge_ties",
        huge.clone(),
        ScorePattern::FewLevels,
        30_000,
        None,
        6,
    ));
    // Heads of four sweeps or more search the keys their sample's pivots gather: tie groups
    // of ~1250 straddling the threshold (they fit), and infinities, signed zeros and extremes.
    v.push(sel(
        "pivots_few_levels",
        vec![16 * 5001, 16 * 3500 + 7],
        ScorePattern::FewLevels,
        1_700,
        Some(small),
        9,
    ));
    v.push(sel(
        "pivots_special",
        vec![16 * 5001, 16 * 4000 + 3],
        ScorePattern::Special,
        900,
        Some(small),
        10,
    ));
    // The pivots' ranks at their clamps: the best page only, and all but one (3072 scored
    // pages: exactly four sweeps, the shortest head that takes the pivots).
    v.push(sel(
        "pivots_budget_one",
        vec![16 * 3073, 16 * 5000 + 5],
        ScorePattern::Random,
        1,
        Some(small),
        11,
    ));
    v.push(sel(
        "pivots_all_but_one",
        vec![16 * 3073],
        ScorePattern::Random,
        3071,
        Some(small),
        12,
    ));
    // Streamed heads whose sample misleads the pivots, on a small tile (many sweeps).
    v.push(sel(
        "sample_decoy",
        vec![16 * 5000 + 9, 16 * 70_001 - 3],
        ScorePattern::SampleDecoy,
        1_000,
        Some(small),
        8,
    ));
    v
}
