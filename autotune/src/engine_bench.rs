//! Decode steps through the runtime's engine (`entkv_runtime::engine::Decoder`) on the GPU, as
//! an inference engine runs them: the paged cache of a workload generated on the device
//! ([`PaperCache`]), the decoder's metadata built once, CUDA-event timings of a whole step or of
//! one kernel family's launches, and checks of sampled heads against the float64 reference.
//! Shared by the autotuner's GPU backend and `entkv bench`.

use anyhow::{Context, Result};
use entkv_abi::{Elem, KernelFamily, PagedShape, PagedSpec};
use entkv_kernels::check::{compare, DenseCheck, DenseOutputs};
use entkv_kernels::decode_checks::selected_reference;
use entkv_kernels::paged_data::{paged_reference, PagedCase, PagedInputs};
use entkv_kernels::pipelines::{softmax_topk_pipeline, Pipeline};
use entkv_runtime::engine::{
    BoundCall, DecodeBuffers, Decoder, DeviceRegion, DeviceTensor, IdFault, Method, Problem, Step,
};
use entkv_runtime::{DeviceBuffer, Gpu, RawStream};

use crate::device::{FunctionCache, Kernels, StepTimer};
use crate::paper::{DeviceKeys, PaperCache, Selection, SOFTMAX_REL_TOL};

/// The workload's cache on the device plus the regions a decoder needs.
pub struct EngineCache {
    pub paper: PaperCache,
    seq_lens: Vec<i32>,
    out: DeviceBuffer<f32>,
    metadata: Option<DeviceBuffer<u8>>,
}

/// A decoder with its planned step and its own workspace, on one [`EngineCache`].
pub struct Session {
    pub decoder: Decoder,
    pub step: Step,
    workspace: DeviceBuffer<u8>,
}

impl Session {
    /// The 32-bit words of workspace slot `name` after the last step (`None` when the
    /// method's layout has no such slot).
    pub fn slot(&self, name: &str) -> Result<Option<Vec<u32>>> {
        slot_words(&self.workspace, self.decoder.planner().workspace_layout(), name)
    }

    /// Device address of workspace slot `name`.
    fn slot_ptr(&self, name: &str) -> Result<u64> {
        let slot = self
            .decoder
            .planner()
            .workspace_layout()
            .get(name)
            .with_context(|| format!("workspace has no `{name}`"))?;
        Ok(self.workspace.device_ptr() + slot.offset)
    }
}

/// What one step read and kept, summed over the batch (see `crate::record::step_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepTraffic {
    /// The `support` slot summed over query heads.
    pub support_rows: u64,
    /// `sel_count` summed over (sequence, KV head): page selectors only.
    pub selected_pages: Option<u64>,
    /// The smallest and the largest `sel_count` of one (sequence, KV head).
    pub selected_pages_range: Option<(u64, u64)>,
    /// Certified-exact's `kept` slot summed over query heads.
    pub kept_rows: Option<u64>,
}

/// The softmax top-k (Quest) baseline on an [`EngineCache`]: the engine's own top-k selection
/// (the `page_score_box` and `select_topk` launches of a `Method::TopK` session, with the
/// bundle's rows) followed by the softmax decode of
/// `entkv_kernels::pipelines::softmax_topk_pipeline` (default tile, generated and loaded here:
/// bundles hold no softmax family), which reads the selection in place in the session's
/// workspace. So the baseline and entmax top-k keep the same pages and differ only in the
/// decode, as in the paper's comparison. The decode's kernels are loaded through the caller's
/// [`FunctionCache`]: they depend on the spec and tile only, so one compilation serves every
/// length.
pub struct SoftmaxTopk {
    decode: Pipeline,
}

impl SoftmaxTopk {
    /// The decode for `cache`'s shape and the top-k session's `budget_pages`.
    pub fn new(gpu: &Gpu, cache: &EngineCache, budget_pages: u32) -> Result<SoftmaxTopk> {
        let (spec, shape) = (&cache.paper.spec, &cache.paper.shape);
        Ok(SoftmaxTopk {
            decode: softmax_topk_pipeline(spec, shape, budget_pages as i32, gpu.info().sm_count)?,
        })
    }

    /// Allocate the decode's partials and output in `cache` (poisoned).
    pub fn prepare(&self, gpu: &Gpu, cache: &mut EngineCache) -> Result<()> {
        cache.paper.prepare(gpu, &self.decode)
    }

    /// Launch on `stream`: the selection of `s` (a `Method::TopK` session on `cache`) first
    /// when `select`, then the softmax decode; without `select` the decode reads the last
    /// selection (the decode stage alone).
    pub fn launch(
        &self,
        fns: &mut FunctionCache,
        cache: &EngineCache,
        s: &Session,
        stream: RawStream,
        select: bool,
    ) -> Result<()> {
        if select {
            let calls: Vec<BoundCall> = s
                .step
                .plan()
                .calls
                .iter()
                .filter(|c| matches!(c.family, KernelFamily::PageScoreBox | KernelFamily::SelectTopk))
                .cloned()
                .collect();
            anyhow::ensure!(
                [KernelFamily::PageScoreBox, KernelFamily::SelectTopk]
                    .iter()
                    .all(|f| calls.iter().any(|c| c.family == *f)),
                "not a top-k step: it has no page_score_box or select_topk launch"
            );
            // SAFETY: the buffers describe `cache`'s allocations and the session's workspace.
            unsafe {
                s.decoder
                    .launch_bound(s.step.plan(), &calls, stream, &cache.buffers(&s.workspace))?
            };
        }
        let external = [
            ("sel_pages", s.slot_ptr("sel_pages")?),
            ("sel_count", s.slot_ptr("sel_count")?),
        ];
        // SAFETY: `sel_pages` [batch, kv_heads, max_pages] and `sel_count` [batch, kv_heads]
        // (i32) are the session's slots, sized by the planner for this cache's shape, which the
        // pipeline was planned for; the workspace outlives the launches (callers synchronise).
        unsafe {
            cache
                .paper
                .dev
                .launch_calls_with(fns, &self.decode.calls, stream, &external)
        }
    }

    /// CUDA-event time (ms) of one [`SoftmaxTopk::launch`].
    pub fn time(
        &self,
        fns: &mut FunctionCache,
        gpu: &Gpu,
        cache: &EngineCache,
        s: &Session,
        timer: &mut StepTimer,
        select: bool,
    ) -> Result<f64> {
        let stream = gpu.stream_raw();
        timer.time(stream, || self.launch(fns, cache, s, stream, select))
    }

    /// Run the whole step on a poisoned output and compare `samples` sampled heads with softmax
    /// attention over their selection in float64: (largest relative error, passed). Every head
    /// must be finite.
    pub fn check(
        &self,
        fns: &mut FunctionCache,
        gpu: &Gpu,
        cache: &mut EngineCache,
        s: &Session,
        samples: usize,
    ) -> Result<(f64, bool)> {
        self.prepare(gpu, cache)?;
        self.launch(fns, cache, s, gpu.stream_raw(), true)?;
        gpu.synchronize()?;
        let out = cache.paper.dev.get("out")?.to_f64_vec();
        let sel = cache
            .selection(s)?
            .context("the top-k session wrote no selection")?;
        let worst = cache.paper.check_softmax_selection(&out, samples, &sel)?;
        let finite = out.iter().all(|x| x.is_finite());
        Ok((worst, finite && worst <= SOFTMAX_REL_TOL))
    }

    /// The decode stage's name in tables (it is no bundle family).
    pub const STAGE: &'static str = "decode_softmax_topk";
}

impl EngineCache {
    /// `batch` sequences of `n` tokens, `kv_heads` KV heads, pages scattered over the pool,
    /// iid normal keys.
    pub fn new(
        gpu: &Gpu,
        kernels: &mut Kernels,
        spec: PagedSpec,
        batch: u32,
        kv_heads: u32,
        n: u64,
        seed: u64,
    ) -> Result<EngineCache> {
        EngineCache::with_keys(gpu, kernels, spec, batch, kv_heads, n, seed, DeviceKeys::Normal)
    }

    /// [`EngineCache::new`] with keys generated as `keys` says ([`PaperCache::with_keys`]).
    #[allow(clippy::too_many_arguments)]
    pub fn with_keys(
        gpu: &Gpu,
        kernels: &mut Kernels,
        spec: PagedSpec,
        batch: u32,
        kv_heads: u32,
        n: u64,
        seed: u64,
        keys: DeviceKeys,
    ) -> Result<EngineCache> {
        let paper = PaperCache::with_keys(gpu, kernels, spec, batch, kv_heads, n, seed, keys)?;
        let heads = batch as usize * paper.shape.q_heads(&spec) as usize;
        Ok(EngineCache {
            seq_lens: vec![n as i32; batch as usize],
            out: DeviceBuffer::alloc_zeros(gpu, heads * spec.decode.head_dim as usize)?,
            metadata: None,
            paper,
        })
    }

    /// Bytes of K and V of the whole cache.
    pub fn kv_bytes(&self) -> u64 {
        2 * self.paper.shape.pool_elems(&self.paper.spec)
            * self.paper.spec.decode.kv_dtype.size_bytes() as u64
    }

    /// The decoder problem of this cache for `method`.
    pub fn problem(&self, method: Method) -> Problem {
        shape_problem(&self.paper.spec, &self.paper.shape, method)
    }

    /// Plan `dec`'s step on this cache with a workspace of its own; the metadata is built on
    /// first need and kept across decoders (its layout does not depend on method or tiles).
    pub fn session(&mut self, gpu: &Gpu, dec: Decoder) -> Result<Session> {
        let workspace = DeviceBuffer::alloc_zeros(gpu, dec.workspace_size().max(256) as usize)?;
        if dec.metadata_size() > 0 {
            match &self.metadata {
                Some(m) if m.size_bytes() as u64 == dec.metadata_size() => {}
                Some(m) => anyhow::bail!(
                    "metadata layouts differ between decoders ({} vs {} bytes)",
                    m.size_bytes(),
                    dec.metadata_size()
                ),
                None => {
                    self.metadata = Some(DeviceBuffer::alloc_zeros(gpu, dec.metadata_size() as usize)?);
                    let b = self.buffers(&workspace);
                    // SAFETY: the buffers describe this cache's allocations.
                    unsafe {
                        dec.build_metadata(
                            gpu.stream_raw(),
                            &self.seq_lens,
                            &self.paper.block_table,
                            &b.k_pool,
                            b.metadata,
                        )?
                    };
                    gpu.synchronize()?;
                }
            }
        }
        let step = dec.plan(&self.seq_lens, &self.paper.block_table)?;
        Ok(Session {
            decoder: dec,
            step,
            workspace,
        })
    }

    /// The engine's view of this cache.
    pub fn buffers(&self, workspace: &DeviceBuffer<u8>) -> DecodeBuffers {
        let (s, sh) = (&self.paper.spec, &self.paper.shape);
        let dev = &self.paper.dev;
        let ptr = |name: &str| dev.device_ptr(name).unwrap_or(0);
        let (b, h, d) = (sh.batch as u64, sh.q_heads(s) as u64, s.decode.head_dim as u64);
        let kv: Elem = s.decode.kv_dtype.into();
        let pool = [sh.num_pages as u64, sh.kv_heads as u64, s.page_size as u64, d];
        DecodeBuffers {
            q: DeviceTensor::contiguous(ptr("q"), s.decode.q_dtype.into(), &[b, h, d]),
            k_pool: DeviceTensor::contiguous(ptr("k_pool"), kv, &pool),
            v_pool: DeviceTensor::contiguous(ptr("v_pool"), kv, &pool),
            block_table: DeviceTensor::contiguous(ptr("block_table"), Elem::I32, &[b, sh.max_pages as u64]),
            seq_lens: DeviceTensor::contiguous(ptr("seq_lens"), Elem::I32, &[b]),
            alibi_slopes: s
                .alibi
                .then(|| DeviceTensor::contiguous(ptr("alibi_slopes"), Elem::F32, &[h])),
            out: DeviceTensor::contiguous(self.out.device_ptr(), Elem::F32, &[b, h, d]),
            metadata: self
                .metadata
                .as_ref()
                .map_or(DeviceRegion::default(), |m| DeviceRegion {
                    ptr: m.device_ptr(),
                    bytes: m.size_bytes() as u64,
                }),
            workspace: DeviceRegion {
                ptr: workspace.device_ptr(),
                bytes: workspace.size_bytes() as u64,
            },
        }
    }

    /// Run the whole step once and wait.
    pub fn run(&self, gpu: &Gpu, s: &Session) -> Result<()> {
        // SAFETY: the buffers describe this cache's allocations and the session's workspace.
        unsafe {
            s.decoder
                .run(&s.step, gpu.stream_raw(), &self.buffers(&s.workspace))?
        };
        gpu.synchronize()?;
        Ok(())
    }

    /// Output, τ and support of the last step (its selection, up to 50 MB at 1M, is read apart
    /// by [`EngineCache::selection`] when a check needs it).
    pub fn outputs(&self, s: &Session) -> Result<DenseOutputs> {
        let heads = self.out.len() / self.paper.spec.decode.head_dim as usize;
        let tau = s.slot("tau")?.context("workspace has no `tau`")?;
        let support = s.slot("support")?.context("workspace has no `support`")?;
        let got = DenseOutputs {
            out: self.out.to_host()?.into_iter().map(f64::from).collect(),
            tau: tau[..heads].iter().map(|&b| f32::from_bits(b) as f64).collect(),
            support: support[..heads].iter().map(|&s| s as i32 as i64).collect(),
        };
        Ok(got)
    }

    /// The selection of `s`'s last step (`None` for methods that select no pages).
    pub fn selection(&self, s: &Session) -> Result<Option<Selection>> {
        Ok(match (s.slot("sel_pages")?, s.slot("sel_count")?) {
            (Some(p), Some(c)) => Some(Selection {
                pages: p.into_iter().map(|v| v as i32).collect(),
                count: c.into_iter().map(|v| v as i32).collect(),
            }),
            _ => None,
        })
    }

    /// What `s`'s last step read and kept, summed over the batch: the inputs of the byte model
    /// (`crate::record::step_bytes`) and of the kept fraction.
    pub fn traffic(&self, s: &Session) -> Result<StepTraffic> {
        let sh = &self.paper.shape;
        let kv_rows = (sh.batch * sh.kv_heads) as usize;
        let heads = kv_rows * self.paper.spec.decode.group as usize;
        let counts = |name: &str, len: usize| -> Result<Option<Vec<u64>>> {
            Ok(s.slot(name)?
                .map(|w| w[..len].iter().map(|&v| (v as i32).max(0) as u64).collect()))
        };
        let sum = |name: &str, len: usize| -> Result<Option<u64>> {
            Ok(counts(name, len)?.map(|c| c.iter().sum()))
        };
        let selected = counts("sel_count", kv_rows)?;
        Ok(StepTraffic {
            support_rows: sum("support", heads)?.context("workspace has no `support`")?,
            selected_pages: selected.as_ref().map(|c| c.iter().sum()),
            selected_pages_range: selected
                .as_ref()
                .and_then(|c| Some((*c.iter().min()?, *c.iter().max()?))),
            kept_rows: sum("kept", heads)?,
        })
    }

    /// Run the step on a NaN-poisoned output (a head it fails to write cannot pass) and read
    /// the results back.
    pub fn run_outputs(&mut self, gpu: &Gpu, s: &Session) -> Result<DenseOutputs> {
        self.out.fill_bytes(0xff)?;
        self.run(gpu, s)?;
        self.outputs(s)
    }

    /// Run the step and compare `samples` sampled heads with the float64 reference (entmax over
    /// each head's selection for the selectors, full cache otherwise).
    pub fn check(&mut self, gpu: &Gpu, s: &Session, samples: usize) -> Result<DenseCheck> {
        let got = self.run_outputs(gpu, s)?;
        let selected = matches!(s.step.plan().method, Method::TopK { .. } | Method::Gaussian);
        let sel = if selected { self.selection(s)? } else { None };
        self.paper.check_sampled(&got, samples, sel.as_ref())
    }

    /// The calls of `step` that belong to `family` (the metadata build for `PageMeta`).
    pub fn family_calls(&self, s: &Session, family: KernelFamily) -> Result<Vec<BoundCall>> {
        let planner = s.decoder.planner();
        if family == KernelFamily::PageMeta {
            let pages = planner.full_pages(&self.seq_lens, &self.paper.block_table)?;
            return Ok(planner.plan_build_metadata(pages.len() as u32)?);
        }
        let calls: Vec<BoundCall> = s
            .step
            .plan()
            .calls
            .iter()
            .filter(|c| c.family == family)
            .cloned()
            .collect();
        anyhow::ensure!(!calls.is_empty(), "the step has no `{family}` launch");
        Ok(calls)
    }

    /// CUDA-event time (ms) of one launch of `calls`.
    pub fn time_calls(
        &self,
        gpu: &Gpu,
        s: &Session,
        calls: &[BoundCall],
        timer: &mut StepTimer,
    ) -> Result<f64> {
        let stream = gpu.stream_raw();
        let b = self.buffers(&s.workspace);
        // SAFETY: the stream is the Gpu's own; the buffers describe this cache's allocations;
        // the step ran once (`check` or `run`), so later stages read valid selections.
        timer.time(stream, || unsafe {
            Ok(s.decoder.launch_bound(s.step.plan(), calls, stream, &b)?)
        })
    }

    /// CUDA-event time (ms) of one whole step of `s`, launched as an engine launches it
    /// (`Decoder::run` with the functions the step looked up when it was planned).
    pub fn time_step(&self, gpu: &Gpu, s: &Session, timer: &mut StepTimer) -> Result<f64> {
        let stream = gpu.stream_raw();
        let b = self.buffers(&s.workspace);
        // SAFETY: the stream is the Gpu's own; the buffers describe this cache's allocations
        // and the session's workspace.
        timer.time(stream, || unsafe { Ok(s.decoder.run(&s.step, stream, &b)?) })
    }
}

/// Copies of a cache of `kv_bytes` bytes of K and V to rotate through so that timed runs do
/// not find their inputs in an L2 of `l2_bytes` (more than 4 × L2 in all; 1 to 16 copies).
pub fn rotation_copies(l2_bytes: u64, kv_bytes: u64) -> usize {
    (4 * l2_bytes.max(1)).div_ceil(kv_bytes.max(1)).clamp(1, 16) as usize
}

/// The decoder problem of a host-data case whose inputs have `shape`, for `method`, sized for
/// exactly the case's batch.
pub fn case_problem(case: &PagedCase, shape: &PagedShape, method: Method) -> Problem {
    let shape = PagedShape {
        batch: case.batch(),
        kv_heads: case.kv_heads,
        ..*shape
    };
    shape_problem(&case.spec, &shape, method)
}

/// The decoder problem of `spec` sized for exactly `shape` (its batch, KV heads and pool), for
/// `method`: `Problem::spec` then says whether the engine can run it.
pub fn shape_problem(s: &PagedSpec, shape: &PagedShape, method: Method) -> Problem {
    Problem {
        alpha: s.decode.alpha.value(),
        head_dim: s.decode.head_dim,
        page_size: s.page_size,
        q_heads: shape.kv_heads * s.decode.group,
        kv_heads: shape.kv_heads,
        kv_dtype: s.decode.kv_dtype,
        alibi: s.alibi,
        sketch_bits: s.sketch_bits,
        method,
        max_batch: shape.batch,
        num_pages: shape.num_pages,
        max_pages: shape.max_pages,
        check_device_ids: false,
    }
}

/// A selector's output read back (`sel_pages` `[batch, kv_heads, max_pages]`, `sel_count`
/// `[batch, kv_heads]`) as the selected logical pages per (sequence, KV head), the form
/// `selected_reference` takes. Each row must be in the format of `entkv_abi::paged`: a count
/// in `1..=max_pages`, pages strictly ascending inside the sequence, its last page last (a
/// poisoned or unwritten row fails here instead of reading as pages of its own).
pub fn per_head_selection(
    pages: &[i32],
    count: &[i32],
    seq_lens: &[i32],
    page_size: usize,
    kv_heads: usize,
    max_pages: usize,
) -> Result<Vec<Vec<Vec<i32>>>> {
    let batch = seq_lens.len();
    anyhow::ensure!(
        count.len() >= batch * kv_heads && pages.len() >= batch * kv_heads * max_pages,
        "selection buffers too small: {} counts, {} pages for {batch} × {kv_heads} heads of {max_pages} pages",
        count.len(),
        pages.len()
    );
    let mut per = Vec::with_capacity(batch);
    for b in 0..batch {
        let mut heads = Vec::with_capacity(kv_heads);
        for h in 0..kv_heads {
            let n = count[b * kv_heads + h];
            anyhow::ensure!(
                n >= 1 && n as usize <= max_pages,
                "sel_count[{b}][{h}] = {n}, expected 1..={max_pages}"
            );
            let row = &pages[(b * kv_heads + h) * max_pages..][..n as usize];
            let seq_pages = (seq_lens[b].max(1) as usize).div_ceil(page_size);
            check_selection_row(row, seq_pages)
                .with_context(|| format!("selection of sequence {b}, KV head {h}"))?;
            heads.push(row.to_vec());
        }
        per.push(heads);
    }
    Ok(per)
}

/// One selection row read back from the GPU (i32 ids), checked by
/// `entkv_abi::check_selection_row`.
pub fn check_selection_row(row: &[i32], seq_pages: usize) -> Result<()> {
    let ids: Vec<i64> = row.iter().map(|&j| j as i64).collect();
    Ok(entkv_abi::check_selection_row(&ids, seq_pages)?)
}

/// The 32-bit words of workspace slot `name` (`None` when the layout has no such slot), read
/// alone: a decode's workspace can hold gigabytes of candidates.
pub fn slot_words(
    workspace: &DeviceBuffer<u8>,
    layout: &entkv_runtime::engine::RegionLayout,
    name: &str,
) -> Result<Option<Vec<u32>>> {
    let Some(slot) = layout.get(name) else {
        return Ok(None);
    };
    let bytes = workspace.range_to_host(slot.offset as usize, slot.bytes() as usize)?;
    Ok(Some(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    ))
}

/// A step of a [`HostCase`] ready to run, with the regions its buffers point into.
struct PreparedStep {
    workspace: DeviceBuffer<u8>,
    _metadata: DeviceBuffer<u8>,
    buffers: DecodeBuffers,
    step: Step,
}

/// A small seeded paged problem with host data (exact float64 reference), uploaded for the
/// engine: odd lengths, pages scattered over a pool with NaN-filled spare pages.
pub struct HostCase {
    pub case: PagedCase,
    pub x: PagedInputs,
    q: DeviceBuffer<u8>,
    k: DeviceBuffer<u8>,
    v: DeviceBuffer<u8>,
    block_table: DeviceBuffer<i32>,
    seq_lens: DeviceBuffer<i32>,
    alibi: Option<DeviceBuffer<f32>>,
    out: DeviceBuffer<f32>,
}

impl HostCase {
    pub fn new(gpu: &Gpu, case: PagedCase) -> Result<HostCase> {
        let x = case.inputs();
        Ok(HostCase {
            q: DeviceBuffer::from_host(gpu, &x.q.to_le_bytes())?,
            k: DeviceBuffer::from_host(gpu, &x.k_pool.to_le_bytes())?,
            v: DeviceBuffer::from_host(gpu, &x.v_pool.to_le_bytes())?,
            block_table: DeviceBuffer::from_host(gpu, &x.block_table)?,
            seq_lens: DeviceBuffer::from_host(gpu, &x.seq_lens)?,
            alibi: if x.alibi_slopes.is_empty() {
                None
            } else {
                Some(DeviceBuffer::from_host(gpu, &x.alibi_slopes)?)
            },
            out: DeviceBuffer::alloc_zeros(gpu, x.q.len())?,
            case,
            x,
        })
    }

    /// The decoder problem of this case for `method`.
    pub fn problem(&self, method: Method) -> Problem {
        case_problem(&self.case, &self.x.shape, method)
    }

    fn buffers(&self, workspace: &DeviceBuffer<u8>, metadata: &DeviceBuffer<u8>) -> DecodeBuffers {
        let s = &self.case.spec;
        let (b, h, d) = (
            self.case.batch() as u64,
            self.case.q_heads() as u64,
            s.decode.head_dim as u64,
        );
        let sh = &self.x.shape;
        let pool = [sh.num_pages as u64, sh.kv_heads as u64, s.page_size as u64, d];
        let kv: Elem = s.decode.kv_dtype.into();
        DecodeBuffers {
            q: DeviceTensor::contiguous(self.q.device_ptr(), s.decode.q_dtype.into(), &[b, h, d]),
            k_pool: DeviceTensor::contiguous(self.k.device_ptr(), kv, &pool),
            v_pool: DeviceTensor::contiguous(self.v.device_ptr(), kv, &pool),
            block_table: DeviceTensor::contiguous(
                self.block_table.device_ptr(),
                Elem::I32,
                &[b, sh.max_pages as u64],
            ),
            seq_lens: DeviceTensor::contiguous(self.seq_lens.device_ptr(), Elem::I32, &[b]),
            alibi_slopes: self
                .alibi
                .as_ref()
                .map(|a| DeviceTensor::contiguous(a.device_ptr(), Elem::F32, &[h])),
            out: DeviceTensor::contiguous(self.out.device_ptr(), Elem::F32, &[b, h, d]),
            metadata: DeviceRegion {
                ptr: metadata.device_ptr(),
                bytes: metadata.size_bytes() as u64,
            },
            workspace: DeviceRegion {
                ptr: workspace.device_ptr(),
                bytes: workspace.size_bytes() as u64,
            },
        }
    }

    /// One step of `dec` (made with `check_device_ids` for [`HostCase::problem`]) planned on
    /// the host copies, run after the device's lengths and block table were replaced by `lens`
    /// and `table` (restored afterwards): the id faults it recorded, read back through
    /// `Decoder::device_id_faults`, and its output.
    pub fn run_on_device_ids(
        &mut self,
        gpu: &Gpu,
        dec: &Decoder,
        lens: &[i32],
        table: &[i32],
    ) -> Result<(Vec<IdFault>, Vec<f32>)> {
        let r = self.prepared_step(gpu, dec)?;
        let stream = gpu.stream_raw();
        gpu.synchronize()?;
        self.seq_lens.copy_from_host(lens)?;
        self.block_table.copy_from_host(table)?;
        // SAFETY: every buffer was allocated with the shapes the problem describes; the device
        // ids replaced above are what the check is for.
        let faults = unsafe {
            dec.run(&r.step, stream, &r.buffers)?;
            dec.device_id_faults(&r.step, stream, r.buffers.workspace)?
        };
        let out = self.out.to_host()?;
        self.seq_lens.copy_from_host(&self.x.seq_lens)?;
        self.block_table.copy_from_host(&self.x.block_table)?;
        Ok((faults, out))
    }

    /// A step of `dec` planned on the host copies, with a poisoned workspace (NaN floats, −1
    /// integers: a slot the step should write and did not shows, where zeros would read as
    /// page 0 and a zero threshold), a fresh metadata region built for the batch, and a
    /// poisoned output: ready to run.
    fn prepared_step(&mut self, gpu: &Gpu, dec: &Decoder) -> Result<PreparedStep> {
        let mut workspace = DeviceBuffer::<u8>::alloc_zeros(gpu, dec.workspace_size().max(256) as usize)?;
        let metadata = DeviceBuffer::<u8>::alloc_zeros(gpu, dec.metadata_size().max(256) as usize)?;
        workspace.fill_bytes(0xff)?;
        self.out.fill_bytes(0xff)?;
        let buffers = self.buffers(&workspace, &metadata);
        let step = dec.plan(&self.x.seq_lens, &self.x.block_table)?;
        // SAFETY: every buffer was allocated above with the shapes the problem describes.
        unsafe {
            dec.build_metadata(
                gpu.stream_raw(),
                &self.x.seq_lens,
                &self.x.block_table,
                &buffers.k_pool,
                buffers.metadata,
            )?;
        }
        Ok(PreparedStep {
            workspace,
            _metadata: metadata,
            buffers,
            step,
        })
    }

    /// Build the metadata, run one step of `dec` (made for [`HostCase::problem`]) on a NaN
    /// output, and compare every head with the float64 reference: full-cache entmax, or entmax
    /// over each head's selection for the selectors.
    pub fn check(&mut self, gpu: &Gpu, dec: &Decoder) -> Result<DenseCheck> {
        // Every field bound: the regions must live until the results are read back.
        let PreparedStep {
            workspace,
            _metadata: _metadata_alive,
            buffers: b,
            step,
        } = self.prepared_step(gpu, dec)?;
        // SAFETY: every buffer was allocated with the shapes the problem describes.
        unsafe { dec.run(&step, gpu.stream_raw(), &b)? };
        gpu.synchronize()?;
        let layout = dec.planner().workspace_layout();
        let ints = |name: &str| -> Result<Vec<i32>> {
            let words = slot_words(&workspace, layout, name)?
                .with_context(|| format!("workspace has no `{name}`"))?;
            Ok(words.into_iter().map(|w| w as i32).collect())
        };
        let heads = self.x.q.len() / self.case.spec.decode.head_dim as usize;
        let tau: Vec<f64> = ints("tau")?[..heads]
            .iter()
            .map(|&b| f32::from_bits(b as u32) as f64)
            .collect();
        let got = DenseOutputs {
            out: self.out.to_host()?.into_iter().map(f64::from).collect(),
            tau,
            support: ints("support")?[..heads].iter().map(|&s| s as i64).collect(),
        };
        let reference = match step.plan().method {
            Method::TopK { .. } | Method::Gaussian => {
                let per = per_head_selection(
                    &ints("sel_pages")?,
                    &ints("sel_count")?,
                    &self.x.seq_lens,
                    self.case.spec.page_size as usize,
                    self.x.shape.kv_heads as usize,
                    self.x.shape.max_pages as usize,
                )?;
                selected_reference(&self.case.spec, &self.x, &per)
            }
            _ => paged_reference(&self.case.spec, &self.x),
        };
        Ok(compare(&reference, &got, None))
    }
}
