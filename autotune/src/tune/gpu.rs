//! The GPU measurement backend: a candidate is generated (DSL → LLVM → PTX), JIT-loaded,
//! checked for spills, verified inside its method's decode step through the runtime's engine —
//! on small host-data cases (iid and peaked keys, float64 reference) and at the bucket's shape
//! (against the default config's output, itself checked against the reference on sampled
//! heads) — and timed with CUDA events, interleaved with its rivals, on a cache rotated
//! through more than the L2 size. The certified family's pruned row is verified and timed in the
//! page-pruned step on page-coherent keys of the bucket's shape (`runs_for`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};
use entkv_bundle::stub::default_row;
use entkv_bundle::{sha256_hex, Bundle, BundleMeta, BundleWriter, TableRow};
use entkv_codegen::{compile_module, llvm_version, Target};
use entkv_kernels::check::DenseOutputs;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_runtime::engine::{BoundCall, Decoder, Method, ModuleCache, Problem};
use entkv_runtime::{gpu_unavailable_reason, Gpu};

use super::{Candidate, DataKind, DeviceKey, EvalError, MeasureBackend, Prepared, Workload};
use crate::device::{Kernels, StepTimer};
use crate::engine_bench::{rotation_copies, EngineCache, HostCase, Session};
use crate::jit_pool::{JitPool, WarmReport};
use crate::paper::DeviceKeys;

/// Heads of the bucket-shape cache checked against the float64 reference (the default config).
const REFERENCE_SAMPLES: usize = 3;
/// Warm-up launches per candidate before timing.
const WARMUP: u32 = 3;
/// Largest relative L2 error of any head of a candidate against the default's output at the
/// bucket shape: both are checked-exact float32 computations that differ only in summation
/// order (measured ≤ 1e-5); beyond this the candidate is checked against the reference itself.
const AGREE_REL: f64 = 1e-3;

struct Compiled {
    file: String,
    ptx: String,
    sha256: String,
    entries: Vec<String>,
    /// DSL → PTX wall time.
    codegen_ms: f64,
    /// Driver JIT wall time, when [`GpuBackend::prefetch`] loaded it.
    load_ms: Option<f64>,
}

type CompileKey = (KernelFamily, String, String);

fn compile_key(family: KernelFamily, spec: &PagedSpec, tile: &TileConfig) -> CompileKey {
    (family, spec.sketch_tag(), tile.tag())
}

/// Generate the PTX module of `family` with `tile` at `spec` (no GPU; thread-safe).
fn generate(family: KernelFamily, spec: &PagedSpec, tile: &TileConfig) -> Result<Compiled, EvalError> {
    let t = Instant::now();
    let kernels =
        entkv_kernels::family_kernels(family, spec, tile).map_err(|e| EvalError::Invalid(e.to_string()))?;
    let file = format!("{}__{}__{}.ptx", family.name(), spec.sketch_tag(), tile.tag());
    let refs: Vec<&entkv_dsl::Kernel> = kernels.iter().collect();
    let m = compile_module(file.trim_end_matches(".ptx"), &refs, &Target::default())
        .map_err(|e| EvalError::CompileError(e.to_string()))?;
    Ok(Compiled {
        file,
        sha256: sha256_hex(m.ptx.as_bytes()),
        ptx: m.ptx,
        entries: kernels.iter().map(|k| k.name.clone()).collect(),
        codegen_ms: t.elapsed().as_secs_f64() * 1e3,
        load_ms: None,
    })
}

/// The caches of the current bucket (several copies when one would fit in L2), the sessions
/// of candidates timed on them, and the default config's checked outputs per method.
struct BucketState {
    workload: Workload,
    spec_tag: String,
    caches: Vec<EngineCache>,
    /// The same shape on page-coherent keys, made the first time a run needs it ([`Run`]).
    peaked: Option<EngineCache>,
    default_out: HashMap<String, DenseOutputs>,
}

impl BucketState {
    /// The cache `run` is timed or verified on: copy `copy` of the iid caches, or the one
    /// page-coherent cache.
    fn cache(&self, keys: DeviceKeys, copy: usize) -> &EngineCache {
        match keys {
            DeviceKeys::Normal => &self.caches[copy],
            DeviceKeys::Peaked => self.peaked.as_ref().expect("peaked cache made first"),
        }
    }

    fn cache_mut(&mut self, keys: DeviceKeys, copy: usize) -> &mut EngineCache {
        match keys {
            DeviceKeys::Normal => &mut self.caches[copy],
            DeviceKeys::Peaked => self.peaked.as_mut().expect("peaked cache made first"),
        }
    }
}

/// Measures candidates on the first GPU.
pub struct GpuBackend {
    gpu: Gpu,
    modules: ModuleCache,
    compiled: HashMap<CompileKey, Compiled>,
    /// Candidates that passed the small host-data cases (they do not depend on the bucket).
    host_checked: HashSet<(KernelFamily, String, String)>,
    /// Candidate bundles (a family's tile swapped in), by (family, spec tag, tile tag).
    bundles: HashMap<(KernelFamily, String, String), Arc<Bundle>>,
    bucket: Option<BucketState>,
    jit_pool: Option<JitPool>,
    jit_warm: WarmReport,
    /// Wall seconds per phase (what a tuning run spends its time on).
    phases: Vec<(&'static str, f64)>,
    /// The timer of every timed launch, made on first use (it compiles its lead kernel).
    timer: Option<StepTimer>,
}

impl GpuBackend {
    /// Open GPU `ordinal`, or say why there is none.
    pub fn open(ordinal: usize) -> Result<GpuBackend> {
        if let Some(reason) = gpu_unavailable_reason() {
            anyhow::bail!("autotune needs an NVIDIA GPU with a working driver: {reason}");
        }
        Ok(GpuBackend {
            gpu: Gpu::open(ordinal).context("opening the GPU")?,
            modules: ModuleCache::new(),
            compiled: HashMap::new(),
            host_checked: HashSet::new(),
            bundles: HashMap::new(),
            bucket: None,
            jit_pool: None,
            jit_warm: WarmReport::default(),
            phases: Vec::new(),
            timer: None,
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn add_phase(&mut self, phase: &'static str, since: Instant) {
        let secs = since.elapsed().as_secs_f64();
        match self.phases.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, t)) => *t += secs,
            None => self.phases.push((phase, secs)),
        }
    }

    /// Wall seconds spent per phase so far, e.g. `prepare 21.3 s, verify (host cases) 9.1 s, …`.
    pub fn phase_report(&self) -> String {
        self.phases
            .iter()
            .map(|(p, t)| format!("{p} {t:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Generate (once) the PTX module of `family` with `tile` at `spec`.
    fn compile(
        &mut self,
        family: KernelFamily,
        spec: &PagedSpec,
        tile: &TileConfig,
    ) -> Result<&Compiled, EvalError> {
        let key = compile_key(family, spec, tile);
        if !self.compiled.contains_key(&key) {
            let m = generate(family, spec, tile)?;
            self.compiled.insert(key.clone(), m);
        }
        Ok(&self.compiled[&key])
    }

    /// JIT-compile prefetched candidates in these worker processes (see [`crate::jit_pool`]);
    /// `None` compiles them in this process, one at a time.
    pub fn set_jit_pool(&mut self, pool: Option<JitPool>) {
        self.jit_pool = pool;
    }

    /// Generate `cs` on every core (codegen is single-threaded LLVM work), JIT-compile them in
    /// the worker processes when there is a pool (the driver's JIT is serialized within a
    /// process), then load them here: what makes a tuning run fit its time budget. Failures
    /// are left for `prepare` to report.
    fn generate_all(&mut self, cs: &[Candidate]) {
        let t = Instant::now();
        let mut queued = HashSet::new();
        let todo: Vec<(CompileKey, Candidate)> = cs
            .iter()
            .map(|c| (compile_key(c.family, &c.spec, &c.tile), *c))
            .filter(|(key, _)| !self.compiled.contains_key(key) && queued.insert(key.clone()))
            .collect();
        if todo.is_empty() {
            return;
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(todo.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((key, c)) = todo.get(i) else { break };
                    if let Ok(m) = generate(c.family, &c.spec, &c.tile) {
                        done.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((key.clone(), m));
                    }
                });
            }
        });
        let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
        self.add_phase("generate (parallel codegen)", t);
        let t = Instant::now();
        if let Some(pool) = self.jit_pool.as_mut() {
            let texts: Vec<&str> = done
                .iter()
                .filter(|(_, m)| !self.modules.contains(&m.sha256))
                .map(|(_, m)| m.ptx.as_str())
                .collect();
            let report = pool.warm(&texts);
            self.jit_warm.modules += report.modules;
            self.jit_warm.workers = self.jit_warm.workers.max(report.workers);
            self.jit_warm.failed.extend(report.failed);
            self.add_phase("JIT (worker processes)", t);
        }
        let t = Instant::now();
        for (_, m) in &mut done {
            let t = Instant::now();
            if self.modules.get_or_load(&self.gpu, &m.sha256, &m.ptx).is_ok() {
                m.load_ms = Some(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        self.compiled.extend(done);
        self.add_phase("load (JIT here, or the workers' cache)", t);
    }

    /// Modules the JIT workers compiled, the most workers one batch used, and worker failures
    /// (their modules were compiled here instead).
    pub fn jit_report(&self) -> &WarmReport {
        &self.jit_warm
    }

    /// A bundle with `c`'s tile for its family and the default tile for every other family.
    fn bundle_for(&mut self, c: &Candidate) -> Result<Arc<Bundle>, EvalError> {
        let key = (c.family, c.spec.sketch_tag(), c.tile.tag());
        if let Some(b) = self.bundles.get(&key) {
            return Ok(b.clone());
        }
        let internal = |e: entkv_bundle::BundleError| EvalError::Invalid(e.to_string());
        let mut w = BundleWriter::new(BundleMeta {
            entkv_version: env!("CARGO_PKG_VERSION").into(),
            llvm_version: llvm_version(),
            target_sm: Target::default().sm,
            ptx_version: "candidate".into(),
            tuned_on: None,
            created_unix_s: 0,
        });
        w.add_spec(c.spec);
        for family in KernelFamily::ALL {
            // The candidate serves every walk it can; a walk it cannot (the page-pruned walk
            // of a seeded certified tile) keeps its default.
            let rows = if family == c.family {
                family.rows_with(&c.spec, c.tile)
            } else {
                family.default_rows(&c.spec)
            };
            for (selector, tile) in rows {
                let m = self.compile(family, &c.spec, &tile)?;
                let (file, ptx, entries) = (m.file.clone(), m.ptx.clone(), m.entries.clone());
                w.add_module(&file, ptx, entries.clone()).map_err(internal)?;
                w.add_row(TableRow {
                    tile,
                    selector,
                    module: file,
                    entries,
                    ..default_row(family, &c.spec).map_err(internal)?
                });
            }
        }
        let bundle = Arc::new(w.finish().map_err(internal)?);
        self.bundles.insert(key, bundle.clone());
        Ok(bundle)
    }

    fn decoder(&mut self, c: &Candidate, problem: &Problem) -> Result<Decoder, EvalError> {
        let bundle = self.bundle_for(c)?;
        Decoder::with_module_cache(&self.gpu, bundle, problem, self.modules.clone())
            .map_err(|e| EvalError::LaunchError(e.to_string()))
    }

    /// Make the bucket's caches current (dropping the previous bucket's first).
    fn enter_bucket(&mut self, spec: &PagedSpec, w: &Workload) -> Result<(), EvalError> {
        let tag = spec.sketch_tag();
        // The caches, and the defaults' checked outputs on them, serve every selector's search:
        // keyed by the selector, the state was rebuilt each time the search moved between
        // families, and every default was checked against the float64 reference again.
        let w = &Workload { selector: None, ..*w };
        if self
            .bucket
            .as_ref()
            .is_some_and(|b| b.workload == *w && b.spec_tag == tag)
        {
            return Ok(());
        }
        self.bucket = None;
        let started = Instant::now();
        let launch = |e: anyhow::Error| EvalError::LaunchError(format!("{e:#}"));
        if w.q_heads != w.kv_heads * spec.decode.group {
            return Err(EvalError::Invalid(format!(
                "workload heads {}/{} do not match GQA group {}",
                w.q_heads, w.kv_heads, spec.decode.group
            )));
        }
        let mut kernels = Kernels::new(&self.gpu);
        let first = EngineCache::new(&self.gpu, &mut kernels, *spec, w.batch, w.kv_heads, w.context, 7)
            .map_err(launch)?;
        let copies = rotation_copies(self.gpu.info().l2_bytes, first.kv_bytes());
        let mut caches = vec![first];
        for i in 1..copies {
            caches.push(
                EngineCache::new(
                    &self.gpu,
                    &mut kernels,
                    *spec,
                    w.batch,
                    w.kv_heads,
                    w.context,
                    7 + i as u64,
                )
                .map_err(launch)?,
            );
        }
        self.bucket = Some(BucketState {
            workload: *w,
            spec_tag: tag,
            caches,
            peaked: None,
            default_out: HashMap::new(),
        });
        self.add_phase("bucket caches", started);
        Ok(())
    }

    /// Make the current bucket's cache of `keys` (the iid copies exist once it is entered; the
    /// page-coherent one is generated on the device the first time a run asks for it).
    fn make_cache(&mut self, spec: &PagedSpec, w: &Workload, keys: DeviceKeys) -> Result<(), EvalError> {
        self.enter_bucket(spec, w)?;
        if keys == DeviceKeys::Normal || self.bucket.as_ref().expect("entered").peaked.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        let mut kernels = Kernels::new(&self.gpu);
        let cache = EngineCache::with_keys(
            &self.gpu,
            &mut kernels,
            *spec,
            w.batch,
            w.kv_heads,
            w.context,
            7,
            DeviceKeys::Peaked,
        )
        .map_err(|e| EvalError::LaunchError(format!("{e:#}")))?;
        self.bucket.as_mut().expect("entered").peaked = Some(cache);
        self.add_phase("bucket caches (peaked)", started);
        Ok(())
    }

    fn check_host_cases(&mut self, c: &Candidate) -> Result<(), EvalError> {
        let launch = |e: anyhow::Error| EvalError::LaunchError(format!("{e:#}"));
        // Small cases with host data: both key distributions, odd lengths, the float64
        // reference on every head.
        let p = c.spec.page_size;
        for (i, data) in [KeyData::Normal, KeyData::Peaked].into_iter().enumerate() {
            let case = PagedCase {
                spec: c.spec,
                kv_heads: 2,
                seq_lens: vec![3001, 40 * p + 1, 17],
                seed: 31 + i as u64,
                data,
                spare_pages: 8,
            };
            let mut hc = HostCase::new(&self.gpu, case).map_err(launch)?;
            // Every step the family runs in, whichever selector feeds it (that the tile
            // serves: a seeded certified tile is the full walk's only).
            let mut methods: Vec<Method> = Vec::new();
            for selector in c.family.selector_keys().into_iter().filter(|s| c.tile.serves(*s)) {
                for r in runs_for(c.family, selector, hc.x.shape.max_pages) {
                    if !methods.contains(&r.method) {
                        methods.push(r.method);
                    }
                }
            }
            for method in methods {
                let dec = self.decoder(c, &hc.problem(method))?;
                let check = hc.check(&self.gpu, &dec).map_err(launch)?;
                if !check.passed {
                    return Err(EvalError::WrongResult(format!(
                        "{data:?} keys, {method:?}: {check:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    fn prepare_candidate(&mut self, c: &Candidate) -> Result<Prepared, EvalError> {
        let m = self.compile(c.family, &c.spec, &c.tile)?;
        let (sha, ptx, entries) = (m.sha256.clone(), m.ptx.clone(), m.entries.clone());
        let (codegen_ms, loaded_ms) = (m.codegen_ms, m.load_ms);
        let t1 = Instant::now();
        let module = self
            .modules
            .get_or_load(&self.gpu, &sha, &ptx)
            .map_err(|e| EvalError::CompileError(e.to_string()))?;
        let load_ms = loaded_ms.unwrap_or_else(|| t1.elapsed().as_secs_f64() * 1e3);
        let (mut registers, mut local_bytes) = (0u32, 0u64);
        for e in &entries {
            let f = module
                .function(e)
                .map_err(|e| EvalError::CompileError(e.to_string()))?;
            registers = registers.max(f.attrs().num_regs);
            local_bytes = local_bytes.max(f.attrs().local_bytes as u64);
        }
        Ok(Prepared {
            registers,
            local_bytes,
            codegen_ms,
            load_ms,
        })
    }

    fn verify_at_bucket(&mut self, c: &Candidate, w: &Workload) -> Result<(), EvalError> {
        // The bucket's shape: agree with the default config, which agrees with the reference.
        self.enter_bucket(&c.spec, w)?;
        let max_pages = self.bucket.as_ref().expect("entered").caches[0]
            .paper
            .shape
            .max_pages;
        for run in runs_for(c.family, w.selector, max_pages) {
            self.verify_method_at_bucket(c, w, run)?;
        }
        Ok(())
    }

    fn verify_method_at_bucket(&mut self, c: &Candidate, w: &Workload, run: Run) -> Result<(), EvalError> {
        let launch = |e: anyhow::Error| EvalError::LaunchError(format!("{e:#}"));
        self.make_cache(&c.spec, w, run.keys)?;
        let key = format!("{run:?}");
        let d = c.spec.decode.head_dim as usize;
        if !self
            .bucket
            .as_ref()
            .expect("entered")
            .default_out
            .contains_key(&key)
        {
            let default = Candidate {
                tile: c.family.default_tile_for(&c.spec, w.selector),
                ..*c
            };
            let t = Instant::now();
            let s = self.session(&default, 0, run)?;
            let gpu = self.gpu.clone();
            let cache = self.bucket.as_mut().expect("entered").cache_mut(run.keys, 0);
            let check = cache.check(&gpu, &s, REFERENCE_SAMPLES).map_err(launch)?;
            if !check.passed {
                return Err(EvalError::WrongResult(format!(
                    "the DEFAULT config of {} fails the reference at {w:?}: {check:?}",
                    c.family
                )));
            }
            let out = cache.outputs(&s).map_err(launch)?;
            self.bucket
                .as_mut()
                .expect("entered")
                .default_out
                .insert(key.clone(), out);
            self.add_phase("(in verify, bucket shape) defaults against the reference", t);
        }
        let t = Instant::now();
        let s = self.session(c, 0, run)?;
        self.add_phase("(in verify, bucket shape) sessions", t);
        let t = Instant::now();
        let gpu = self.gpu.clone();
        let bucket = self.bucket.as_mut().expect("entered");
        let got = bucket
            .cache_mut(run.keys, 0)
            .run_outputs(&gpu, &s)
            .map_err(launch)?;
        let (rel, tau) = agreement(&got, &bucket.default_out[&key], d);
        let agrees = rel <= AGREE_REL && tau <= 1e-4 && got.support.iter().all(|&s| s > 0);
        self.add_phase("(in verify, bucket shape) runs and read-backs", t);
        if agrees {
            return Ok(());
        }
        // Different from the default (e.g. another selection after a tie): the reference decides.
        let t = Instant::now();
        let bucket = self.bucket.as_mut().expect("entered");
        let check = bucket
            .cache_mut(run.keys, 0)
            .check(&gpu, &s, REFERENCE_SAMPLES)
            .map_err(launch)?;
        self.add_phase(
            "(in verify, bucket shape) candidates unlike the default against the reference",
            t,
        );
        if check.passed {
            Ok(())
        } else {
            Err(EvalError::WrongResult(format!(
                "at {w:?}: differs from the default (rel {rel:.2e}, τ {tau:.2e}) and fails the reference: {check:?}"
            )))
        }
    }

    fn time_candidates(
        &mut self,
        cs: &[Candidate],
        w: &Workload,
        reps: u32,
    ) -> Result<Vec<Vec<f64>>, EvalError> {
        let launch = |e: anyhow::Error| EvalError::LaunchError(format!("{e:#}"));
        let Some(first) = cs.first() else {
            return Ok(Vec::new());
        };
        if w.data == DataKind::Peaked {
            // Buckets are timed on caches generated on the device: iid normal (BENCH.md `paper`),
            // and page-coherent ones for the runs that ask for them (`runs_for`); a `peaked`
            // workload is the host cases' data, used in verification.
            return Err(EvalError::Invalid(
                "timing runs on device-generated iid normal keys; `peaked` is verified, not timed".into(),
            ));
        }
        self.enter_bucket(&first.spec, w)?;
        let copies = self.bucket.as_ref().expect("entered").caches.len();
        let max_pages = self.bucket.as_ref().expect("entered").caches[0]
            .paper
            .shape
            .max_pages;
        // One session per (candidate, cache copy, method); each runs its whole step once so the
        // stages before the timed family (selections) hold valid data in its own workspace.
        let mut sessions: Vec<Vec<Vec<TimedSession>>> = Vec::new();
        let gpu = self.gpu.clone();
        for c in cs {
            let mut per_copy = Vec::new();
            for copy in 0..copies {
                let mut per_method = Vec::new();
                for run in runs_for(c.family, w.selector, max_pages) {
                    self.make_cache(&c.spec, w, run.keys)?;
                    let s = self.session(c, copy, run)?;
                    let cache = self.bucket.as_ref().expect("entered").cache(run.keys, copy);
                    cache.run(&gpu, &s).map_err(launch)?;
                    let calls = cache.family_calls(&s, c.family).map_err(launch)?;
                    per_method.push((run.keys, s, calls));
                }
                per_copy.push(per_method);
            }
            sessions.push(per_copy);
        }
        if self.timer.is_none() {
            self.timer = Some(StepTimer::new(&gpu).map_err(launch)?);
        }
        let (bucket, timer) = (
            self.bucket.as_ref().expect("entered"),
            self.timer.as_mut().expect("made above"),
        );
        let mut out = vec![Vec::with_capacity(reps as usize); cs.len()];
        let n = cs.len();
        for r in 0..(WARMUP + reps) as usize {
            for (i, per_copy) in sessions.iter().enumerate() {
                let copy = (r * n + i) % copies;
                let mut runs_ms = Vec::with_capacity(per_copy[copy].len());
                for (keys, s, calls) in &per_copy[copy] {
                    runs_ms.push(
                        bucket
                            .cache(*keys, copy)
                            .time_calls(&gpu, s, calls, timer)
                            .map_err(launch)?,
                    );
                }
                if r >= WARMUP as usize {
                    out[i].push(aggregate_runs(&runs_ms) * 1e3);
                }
            }
        }
        Ok(out)
    }
    fn session(&mut self, c: &Candidate, copy: usize, run: Run) -> Result<Session, EvalError> {
        let problem = self
            .bucket
            .as_ref()
            .expect("bucket entered")
            .cache(run.keys, copy)
            .problem(run.method);
        let dec = self.decoder(c, &problem)?;
        let gpu = self.gpu.clone();
        let bucket = self.bucket.as_mut().expect("bucket entered");
        bucket
            .cache_mut(run.keys, copy)
            .session(&gpu, dec)
            .map_err(|e| EvalError::LaunchError(format!("{e:#}")))
    }
}

/// A step's session and the launches of the family timed in it.
type TimedSession = (DeviceKeys, Session, Vec<BoundCall>);

/// One step a family is verified and timed in: a method on the keys it is for.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    method: Method,
    keys: DeviceKeys,
}

/// The steps that exercise `family` fed by `selector` (top-k keeps a quarter of the pages,
/// BENCH.md). A family is verified in each and timed over them by [`aggregate_runs`]. The
/// sparse decode is searched once per selector, in that selector's step alone:
/// timed on top-k's selection only, a tile was once chosen 1.7% faster there and ran Gaussian's
/// 32k step 9% slower; timed on both, `gqa` top-k at 128k lost 7% (results/2026-11-30-refine,
/// results/2026-11-30-jit-pool). Without a selector (the host cases' checks) it runs in both.
/// The certified family's pruned row ([`Selector::Pruned`]) is searched in the page-pruned step
/// on page-coherent keys (BENCH.md `peaked`, what pruning is for) and on iid keys, where
/// pruning keeps every page and the step falls back to the full walk at the pruned row's tile.
/// Timed on `peaked` alone it picked a tile whose fallback ran `paper` 1M at 1.322 ms instead
/// of 1.173 (results/2026-12-02-box-dp4a/4-rounds); the full walk's own winner, one-warp CTAs
/// at `paper` 1M, ran the pruned `peaked` step 40% slower (0.611 → 0.858 ms,
/// results/2026-12-02-head-bound/1-checks-bench). So both runs count, by the geometric mean of
/// their times ([`aggregate_runs`]): a tenth off either step counts the same. The full walk is
/// timed on both caches too: it reads every token whatever the keys, but how many it rescores
/// and how soon its bound tightens depend on them. Timed on iid keys alone, `paper` 1M picked
/// one-warp CTAs with a shared bound that ran `peaked` 1M in 1.195 ms, against 1.137 ms at the
/// 256-thread tile picked at b44f374 (results/2026-12-03-page-pass-order/1-ab-checks-bench,
/// results/2026-12-01-exact-finish/1-checks-bench-b44f374).
fn runs_for(family: KernelFamily, selector: Option<Selector>, max_pages: u32) -> Vec<Run> {
    let topk = Method::TopK {
        budget_pages: (max_pages / 4).max(1),
    };
    let iid = |method| Run {
        method,
        keys: DeviceKeys::Normal,
    };
    match family {
        KernelFamily::DecodeDense => vec![iid(Method::Dense)],
        KernelFamily::PageScoreBox | KernelFamily::SelectTopk => vec![iid(topk)],
        KernelFamily::DecodeSparse => [topk, Method::Gaussian]
            .into_iter()
            .filter(|m| selector.is_none_or(|s| m.selector() == Some(s)))
            .map(iid)
            .collect(),
        KernelFamily::PageScoreMoments | KernelFamily::SelectGaussian => vec![iid(Method::Gaussian)],
        KernelFamily::DecodeCertified if selector == Some(Selector::Pruned) => vec![
            Run {
                method: Method::CertifiedPruned,
                keys: DeviceKeys::Peaked,
            },
            iid(Method::CertifiedPruned),
        ],
        KernelFamily::DecodeCertified => vec![
            iid(Method::Certified),
            Run {
                method: Method::Certified,
                keys: DeviceKeys::Peaked,
            },
        ],
        KernelFamily::PageMeta => vec![iid(Method::Certified)],
    }
}

/// One timing of a candidate over the steps it runs in ([`runs_for`]): the geometric mean of
/// their times, so that each step's relative change weighs the same whatever its length (a
/// plain sum let the long iid fallback of the pruned row outvote its `peaked` step, ten times
/// shorter). With one step it is that step's time.
fn aggregate_runs(ms: &[f64]) -> f64 {
    if ms.is_empty() {
        return 0.0;
    }
    (ms.iter().map(|t| t.ln()).sum::<f64>() / ms.len() as f64).exp()
}

/// Largest relative L2 error over heads and largest relative τ difference.
fn agreement(a: &DenseOutputs, b: &DenseOutputs, d: usize) -> (f64, f64) {
    let mut worst = 0.0f64;
    for (x, y) in a.out.chunks(d).zip(b.out.chunks(d)) {
        let diff = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q) * (p - q))
            .sum::<f64>()
            .sqrt();
        let norm = y.iter().map(|q| q * q).sum::<f64>().sqrt().max(1e-30);
        let rel = diff / norm;
        worst = worst.max(if rel.is_nan() { f64::INFINITY } else { rel });
    }
    let tau = a
        .tau
        .iter()
        .zip(&b.tau)
        .map(|(p, q)| {
            let r = (p - q).abs() / (1.0 + q.abs());
            if r.is_nan() {
                f64::INFINITY
            } else {
                r
            }
        })
        .fold(0.0, f64::max);
    (worst, tau)
}

impl MeasureBackend for GpuBackend {
    fn device(&self) -> DeviceKey {
        let info = self.gpu.info();
        DeviceKey {
            gpu: info.name.clone(),
            sm: info.compute_capability.0 * 10 + info.compute_capability.1,
            driver: info
                .kernel_module_version
                .clone()
                .unwrap_or_else(|| info.driver_version.clone()),
            cuda: format!("{}.{}", info.cuda_driver_version.0, info.cuda_driver_version.1),
        }
    }

    fn verify(&mut self, c: &Candidate, w: &Workload) -> Result<(), EvalError> {
        // Small cases with host data (once per candidate): both key distributions, odd
        // lengths, the float64 reference on every head.
        let key = (c.family, c.spec.sketch_tag(), c.tile.tag());
        if !self.host_checked.contains(&key) {
            let t = Instant::now();
            self.check_host_cases(c)?;
            self.add_phase("verify (host cases)", t);
            self.host_checked.insert(key);
        }
        let t = Instant::now();
        let r = self.verify_at_bucket(c, w);
        self.add_phase("verify (bucket shape)", t);
        r
    }

    fn prefetch(&mut self, cs: &[Candidate]) {
        self.generate_all(cs);
    }

    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, EvalError> {
        let t = Instant::now();
        let r = self.prepare_candidate(c);
        self.add_phase("prepare (codegen + JIT)", t);
        r
    }

    fn time(&mut self, cs: &[Candidate], w: &Workload, reps: u32) -> Result<Vec<Vec<f64>>, EvalError> {
        let t = Instant::now();
        let r = self.time_candidates(cs, w, reps);
        self.add_phase("time", t);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certified_rows_are_timed_on_both_caches_and_others_on_iid_keys() {
        let pruned = runs_for(KernelFamily::DecodeCertified, Some(Selector::Pruned), 100);
        assert_eq!(pruned.len(), 2);
        assert!(pruned.iter().all(|r| r.method == Method::CertifiedPruned));
        assert!(pruned.iter().any(|r| r.keys == DeviceKeys::Peaked));
        assert!(pruned.iter().any(|r| r.keys == DeviceKeys::Normal));
        let full = runs_for(KernelFamily::DecodeCertified, None, 100);
        assert_eq!(
            full,
            [DeviceKeys::Normal, DeviceKeys::Peaked].map(|keys| Run {
                method: Method::Certified,
                keys
            })
        );
        assert_eq!(
            runs_for(KernelFamily::DecodeDense, None, 100),
            vec![Run {
                method: Method::Dense,
                keys: DeviceKeys::Normal
            }]
        );
    }

    #[test]
    fn runs_weigh_by_their_relative_change() {
        assert_eq!(aggregate_runs(&[0.25]), 0.25);
        assert!((aggregate_runs(&[0.1, 1.0]) - 0.1f64.sqrt()).abs() < 1e-12);
        // A tenth off the short step is worth a tenth off the long one.
        let a = aggregate_runs(&[0.09, 1.0]);
        let b = aggregate_runs(&[0.1, 0.9]);
        assert!((a - b).abs() < 1e-12);
    }
}
