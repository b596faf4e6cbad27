//! Host-only planning: which bundle rows a step uses, the fixed workspace and metadata layouts,
//! and every launch of a step with its arguments bound to the caller's tensors, region offsets
//! or scalars. No GPU is needed, so plans are tested (and run in the interpreter) in CI.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use entkv_abi::gaussian::GaussianParams;
use entkv_abi::pipeline::{
    certified_prune_calls, decode_buffers_bound, decode_calls, gaussian_select_calls, meta_build_calls,
    meta_update_calls, topk_select_calls,
};
use entkv_abi::{
    check_batch, guard_chunks, guard_ids_buffers, guard_ids_calls, guard_ids_entry, ArgRef, BufferSpec,
    DecodeKind, Elem, IdFault, KernelFamily, LaunchGeometry, PagedShape, PagedSpec, PipelinePlan, TileConfig,
    GUARDED_INPUTS, GUARD_FAULTS, GUARD_FAULT_WORDS,
};
use entkv_bundle::{Bundle, RowSource, TableRow, Tier};

use super::layout::{RegionLayout, Slot};
use super::tensor::DecodeBuffers;
use super::{EngineError, Method, Problem};
use crate::{KernelArg, MAX_KERNEL_ARGS};

/// A caller-owned tensor a launch reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorRole {
    /// `[batch, q_heads, head_dim]` queries.
    Q,
    /// `[num_pages, kv_heads, page_size, head_dim]` keys.
    KPool,
    /// `[num_pages, kv_heads, page_size, head_dim]` values.
    VPool,
    /// `[batch, max_pages]` i32 physical page ids.
    BlockTable,
    /// `[batch]` i32 tokens per sequence.
    SeqLens,
    /// `[q_heads]` f32 ALiBi slopes.
    AlibiSlopes,
    /// `[batch, q_heads, head_dim]` f32 attention output.
    Out,
}

impl TensorRole {
    /// The canonical buffer name (`entkv_abi::pipeline`).
    pub fn name(self) -> &'static str {
        match self {
            TensorRole::Q => "q",
            TensorRole::KPool => "k_pool",
            TensorRole::VPool => "v_pool",
            TensorRole::BlockTable => "block_table",
            TensorRole::SeqLens => "seq_lens",
            TensorRole::AlibiSlopes => "alibi_slopes",
            TensorRole::Out => "out",
        }
    }

    fn from_name(name: &str) -> Option<TensorRole> {
        [
            TensorRole::Q,
            TensorRole::KPool,
            TensorRole::VPool,
            TensorRole::BlockTable,
            TensorRole::SeqLens,
            TensorRole::AlibiSlopes,
            TensorRole::Out,
        ]
        .into_iter()
        .find(|r| r.name() == name)
    }
}

/// Which decoder-sized region a buffer lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// Scratch, selections, τ / support / kept: rewritten by every step.
    Workspace,
    /// Page bounds, moments and sketch: kept across steps by `build_metadata` and `append`.
    Metadata,
}

/// One argument of a planned launch.
#[derive(Clone, Debug, PartialEq)]
pub enum BoundArg {
    /// A caller tensor's base pointer.
    Tensor(TensorRole),
    /// `region base + offset`, the slot of buffer `name`.
    Region {
        /// Workspace or metadata.
        region: Region,
        /// Canonical buffer name.
        name: String,
        /// Byte offset of the slot.
        offset: u64,
    },
    /// A scalar passed by value.
    Scalar(KernelArg),
}

/// One planned launch.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundCall {
    /// The family (bundle table row) the entry belongs to.
    pub family: KernelFamily,
    /// The bundle artifact holding the entry.
    pub module: String,
    /// PTX entry name.
    pub entry: String,
    /// Grid, block, dynamic shared memory.
    pub geometry: LaunchGeometry,
    /// Arguments in parameter order.
    pub args: Vec<BoundArg>,
}

/// Which bundle row serves a family in a plan, and how well it matches.
#[derive(Clone, Debug, PartialEq)]
pub struct ChosenKernel {
    /// Kernel family.
    pub family: KernelFamily,
    /// Exact tuned bucket, nearest tuned bucket, or the untuned default.
    pub tier: Tier,
    /// The row's tile config.
    pub tile: TileConfig,
    /// The row's artifact.
    pub module: String,
}

/// Every launch of one decode step for one batch, bound to argument roles. Made by
/// [`DecodePlanner::plan`]; valid for any step with the same batch size whose sequences are no
/// longer than [`StepPlan::longest`] (the block table's contents and the lengths may change).
#[derive(Clone, Debug)]
pub struct StepPlan {
    pub(crate) owner: u64,
    /// The method the step runs (`Auto` resolved to `Dense` or `Certified`).
    pub method: Method,
    /// Sequences in the step.
    pub batch: u32,
    /// The longest sequence the plan covers.
    pub longest: u32,
    /// The rows used, with their tiers.
    pub kernels: Vec<ChosenKernel>,
    /// The decode launches, in order.
    pub calls: Vec<BoundCall>,
    /// The metadata update launches of `append` (empty when the method reads no metadata).
    pub append_calls: Vec<BoundCall>,
}

/// The metadata slot holding the page list of a build.
pub const META_PAGES: &str = "meta_pages";

static NEXT_PLANNER_ID: AtomicU64 = AtomicU64::new(1);

/// Host-side half of a decoder: checks a [`Problem`] against a bundle, fixes the region
/// layouts, and plans steps. Needs no GPU (`sm_count` sizes the split plans).
#[derive(Clone, Debug)]
pub struct DecodePlanner {
    id: u64,
    problem: Problem,
    spec: PagedSpec,
    spec_tag: String,
    sm_count: u32,
    bundle: Arc<Bundle>,
    gaussian: GaussianParams,
    workspace: RegionLayout,
    metadata: RegionLayout,
}

impl DecodePlanner {
    /// Check `problem`, find its rows in `bundle`, and size the regions for the largest step
    /// (`max_batch` sequences of `max_pages` pages, any row the bundle may pick).
    pub fn new(problem: &Problem, bundle: Arc<Bundle>, sm_count: u32) -> Result<DecodePlanner, EngineError> {
        let spec = problem.spec()?;
        if let Method::TopK { budget_pages } = problem.method {
            if budget_pages == 0 || budget_pages > i32::MAX as u32 {
                return Err(EngineError::Budget(budget_pages));
            }
        }
        if sm_count == 0 {
            return Err(EngineError::Capacity("sm_count must be ≥ 1".into()));
        }
        let spec_tag = spec.sketch_tag();
        for &family in problem.method.families() {
            bundle.resolve(family, &spec, 1, problem.method.selector_for(family))?;
        }
        if problem.check_device_ids {
            check_guard_modules(&bundle, problem, &spec)?;
        }
        let mut planner = DecodePlanner {
            id: NEXT_PLANNER_ID.fetch_add(1, Ordering::Relaxed),
            problem: *problem,
            spec,
            spec_tag,
            sm_count,
            bundle,
            gaussian: GaussianParams::default(),
            workspace: RegionLayout::default(),
            metadata: RegionLayout::default(),
        };
        planner.workspace = RegionLayout::new(&planner.workspace_bound()?)?;
        if problem.method.uses_metadata() {
            let plan = meta_build_calls(
                &spec,
                &planner.meta_tile_any()?,
                &planner.shape(problem.max_batch),
                0,
            )?;
            // The page list of a build, staged here by `build_metadata` (distinct pages).
            let pages = BufferSpec {
                name: META_PAGES.into(),
                elem: entkv_abi::Elem::I32,
                len: problem.num_pages as u64,
            };
            planner.metadata = RegionLayout::new(plan.buffers.iter().chain([&pages]))?;
        }
        Ok(planner)
    }

    /// The kernel specialization.
    pub fn spec(&self) -> &PagedSpec {
        &self.spec
    }

    /// The problem the planner was made for.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The bundle the planner reads.
    pub fn bundle(&self) -> &Arc<Bundle> {
        &self.bundle
    }

    /// Every bundle artifact a step of the problem's method can launch from: the modules of
    /// the rows of its kernel families at this specialization, every length bucket, rows kept
    /// for another selector left out (sorted, each once). Any plan's calls are in these.
    pub fn modules(&self) -> Vec<&str> {
        let spec = self.spec.sketch_tag();
        let families = self.problem.method.families();
        let selector = self.problem.method.selector();
        let mut modules: Vec<&str> = self
            .bundle
            .rows()
            .iter()
            .filter(|r| r.spec == spec && families.contains(&r.family))
            .filter(|r| r.selector.is_none() || r.selector == selector)
            .map(|r| r.module.as_str())
            .collect();
        modules.sort_unstable();
        modules.dedup();
        modules
    }

    /// Bytes of workspace a step needs (256-byte aligned base).
    pub fn workspace_size(&self) -> u64 {
        self.workspace.size()
    }

    /// Bytes of page metadata (0 for the dense method).
    pub fn metadata_size(&self) -> u64 {
        self.metadata.size()
    }

    /// Where each workspace buffer lives (e.g. `tau`, `support`, `kept`, `sel_pages`).
    pub fn workspace_layout(&self) -> &RegionLayout {
        &self.workspace
    }

    /// Where `meta_bounds`, `meta_moments` and `sketch` live.
    pub fn metadata_layout(&self) -> &RegionLayout {
        &self.metadata
    }

    fn shape(&self, batch: u32) -> PagedShape {
        PagedShape {
            batch,
            kv_heads: self.problem.kv_heads,
            num_pages: self.problem.num_pages,
            max_pages: self.problem.max_pages,
        }
    }

    fn rows(&self, family: KernelFamily) -> impl Iterator<Item = &TableRow> {
        let tag = self.spec_tag.clone();
        self.bundle
            .rows()
            .iter()
            .filter(move |r| r.family == family && r.spec == tag)
    }

    fn meta_tile_any(&self) -> Result<entkv_abi::MetaTile, EngineError> {
        match self
            .bundle
            .resolve(KernelFamily::PageMeta, &self.spec, 1, None)?
            .row
            .tile
        {
            TileConfig::Meta(t) => Ok(t),
            other => Err(tile_mismatch(KernelFamily::PageMeta, &other)),
        }
    }

    /// The page selection of the methods built on box bounds, with the tiles of a
    /// `page_score_box` row (`a`) and a `select_topk` row (`b`): top-k's budget pages, or the
    /// certified decode's page pruning.
    fn box_selection(
        &self,
        method: Method,
        a: &TileConfig,
        b: &TileConfig,
        shape: &PagedShape,
    ) -> Result<PipelinePlan, EngineError> {
        let (TileConfig::BoxScore(bt), TileConfig::SelectTopk(st)) = (a, b) else {
            return Err(tile_mismatch(KernelFamily::SelectTopk, b));
        };
        Ok(match method {
            Method::TopK { budget_pages } => {
                topk_select_calls(&self.spec, bt, st, shape, budget_pages as i32)?
            }
            Method::CertifiedPruned => certified_prune_calls(&self.spec, bt, st, shape)?,
            other => {
                return Err(EngineError::Internal(format!(
                    "`{}` has no box-bound page selection",
                    other.name()
                )))
            }
        })
    }

    /// Every buffer any plan of this problem may write, at its largest (batch `max_batch`,
    /// sequences of `max_pages` pages, every tile the bundle has for the families).
    fn workspace_bound(&self) -> Result<Vec<BufferSpec>, EngineError> {
        let p = &self.problem;
        let shape = self.shape(p.max_batch);
        let max_tokens = p.max_pages as u64 * p.page_size as u64;
        let mut out = Vec::new();
        for &family in p.method.families() {
            let kind = match family {
                KernelFamily::DecodeDense => DecodeKind::Dense,
                KernelFamily::DecodeSparse => DecodeKind::Sparse,
                KernelFamily::DecodeCertified => DecodeKind::Certified,
                _ => continue,
            };
            for row in self.rows(family) {
                let TileConfig::Dense(tile) = row.tile else {
                    return Err(tile_mismatch(family, &row.tile));
                };
                out.extend(decode_buffers_bound(
                    kind,
                    &self.spec,
                    &tile,
                    p.max_batch,
                    p.kv_heads,
                    max_tokens,
                    self.sm_count,
                )?);
            }
        }
        match p.method {
            Method::TopK { .. } | Method::CertifiedPruned => {
                for a in self.rows(KernelFamily::PageScoreBox) {
                    for b in self.rows(KernelFamily::SelectTopk) {
                        out.extend(self.box_selection(p.method, &a.tile, &b.tile, &shape)?.buffers);
                    }
                }
            }
            Method::Gaussian => {
                for a in self.rows(KernelFamily::PageScoreMoments) {
                    for b in self.rows(KernelFamily::SelectGaussian) {
                        let (TileConfig::Moments(mt), TileConfig::Gauss(gt)) = (a.tile, b.tile) else {
                            return Err(tile_mismatch(KernelFamily::SelectGaussian, &b.tile));
                        };
                        out.extend(
                            gaussian_select_calls(&self.spec, &mt, &gt, &self.gaussian, &shape)?.buffers,
                        );
                    }
                }
            }
            _ => {}
        }
        if p.check_device_ids {
            out.extend(guard_ids_buffers(&self.spec, &shape));
        }
        out.retain(|b| TensorRole::from_name(&b.name).is_none());
        Ok(out)
    }

    /// Plan a step for these host copies of the sequence lengths and block table
    /// (`[batch]`, `[batch × max_pages]`): every length and referenced page is checked here, so
    /// nothing out of range reaches the GPU.
    pub fn plan(&self, seq_lens: &[i32], block_table: &[i32]) -> Result<StepPlan, EngineError> {
        let p = &self.problem;
        if seq_lens.is_empty() {
            return Err(EngineError::EmptyBatch);
        }
        if seq_lens.len() > p.max_batch as usize {
            return Err(EngineError::BatchTooLarge {
                batch: seq_lens.len(),
                max_batch: p.max_batch,
            });
        }
        let batch = seq_lens.len() as u32;
        let shape = self.shape(batch);
        let longest = check_batch(&self.spec, &shape, seq_lens, block_table)?;
        let tokens = longest as u64;
        let pages = tokens.div_ceil(p.page_size as u64);

        let mut chosen = Vec::new();
        let mut pick = |family: KernelFamily| -> Result<TableRow, EngineError> {
            let selector = p.method.selector_for(family);
            let r = self.bundle.resolve(family, &self.spec, tokens, selector)?;
            chosen.push(ChosenKernel {
                family,
                tier: r.tier,
                tile: r.row.tile,
                module: r.row.module.clone(),
            });
            Ok(r.row.clone())
        };
        let method = match p.method {
            Method::Auto => {
                let dense = self
                    .bundle
                    .resolve(KernelFamily::DecodeDense, &self.spec, tokens, None)?;
                let cert = self
                    .bundle
                    .resolve(KernelFamily::DecodeCertified, &self.spec, tokens, None)?;
                match (&dense.row.source, &cert.row.source) {
                    (RowSource::Tuned { median_us: d }, RowSource::Tuned { median_us: c }) if c < d => {
                        Method::Certified
                    }
                    _ => Method::Dense,
                }
            }
            m => m,
        };
        let mut rows: Vec<TableRow> = Vec::new();
        let decode =
            |kind: DecodeKind, row: &TableRow, max_tokens: u64| -> Result<PipelinePlan, EngineError> {
                let TileConfig::Dense(tile) = row.tile else {
                    return Err(tile_mismatch(row.family, &row.tile));
                };
                Ok(decode_calls(
                    kind,
                    &self.spec,
                    &tile,
                    &shape,
                    max_tokens,
                    self.sm_count,
                )?)
            };
        let pipeline = match method {
            Method::Dense => {
                let row = pick(KernelFamily::DecodeDense)?;
                let plan = decode(DecodeKind::Dense, &row, tokens)?;
                rows.push(row);
                plan
            }
            Method::Certified => {
                let row = pick(KernelFamily::DecodeCertified)?;
                let plan = decode(DecodeKind::Certified, &row, tokens)?;
                rows.push(row);
                plan
            }
            Method::CertifiedPruned => {
                let (a, b) = (pick(KernelFamily::PageScoreBox)?, pick(KernelFamily::SelectTopk)?);
                let prune = self.box_selection(method, &a.tile, &b.tile, &shape)?;
                let row = pick(KernelFamily::DecodeCertified)?;
                // Planned for every page kept (the selection's size is known on the GPU only).
                let plan = prune.then(decode(DecodeKind::CertifiedSelected, &row, tokens)?);
                rows.extend([a, b, row]);
                plan
            }
            Method::TopK { budget_pages } => {
                let (a, b) = (pick(KernelFamily::PageScoreBox)?, pick(KernelFamily::SelectTopk)?);
                let select = self.box_selection(method, &a.tile, &b.tile, &shape)?;
                let row = pick(KernelFamily::DecodeSparse)?;
                let most = pages.min(budget_pages as u64 + 1) * p.page_size as u64;
                let plan = select.then(decode(DecodeKind::Sparse, &row, most)?);
                rows.extend([a, b, row]);
                plan
            }
            Method::Gaussian => {
                let (a, b) = (
                    pick(KernelFamily::PageScoreMoments)?,
                    pick(KernelFamily::SelectGaussian)?,
                );
                let (TileConfig::Moments(mt), TileConfig::Gauss(gt)) = (a.tile, b.tile) else {
                    return Err(tile_mismatch(KernelFamily::SelectGaussian, &b.tile));
                };
                let select = gaussian_select_calls(&self.spec, &mt, &gt, &self.gaussian, &shape)?;
                let row = pick(KernelFamily::DecodeSparse)?;
                let plan = select.then(decode(DecodeKind::Sparse, &row, pages * p.page_size as u64)?);
                rows.extend([a, b, row]);
                plan
            }
            Method::Auto => unreachable!("resolved above"),
        };
        let mut calls = self.bind(pipeline, &rows)?;
        let mut append_calls = if p.method.uses_metadata() {
            let row = pick(KernelFamily::PageMeta)?;
            let TileConfig::Meta(tile) = row.tile else {
                return Err(tile_mismatch(KernelFamily::PageMeta, &row.tile));
            };
            self.bind(meta_update_calls(&self.spec, &tile, &shape)?, &[row])?
        } else {
            Vec::new()
        };
        if p.check_device_ids {
            // The decode row is the last one picked for every method.
            let decode_row = rows
                .last()
                .ok_or_else(|| EngineError::Internal("a plan without a decode row".into()))?;
            let guard = self.guard_call(&shape, longest, decode_row)?;
            for list in [&mut calls, &mut append_calls] {
                if !list.is_empty() {
                    self.read_guarded_copies(list)?;
                    list.insert(0, guard.clone());
                }
            }
        }
        Ok(StepPlan {
            owner: self.id,
            method,
            batch,
            longest,
            kernels: chosen,
            calls,
            append_calls,
        })
    }

    /// The distinct full pages of a batch (host copies of its lengths and block table), whose
    /// metadata a build computes: what `build_metadata` stages in the `meta_pages` slot.
    pub fn full_pages(&self, seq_lens: &[i32], block_table: &[i32]) -> Result<Vec<i32>, EngineError> {
        if seq_lens.len() > self.problem.max_batch as usize {
            return Err(EngineError::BatchTooLarge {
                batch: seq_lens.len(),
                max_batch: self.problem.max_batch,
            });
        }
        let shape = self.shape(seq_lens.len() as u32);
        check_batch(&self.spec, &shape, seq_lens, block_table)?;
        let mut pages = entkv_abi::full_pages(&self.spec, &shape, seq_lens, block_table)?;
        pages.sort_unstable();
        pages.dedup();
        Ok(pages)
    }

    /// The launches that build the metadata of the first `pages` physical pages listed in the
    /// metadata region's `meta_pages` slot (see [`DecodePlanner::full_pages`]).
    pub fn plan_build_metadata(&self, pages: u32) -> Result<Vec<BoundCall>, EngineError> {
        if !self.problem.method.uses_metadata() {
            return Ok(Vec::new());
        }
        if pages > self.problem.num_pages {
            return Err(EngineError::Capacity(format!(
                "{pages} pages to build, the pool has {}",
                self.problem.num_pages
            )));
        }
        let row = self
            .bundle
            .resolve(
                KernelFamily::PageMeta,
                &self.spec,
                self.problem.max_pages as u64 * self.problem.page_size as u64,
                None,
            )?
            .row
            .clone();
        let TileConfig::Meta(tile) = row.tile else {
            return Err(tile_mismatch(KernelFamily::PageMeta, &row.tile));
        };
        let plan = meta_build_calls(
            &self.spec,
            &tile,
            &self.shape(self.problem.max_batch),
            pages as u64,
        )?;
        self.bind(plan, &[row])
    }

    /// Host checks before a step's launches: the plan is this planner's, and every tensor and
    /// region has the dtype, shape, layout, alignment and size the plan's launches touch.
    pub fn check_step(&self, plan: &StepPlan, b: &DecodeBuffers) -> Result<(), EngineError> {
        if plan.owner != self.id {
            return Err(EngineError::WrongPlan);
        }
        let p = &self.problem;
        let spec = &self.spec;
        let (batch, d) = (plan.batch as u64, p.head_dim as u64);
        let kv: Elem = spec.decode.kv_dtype.into();
        let pool = [p.num_pages as u64, p.kv_heads as u64, p.page_size as u64, d];
        let heads = [batch, p.q_heads as u64, d];
        b.q.check("q", spec.decode.q_dtype.into(), &heads, true)?;
        b.k_pool.check("k_pool", kv, &pool, false)?;
        b.v_pool.check("v_pool", kv, &pool, false)?;
        b.block_table
            .check("block_table", Elem::I32, &[batch, p.max_pages as u64], true)?;
        b.seq_lens.check("seq_lens", Elem::I32, &[batch], true)?;
        b.out.check("out", spec.decode.out_dtype.into(), &heads, true)?;
        match (p.alibi, &b.alibi_slopes) {
            (true, Some(s)) => s.check("alibi_slopes", Elem::F32, &[p.q_heads as u64], false)?,
            (true, None) => return Err(EngineError::MissingTensor("alibi_slopes")),
            (false, Some(_)) => {
                return Err(EngineError::BadTensor {
                    name: "alibi_slopes",
                    problem: "given, but the decoder was created without ALiBi".into(),
                })
            }
            (false, None) => {}
        }
        b.metadata.check("metadata", self.metadata_size())?;
        b.workspace.check("workspace", self.workspace_size())?;
        Ok(())
    }

    /// Where a step of `plan` leaves `guard_ids`' fault records (`len`: its batch × column
    /// chunks × 3 i32), with [`Problem::check_device_ids`].
    pub fn id_fault_slot(&self, plan: &StepPlan) -> Result<Slot, EngineError> {
        if plan.owner != self.id {
            return Err(EngineError::WrongPlan);
        }
        if !self.problem.check_device_ids {
            return Err(EngineError::DeviceIdCheckOff);
        }
        let slot = self
            .workspace
            .get(GUARD_FAULTS)
            .ok_or_else(|| EngineError::Internal(format!("no workspace slot `{GUARD_FAULTS}`")))?;
        Ok(Slot {
            len: plan.batch as u64 * guard_chunks(&self.spec, plan.longest) as u64 * GUARD_FAULT_WORDS,
            ..slot.clone()
        })
    }

    /// The faults in a step's records (read from [`DecodePlanner::id_fault_slot`]).
    pub fn id_faults(&self, plan: &StepPlan, records: &[i32]) -> Result<Vec<IdFault>, EngineError> {
        let slot = self.id_fault_slot(plan)?;
        if records.len() as u64 != slot.len {
            return Err(EngineError::Internal(format!(
                "{} fault words for a step of {} sequences",
                records.len(),
                plan.batch
            )));
        }
        let chunks = guard_chunks(&self.spec, plan.longest);
        Ok(IdFault::decode(
            records,
            chunks,
            plan.longest,
            self.problem.num_pages,
        ))
    }

    /// `guard_ids` for a step of `shape` planned for `longest` tokens, from the module of the
    /// step's decode row.
    fn guard_call(
        &self,
        shape: &PagedShape,
        longest: u32,
        decode_row: &TableRow,
    ) -> Result<BoundCall, EngineError> {
        let mut plan = guard_ids_calls(&self.spec, shape, longest)?;
        let call = plan
            .calls
            .pop()
            .ok_or_else(|| EngineError::Internal("guard_ids planned no launch".into()))?;
        let args = call
            .args
            .into_iter()
            .map(|a| self.bind_arg(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BoundCall {
            family: decode_row.family,
            module: decode_row.module.clone(),
            entry: call.entry,
            geometry: call.geometry,
            args,
        })
    }

    /// Point every launch's lengths and block table at `guard_ids`' clamped copies.
    fn read_guarded_copies(&self, calls: &mut [BoundCall]) -> Result<(), EngineError> {
        for (role, copy) in [TensorRole::BlockTable, TensorRole::SeqLens]
            .into_iter()
            .zip(GUARDED_INPUTS.map(|(_, copy)| copy))
        {
            let slot = self
                .workspace
                .get(copy)
                .ok_or_else(|| EngineError::Internal(format!("no workspace slot `{copy}`")))?;
            for arg in calls.iter_mut().flat_map(|c| c.args.iter_mut()) {
                if *arg == BoundArg::Tensor(role) {
                    *arg = BoundArg::Region {
                        region: Region::Workspace,
                        name: copy.to_string(),
                        offset: slot.offset,
                    };
                }
            }
        }
        Ok(())
    }

    /// Bind a pipeline's buffer names to tensors and region slots, checking every buffer it
    /// writes fits its slot (the bound the layout was made from).
    fn bind(&self, plan: PipelinePlan, rows: &[TableRow]) -> Result<Vec<BoundCall>, EngineError> {
        for b in &plan.buffers {
            if TensorRole::from_name(&b.name).is_some() {
                continue;
            }
            let slot = self
                .workspace
                .get(&b.name)
                .or_else(|| self.metadata.get(&b.name))
                .ok_or_else(|| EngineError::Internal(format!("no slot for buffer `{}`", b.name)))?;
            if slot.len < b.len || slot.elem != b.elem {
                return Err(EngineError::Internal(format!(
                    "buffer `{}` needs {} × {:?}, its slot holds {} × {:?}",
                    b.name, b.len, b.elem, slot.len, slot.elem
                )));
            }
        }
        let mut out = Vec::with_capacity(plan.calls.len());
        for call in plan.calls {
            let row = rows
                .iter()
                .find(|r| r.entries.contains(&call.entry))
                .ok_or_else(|| EngineError::Internal(format!("no bundle row has entry `{}`", call.entry)))?;
            if call.args.len() > MAX_KERNEL_ARGS {
                return Err(EngineError::Internal(format!(
                    "`{}` takes too many arguments",
                    call.entry
                )));
            }
            let args = call
                .args
                .into_iter()
                .map(|a| self.bind_arg(a))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(BoundCall {
                family: row.family,
                module: row.module.clone(),
                entry: call.entry,
                geometry: call.geometry,
                args,
            });
        }
        Ok(out)
    }

    fn bind_arg(&self, a: ArgRef) -> Result<BoundArg, EngineError> {
        Ok(match a {
            ArgRef::Buf(name) => {
                if let Some(role) = TensorRole::from_name(&name) {
                    BoundArg::Tensor(role)
                } else if let Some(s) = self.workspace.get(&name) {
                    BoundArg::Region {
                        region: Region::Workspace,
                        offset: s.offset,
                        name,
                    }
                } else if let Some(s) = self.metadata.get(&name) {
                    BoundArg::Region {
                        region: Region::Metadata,
                        offset: s.offset,
                        name,
                    }
                } else {
                    return Err(EngineError::Internal(format!("no slot for buffer `{name}`")));
                }
            }
            ArgRef::I32(v) => BoundArg::Scalar(KernelArg::I32(v)),
            ArgRef::U32(v) => BoundArg::Scalar(KernelArg::U32(v)),
            ArgRef::I64(v) => BoundArg::Scalar(KernelArg::I64(v)),
            ArgRef::F32(v) => BoundArg::Scalar(KernelArg::F32(v)),
        })
    }

    /// The distinct artifacts a set of calls needs.
    pub fn modules_of(calls: &[BoundCall]) -> BTreeSet<&str> {
        calls.iter().map(|c| c.module.as_str()).collect()
    }
}

/// With `check_device_ids`, every decode module a step of `problem` may launch from must
/// define `guard_ids` (bundles of schema 15 on).
fn check_guard_modules(bundle: &Bundle, problem: &Problem, spec: &PagedSpec) -> Result<(), EngineError> {
    let families = problem.method.families();
    let (tag, entry) = (spec.sketch_tag(), guard_ids_entry(spec));
    for row in bundle.rows() {
        if row.spec != tag || !row.family.is_decode() || !families.contains(&row.family) {
            continue;
        }
        let defined = bundle
            .manifest()
            .artifacts
            .iter()
            .any(|a| a.file == row.module && a.entries.contains(&entry));
        if !defined {
            return Err(EngineError::NoDeviceIdCheck {
                module: row.module.clone(),
            });
        }
    }
    Ok(())
}

fn tile_mismatch(family: KernelFamily, tile: &TileConfig) -> EngineError {
    EngineError::Internal(format!("bundle row of `{family}` has tile {}", tile.tag()))
}
