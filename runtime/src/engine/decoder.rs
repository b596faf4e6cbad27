//! The GPU half of a decoder: device check, lazy module loading, and launches on the caller's
//! stream with the caller's pointers. `run` and `append` allocate nothing and never wait on the
//! host, so a step can be captured in a CUDA graph.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::result;
use entkv_abi::{Elem, IdFault};
use entkv_bundle::{Bundle, Manifest};

use super::plan::{BoundArg, BoundCall, DecodePlanner, Region, StepPlan, TensorRole, META_PAGES};
use super::tensor::{DecodeBuffers, DeviceRegion, DeviceTensor};
use super::{EngineError, Problem};
use crate::ctx::CtxGuard;
use crate::error::drv;
use crate::{launch, Function, Gpu, KernelArg, Module, RawStream, MAX_KERNEL_ARGS};

/// A planned step with its kernels loaded: pass it to [`Decoder::run`] and [`Decoder::append`].
#[derive(Clone, Debug)]
pub struct Step {
    plan: StepPlan,
    functions: Vec<Function>,
    append_functions: Vec<Function>,
}

impl Step {
    /// The plan (method, rows and tiers, launches).
    pub fn plan(&self) -> &StepPlan {
        &self.plan
    }
}

/// How the device relates to the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMatch {
    /// The device's compute capability as `major·10 + minor`.
    pub device_sm: u32,
    /// The bundle's target.
    pub bundle_sm: u32,
    /// Whether the bundle was tuned on a GPU of this name and compute capability (its tuned
    /// rows are then measured, not borrowed).
    pub tuned_on_this_gpu: bool,
}

impl DeviceMatch {
    /// Whether a device named `name` of compute capability `(major, minor)` runs the bundle's
    /// PTX: it targets `target_sm`, which every device of that or a newer capability
    /// JIT-compiles.
    pub fn check(
        name: &str,
        (major, minor): (u32, u32),
        manifest: &Manifest,
    ) -> Result<DeviceMatch, EngineError> {
        let device_sm = major * 10 + minor;
        let bundle_sm = manifest.target_sm;
        if device_sm < bundle_sm {
            return Err(EngineError::DeviceMismatch {
                device: name.to_string(),
                device_sm,
                bundle_sm,
            });
        }
        let tuned_on_this_gpu = manifest
            .tuned_on
            .as_ref()
            .is_some_and(|t| t.gpu == name && t.sm == device_sm);
        Ok(DeviceMatch {
            device_sm,
            bundle_sm,
            tuned_on_this_gpu,
        })
    }
}

/// Loaded modules keyed by the sha256 of their PTX, shareable between decoders (one per GPU
/// context): decoders made from bundles that share artifacts JIT-compile each artifact once.
#[derive(Clone, Debug, Default)]
pub struct ModuleCache {
    modules: Arc<Mutex<HashMap<String, Module>>>,
}

impl ModuleCache {
    /// An empty cache.
    pub fn new() -> ModuleCache {
        ModuleCache::default()
    }

    /// The module of `ptx` (whose sha256 is `sha256`), loaded on `gpu` on first use.
    pub fn get_or_load(&self, gpu: &Gpu, sha256: &str, ptx: &str) -> Result<Module, EngineError> {
        if let Some(m) = self.modules.lock().unwrap_or_else(|e| e.into_inner()).get(sha256) {
            return Ok(m.clone());
        }
        // JIT outside the lock, so lookups of loaded modules never wait on a JIT (the driver
        // compiles one module at a time per process anyway); a module two threads raced to
        // load is kept once.
        let m = gpu.load_module(ptx)?;
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        Ok(modules.entry(sha256.to_string()).or_insert(m).clone())
    }

    /// Whether the module with this PTX digest is loaded.
    pub fn contains(&self, sha256: &str) -> bool {
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(sha256)
    }

    /// Modules loaded so far.
    pub fn len(&self) -> usize {
        self.modules.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing was loaded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A decoder for one [`Problem`] on one GPU, from one bundle.
#[derive(Debug)]
pub struct Decoder {
    gpu: Gpu,
    planner: DecodePlanner,
    device: DeviceMatch,
    modules: ModuleCache,
    functions: Mutex<HashMap<String, Function>>,
}

impl Decoder {
    /// Check the problem and the device against the bundle (the PTX targets `target_sm`; any
    /// device of that or a newer compute capability JIT-compiles it). Loads nothing yet.
    pub fn new(gpu: &Gpu, bundle: Arc<Bundle>, problem: &Problem) -> Result<Decoder, EngineError> {
        Decoder::with_module_cache(gpu, bundle, problem, ModuleCache::new())
    }

    /// As [`Decoder::new`], loading modules through a cache shared with other decoders.
    pub fn with_module_cache(
        gpu: &Gpu,
        bundle: Arc<Bundle>,
        problem: &Problem,
        modules: ModuleCache,
    ) -> Result<Decoder, EngineError> {
        let info = gpu.info();
        let device = DeviceMatch::check(&info.name, info.compute_capability, bundle.manifest())?;
        let planner = DecodePlanner::new(problem, bundle, info.sm_count)?;
        Ok(Decoder {
            gpu: gpu.clone(),
            planner,
            device,
            modules,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The host-side planner (layouts, sizes).
    pub fn planner(&self) -> &DecodePlanner {
        &self.planner
    }

    /// How the device matched the bundle.
    pub fn device_match(&self) -> &DeviceMatch {
        &self.device
    }

    /// Bytes of workspace [`Decoder::run`] needs.
    pub fn workspace_size(&self) -> u64 {
        self.planner.workspace_size()
    }

    /// Bytes of page metadata the decoder keeps (0 for the dense method).
    pub fn metadata_size(&self) -> u64 {
        self.planner.metadata_size()
    }

    /// Load now every module a step of this decoder's method can launch
    /// ([`DecodePlanner::modules`]: its kernel families' rows, every length bucket).
    /// Otherwise the first [`Decoder::plan`] that needs a module loads it, and loading is the
    /// driver's JIT: tenths of a second to a second a module on an H200, one module at a time
    /// per process (the driver caches the result on disk, `CUDA_CACHE_PATH`, for the next
    /// process). An engine calls this at start-up to keep that off its first decode steps.
    /// Returns how many modules the method uses.
    pub fn load_modules(&self) -> Result<usize, EngineError> {
        let modules = self.planner.modules();
        for module in &modules {
            self.module(module)?;
        }
        Ok(modules.len())
    }

    /// The bundle's artifact `module`, loaded through the module cache.
    fn module(&self, module: &str) -> Result<Module, EngineError> {
        let bundle = self.planner.bundle();
        let missing = || EngineError::Internal(format!("bundle has no artifact `{module}`"));
        let ptx = bundle.ptx(module).ok_or_else(missing)?;
        let sha = &bundle
            .manifest()
            .artifacts
            .iter()
            .find(|a| a.file == module)
            .ok_or_else(missing)?
            .sha256;
        self.modules.get_or_load(&self.gpu, sha, ptx)
    }

    /// Modules loaded so far (through this decoder's module cache, which other decoders may
    /// share).
    pub fn loaded_modules(&self) -> usize {
        self.modules.len()
    }

    /// Plan a step (host copies of the lengths and block table; see [`DecodePlanner::plan`])
    /// and load the modules it needs (once per module, on first use; see
    /// [`Decoder::load_modules`]).
    pub fn plan(&self, seq_lens: &[i32], block_table: &[i32]) -> Result<Step, EngineError> {
        let plan = self.planner.plan(seq_lens, block_table)?;
        let functions = self.functions_for(&plan.calls)?;
        let append_functions = self.functions_for(&plan.append_calls)?;
        Ok(Step {
            plan,
            functions,
            append_functions,
        })
    }

    fn function(&self, module: &str, entry: &str) -> Result<Function, EngineError> {
        let mut fns = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = fns.get(entry) {
            return Ok(f.clone());
        }
        let f = self.module(module)?.function(entry)?;
        fns.insert(entry.to_string(), f.clone());
        Ok(f)
    }

    /// Look up every call's function and check its launch once (geometry, argument sizes).
    fn functions_for(&self, calls: &[BoundCall]) -> Result<Vec<Function>, EngineError> {
        calls
            .iter()
            .map(|c| {
                let f = self.function(&c.module, &c.entry)?;
                if c.geometry.shared_bytes > f.max_dynamic_shared_bytes() {
                    f.set_max_dynamic_shared_bytes(c.geometry.shared_bytes)?;
                }
                let probe: Vec<KernelArg> = c
                    .args
                    .iter()
                    .map(|a| match a {
                        BoundArg::Scalar(k) => *k,
                        _ => KernelArg::Ptr(0),
                    })
                    .collect();
                f.check_launch(&c.geometry, &probe)?;
                Ok(f)
            })
            .collect()
    }

    /// Launch `calls` on `stream`; arguments go through a stack array.
    ///
    /// # Safety
    /// As [`Decoder::run`].
    unsafe fn launch_calls(
        &self,
        calls: &[BoundCall],
        functions: &[Function],
        stream: RawStream,
        b: &DecodeBuffers,
    ) -> Result<(), EngineError> {
        for (call, f) in calls.iter().zip(functions) {
            let mut args = [KernelArg::I32(0); MAX_KERNEL_ARGS];
            for (slot, a) in args.iter_mut().zip(&call.args) {
                *slot = match a {
                    BoundArg::Scalar(k) => *k,
                    BoundArg::Tensor(role) => KernelArg::Ptr(tensor_ptr(b, *role)),
                    BoundArg::Region { region, offset, .. } => KernelArg::Ptr(
                        match region {
                            Region::Workspace => b.workspace.ptr,
                            Region::Metadata => b.metadata.ptr,
                        } + offset,
                    ),
                };
            }
            // SAFETY: the caller upholds `run`'s contract; the tensors and regions were checked
            // against the shapes and sizes the plan's launches touch.
            unsafe { launch(f, &call.geometry, stream, &args[..call.args.len()])? };
        }
        Ok(())
    }

    /// Run the decode step `step` on `stream`: asynchronous, no allocation, no host
    /// synchronisation (capturable in a CUDA graph). Writes `out` and the workspace's `tau`,
    /// `support` (and `kept`) slots.
    ///
    /// # Safety
    /// `stream` is a live stream of the GPU's context (or null), and every pointer in `buffers`
    /// is device memory of that context with the described shape, valid until the step has
    /// finished; the device's block table and lengths hold what the step was planned for: the
    /// page ids may change, but each length stays between 1 and [`StepPlan::longest`] and every
    /// page id it references in `0..num_pages`. [`Decoder::plan`] checked that on its host
    /// copies. Without [`Problem::check_device_ids`] the kernels do not check the device's, and
    /// an id outside the pool makes them read, and `append` write, outside it; with it, the step
    /// clamps them first and records what was bad ([`Decoder::device_id_faults`]).
    pub unsafe fn run(
        &self,
        step: &Step,
        stream: RawStream,
        buffers: &DecodeBuffers,
    ) -> Result<(), EngineError> {
        self.planner.check_step(&step.plan, buffers)?;
        // SAFETY: forwarded contract.
        unsafe { self.launch_calls(&step.plan.calls, &step.functions, stream, buffers) }
    }

    /// Bring the metadata up to date after each sequence of the step gained one token (its K/V
    /// written to the pools, its length incremented): rebuilds the page the new token completed.
    /// A no-op for the dense method. Asynchronous, no allocation.
    ///
    /// # Safety
    /// As [`Decoder::run`].
    pub unsafe fn append(
        &self,
        step: &Step,
        stream: RawStream,
        buffers: &DecodeBuffers,
    ) -> Result<(), EngineError> {
        self.planner.check_step(&step.plan, buffers)?;
        // SAFETY: forwarded contract.
        unsafe { self.launch_calls(&step.plan.append_calls, &step.append_functions, stream, buffers) }
    }

    /// The bad lengths and page ids the last `run` or `append` of `step` found on the device
    /// (one [`IdFault`] a sequence that had any; empty when all were in range), with
    /// [`Problem::check_device_ids`]. Waits for `stream` (a host sync: for checks between
    /// steps, not inside a captured one).
    ///
    /// # Safety
    /// `stream` and `workspace` as in [`Decoder::run`], and a step of `step` ran on them.
    pub unsafe fn device_id_faults(
        &self,
        step: &Step,
        stream: RawStream,
        workspace: DeviceRegion,
    ) -> Result<Vec<IdFault>, EngineError> {
        let slot = self.planner.id_fault_slot(&step.plan)?;
        workspace.check("workspace", self.planner.workspace_size())?;
        let mut records = vec![0i32; slot.len as usize];
        let _ctx = CtxGuard::bind(self.gpu.shared.cu_ctx())?;
        // SAFETY: the slot lies inside the checked workspace and holds `records.len()` i32s;
        // `records` is not touched until the stream is synchronised.
        unsafe {
            result::memcpy_dtoh_async(&mut records, workspace.ptr + slot.offset, stream.0)
                .map_err(drv("cuMemcpyDtoHAsync"))?;
            result::stream::synchronize(stream.0).map_err(drv("cuStreamSynchronize"))?;
        }
        self.planner.id_faults(&step.plan, &records)
    }

    /// Launch `calls` — a subset of `plan`'s, or [`DecodePlanner::plan_build_metadata`]'s —
    /// after the same checks as [`Decoder::run`]. For tools that time one stage of a step
    /// (the autotuner, benchmarks); it looks functions up, so it is not for the serving path.
    ///
    /// # Safety
    /// As [`Decoder::run`]; the stages before `calls` have run on these buffers.
    pub unsafe fn launch_bound(
        &self,
        plan: &StepPlan,
        calls: &[BoundCall],
        stream: RawStream,
        buffers: &DecodeBuffers,
    ) -> Result<(), EngineError> {
        self.planner.check_step(plan, buffers)?;
        let functions = self.functions_for(calls)?;
        // SAFETY: forwarded contract.
        unsafe { self.launch_calls(calls, &functions, stream, buffers) }
    }

    /// Build the metadata of every full page of a batch (after prefill). `seq_lens` and
    /// `block_table` are host copies of what the device holds; the distinct pages are staged
    /// into the metadata region (a pageable host→device copy: the host does not wait for the
    /// GPU, but this is not for a captured step). A no-op for the dense method.
    ///
    /// # Safety
    /// `stream`, `k_pool` and `metadata` as in [`Decoder::run`].
    pub unsafe fn build_metadata(
        &self,
        stream: RawStream,
        seq_lens: &[i32],
        block_table: &[i32],
        k_pool: &DeviceTensor,
        metadata: DeviceRegion,
    ) -> Result<(), EngineError> {
        let p = self.planner.problem();
        if !p.method.uses_metadata() {
            return Ok(());
        }
        let kv: Elem = self.planner.spec().decode.kv_dtype.into();
        let pool = [
            p.num_pages as u64,
            p.kv_heads as u64,
            p.page_size as u64,
            p.head_dim as u64,
        ];
        k_pool.check("k_pool", kv, &pool, false)?;
        metadata.check("metadata", self.planner.metadata_size())?;
        let pages = self.planner.full_pages(seq_lens, block_table)?;
        if pages.is_empty() {
            return Ok(());
        }
        let calls = self.planner.plan_build_metadata(pages.len() as u32)?;
        let functions = self.functions_for(&calls)?;
        let slot = self
            .planner
            .metadata_layout()
            .get(META_PAGES)
            .ok_or_else(|| EngineError::Internal("metadata has no page-list slot".into()))?;
        {
            let _ctx = CtxGuard::bind(self.gpu.shared.cu_ctx())?;
            // SAFETY: the slot lies inside the checked metadata region and holds `num_pages` ≥
            // `pages.len()` i32s; a pageable source is staged before the call returns.
            unsafe { result::memcpy_htod_async(metadata.ptr + slot.offset, &pages, stream.0) }
                .map_err(drv("cuMemcpyHtoDAsync"))?;
        }
        let buffers = DecodeBuffers {
            k_pool: *k_pool,
            metadata,
            ..placeholder_buffers(k_pool)
        };
        // SAFETY: build calls only read `k_pool` and the metadata region (checked above).
        unsafe { self.launch_calls(&calls, &functions, stream, &buffers) }
    }
}

/// Buffers for launches that read only `k_pool` and the metadata region.
fn placeholder_buffers(k_pool: &DeviceTensor) -> DecodeBuffers {
    DecodeBuffers {
        q: *k_pool,
        k_pool: *k_pool,
        v_pool: *k_pool,
        block_table: *k_pool,
        seq_lens: *k_pool,
        alibi_slopes: None,
        out: *k_pool,
        metadata: DeviceRegion::default(),
        workspace: DeviceRegion::default(),
    }
}

fn tensor_ptr(b: &DecodeBuffers, role: TensorRole) -> u64 {
    match role {
        TensorRole::Q => b.q.ptr,
        TensorRole::KPool => b.k_pool.ptr,
        TensorRole::VPool => b.v_pool.ptr,
        TensorRole::BlockTable => b.block_table.ptr,
        TensorRole::SeqLens => b.seq_lens.ptr,
        TensorRole::AlibiSlopes => b.alibi_slopes.map_or(0, |t| t.ptr),
        TensorRole::Out => b.out.ptr,
    }
}
