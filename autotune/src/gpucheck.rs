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

use crate::device::{
    device_fill, run_program, time_ms, DenseBuffers, DevTensor, FunctionCache, Kernels, SEED_K, SEED_V,
};
use crate::jit_pool::JitPool;
use crate::record::{Environment, TimingRecord};
use anyhow::{bail, Context, Result};
use entkv_abi::{DType, DecodeSpec, DenseShape, DenseTile};
use entkv_codegen::{compile_module, Target};
use entkv_kernels::check::{compare, reference, DataKind, DenseCase, DenseCheck, DenseInputs, DenseOutputs};
use entkv_kernels::data::Tensor;
use entkv_kernels::fill::value_at;
use entkv_kernels::reference::{dense_decode, DenseProblem};
use entkv_runtime::Gpu;
use serde::Serialize;

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
            large_n: vec![32_768, 131_072, 1_048_576],
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

fn row_of(name: String, c: &DenseCheck) -> CheckRow {
    CheckRow {
        check: name,
        passed: c.passed,
        detail: format!(
            "rel err {:.2e}, τ err {:.2e}, support ≤ {}, mismatches {}, non-finite {} ({} heads)",
            c.max_rel_err, c.max_tau_err, c.max_support, c.support_mismatches, c.non_finite, c.heads
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
fn small_cases(sm_count: u32) -> Vec<DenseCase> {
    let mut cases = Vec::new();
    let mk = |alpha: f64, group: u32, n: u64, data: DataKind, seed: u64| {
        let spec = DecodeSpec::new(alpha, 32, group, DType::F16).expect("supported spec");
        DenseCase {
            spec,
            tile: DenseTile::default_contiguous(&spec),
            shape: DenseShape {
                batch: 2,
                kv_heads: 2,
                n,
            },
            seed,
            data,
            sm_count,
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
    Ok(compare(&r, &got, None))
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
        tile: DenseTile::default_contiguous(&spec),
        shape: DenseShape {
            batch: 8,
            kv_heads: 24,
            n,
        },
        seed: 2026,
        data: DataKind::Normal,
        sm_count: gpu.info().sm_count,
    };
    let d = spec.head_dim as u64;
    let kv_len = case.shape.batch as u64 * case.shape.kv_heads as u64 * n * d;
    let q = Tensor::from_f64(
        spec.q_dtype,
        &entkv_kernels::data::normal(case.seed, case.shape.batch as usize * case.q_heads() * d as usize),
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
        worst.out_failures += c.out_failures;
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
    let times = time_ms(gpu, opts.warmup, opts.iters, |s| bufs.launch(fns, &case, s))?;
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
    let (d, n, group) = (spec.head_dim as usize, case.shape.n as usize, spec.group as usize);
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
    compare(&r, &one, None)
}

/// Run every GPU check. Fails (Err) only when the GPU cannot be used at all; failed checks
/// are rows with `passed = false`. `pool` JIT-compiles the kernel suite's modules in worker
/// processes first (`None`: one at a time, here).
pub fn run(opts: &Options, commit: &str, mut pool: Option<JitPool>) -> Result<Report> {
    if let Some(reason) = entkv_runtime::gpu_unavailable_reason() {
        bail!("no usable GPU: {reason}");
    }
    let gpu = Gpu::open(0).context("opening GPU 0")?;
    let env = Environment::detect(Some(&gpu), commit);
    let mut kernels = Kernels::new(&gpu);
    let mut checks = Vec::new();
    for case in small_cases(gpu.info().sm_count) {
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
    // The kernel suite (every KernelCheck the interpreter runs in CI), on the GPU, its kernels
    // compiled together first.
    let mut cache = FunctionCache::new(&gpu);
    let suite = entkv_kernels::suite::all_checks();
    let t = std::time::Instant::now();
    let loaded = cache.prefetch(&suite_modules(suite.len()), pool.as_mut());
    // The workers hold a CUDA context each: gone before the checks allocate.
    drop(pool);
    eprintln!(
        "gpu-check: {} suite checks, {loaded} kernels compiled and loaded in {:.1} s",
        suite.len(),
        t.elapsed().as_secs_f64()
    );
    for (i, check) in suite.iter().enumerate() {
        let name = check.name();
        let row = match check.program() {
            Ok(mut p) => match run_program(&gpu, &mut cache, &mut p) {
                Ok(_) => {
                    let o = check.verify(&p);
                    CheckRow {
                        check: name,
                        passed: o.passed,
                        detail: o.detail,
                    }
                }
                Err(e) => CheckRow {
                    check: name,
                    passed: false,
                    detail: format!("error: {e:#}"),
                },
            },
            Err(e) => CheckRow {
                check: name,
                passed: false,
                detail: format!("error building the program: {e}"),
            },
        };
        // Progress as it goes, so that a run cut short still shows what passed.
        eprintln!(
            "[{}/{}] {} {}",
            i + 1,
            suite.len(),
            if row.passed { "PASS" } else { "FAIL" },
            row.check
        );
        checks.push(row);
    }
    for f in cache.functions() {
        let a = f.attrs();
        if a.local_bytes > 0 {
            checks.push(CheckRow {
                check: format!("driver attrs {}", f.name()),
                passed: false,
                detail: format!("{} regs, {} B local (spills)", a.num_regs, a.local_bytes),
            });
        }
    }
    match engine_guard_rows(&gpu) {
        Ok(rows) => checks.extend(rows),
        Err(e) => checks.push(CheckRow {
            check: "engine guard_ids".into(),
            passed: false,
            detail: format!("error: {e:#}"),
        }),
    }
    let mut timings = Vec::new();
    for &n in &opts.large_n {
        match paper_paged(&gpu, &mut kernels, &mut cache, n, opts, &env) {
            Ok((rows, t)) => {
                checks.extend(rows);
                timings.extend(t);
            }
            Err(e) => checks.push(CheckRow {
                check: format!("paged paper n={n}"),
                passed: false,
                detail: format!("error: {e:#}"),
            }),
        }
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
    Ok(Report { env, checks, timings })
}

/// Every method through the runtime's `Decoder` with `check_device_ids`, on a small case of
/// an untuned bundle made here: with the device's ids as planned the step matches the float64
/// reference; with ids outside the pool and a length past the plan written to the device after
/// planning, the step runs (no fault), reads back the faults `guard_ids_reference` predicts, and
/// leaves the one untouched sequence's output as it was (within 1e-4: the same inputs, where
/// only the certified paths' atomics may reorder f32 sums).
fn engine_guard_rows(gpu: &Gpu) -> Result<Vec<CheckRow>> {
    use crate::interp_engine::{bad_device_ids, expected_id_faults, id_check_case, EVERY_METHOD};
    use entkv_runtime::engine::{Decoder, Problem};

    let case = id_check_case()?;
    let spec = case.spec;
    let bundle = std::sync::Arc::new(crate::bundle_cmd::create_default_bundle(&[spec], 0)?);
    let mut host = crate::engine_bench::HostCase::new(gpu, case)?;
    let x = host.x.clone();
    let (lens, table) = bad_device_ids(&x);
    let (_, want) = expected_id_faults(&spec, &x, &lens, &table);
    let row_len = x.q.len() / 4;
    let mut rows = Vec::new();
    for method in EVERY_METHOD {
        let problem = Problem {
            check_device_ids: true,
            ..host.problem(method)
        };
        let dec = Decoder::new(gpu, bundle.clone(), &problem)?;
        let good = host.check(gpu, &dec)?;
        let (none, good_out) = host.run_on_device_ids(gpu, &dec, &x.seq_lens, &x.block_table)?;
        let (faults, out) = host.run_on_device_ids(gpu, &dec, &lens, &table)?;
        let finite = out.iter().all(|v| v.is_finite());
        let drift = out[3 * row_len..]
            .iter()
            .zip(&good_out[3 * row_len..])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let passed = good.passed && none.is_empty() && faults == want && finite && drift <= 1e-4;
        rows.push(CheckRow {
            check: format!("engine guard_ids {}", method.name()),
            passed,
            detail: format!(
                "in range: rel err {:.2e}, faults {}; bad ids: {} of {} sequences named as the reference{}, output finite {finite}, untouched sequence drift {drift:.1e}",
                good.max_rel_err,
                none.len(),
                faults.len(),
                want.len(),
                if faults == want { "" } else { " (NOT)" }
            ),
        });
    }
    Ok(rows)
}

/// The PTX of every kernel the suite's programs launch, as (entry name, PTX), generated on every
/// core. Kernels hold `Rc`s, so each thread builds its own share of the checks' programs and
/// sends back text; a kernel two shares launch is compiled twice (codegen is milliseconds).
fn suite_modules(checks: usize) -> Vec<(String, String)> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(checks.max(1));
    std::thread::scope(|scope| {
        let shares: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    // A check whose program cannot be built fails when it runs, below.
                    let (kernels, _) = entkv_kernels::suite::share_kernels(t, threads);
                    kernels
                        .iter()
                        .filter_map(|k| {
                            let m = compile_module(&k.name, &[k], &Target::default()).ok()?;
                            Some((k.name.clone(), m.ptx))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        shares
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// The paged pipelines at the `paper` shape (batch 8, 24 heads, d = 32, P = 16, f16, α = 1.5,
/// 4-bit sketch): metadata build, dense decode over every page, certified-exact decode; each
/// checked against the full-cache float64 reference on sampled heads and timed.
fn paper_paged(
    gpu: &Gpu,
    kernels: &mut Kernels,
    cache: &mut FunctionCache,
    n: u64,
    opts: &Options,
    env: &Environment,
) -> Result<(Vec<CheckRow>, Vec<TimingRecord>)> {
    use crate::paper::{record, run_and_time, PaperCache};
    use entkv_abi::{full_pages, PagedSpec};
    use entkv_kernels::pipelines::{
        decode_pipeline, gaussian_select_pipeline, meta_build_pipeline, softmax_topk_pipeline,
        topk_select_pipeline, DecodeKind,
    };
    // 8-bit sketches: at 1M they keep 40× fewer tokens than 4-bit and run faster
    // (results/2026-11-29-certified-variants).
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16)?, 16, false, 8)?;
    let mut pc = PaperCache::new(gpu, kernels, spec, 8, 24, n, 2026)?;
    let sm = gpu.info().sm_count;
    let mut rows = Vec::new();
    let mut timings = Vec::new();
    let seq_lens = vec![n as i32; 8];
    let pages = full_pages(&spec, &pc.shape, &seq_lens, &pc.block_table)?;
    let (meta, list) = meta_build_pipeline(&spec, &pc.shape, &pages)?;
    pc.dev
        .put(gpu, "meta_pages", &entkv_dsl::interp::HostBuffer::I32(list))?;
    pc.prepare(gpu, &meta)?;
    let t = run_and_time(gpu, cache, &pc, &meta, 2, 5)?;
    let (rd, wr) = entkv_abi::meta_bytes(&spec);
    let meta_bytes = pages.len() as u64 * pc.shape.kv_heads as u64 * (rd + wr);
    timings.push(record(env, "paper", "page-meta-build", &pc, &t, meta_bytes));
    let kv_elem = spec.decode.kv_dtype.size_bytes() as u64;
    let d = spec.decode.head_dim as u64;
    let tokens = 8 * 24 * n;
    for kind in [DecodeKind::Dense, DecodeKind::Certified] {
        let tile = if kind == DecodeKind::Certified {
            entkv_abi::DenseTile::default_certified(&spec)
        } else {
            entkv_abi::DenseTile::default_paged(&spec)
        };
        let pipeline = pc.pipeline(kind, &tile, sm)?;
        pc.prepare(gpu, &pipeline)?;
        let times = run_and_time(gpu, cache, &pc, &pipeline, opts.warmup, opts.iters)?;
        let got = pc.outputs()?;
        let c = pc.check_sampled(&got, opts.sampled_heads, None)?;
        let support: i64 = got.support.iter().sum();
        let (method, bytes, extra) = match kind {
            DecodeKind::Certified => {
                let kept: f64 = pc.dev.get("kept")?.to_f64_vec().iter().sum();
                let sketch = tokens * spec.sketch_bytes_per_token() as u64;
                // A per-token grid carries its own range; the 8-bit sketch reads the page's.
                let bounds = if !spec.sketch_token_grid() {
                    pc.shape.num_pages as u64 * 24 * 2 * d * kv_elem
                } else {
                    0
                };
                let bytes = sketch + bounds + (kept as u64 + support as u64) * d * kv_elem;
                (
                    "entmax-certified",
                    bytes,
                    format!("; kept {:.3}% of tokens", 100.0 * kept / tokens as f64),
                )
            }
            _ => (
                "entmax-dense-paged",
                tokens * d * kv_elem + support as u64 * d * kv_elem,
                String::new(),
            ),
        };
        rows.push(CheckRow {
            check: format!("{method} paper n={n} (sampled heads vs full cache)"),
            passed: c.passed,
            detail: format!(
                "rel err {:.2e}, τ err {:.2e}, support ≤ {}, mismatches {}, non-finite {} ({} heads){extra}",
                c.max_rel_err, c.max_tau_err, c.max_support, c.support_mismatches, c.non_finite, c.heads
            ),
        });
        timings.push(record(env, "paper", method, &pc, &times, bytes));
    }
    // Top-k at 25% coverage (the reference benchmark's default): box scores, radix select,
    // then entmax (exact over the selection) or softmax (Quest) decode.
    let pages = pc.shape.max_pages;
    let budget = (pages as f64 * 0.25).ceil() as i32;
    let select = topk_select_pipeline(&spec, &pc.shape, budget)?;
    let max_tokens = (budget as u64 + 1) * spec.page_size as u64;
    let tile = entkv_abi::DenseTile::default_sparse(&spec);
    let sparse = decode_pipeline(DecodeKind::Sparse, &spec, &tile, &pc.shape, max_tokens, sm)?;
    let selected_bytes = |pc: &PaperCache| -> Result<u64> {
        let sel: f64 = pc.dev.get("sel_count")?.to_f64_vec().iter().sum();
        Ok(sel as u64 * spec.page_size as u64 * d * kv_elem)
    };
    // The box bounds (a min and a max row) and the moments (a mean and a std row) are both two
    // f16 rows per page: see `record::step_bytes::topk` for why the box reads both.
    let meta_read = pc.shape.num_pages as u64 * 24 * 2 * d * kv_elem;
    // The Gaussian selector plans its decode for the largest possible selection (every page):
    // its coverage is only known on the device.
    let all_tokens = pc.shape.max_pages as u64 * spec.page_size as u64;
    let gauss = gaussian_select_pipeline(&spec, &pc.shape)?.then(decode_pipeline(
        DecodeKind::Sparse,
        &spec,
        &tile,
        &pc.shape,
        all_tokens,
        sm,
    )?);
    for (method, pipe) in [
        ("entmax-gaussian", gauss),
        ("entmax-topk", select.clone().then(sparse)),
        (
            "softmax-topk",
            select
                .clone()
                .then(softmax_topk_pipeline(&spec, &pc.shape, budget, sm)?),
        ),
    ] {
        pc.prepare(gpu, &pipe)?;
        let times = run_and_time(gpu, cache, &pc, &pipe, opts.warmup, opts.iters)?;
        let kv_sel = selected_bytes(&pc)?;
        let (passed, detail, bytes) = if method != "softmax-topk" {
            let got = pc.outputs()?;
            let c = pc.check_sampled(&got, opts.sampled_heads, Some(&pc.selection()?))?;
            let support: i64 = got.support.iter().sum();
            let sel: f64 = pc.dev.get("sel_count")?.to_f64_vec().iter().sum();
            let coverage = sel / (pc.shape.max_pages as f64 * 8.0 * 24.0);
            (
                c.passed,
                format!(
                    "vs entmax over the selection: rel err {:.2e}, τ err {:.2e}, mismatches {}, non-finite {} ({} heads); coverage {:.2}%",
                    c.max_rel_err,
                    c.max_tau_err,
                    c.support_mismatches,
                    c.non_finite,
                    c.heads,
                    100.0 * coverage
                ),
                meta_read + kv_sel + support as u64 * d * kv_elem,
            )
        } else {
            let out = pc.dev.get("out")?.to_f64_vec();
            let worst = pc.check_softmax_sampled(&out, opts.sampled_heads)?;
            (
                worst <= crate::paper::SOFTMAX_REL_TOL,
                format!("vs softmax over the selection: rel err {worst:.2e}"),
                meta_read + 2 * kv_sel,
            )
        };
        rows.push(CheckRow {
            check: if method == "entmax-gaussian" {
                format!("{method} paper n={n}")
            } else {
                format!("{method} paper n={n} budget {budget} pages")
            },
            passed,
            detail,
        });
        timings.push(record(env, "paper", method, &pc, &times, bytes));
    }
    Ok((rows, timings))
}
