//! The decode pipelines of `entkv_abi::pipeline` with their generated kernels attached, ready
//! for a [`Program`] (interpreter) or the GPU harness. The calls, argument lists and geometry
//! come from `entkv-abi` — the same plans the runtime launches from a bundle — and this module
//! only generates the kernel behind each entry name.

use crate::program::{Call, Program};
use crate::{certified, decode, gaussian, page_meta, scalar_of_elem, topk, KernelGenError};
use entkv_abi::pipeline::{
    certified_prune_calls, decode_calls, gaussian_select_calls, meta_build_calls, meta_update_calls,
    softmax_topk_calls, topk_select_calls,
};
use entkv_abi::{
    BoxScoreTile, BufferSpec, DenseTile, MetaTile, PagedShape, PagedSpec, PipelinePlan, SelectTopkTile,
    SoftmaxTopkTile, SpecError,
};
use entkv_dsl::Kernel;
use std::rc::Rc;

pub use entkv_abi::DecodeKind;

/// A pipeline's calls (with kernels) and the workspace/output buffers it writes.
#[derive(Clone, Debug)]
pub struct Pipeline {
    pub calls: Vec<Call>,
    pub buffers: Vec<BufferSpec>,
}

/// Attach `kernels` to `plan` by entry name; every entry needs a kernel whose parameter count
/// matches the call's arguments.
fn attach(plan: PipelinePlan, kernels: Vec<Kernel>) -> Result<Pipeline, KernelGenError> {
    let kernels: Vec<Rc<Kernel>> = kernels.into_iter().map(Rc::new).collect();
    let mut calls = Vec::with_capacity(plan.calls.len());
    for c in plan.calls {
        let kernel = kernels
            .iter()
            .find(|k| k.name == c.entry)
            .ok_or_else(|| SpecError::BadShape(format!("no generated kernel for entry `{}`", c.entry)))?;
        if kernel.params.len() != c.args.len() {
            return Err(SpecError::BadShape(format!(
                "entry `{}` takes {} parameters, the plan passes {}",
                c.entry,
                kernel.params.len(),
                c.args.len()
            ))
            .into());
        }
        calls.push(Call {
            kernel: kernel.clone(),
            geometry: c.geometry,
            args: c.args,
        });
    }
    Ok(Pipeline {
        calls,
        buffers: plan.buffers,
    })
}

/// One decode step over the paged cache (see `entkv_abi::pipeline::decode_calls`).
pub fn decode_pipeline(
    kind: DecodeKind,
    spec: &PagedSpec,
    tile: &DenseTile,
    shape: &PagedShape,
    max_tokens: u64,
    sm_count: u32,
) -> Result<Pipeline, KernelGenError> {
    let plan = decode_calls(kind, spec, tile, shape, max_tokens, sm_count)?;
    // `attach` finds each call's kernel by name, so the order here does not matter.
    let kernels: Vec<Kernel> = match kind {
        DecodeKind::Dense => decode::paged_kernels(spec, tile, false)?.into(),
        DecodeKind::Sparse => decode::paged_kernels(spec, tile, true)?.into(),
        DecodeKind::Certified => vec![
            certified::select_kernel(spec, tile)?,
            certified::decode_kernel(spec, tile)?,
        ],
        DecodeKind::CertifiedSelected => vec![
            certified::rest_select_kernel(spec, tile)?,
            certified::selected_select_kernel(spec, tile)?,
            certified::decode_kernel(spec, tile)?,
        ],
    }
    .into_iter()
    .chain(certified::tile_extra_kernels(spec, tile)?)
    .collect();
    attach(plan, kernels)
}

/// The certified score pass alone, without rescoring (`certified::unrefined_select_kernel`),
/// over the plan of [`decode_pipeline`]'s `Certified` kind: a check runs it after the decode to
/// see the candidates' sketch bounds. A seeded tile's pass runs unseeded here: the seed only
/// moves where the filter starts, not how a bound is computed, and the seeded checks-only pass
/// spilled under ptxas 13 (12 B at 128 registers, `a4o3_d64_g2` bf16 `t64_l4_r2_n2_m1_c3_h_seed`,
/// results/2026-12-05-long-select/3-checks-bench) where the unseeded one takes 154 registers.
pub fn certified_bounds_pipeline(
    spec: &PagedSpec,
    tile: &DenseTile,
    shape: &PagedShape,
    max_tokens: u64,
    sm_count: u32,
) -> Result<Pipeline, KernelGenError> {
    let tile = &DenseTile {
        seed: false,
        pruned_walk: false,
        ..*tile
    };
    let mut plan = decode_calls(DecodeKind::Certified, spec, tile, shape, max_tokens, sm_count)?;
    // Up to the first score pass: what comes after reads or repairs its candidates.
    let (select, _) = entkv_abi::pipeline::certified_entry_names(spec, tile);
    let first_pass = plan
        .calls
        .iter()
        .position(|c| c.entry == select)
        .expect("a score pass");
    plan.calls.truncate(first_pass + 1);
    let pass = plan.calls.last_mut().expect("a score pass");
    pass.entry = certified::unrefined_entry(spec, tile);
    let mut kernels = vec![certified::unrefined_select_kernel(spec, tile)?];
    kernels.extend(certified::tile_extra_kernels(spec, tile)?);
    attach(plan, kernels)
}

/// Build the metadata of the physical pages in `pages` (e.g. `entkv_abi::full_pages` after
/// prefill), read from buffer `meta_pages`; returns the list to put there.
pub fn meta_build_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    pages: &[i32],
) -> Result<(Pipeline, Vec<i32>), KernelGenError> {
    let tile = MetaTile::default_for(spec);
    let plan = meta_build_calls(spec, &tile, shape, pages.len() as u64)?;
    Ok((
        attach(plan, vec![page_meta::build_kernel(spec, &tile)?])?,
        pages.to_vec(),
    ))
}

/// Rebuild the metadata of the page each sequence's newest token completed.
pub fn meta_update_pipeline(spec: &PagedSpec, shape: &PagedShape) -> Result<Pipeline, KernelGenError> {
    let tile = MetaTile::default_for(spec);
    let plan = meta_update_calls(spec, &tile, shape)?;
    attach(plan, vec![page_meta::update_kernel(spec, &tile)?])
}

/// Top-k page selection with the default tiles.
pub fn topk_select_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    budget_pages: i32,
) -> Result<Pipeline, KernelGenError> {
    let (bt, st) = (BoxScoreTile::default_for(spec), SelectTopkTile::default_for(spec));
    let plan = topk_select_calls(spec, &bt, &st, shape, budget_pages)?;
    attach(
        plan,
        vec![
            topk::score::box_kernel(spec, &bt)?,
            topk::select::select_kernel(spec, &st)?,
        ],
    )
}

/// The certified decode's page pruning (`page_bounds`, then `prune_mark`, with `prune_tau` and
/// `select_pruned` when rows span several slices) with the default tiles;
/// [`DecodeKind::CertifiedSelected`] decodes its selection.
pub fn certified_prune_pipeline(spec: &PagedSpec, shape: &PagedShape) -> Result<Pipeline, KernelGenError> {
    let (bt, st) = (BoxScoreTile::default_for(spec), SelectTopkTile::default_for(spec));
    certified_prune_pipeline_with(spec, shape, &bt, &st)
}

/// [`certified_prune_pipeline`] with explicit tiles.
pub fn certified_prune_pipeline_with(
    spec: &PagedSpec,
    shape: &PagedShape,
    bt: &BoxScoreTile,
    st: &SelectTopkTile,
) -> Result<Pipeline, KernelGenError> {
    let plan = certified_prune_calls(spec, bt, st, shape)?;
    attach(
        plan,
        vec![
            topk::score::page_bounds_kernel(spec, bt)?,
            crate::prune::prune_tau_kernel(spec, st)?,
            crate::prune::prune_mark_kernel(spec, st)?,
            crate::prune::select_pruned_kernel(spec, st)?,
        ],
    )
}

/// Softmax (Quest) decode over the selection, default tile.
pub fn softmax_topk_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    budget_pages: i32,
    sm_count: u32,
) -> Result<Pipeline, KernelGenError> {
    let tile = SoftmaxTopkTile::default_for(spec);
    let plan = softmax_topk_calls(spec, &tile, shape, budget_pages, sm_count)?;
    attach(
        plan,
        vec![
            topk::softmax::score_kernel(spec, &tile)?,
            topk::softmax::finish_kernel(spec, &tile)?,
        ],
    )
}

/// Gaussian-aware selection with the default tiles and the reference's parameters.
pub fn gaussian_select_pipeline(spec: &PagedSpec, shape: &PagedShape) -> Result<Pipeline, KernelGenError> {
    let (mt, gt) = (
        entkv_abi::gaussian::MomentsTile::default_for(spec),
        entkv_abi::gaussian::GaussTile::default_for(spec),
    );
    gaussian::pipeline(
        spec,
        &mt,
        &gt,
        &entkv_abi::gaussian::GaussianParams::default(),
        shape,
    )
}

/// The Gaussian selection for explicit tiles and parameters.
pub(crate) fn gaussian_with(
    spec: &PagedSpec,
    mt: &entkv_abi::gaussian::MomentsTile,
    gt: &entkv_abi::gaussian::GaussTile,
    params: &entkv_abi::gaussian::GaussianParams,
    shape: &PagedShape,
    kernels: Vec<Kernel>,
) -> Result<Pipeline, KernelGenError> {
    attach(gaussian_select_calls(spec, mt, gt, params, shape)?, kernels)
}

impl Pipeline {
    /// This pipeline followed by `next` (buffers of both, each name once).
    pub fn then(mut self, next: Pipeline) -> Pipeline {
        self.calls.extend(next.calls);
        entkv_abi::pipeline::merge_buffers(&mut self.buffers, next.buffers);
        self
    }

    /// Add the pipeline's workspace and outputs to a program, poisoned, and its calls.
    pub fn add_to(self, p: &mut Program) {
        for b in &self.buffers {
            p.poisoned(&b.name, scalar_of_elem(b.elem), b.len as usize);
        }
        p.calls.extend(self.calls);
    }
}
