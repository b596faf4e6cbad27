//! Device-side plumbing shared by `gpu-check` and `bench`: kernels compiled and loaded on
//! demand, device tensors, the buffers of one dense decode call, and the device data generator.

use anyhow::Result;
use entkv_abi::{
    dense_entry_names, dense_finish_geometry, dense_score_geometry, DType, DecodeSpec, DensePlan, DenseTile,
    LaunchGeometry,
};
use entkv_codegen::{compile_module, Target};
use entkv_kernels::check::{DenseCase, DenseOutputs};
use entkv_kernels::data::Tensor;
use entkv_kernels::fill::fill_kernel;
use entkv_kernels::program::{ArgRef, Program};
use entkv_runtime::{launch, DeviceBuffer, Function, Gpu, GpuTimer, KernelArg, Module, RawStream};
use std::collections::HashMap;

/// Loaded dense decode kernels for one (spec, tile).
pub struct DenseFns {
    _module: Module,
    pub score: Function,
    pub finish: Function,
}

/// Compiles and loads kernels on demand, once per entry.
pub struct Kernels<'g> {
    gpu: &'g Gpu,
    pub dense: HashMap<String, DenseFns>,
    fill: HashMap<DType, (Module, Function)>,
    /// Single kernels launched as `entkv_kernels::program::Call`s (the data generators).
    pub functions: FunctionCache<'g>,
}

impl<'g> Kernels<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        Kernels {
            gpu,
            dense: HashMap::new(),
            fill: HashMap::new(),
            functions: FunctionCache::new(gpu),
        }
    }

    pub fn dense(&mut self, spec: &DecodeSpec, tile: &DenseTile) -> Result<&DenseFns> {
        let (score_name, finish_name) = dense_entry_names(spec, tile);
        if !self.dense.contains_key(&score_name) {
            let m = entkv_kernels::dense_module(spec, tile)?;
            let kernels: Vec<&entkv_dsl::Kernel> = m.kernels.iter().collect();
            let compiled = compile_module(m.name, &kernels, &Target::default())?;
            let module = self.gpu.load_module(&compiled.ptx)?;
            let fns = DenseFns {
                score: module.function(&score_name)?,
                finish: module.function(&finish_name)?,
                _module: module,
            };
            self.dense.insert(score_name.clone(), fns);
        }
        Ok(&self.dense[&score_name])
    }

    pub fn fill(&mut self, dtype: DType) -> Result<&Function> {
        if !self.fill.contains_key(&dtype) {
            let k = fill_kernel(dtype)?;
            let compiled = compile_module("fill", &[&k], &Target::default())?;
            let module = self.gpu.load_module(&compiled.ptx)?;
            let f = module.function(&k.name)?;
            self.fill.insert(dtype, (module, f));
        }
        Ok(&self.fill[&dtype].1)
    }
}

/// Storage of a tensor on the device (16-bit types as raw bits).
pub enum DevTensor {
    Half(DeviceBuffer<u16>),
    Single(DeviceBuffer<f32>),
}

impl DevTensor {
    pub fn upload(gpu: &Gpu, t: &Tensor) -> Result<DevTensor> {
        Ok(match t.dtype {
            DType::F16 | DType::BF16 => {
                let bits: Vec<u16> = t.bits.iter().map(|&b| b as u16).collect();
                DevTensor::Half(DeviceBuffer::from_host(gpu, &bits)?)
            }
            DType::F32 => DevTensor::Single(DeviceBuffer::from_host(gpu, &t.to_f32())?),
        })
    }
    pub fn alloc(gpu: &Gpu, dtype: DType, len: usize) -> Result<DevTensor> {
        Ok(match dtype {
            DType::F16 | DType::BF16 => DevTensor::Half(DeviceBuffer::alloc_zeros(gpu, len)?),
            DType::F32 => DevTensor::Single(DeviceBuffer::alloc_zeros(gpu, len)?),
        })
    }
    pub fn arg(&self) -> KernelArg {
        match self {
            DevTensor::Half(b) => b.arg(),
            DevTensor::Single(b) => b.arg(),
        }
    }
    pub fn poison(&mut self) -> Result<()> {
        match self {
            DevTensor::Half(b) => b.fill_bytes(0xff)?,
            DevTensor::Single(b) => b.fill_bytes(0xff)?,
        }
        Ok(())
    }
    pub fn to_f64(&self, dtype: DType) -> Result<Vec<f64>> {
        Ok(match self {
            DevTensor::Half(b) => b
                .to_host()?
                .into_iter()
                .map(|x| match dtype {
                    DType::BF16 => half::bf16::from_bits(x).to_f64(),
                    _ => half::f16::from_bits(x).to_f64(),
                })
                .collect(),
            DevTensor::Single(b) => b.to_host()?.into_iter().map(|x| x as f64).collect(),
        })
    }
}

/// Device buffers of one dense decode call.
pub struct DenseBuffers {
    pub q: DevTensor,
    pub k: DevTensor,
    pub v: DevTensor,
    pub cand_z: DeviceBuffer<f32>,
    pub cand_idx: DeviceBuffer<i32>,
    pub cand_count: DeviceBuffer<i32>,
    pub cand_lb: DeviceBuffer<f32>,
    pub out: DevTensor,
    pub tau: DeviceBuffer<f32>,
    pub support: DeviceBuffer<i32>,
    pub plan: DensePlan,
}

impl DenseBuffers {
    pub fn new(gpu: &Gpu, case: &DenseCase, q: DevTensor, k: DevTensor, v: DevTensor) -> Result<Self> {
        let plan = case.plan()?;
        let ws = case.workspace(&plan);
        let heads = case.shape.batch as usize * case.q_heads();
        let d = case.spec.head_dim as usize;
        let mut b = DenseBuffers {
            q,
            k,
            v,
            cand_z: DeviceBuffer::alloc_zeros(gpu, ws.cand_elems as usize)?,
            cand_idx: DeviceBuffer::alloc_zeros(gpu, ws.cand_elems as usize)?,
            cand_count: DeviceBuffer::alloc_zeros(gpu, ws.split_elems as usize)?,
            cand_lb: DeviceBuffer::alloc_zeros(gpu, ws.split_elems as usize)?,
            out: DevTensor::alloc(gpu, case.spec.out_dtype, heads * d)?,
            tau: DeviceBuffer::alloc_zeros(gpu, heads)?,
            support: DeviceBuffer::alloc_zeros(gpu, heads)?,
            plan,
        };
        b.poison()?;
        Ok(b)
    }

    /// NaN / −1 everywhere a kernel writes, so unwritten outputs cannot pass.
    pub fn poison(&mut self) -> Result<()> {
        self.cand_z.fill_bytes(0xff)?;
        self.cand_idx.fill_bytes(0xff)?;
        self.cand_count.fill_bytes(0xff)?;
        self.cand_lb.fill_bytes(0xff)?;
        self.out.poison()?;
        self.tau.fill_bytes(0xff)?;
        self.support.fill_bytes(0xff)?;
        Ok(())
    }

    /// Launch one decode step (both kernels) on `stream`.
    pub fn launch(&self, fns: &DenseFns, case: &DenseCase, stream: RawStream) -> Result<()> {
        self.launch_score(fns, case, stream)?;
        self.launch_finish(fns, case, stream)
    }

    pub fn launch_score(&self, fns: &DenseFns, case: &DenseCase, stream: RawStream) -> Result<()> {
        let args = [
            self.q.arg(),
            self.k.arg(),
            self.cand_z.arg(),
            self.cand_idx.arg(),
            self.cand_count.arg(),
            self.cand_lb.arg(),
            KernelArg::I64(case.shape.n as i64),
            KernelArg::I32(self.plan.chunks_per_split as i32),
        ];
        let g = dense_score_geometry(&case.tile, &case.shape, &self.plan);
        // SAFETY: argument order and types follow `entkv_abi::dense_score_signature`; every
        // buffer was sized from this case's shape and workspace and outlives the launch
        // (callers synchronise before dropping).
        unsafe { launch(&fns.score, &g, stream, &args)? };
        Ok(())
    }

    pub fn launch_finish(&self, fns: &DenseFns, case: &DenseCase, stream: RawStream) -> Result<()> {
        let args = [
            self.cand_z.arg(),
            self.cand_idx.arg(),
            self.cand_count.arg(),
            self.cand_lb.arg(),
            self.v.arg(),
            self.out.arg(),
            self.tau.arg(),
            self.support.arg(),
            KernelArg::I32(self.plan.splits as i32),
            KernelArg::I64(self.plan.split_len as i64),
            KernelArg::I64(case.shape.n as i64),
        ];
        let g = dense_finish_geometry(&case.spec, &case.tile, &case.shape);
        // SAFETY: as for `launch_score`, following `entkv_abi::dense_finish_signature`.
        unsafe { launch(&fns.finish, &g, stream, &args)? };
        Ok(())
    }

    pub fn outputs(&self, case: &DenseCase) -> Result<DenseOutputs> {
        Ok(DenseOutputs {
            out: self.out.to_f64(case.spec.out_dtype)?,
            tau: self.tau.to_host()?.into_iter().map(|x| x as f64).collect(),
            support: self.support.to_host()?.into_iter().map(|x| x as i64).collect(),
        })
    }
}

pub const SEED_K: u32 = 0x1234_5678;
pub const SEED_V: u32 = 0x0bad_cafe;

/// Fill `buf` (`len` elements of `dtype`) on the device with the counter-based generator.
pub fn device_fill(
    gpu: &Gpu,
    kernels: &mut Kernels,
    buf: &DevTensor,
    dtype: DType,
    len: u64,
    seed: u32,
) -> Result<()> {
    let f = kernels.fill(dtype)?;
    let geom = LaunchGeometry::linear(gpu.info().sm_count * 16, entkv_kernels::fill::FILL_THREADS);
    let args = [
        buf.arg(),
        KernelArg::I64(len as i64),
        KernelArg::U32(seed),
        KernelArg::F32(1.0),
    ];
    // SAFETY: `fill_normal(out, len, seed, scale)` writes exactly `len` elements of `buf`.
    unsafe { launch(f, &geom, gpu.stream_raw(), &args)? };
    Ok(())
}

/// How every timed region of `bench`, `bench-paper`, `gpu-check` and the tuner is measured:
/// CUDA events around the region's launches, with the stream kept busy up to the start event
/// by `entkv_kernels::lead` (so the region's first kernel is queued before its clock starts,
/// as in an engine whose step follows other GPU work); `StepTimer::idle` leaves the stream
/// idle instead, as before 2026-12-06, and the region's time then includes the host's latency
/// of launching its first kernel.
pub struct StepTimer {
    timer: GpuTimer,
    lead: Option<(Function, DeviceBuffer<u32>)>,
}

impl StepTimer {
    /// Loads the lead kernel (compiled once per process; `time_ms` makes a timer per call).
    pub fn new(gpu: &Gpu) -> Result<StepTimer> {
        static LEAD_PTX: std::sync::OnceLock<std::result::Result<(String, String), String>> =
            std::sync::OnceLock::new();
        let (name, ptx) = LEAD_PTX
            .get_or_init(|| {
                let k = entkv_kernels::lead::lead_kernel().map_err(|e| e.to_string())?;
                let compiled =
                    compile_module(&k.name, &[&k], &Target::default()).map_err(|e| e.to_string())?;
                Ok((k.name.clone(), compiled.ptx))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("compiling the timing lead kernel: {e}"))?;
        let f = gpu.load_module(ptx)?.function(name)?;
        Ok(StepTimer {
            timer: GpuTimer::new(gpu)?,
            lead: Some((f, DeviceBuffer::alloc_zeros(gpu, 1)?)),
        })
    }

    /// A timer whose regions start on an idle stream.
    pub fn idle(gpu: &Gpu) -> Result<StepTimer> {
        Ok(StepTimer {
            timer: GpuTimer::new(gpu)?,
            lead: None,
        })
    }

    /// How its regions start, as a record's `start` says: `lead` or `idle`.
    pub fn start(&self) -> &'static str {
        if self.lead.is_some() {
            "lead"
        } else {
            "idle"
        }
    }

    /// CUDA-event time (ms) of what `region` queues on `stream`, the Gpu's own stream.
    pub fn time(&mut self, stream: RawStream, region: impl FnOnce() -> Result<()>) -> Result<f64> {
        if let Some((f, out)) = &self.lead {
            let args = [
                out.arg(),
                KernelArg::I32(entkv_kernels::lead::LEAD_ROUNDS),
                KernelArg::U32(0x5eed),
            ];
            // SAFETY: `out` is a live one-element u32 buffer, the kernel's only buffer.
            unsafe { launch(f, &LaunchGeometry::linear(1, 32), stream, &args)? };
        }
        // SAFETY: the caller passes the Gpu's own live stream.
        unsafe { self.timer.record_start(stream)? };
        region()?;
        // SAFETY: as above.
        unsafe { self.timer.record_end(stream)? };
        Ok(self.timer.elapsed_ms()? as f64)
    }
}

/// CUDA-event times (ms) of `iters` runs of `f` on the Gpu's stream, after `warmup` runs.
pub fn time_ms(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    mut f: impl FnMut(RawStream) -> Result<()>,
) -> Result<Vec<f64>> {
    let stream = gpu.stream_raw();
    for _ in 0..warmup {
        f(stream)?;
    }
    let mut timer = StepTimer::new(gpu)?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        times.push(timer.time(stream, || f(stream))?);
    }
    Ok(times)
}

/// Loaded functions of single kernels, compiled on first use and cached by entry name.
pub struct FunctionCache<'g> {
    gpu: &'g Gpu,
    loaded: HashMap<String, (Module, Function)>,
}

impl<'g> FunctionCache<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        FunctionCache {
            gpu,
            loaded: HashMap::new(),
        }
    }

    pub fn get(&mut self, kernel: &entkv_dsl::Kernel) -> Result<&Function> {
        if !self.loaded.contains_key(&kernel.name) {
            let compiled = compile_module(&kernel.name, &[kernel], &Target::default())?;
            self.load(&kernel.name, &compiled.ptx)?;
        }
        Ok(&self.loaded[&kernel.name].1)
    }

    /// Load `ptx` (the driver JITs it, or reads its cache) and keep its entry `name`.
    fn load(&mut self, name: &str, ptx: &str) -> Result<()> {
        let module = self.gpu.load_module(ptx)?;
        let f = module.function(name)?;
        self.loaded.insert(name.to_string(), (module, f));
        Ok(())
    }

    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.loaded.values().map(|(_, f)| f)
    }

    /// Load compiled modules (entry name, PTX) ahead of their first use: the driver's JIT in
    /// `pool`'s worker processes when there is one (it is serialized within a process: hundreds
    /// of suite modules took minutes one at a time), then the loads here, which read the
    /// workers' cache. Entries already loaded are skipped; a failure is left for
    /// [`FunctionCache::get`] to report when the kernel is used. Returns how many were loaded.
    pub fn prefetch(
        &mut self,
        modules: &[(String, String)],
        pool: Option<&mut crate::jit_pool::JitPool>,
    ) -> usize {
        let mut seen = std::collections::HashSet::new();
        let todo: Vec<&(String, String)> = modules
            .iter()
            .filter(|(name, _)| !self.loaded.contains_key(name) && seen.insert(name.clone()))
            .collect();
        if let Some(pool) = pool {
            let texts: Vec<&str> = todo.iter().map(|(_, ptx)| ptx.as_str()).collect();
            pool.warm(&texts);
        }
        todo.into_iter()
            .filter(|(name, ptx)| self.load(name, ptx).is_ok())
            .count()
    }
}

/// Named device buffers (a [`Program`]'s, or ones allocated and filled on the device) and the
/// launcher of calls that refer to them by name.
pub struct DeviceProgram {
    buffers: HashMap<String, (DeviceBuffer<u8>, entkv_dsl::Scalar, usize)>,
}

impl DeviceProgram {
    pub fn new() -> DeviceProgram {
        DeviceProgram {
            buffers: HashMap::new(),
        }
    }

    /// Upload every buffer of `p`.
    pub fn upload(gpu: &Gpu, p: &Program) -> Result<DeviceProgram> {
        let mut d = DeviceProgram::new();
        for (name, b) in &p.buffers {
            d.put(gpu, name, b)?;
        }
        Ok(d)
    }

    /// Upload (or replace) one buffer.
    pub fn put(&mut self, gpu: &Gpu, name: &str, b: &entkv_dsl::interp::HostBuffer) -> Result<()> {
        // Zero-length buffers still get a valid (1-byte) allocation.
        let mut bytes = b.to_le_bytes();
        if bytes.is_empty() {
            bytes.push(0);
        }
        let dev = DeviceBuffer::from_host(gpu, &bytes)?;
        self.buffers.insert(name.to_string(), (dev, b.elem(), b.len()));
        Ok(())
    }

    /// Allocate a buffer of `len` elements filled with 0xff bytes (NaN for floats, −1 for
    /// integers), so anything a kernel fails to write shows.
    pub fn alloc_poisoned(
        &mut self,
        gpu: &Gpu,
        name: &str,
        elem: entkv_dsl::Scalar,
        len: usize,
    ) -> Result<()> {
        let bytes = (len * elem.size_bytes() as usize).max(1);
        let mut dev = DeviceBuffer::<u8>::alloc_zeros(gpu, bytes)?;
        dev.fill_bytes(0xff)?;
        self.buffers.insert(name.to_string(), (dev, elem, len));
        Ok(())
    }

    /// Allocate `len` elements of `dtype` filled on the device by the counter-based generator
    /// (`entkv_kernels::fill`), so multi-gigabyte caches need no host upload.
    pub fn alloc_normal(
        &mut self,
        gpu: &Gpu,
        kernels: &mut Kernels,
        name: &str,
        dtype: DType,
        len: u64,
        seed: u32,
    ) -> Result<()> {
        let t = DevTensor::alloc(gpu, dtype, len as usize)?;
        device_fill(gpu, kernels, &t, dtype, len, seed)?;
        let raw = match t {
            DevTensor::Half(b) => b.into_bytes(),
            DevTensor::Single(b) => b.into_bytes(),
        };
        self.buffers.insert(
            name.to_string(),
            (raw, crate::device::scalar_of_dtype(dtype), len as usize),
        );
        Ok(())
    }

    /// Launch `calls` on `stream` (no synchronisation).
    pub fn launch_calls(
        &self,
        cache: &mut FunctionCache,
        calls: &[entkv_kernels::program::Call],
        stream: RawStream,
    ) -> Result<()> {
        // SAFETY: no external buffers; every name binds to one of `self`'s allocations.
        unsafe { self.launch_calls_with(cache, calls, stream, &[]) }
    }

    /// [`DeviceProgram::launch_calls`] with the buffers named in `external` bound to the given
    /// device addresses instead of `self`'s: how a pipeline of `entkv_kernels::pipelines` reads
    /// what another launcher wrote in its own memory (e.g. a selection in a runtime decoder's
    /// workspace) without a copy.
    ///
    /// # Safety
    /// Every address in `external` must point to a live allocation of the element type and
    /// length the calls' kernels expect under that name, until the launches complete.
    pub unsafe fn launch_calls_with(
        &self,
        cache: &mut FunctionCache,
        calls: &[entkv_kernels::program::Call],
        stream: RawStream,
        external: &[(&str, u64)],
    ) -> Result<()> {
        for c in calls {
            let mut args = Vec::with_capacity(c.args.len());
            for a in &c.args {
                args.push(match a {
                    ArgRef::Buf(name) => {
                        match (external.iter().find(|(n, _)| n == name), self.buffers.get(name)) {
                            (Some(&(_, ptr)), _) => KernelArg::Ptr(ptr),
                            (None, Some((b, _, _))) => b.arg(),
                            (None, None) => anyhow::bail!("{}: no device buffer `{name}`", c.kernel.name),
                        }
                    }
                    ArgRef::I32(v) => KernelArg::I32(*v),
                    ArgRef::U32(v) => KernelArg::U32(*v),
                    ArgRef::I64(v) => KernelArg::I64(*v),
                    ArgRef::F32(v) => KernelArg::F32(*v),
                });
            }
            let f = cache.get(&c.kernel)?;
            // SAFETY: the calls come from `entkv_kernels::pipelines` (or a checked Program),
            // whose buffer names are bound here to allocations of the element type and length
            // each kernel was built for (`external` ones by the caller's contract); the buffers
            // outlive the launch (callers synchronise before dropping `self`).
            unsafe { launch(f, &c.geometry, stream, &args)? };
        }
        Ok(())
    }

    /// Launch every call of `p` on `stream` (no synchronisation).
    pub fn launch(&self, cache: &mut FunctionCache, p: &Program, stream: RawStream) -> Result<()> {
        p.check()?;
        self.launch_calls(cache, &p.calls, stream)
    }

    /// Device address of buffer `name`.
    pub fn device_ptr(&self, name: &str) -> Result<u64> {
        match self.buffers.get(name) {
            Some((b, _, _)) => Ok(b.device_ptr()),
            None => anyhow::bail!("no device buffer `{name}`"),
        }
    }

    /// Download one buffer as a host buffer of its element type.
    pub fn get(&self, name: &str) -> Result<entkv_dsl::interp::HostBuffer> {
        let Some((_, _, len)) = self.buffers.get(name) else {
            anyhow::bail!("no device buffer `{name}`");
        };
        self.get_range(name, 0, *len)
    }

    /// Download elements `start..start + len` of buffer `name` (a few pages of a pool that is
    /// too large to read whole).
    pub fn get_range(&self, name: &str, start: u64, len: usize) -> Result<entkv_dsl::interp::HostBuffer> {
        let Some((b, elem, total)) = self.buffers.get(name) else {
            anyhow::bail!("no device buffer `{name}`");
        };
        if start.saturating_add(len as u64) > *total as u64 {
            anyhow::bail!("elements {start}..+{len} of `{name}`, which has {total}");
        }
        let size = elem.size_bytes() as usize;
        let bytes = b.range_to_host(start as usize * size, len * size)?;
        let mut h = entkv_dsl::interp::HostBuffer::zeros(*elem, len);
        if len > 0 && !h.copy_from_le_bytes(&bytes) {
            anyhow::bail!("buffer `{name}` came back with {} bytes", bytes.len());
        }
        Ok(h)
    }

    /// Copy every buffer back into `p`.
    pub fn download(&self, p: &mut Program) -> Result<()> {
        for (name, b) in p.buffers.iter_mut() {
            *b = self.get(name)?;
        }
        Ok(())
    }
}

impl Default for DeviceProgram {
    fn default() -> Self {
        DeviceProgram::new()
    }
}

/// The DSL element type of a boundary dtype.
pub fn scalar_of_dtype(d: DType) -> entkv_dsl::Scalar {
    entkv_kernels::scalar_of(d)
}

/// Upload `p`, run its calls once, download the results into `p`.
pub fn run_program(gpu: &Gpu, cache: &mut FunctionCache, p: &mut Program) -> Result<DeviceProgram> {
    let dev = DeviceProgram::upload(gpu, p)?;
    dev.launch(cache, p, gpu.stream_raw())?;
    gpu.synchronize()?;
    dev.download(p)?;
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_kernels::peaked::peaked_kernel;

    /// The host twins of the generators are bit-exact only if the device rounds every float
    /// operation as written: PTX `mul.f32`/`add.f32`/`sub.f32` without a rounding modifier may
    /// be fused into an fma by ptxas, so every one must carry `.rn`; the only fmas are the
    /// kernels' explicit ones (`f32::mul_add` on the host).
    #[test]
    fn generators_compile_to_unfusable_float_ops() {
        let kernels = [
            fill_kernel(DType::F16).unwrap(),
            fill_kernel(DType::BF16).unwrap(),
            peaked_kernel(DType::F16, DType::F16).unwrap(),
            peaked_kernel(DType::BF16, DType::BF16).unwrap(),
        ];
        for k in &kernels {
            let ptx = compile_module(&k.name, &[k], &Target::default()).unwrap().ptx;
            for op in ["mul", "add", "sub"] {
                for line in ptx.lines() {
                    let insn = line.split_whitespace().next().unwrap_or("");
                    assert!(
                        !(insn.starts_with(&format!("{op}."))
                            && insn.ends_with(".f32")
                            && !insn.contains(".rn")),
                        "{}: contractible `{}`",
                        k.name,
                        line.trim()
                    );
                }
            }
            let fmas = ptx.matches("fma.rn.f32").count();
            if k.name.starts_with("fill_peaked") {
                // 22 walk terms, ‖q‖² and the key: more only if LLVM duplicated code.
                assert!(fmas >= 24, "{}: {fmas} fmas", k.name);
            } else {
                assert_eq!(fmas, 0, "{}", k.name);
            }
        }
    }
}
