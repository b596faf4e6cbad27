//! `entkv gpu-check`: every GPU check of the generated kernels in one process, ending with one
//! table. Kernels are generated and compiled here (codegen), loaded and launched through the
//! runtime, and compared with the float64 references of `entkv-kernels`.
//!
//! Two kinds of rows:
//! - correctness: the interpreter test matrix (α, GQA, odd lengths, adversarial data) on the
//!   GPU with host-generated inputs, and the large `paper` shapes (batch 8, 24 heads, d = 32)
//!   whose K/V are generated on the device by the counter-based generator and regenerated on
//!   the host for a sample of heads;
//! - timing: CUDA-event medians of a whole decode step (both kernels) at the large shapes.

use crate::record::{Environment, TimingRecord};
use anyhow::{bail, Context, Result};
use entkv_abi::{
    dense_entry_names, dense_finish_geometry, dense_score_geometry, DType, DecodeSpec, DenseShape,
    DenseTile, LaunchGeometry,
};
use entkv_codegen::{compile_module, Target};
use entkv_kernels::check::{
    compare, reference, DataKind, DenseCase, DenseCheck, DenseInputs, DenseOutputs,
};
use entkv_kernels::data::Tensor;
use entkv_kernels::fill::{fill_kernel, value_at};
use entkv_kernels::reference::{dense_decode, DenseProblem};
use entkv_runtime::{launch, DeviceBuffer, Function, Gpu, GpuTimer, KernelArg, Module, RawStream};
use serde::Serialize;
use std::collections::HashMap;

/// Measured H200 device-to-device copy rate (../shared/DEVICE.md): the bandwidth ceiling used
/// for byte floors.
pub const CEILING_BYTES_PER_S: f64 = 4.28e12;

#[derive(Clone, Debug)]
pub struct Options {
    /// Context lengths of the large `paper`-shape runs.
    pub large_n: Vec<u64>,
    pub warmup: usize,
    pub iters: usize,
    /// Heads (of batch × q heads) checked against the reference at the large shapes.
    pub sampled_heads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            large_n: vec![131_072, 1_048_576],
            warmup: 10,
            iters: 50,
            sampled_heads: 12,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    pub check: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub env: Environment,
    pub checks: Vec<CheckRow>,
    pub timings: Vec<TimingRecord>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The table printed last.
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "entkv gpu-check  {}  {}  driver {}  commit {}\n",
            self.env.date, self.env.gpu, self.env.driver, self.env.commit
        ));
        s.push_str(&format!("{:<64} {:<6} detail\n", "check", "result"));
        for c in &self.checks {
            s.push_str(&format!(
                "{:<64} {:<6} {}\n",
                c.check,
                if c.passed { "PASS" } else { "FAIL" },
                c.detail
            ));
        }
        if !self.timings.is_empty() {
            s.push_str(&format!(
                "\n{:<10} {:<14} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8}\n",
                "workload", "method", "n", "median", "min", "p90", "bytes GB", "floor", "x floor"
            ));
            for t in &self.timings {
                s.push_str(&format!(
                    "{:<10} {:<14} {:>8} {:>7.3}ms {:>7.3}ms {:>7.3}ms {:>10.3} {:>7.3}ms {:>8.2}\n",
                    t.workload,
                    t.method,
                    t.n,
                    t.median_ms,
                    t.min_ms,
                    t.p90_ms,
                    t.bytes as f64 / 1e9,
                    t.floor_ms,
                    t.median_ms / t.floor_ms
                ));
            }
        }
        s
    }
}

/// Loaded dense decode kernels for one (spec, tile).
struct DenseFns {
    _module: Module,
    score: Function,
    finish: Function,
}

/// Compiles and loads kernels on demand, once per entry.
struct Kernels<'g> {
    gpu: &'g Gpu,
    dense: HashMap<String, DenseFns>,
    fill: HashMap<DType, (Module, Function)>,
}

impl<'g> Kernels<'g> {
    fn new(gpu: &'g Gpu) -> Self {
        Kernels {
            gpu,
            dense: HashMap::new(),
            fill: HashMap::new(),
        }
    }

    fn dense(&mut self, spec: &DecodeSpec, tile: &DenseTile) -> Result<&DenseFns> {
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

    fn fill(&mut self, dtype: DType) -> Result<&Function> {
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
enum DevTensor {
    Half(DeviceBuffer<u16>),
    Single(DeviceBuffer<f32>),
}

impl DevTensor {
    fn upload(gpu: &Gpu, t: &Tensor) -> Result<DevTensor> {
        Ok(match t.dtype {
            DType::F16 | DType::BF16 => {
                let bits: Vec<u16> = t.bits.iter().map(|&b| b as u16).collect();
                DevTensor::Half(DeviceBuffer::from_host(gpu, &bits)?)
            }
            DType::F32 => DevTensor::Single(DeviceBuffer::from_host(gpu, &t.to_f32())?),
        })
    }
    fn alloc(gpu: &Gpu, dtype: DType, len: usize) -> Result<DevTensor> {
        Ok(match dtype {
            DType::F16 | DType::BF16 => DevTensor::Half(DeviceBuffer::alloc_zeros(gpu, len)?),
            DType::F32 => DevTensor::Single(DeviceBuffer::alloc_zeros(gpu, len)?),
        })
    }
    fn arg(&self) -> KernelArg {
        match self {
            DevTensor::Half(b) => b.arg(),
            DevTensor::Single(b) => b.arg(),
        }
    }
    fn poison(&mut self) -> Result<()> {
        match self {
            DevTensor::Half(b) => b.fill_bytes(0xff)?,
            DevTensor::Single(b) => b.fill_bytes(0xff)?,
        }
        Ok(())
    }
    fn to_f64(&self, dtype: DType) -> Result<Vec<f64>> {
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
struct DenseBuffers {
    q: DevTensor,
    k: DevTensor,
    v: DevTensor,
    cand_z: DeviceBuffer<f32>,
    cand_idx: DeviceBuffer<i32>,
    cand_count: DeviceBuffer<i32>,
    cand_lb: DeviceBuffer<f32>,
    out: DevTensor,
    tau: DeviceBuffer<f32>,
    support: DeviceBuffer<i32>,
    splits: u32,
}

impl DenseBuffers {
    fn new(gpu: &Gpu, case: &DenseCase, q: DevTensor, k: DevTensor, v: DevTensor) -> Result<Self> {
        let ws = case.workspace();
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
            splits: ws.splits,
        };
        b.poison()?;
        Ok(b)
    }

    /// NaN / −1 everywhere a kernel writes, so unwritten outputs cannot pass.
    fn poison(&mut self) -> Result<()> {
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
    fn launch(&self, fns: &DenseFns, case: &DenseCase, stream: RawStream) -> Result<()> {
        let n = KernelArg::I64(case.shape.n as i64);
        let score_args = [
            self.q.arg(),
            self.k.arg(),
            self.cand_z.arg(),
            self.cand_idx.arg(),
            self.cand_count.arg(),
            self.cand_lb.arg(),
            n,
        ];
        let finish_args = [
            self.cand_z.arg(),
            self.cand_idx.arg(),
            self.cand_count.arg(),
            self.cand_lb.arg(),
            self.v.arg(),
            self.out.arg(),
            self.tau.arg(),
            self.support.arg(),
            KernelArg::I32(self.splits as i32),
            n,
        ];
        let g1 = dense_score_geometry(&case.tile, &case.shape);
        let g2 = dense_finish_geometry(&case.spec, &case.tile, &case.shape);
        // SAFETY: argument order and types follow `entkv_abi::dense_{score,finish}_signature`;
        // every buffer was sized from the same case's shape and workspace and outlives the
        // launch (callers synchronise before dropping).
        unsafe {
            launch(&fns.score, &g1, stream, &score_args)?;
            launch(&fns.finish, &g2, stream, &finish_args)?;
        }
        Ok(())
    }

    fn outputs(&self, case: &DenseCase) -> Result<DenseOutputs> {
        Ok(DenseOutputs {
            out: self.out.to_f64(case.spec.out_dtype)?,
            tau: self.tau.to_host()?.into_iter().map(|x| x as f64).collect(),
            support: self
                .support
                .to_host()?
                .into_iter()
                .map(|x| x as i64)
                .collect(),
        })
    }
}

fn row_of(name: String, c: &DenseCheck) -> CheckRow {
    CheckRow {
        check: name,
        passed: c.passed,
        detail: format!(
            "rel err {:.2e}, τ err {:.2e}, support ≤ {}, mismatches {}, non-finite {} ({} heads)",
            c.max_rel_err,
            c.max_tau_err,
            c.max_support,
            c.support_mismatches,
            c.non_finite,
            c.heads
        ),
    }
}

fn case_name(case: &DenseCase) -> String {
    format!(
        "dense α={} g={} B={} Hkv={} n={} {:?} {}",
        case.spec.alpha,
        case.spec.group,
        case.shape.batch,
        case.shape.kv_heads,
        case.shape.n,
        case.data,
        case.tile.tag()
    )
}

/// The interpreter test matrix, on the GPU.
fn small_cases() -> Vec<DenseCase> {
    let mut cases = Vec::new();
    let mk = |alpha: f64, group: u32, n: u64, data: DataKind, seed: u64| {
        let spec = DecodeSpec::new(alpha, 32, group, DType::F16).expect("supported spec");
        DenseCase {
            spec,
            tile: DenseTile::default_for(&spec),
            shape: DenseShape {
                batch: 2,
                kv_heads: 2,
                n,
            },
            seed,
            data,
        }
    };
    for alpha in [1.5, 2.0] {
        for group in [1, 3] {
            for n in [1, 2, 17, 1000, 4097] {
                cases.push(mk(alpha, group, n, DataKind::Normal, 42 + n));
            }
        }
        for data in [DataKind::Ties, DataKind::Dominant, DataKind::Extreme] {
            cases.push(mk(alpha, 1, 300, data, 5));
        }
        cases.push(mk(alpha, 1, 4097, DataKind::Ties, 6));
    }
    cases
}

fn run_small(gpu: &Gpu, kernels: &mut Kernels, case: &DenseCase) -> Result<DenseCheck> {
    let x: DenseInputs = case.inputs();
    let r = reference(case, &x);
    let mut bufs = DenseBuffers::new(
        gpu,
        case,
        DevTensor::upload(gpu, &x.q)?,
        DevTensor::upload(gpu, &x.k)?,
        DevTensor::upload(gpu, &x.v)?,
    )?;
    bufs.poison()?;
    let fns = kernels.dense(&case.spec, &case.tile)?;
    bufs.launch(fns, case, gpu.stream_raw())?;
    gpu.synchronize()?;
    let got = bufs.outputs(case)?;
    Ok(compare(
        &r,
        &got,
        case.spec.head_dim as usize,
        case.shape.n as usize,
        None,
    ))
}

const SEED_K: u32 = 0x1234_5678;
const SEED_V: u32 = 0x0bad_cafe;

/// Fill `buf` (`len` elements of `dtype`) on the device with the counter-based generator.
fn device_fill(
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

/// The large `paper`-shape run: correctness on sampled heads, then timing.
fn run_large(
    gpu: &Gpu,
    kernels: &mut Kernels,
    n: u64,
    opts: &Options,
    env: &Environment,
) -> Result<(CheckRow, TimingRecord)> {
    let spec = DecodeSpec::new(1.5, 32, 1, DType::F16)?;
    let case = DenseCase {
        spec,
        tile: DenseTile::default_for(&spec),
        shape: DenseShape {
            batch: 8,
            kv_heads: 24,
            n,
        },
        seed: 2026,
        data: DataKind::Normal,
    };
    let d = spec.head_dim as u64;
    let kv_len = case.shape.batch as u64 * case.shape.kv_heads as u64 * n * d;
    let q = Tensor::from_f64(
        spec.q_dtype,
        &entkv_kernels::data::normal(
            case.seed,
            case.shape.batch as usize * case.q_heads() * d as usize,
        ),
    );
    let kbuf = DevTensor::alloc(gpu, spec.kv_dtype, kv_len as usize)?;
    let vbuf = DevTensor::alloc(gpu, spec.kv_dtype, kv_len as usize)?;
    device_fill(gpu, kernels, &kbuf, spec.kv_dtype, kv_len, SEED_K)?;
    device_fill(gpu, kernels, &vbuf, spec.kv_dtype, kv_len, SEED_V)?;
    let mut bufs = DenseBuffers::new(gpu, &case, DevTensor::upload(gpu, &q)?, kbuf, vbuf)?;
    bufs.poison()?;
    let fns = kernels.dense(&spec, &case.tile)?;
    bufs.launch(fns, &case, gpu.stream_raw())?;
    gpu.synchronize()?;
    let got = bufs.outputs(&case)?;

    // Reference on sampled heads, K/V regenerated on the host (all cores).
    let heads = case.shape.batch as usize * case.q_heads();
    let step = (heads / opts.sampled_heads.max(1)).max(1);
    let mut sample: Vec<usize> = (0..heads).step_by(step).collect();
    if sample.last() != Some(&(heads - 1)) {
        sample.push(heads - 1);
    }
    let checks: Vec<DenseCheck> = std::thread::scope(|s| {
        let handles: Vec<_> = sample
            .iter()
            .map(|&hd| {
                let q = &q;
                let got = &got;
                let case = &case;
                s.spawn(move || check_one_head(case, q, got, hd))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reference thread"))
            .collect()
    });
    let mut worst = checks[0].clone();
    for c in &checks[1..] {
        worst.max_rel_err = worst.max_rel_err.max(c.max_rel_err);
        worst.max_tau_err = worst.max_tau_err.max(c.max_tau_err);
        worst.max_support = worst.max_support.max(c.max_support);
        worst.support_mismatches += c.support_mismatches;
        worst.non_finite += c.non_finite;
        worst.heads += c.heads;
        worst.passed &= c.passed;
    }
    // Every head, not only the sampled ones, must have produced finite results.
    let all_finite =
        got.out.iter().chain(&got.tau).all(|x| x.is_finite()) && got.support.iter().all(|&s| s > 0);
    if !all_finite {
        worst.passed = false;
        worst.non_finite += 1;
    }
    let row = row_of(format!("{} (sampled heads)", case_name(&case)), &worst);

    // Timing of the whole step.
    let stream = gpu.stream_raw();
    for _ in 0..opts.warmup {
        bufs.launch(fns, &case, stream)?;
    }
    let mut timer = GpuTimer::new(gpu)?;
    let mut times = Vec::with_capacity(opts.iters);
    for _ in 0..opts.iters {
        // SAFETY: `stream` is the Gpu's own live stream.
        unsafe { timer.record_start(stream)? };
        bufs.launch(fns, &case, stream)?;
        unsafe { timer.record_end(stream)? };
        times.push(timer.elapsed_ms()? as f64);
    }
    let support_total: i64 = got.support.iter().sum();
    let cand_total: i64 = bufs.cand_count.to_host()?.iter().map(|&c| c as i64).sum();
    let kv_elem = spec.kv_dtype.size_bytes() as u64;
    let bytes = kv_len * kv_elem // K, read once
        + support_total as u64 * d * kv_elem // V rows of the support
        + cand_total as u64 * 8 * 2 // candidates written then read
        + heads as u64 * d * (spec.q_dtype.size_bytes() + spec.out_dtype.size_bytes()) as u64;
    let timing = TimingRecord::new(
        env,
        "paper",
        "entmax-dense",
        &case.shape,
        &spec,
        &times,
        bytes,
        CEILING_BYTES_PER_S,
    );
    Ok((row, timing))
}

fn check_one_head(case: &DenseCase, q: &Tensor, got: &DenseOutputs, hd: usize) -> DenseCheck {
    let spec = &case.spec;
    let (d, n, group) = (
        spec.head_dim as usize,
        case.shape.n as usize,
        spec.group as usize,
    );
    let hkv = case.shape.kv_heads as usize;
    let q_heads = case.q_heads();
    let (b, h) = (hd / q_heads, hd % q_heads);
    let kvh = h / group;
    let base = ((b * hkv + kvh) * n * d) as u64;
    let gen = |seed: u32| -> Vec<f64> {
        (0..(n * d) as u64)
            .map(|i| value_at(spec.kv_dtype, seed, 1.0, base + i))
            .collect()
    };
    let problem = DenseProblem {
        batch: 1,
        q_heads: 1,
        kv_heads: 1,
        n,
        d,
        q: q.values[hd * d..][..d].to_vec(),
        k: gen(SEED_K),
        v: gen(SEED_V),
    };
    let r = dense_decode(&problem, spec.alpha);
    let one = DenseOutputs {
        out: got.out[hd * d..][..d].to_vec(),
        tau: vec![got.tau[hd]],
        support: vec![got.support[hd]],
    };
    compare(&r, &one, d, n, None)
}

/// Run every GPU check. Fails (Err) only when the GPU cannot be used at all; failed checks
/// are rows with `passed = false`.
pub fn run(opts: &Options, commit: &str) -> Result<Report> {
    if let Some(reason) = entkv_runtime::gpu_unavailable_reason() {
        bail!("no usable GPU: {reason}");
    }
    let gpu = Gpu::open(0).context("opening GPU 0")?;
    let env = Environment::detect(Some(&gpu), commit);
    let mut kernels = Kernels::new(&gpu);
    let mut checks = Vec::new();
    for case in small_cases() {
        let name = case_name(&case);
        match run_small(&gpu, &mut kernels, &case) {
            Ok(c) => checks.push(row_of(name, &c)),
            Err(e) => checks.push(CheckRow {
                check: name,
                passed: false,
                detail: format!("error: {e:#}"),
            }),
        }
    }
    let mut timings = Vec::new();
    for &n in &opts.large_n {
        match run_large(&gpu, &mut kernels, n, opts, &env) {
            Ok((row, t)) => {
                checks.push(row);
                timings.push(t);
            }
            Err(e) => checks.push(CheckRow {
                check: format!("dense paper n={n}"),
                passed: false,
                detail: format!("error: {e:#}"),
            }),
        }
    }
    for f in kernels.dense.values().flat_map(|f| [&f.score, &f.finish]) {
        let a = f.attrs();
        checks.push(CheckRow {
            check: format!("driver attrs {}", f.name()),
            passed: a.local_bytes == 0,
            detail: format!(
                "{} regs, {} B local (spills), {} B shared",
                a.num_regs, a.local_bytes, a.shared_bytes
            ),
        });
    }
    Ok(Report {
        env,
        checks,
        timings,
    })
}
