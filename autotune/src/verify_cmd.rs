//! `entkv verify`: every table row of a bundle checked inside the decode steps that launch it,
//! against float64 references. A tuned row is only reached at some context lengths, so each row
//! is made its family's default in a view of the bundle (one shared function,
//! [`bundle_with_row_as_default`]) and the methods using the family run on small seeded cases —
//! in the CPU interpreter (`--interp`, no GPU: the kernels generated from the row's tile) or on
//! the GPU through the runtime's `Decoder` (the row's PTX itself).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use entkv_abi::{KernelFamily, PagedSpec};
use entkv_bundle::{Bucket, Bundle, BundleMeta, BundleWriter, RowSource, TableRow};
use entkv_kernels::check::DenseCheck;
use entkv_kernels::paged_data::{KeyData, PagedCase, PagedInputs};
use entkv_runtime::engine::{Decoder, Method, ModuleCache};
use entkv_runtime::{gpu_unavailable_reason, Gpu};
use serde::Serialize;

use crate::engine_bench::HostCase;
use crate::interp_engine::{check_engine, H200_SMS};

/// `entkv verify PATH [--interp] [--json]`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Bundle directory or .entkvb file.
    pub path: PathBuf,
    /// Run the kernels in the CPU interpreter (no GPU needed) instead of the bundle's PTX on
    /// the GPU.
    #[arg(long)]
    pub interp: bool,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A view of `bundle` in which `row`'s tile is its family's default row at its spec: every
/// tuned row is dropped and every other (family, spec) keeps its default rows, so the planner
/// launches `row`'s entries at any context length (on every walk it serves; a walk it cannot
/// keeps a default row that can). Built from the bundle's own artifacts (the
/// row's PTX is in its module, nothing is recompiled); only the artifacts the kept rows use are
/// carried over, and the header is the bundle's, so the view of a default row of an untuned
/// bundle is that bundle.
pub fn bundle_with_row_as_default(bundle: &Bundle, row: &TableRow) -> Result<Bundle> {
    anyhow::ensure!(
        bundle.rows().contains(row),
        "{} at `{}`, bucket {} is not a row of the bundle",
        row.family,
        row.spec,
        row.bucket
    );
    view(bundle, Some(row))
}

/// A view of `bundle` with every tuned row dropped: what the bundle launches untuned.
pub fn default_rows_only(bundle: &Bundle) -> Result<Bundle> {
    view(bundle, None)
}

/// The default rows of `bundle`, the one of `as_default`'s (family, spec) replaced by it.
fn view(bundle: &Bundle, as_default: Option<&TableRow>) -> Result<Bundle> {
    let m = bundle.manifest();
    let mut w = BundleWriter::new(BundleMeta {
        entkv_version: m.entkv_version.clone(),
        llvm_version: m.llvm_version.clone(),
        target_sm: m.target_sm,
        ptx_version: m.ptx_version.clone(),
        tuned_on: m.tuned_on.clone(),
        created_unix_s: m.created_unix_s,
    });
    for spec in &m.specs {
        w.add_spec(*spec);
    }
    let defaults: Vec<&TableRow> = m
        .table
        .iter()
        .filter(|r| r.source == RowSource::Default)
        .collect();
    let mut rows: Vec<TableRow> = Vec::new();
    for &r in &defaults {
        match as_default {
            Some(new) if new.family == r.family && new.spec == r.spec => {
                // `new` serves every walk it can, in place of the family's default rows; a walk
                // it cannot (the page-pruned walk of a seeded certified row) keeps a default
                // row that can.
                if r.selector.is_some() {
                    continue;
                }
                rows.push(TableRow {
                    bucket: Bucket::Any,
                    selector: None,
                    source: RowSource::Default,
                    ..new.clone()
                });
                for s in r.family.selectors_unserved_by(&new.tile) {
                    let keep = defaults
                        .iter()
                        .find(|d| d.family == r.family && d.spec == r.spec && d.selector == Some(s))
                        .or(Some(&r).filter(|d| d.tile.serves(Some(s))))
                        .with_context(|| {
                            format!(
                                "no default row of {} at `{}` serves its {s} walk",
                                r.family, r.spec
                            )
                        })?;
                    rows.push(TableRow {
                        selector: Some(s),
                        ..(*keep).clone()
                    });
                }
            }
            _ => rows.push(r.clone()),
        }
    }
    for a in m
        .artifacts
        .iter()
        .filter(|a| rows.iter().any(|r| r.module == a.file))
    {
        let ptx = bundle
            .ptx(&a.file)
            .with_context(|| format!("the bundle has no PTX for its artifact `{}`", a.file))?;
        w.add_module(&a.file, ptx.to_string(), a.entries.clone())?;
    }
    for r in rows {
        w.add_row(r);
    }
    w.finish().context("building the bundle view")
}

/// The methods whose step launches `family`, for a cache of `max_pages` pages per sequence
/// (top-k keeps a quarter of the pages, at least one, as in BENCH.md). `Auto` is left out: it
/// runs dense or certified.
pub fn methods_using(family: KernelFamily, max_pages: u32) -> Vec<Method> {
    [
        Method::Dense,
        Method::TopK {
            budget_pages: (max_pages / 4).max(1),
        },
        Method::Gaussian,
        Method::Certified,
    ]
    .into_iter()
    .filter(|m| m.families().contains(&family))
    .collect()
}

/// The seeded cases every row runs on at `spec`: iid normal and peaked keys, 2 KV heads, the
/// spec's group, dtype and ALiBi, lengths of one token, two pages plus one (a page completed by
/// the appended token, then scored), four full pages (the last completed by the newest token)
/// and 18 pages plus a partial last page; spare NaN-filled pool pages.
pub fn verify_cases(spec: &PagedSpec) -> Vec<PagedCase> {
    let p = spec.page_size;
    [KeyData::Normal, KeyData::Peaked]
        .into_iter()
        .enumerate()
        .map(|(i, data)| PagedCase {
            spec: *spec,
            kv_heads: 2,
            seq_lens: vec![1, 2 * p + 1, 4 * p, 18 * p + 12],
            seed: 31 + i as u64,
            data,
            spare_pages: 3,
        })
        .collect()
}

/// Where the checks run.
pub enum Backend {
    /// The CPU interpreter (kernels generated from each row's tile).
    Interp,
    /// The GPU, through the runtime's `Decoder` (the bundle's PTX).
    Gpu {
        /// The device.
        gpu: Gpu,
        /// Modules loaded once across views.
        modules: ModuleCache,
    },
}

impl Backend {
    /// The GPU backend on device 0, or an error saying why there is none and what to use
    /// instead.
    pub fn gpu() -> Result<Backend> {
        if let Some(reason) = gpu_unavailable_reason() {
            bail!(
                "`entkv verify` runs the bundle's PTX on the GPU, and there is no usable GPU: {reason}. \
                 Use `entkv verify --interp PATH` to run every row in the CPU interpreter instead."
            );
        }
        Ok(Backend::Gpu {
            gpu: Gpu::open(0).context("opening GPU 0")?,
            modules: ModuleCache::new(),
        })
    }

    /// `interp` or `gpu (<name>)`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Interp => "interp".into(),
            Backend::Gpu { gpu, .. } => format!("gpu ({})", gpu.info().name),
        }
    }
}

/// A case, its inputs, and on the GPU its device copy.
struct CaseData {
    case: PagedCase,
    x: PagedInputs,
    device: Option<HostCase>,
}

impl CaseData {
    fn new(backend: &Backend, case: PagedCase) -> Result<CaseData> {
        let device = match backend {
            Backend::Interp => None,
            Backend::Gpu { gpu, .. } => Some(HostCase::new(gpu, case.clone())?),
        };
        Ok(CaseData {
            x: case.inputs(),
            case,
            device,
        })
    }

    /// One step of `method` through `view`, compared with the reference on every head.
    fn check(&mut self, backend: &Backend, method: Method, view: &Arc<Bundle>) -> Result<DenseCheck> {
        match (backend, &mut self.device) {
            (Backend::Gpu { gpu, modules }, Some(hc)) => {
                let dec = Decoder::with_module_cache(gpu, view.clone(), &hc.problem(method), modules.clone())
                    .context("making the decoder")?;
                hc.check(gpu, &dec)
            }
            (Backend::Interp, _) => Ok(check_engine(&self.case, &self.x, method, view, H200_SMS)?.check),
            (Backend::Gpu { .. }, None) => unreachable!("GPU cases are uploaded when made"),
        }
    }
}

/// One row × method × key data check.
#[derive(Clone, Debug, Serialize)]
pub struct RowCheck {
    /// Index of the row in the bundle's table.
    pub row: usize,
    pub family: String,
    pub spec: String,
    pub bucket: String,
    pub tile: String,
    /// `default` or `tuned (… us)`.
    pub source: String,
    /// `dense`, `topk(4)`, `gaussian`, `certified`.
    pub method: String,
    /// `normal` or `peaked`.
    pub data: String,
    /// The comparison on every head (absent when the run failed before producing outputs).
    pub check: Option<DenseCheck>,
    /// Why the run failed, when it did.
    pub error: Option<String>,
    /// Whether an identical run (same method, data, and tile and module for every family of
    /// the method) was done for an earlier row, whose result this is.
    pub shared: bool,
    pub passed: bool,
}

/// Every check of a bundle.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    /// `interp` or `gpu (<name>)`.
    pub backend: String,
    pub checks: Vec<RowCheck>,
    /// Distinct runs made (the rest were shared).
    pub runs: usize,
    pub seconds: f64,
}

impl VerifyReport {
    /// Checks that failed.
    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.passed).count()
    }

    /// One aligned line per check.
    pub fn table(&self) -> String {
        let head = [
            "row", "family", "spec", "bucket", "tile", "method", "data", "rel err", "result",
        ]
        .map(String::from);
        let rows: Vec<[String; 9]> = self
            .checks
            .iter()
            .map(|c| {
                let result = match (&c.error, &c.check) {
                    (Some(e), _) => format!("ERROR: {e}"),
                    (None, Some(k)) if k.passed => "ok".into(),
                    (None, Some(k)) => format!(
                        "FAIL (τ err {:.2e}, {} output failures, {} support mismatches, {} non-finite)",
                        k.max_tau_err, k.out_failures, k.support_mismatches, k.non_finite
                    ),
                    (None, None) => "FAIL".into(),
                };
                [
                    c.row.to_string(),
                    c.family.clone(),
                    c.spec.clone(),
                    c.bucket.clone(),
                    c.tile.clone(),
                    c.method.clone(),
                    c.data.clone(),
                    c.check
                        .as_ref()
                        .map_or("-".into(), |k| format!("{:.2e}", k.max_rel_err)),
                    result,
                ]
            })
            .collect();
        aligned(&head, &rows)
    }
}

/// Columns padded to their widest cell (the last one unpadded), one line per row.
pub fn aligned<const N: usize>(head: &[String; N], rows: &[[String; N]]) -> String {
    let mut width = [0usize; N];
    for r in std::iter::once(head).chain(rows) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(head).chain(rows) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == N {
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `dense`, `topk(B)`, `gaussian`, `certified`, `auto`.
pub fn method_label(m: Method) -> String {
    match m {
        Method::TopK { budget_pages } => format!("topk({budget_pages})"),
        m => m.name().to_string(),
    }
}

/// Check every row of every spec of `bundle` on `backend`: for each row, its view
/// ([`bundle_with_row_as_default`]), each method using its family ([`methods_using`]), each
/// case of [`verify_cases`]. A run identical to an earlier one (same method, data, and tile and
/// module for every family the method launches) is not repeated. A run that fails (planner,
/// interpreter or driver error) is a failed check, not an error of the whole verification.
pub fn verify(bundle: &Bundle, backend: &Backend) -> Result<VerifyReport> {
    let t0 = Instant::now();
    let mut checks = Vec::new();
    let mut done: HashMap<String, (Option<DenseCheck>, Option<String>)> = HashMap::new();
    for spec in &bundle.manifest().specs {
        let tag = spec.sketch_tag();
        let mut cases = verify_cases(spec)
            .into_iter()
            .map(|c| CaseData::new(backend, c))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("preparing the cases of `{tag}`"))?;
        for (index, row) in bundle.rows().iter().enumerate().filter(|(_, r)| r.spec == tag) {
            let view = Arc::new(bundle_with_row_as_default(bundle, row)?);
            let covered = |f: &KernelFamily| view.rows().iter().any(|r| r.spec == tag && r.family == *f);
            let methods: Vec<Method> = methods_using(row.family, cases[0].x.shape.max_pages)
                .into_iter()
                .filter(|m| m.families().iter().all(covered))
                .collect();
            let result =
                |method: String, data: String, check: Option<DenseCheck>, error: Option<String>, shared| {
                    RowCheck {
                        row: index,
                        family: row.family.to_string(),
                        spec: tag.clone(),
                        bucket: row.bucket.to_string(),
                        tile: row.tile.tag(),
                        source: row.source.to_string(),
                        method,
                        data,
                        passed: error.is_none() && check.as_ref().is_some_and(|c| c.passed),
                        check,
                        error,
                        shared,
                    }
                };
            if methods.is_empty() {
                let why = format!(
                    "no method launching {} can run: the bundle lacks rows of the other families of its step at `{tag}`",
                    row.family
                );
                checks.push(result("-".into(), "-".into(), None, Some(why), false));
            }
            for method in methods {
                let tiles: Vec<String> = view
                    .rows()
                    .iter()
                    .filter(|r| r.spec == tag && method.families().contains(&r.family))
                    .map(|r| format!("{}={}@{}", r.family, r.tile.tag(), r.module))
                    .collect();
                for data in cases.iter_mut() {
                    let key = format!("{tag}|{method:?}|{:?}|{}", data.case.data, tiles.join(","));
                    let shared = done.contains_key(&key);
                    if !shared {
                        let outcome = match data.check(backend, method, &view) {
                            Ok(c) => (Some(c), None),
                            Err(e) => (None, Some(format!("{e:#}"))),
                        };
                        done.insert(key.clone(), outcome);
                    }
                    let (check, error) = done[&key].clone();
                    let data = format!("{:?}", data.case.data).to_lowercase();
                    checks.push(result(method_label(method), data, check, error, shared));
                }
            }
        }
    }
    Ok(VerifyReport {
        backend: backend.describe(),
        checks,
        runs: done.len(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Run `entkv verify`: print the table (or JSON) and fail when any check failed.
pub fn run(args: VerifyArgs) -> Result<()> {
    let bundle =
        Bundle::open(&args.path).with_context(|| format!("cannot open bundle {}", args.path.display()))?;
    let backend = if args.interp {
        Backend::Interp
    } else {
        Backend::gpu()?
    };
    let report = verify(&bundle, &backend)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
        println!(
            "{} check(s) of {} row(s) on {}: {} distinct run(s), {} failed, {:.1} s",
            report.checks.len(),
            bundle.rows().len(),
            report.backend,
            report.runs,
            report.failures(),
            report.seconds
        );
    }
    if report.failures() > 0 {
        bail!(
            "{} of {} checks of {} failed",
            report.failures(),
            report.checks.len(),
            args.path.display()
        );
    }
    Ok(())
}
