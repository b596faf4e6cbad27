//! The runtime's engine run in the CPU interpreter: the planner (`DecodePlanner`) picks a
//! bundle's rows and binds every launch, and the kernels behind each planned entry — generated
//! from the row's tile, the same DSL its PTX was compiled from — run in the interpreter with its
//! sanitizer: metadata built after "prefill", `append` for the last two tokens, then the step.
//! Bundles, planner and kernels are so checked together without a GPU, against float64
//! references. Shared by `entkv verify --interp` and tests/tests/engine_interp.rs.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use anyhow::{anyhow, bail, ensure, Context, Result};
use entkv_abi::PagedSpec;
use entkv_bundle::Bundle;
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::Kernel;
use entkv_kernels::check::{compare, DenseCheck, DenseOutputs};
use entkv_kernels::decode_checks::{add_paged_inputs, selected_reference};
use entkv_kernels::paged_data::{paged_reference, PagedCase, PagedInputs};
use entkv_kernels::program::{ArgRef, Call, Program};
use entkv_kernels::{family_kernels, scalar_of_elem};
use entkv_runtime::engine::{BoundArg, BoundCall, DecodePlanner, Method, RegionLayout, StepPlan};
use entkv_runtime::KernelArg;

use crate::engine_bench::{case_problem, per_head_selection};

/// SMs the interpreter plans split launches for: the H200's, so the interpreter runs the plans
/// the GPU would.
pub const H200_SMS: u32 = 132;

/// Generated kernels by entry name.
pub type KernelsByEntry = BTreeMap<String, Rc<Kernel>>;

/// Every kernel of every row of `bundle` at `spec`, by entry name, generated from the row's
/// tile (what the row's PTX was compiled from).
pub fn kernels_of(bundle: &Bundle, spec: &PagedSpec) -> Result<KernelsByEntry> {
    let mut out = BTreeMap::new();
    for row in bundle.rows().iter().filter(|r| r.spec == spec.sketch_tag()) {
        let kernels = family_kernels(row.family, spec, &row.tile).with_context(|| {
            format!(
                "generating {} at {} (tile {})",
                row.family,
                row.spec,
                row.tile.tag()
            )
        })?;
        // And what the row's module holds besides its entries (a decode module's id check).
        let extra = entkv_kernels::module_extra_kernels(row.family, spec)?;
        for k in kernels.into_iter().chain(extra) {
            out.insert(k.name.clone(), Rc::new(k));
        }
    }
    Ok(out)
}

/// Append planned launches to `p`: each entry's generated kernel, its geometry, and its bound
/// arguments by buffer name (tensor roles and region slots become named buffers).
pub fn add_calls(p: &mut Program, calls: &[BoundCall], kernels: &KernelsByEntry) -> Result<()> {
    for c in calls {
        let kernel = kernels
            .get(&c.entry)
            .ok_or_else(|| {
                anyhow!(
                    "no generated kernel for planned entry `{}` ({})",
                    c.entry,
                    c.family
                )
            })?
            .clone();
        let args = c
            .args
            .iter()
            .map(|a| {
                Ok(match a {
                    BoundArg::Tensor(role) => ArgRef::buf(role.name()),
                    BoundArg::Region { name, .. } => ArgRef::Buf(name.clone()),
                    BoundArg::Scalar(KernelArg::I32(v)) => ArgRef::I32(*v),
                    BoundArg::Scalar(KernelArg::U32(v)) => ArgRef::U32(*v),
                    BoundArg::Scalar(KernelArg::I64(v)) => ArgRef::I64(*v),
                    BoundArg::Scalar(KernelArg::F32(v)) => ArgRef::F32(*v),
                    BoundArg::Scalar(other) => bail!("`{}`: unexpected scalar argument {other:?}", c.entry),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        p.calls.push(Call {
            kernel,
            geometry: c.geometry,
            args,
        });
    }
    Ok(())
}

/// Fill every slot of a region with NaN (floats) or −7 (integers): what a kernel should have
/// written and did not shows in the outputs.
pub fn poison_region(p: &mut Program, layout: &RegionLayout) {
    for s in layout.slots() {
        p.poisoned(&s.name, scalar_of_elem(s.elem), s.len as usize);
    }
}

/// A step run in the interpreter: its plan and every buffer after it ran.
pub struct EngineRun {
    /// The plan (method, rows and tiers, launches).
    pub plan: StepPlan,
    /// Inputs, regions (by slot name) and output after the step.
    pub program: Program,
}

impl EngineRun {
    fn buffer(&self, name: &str) -> Result<&HostBuffer> {
        self.program
            .buffers
            .get(name)
            .ok_or_else(|| anyhow!("the run has no buffer `{name}`"))
    }

    /// Output, τ and support per (sequence, query head).
    pub fn outputs(&self) -> Result<DenseOutputs> {
        Ok(DenseOutputs {
            out: self.buffer("out")?.to_f64_vec(),
            tau: self.buffer("tau")?.to_f64_vec(),
            support: self
                .buffer("support")?
                .to_f64_vec()
                .into_iter()
                .map(|v| v as i64)
                .collect(),
        })
    }

    /// Selected logical pages per (sequence, KV head) read back from the workspace, each row
    /// checked by [`per_head_selection`] (ascending inside its sequence, the last page last).
    pub fn selection(&self, spec: &PagedSpec, x: &PagedInputs) -> Result<Vec<Vec<Vec<i32>>>> {
        let ints = |name: &str| -> Result<Vec<i32>> {
            Ok(self
                .buffer(name)?
                .to_f64_vec()
                .into_iter()
                .map(|v| v as i32)
                .collect())
        };
        let sel = per_head_selection(
            &ints("sel_pages")?,
            &ints("sel_count")?,
            &x.seq_lens,
            spec.page_size as usize,
            x.shape.kv_heads as usize,
            x.shape.max_pages as usize,
        )?;
        Ok(sel)
    }
}

/// Plan and run one step of `method` on `case` (whose inputs are `x`) through `bundle`'s rows;
/// see [`run_engine_with`].
pub fn run_engine(
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
    bundle: &Arc<Bundle>,
    sm_count: u32,
) -> Result<EngineRun> {
    run_engine_with(case, x, method, bundle, sm_count, |_| {})
}

/// Plan a step of `method` on `case` (inputs `x`) with `bundle`, then in the interpreter, on
/// NaN-poisoned regions and output: build the metadata of the pages full two tokens before the
/// end (prefill), `append` those two tokens, and run the step's launches after `tamper` has
/// edited them (tests use it to break a step and see the check fail).
///
/// Lengths with `len − 1` a multiple of the page size make the first append complete a page that
/// the step then scores (it is no longer the last page), so a missing update shows.
pub fn run_engine_with(
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
    bundle: &Arc<Bundle>,
    sm_count: u32,
    tamper: impl FnOnce(&mut Vec<BoundCall>),
) -> Result<EngineRun> {
    run_step(case, x, method, bundle, sm_count, (false, None), tamper)
}

/// The device's lengths and block table at a step, where they differ from the host copies the
/// step was planned with.
pub struct DeviceIds<'a> {
    pub seq_lens: &'a [i32],
    pub block_table: &'a [i32],
}

/// Every engine method, top-k at 3 pages (the small cases' budget): the list the interpreter
/// tests and `entkv gpu-check`'s engine rows run.
pub const EVERY_METHOD: [Method; 6] = [
    Method::Dense,
    Method::TopK { budget_pages: 3 },
    Method::Gaussian,
    Method::Certified,
    Method::CertifiedPruned,
    Method::Auto,
];

/// The id-check scenario that tests/tests/engine_interp.rs runs in the interpreter and
/// `entkv gpu-check` on the GPU: `paper`'s spec (4-bit sketch), two KV heads, four sequences of
/// 17, 200, 95 and 61 tokens; see [`bad_device_ids`].
pub fn id_check_case() -> Result<PagedCase> {
    let decode = entkv_abi::DecodeSpec::new(1.5, 32, 1, entkv_abi::DType::F16)?;
    Ok(PagedCase {
        spec: PagedSpec::new(decode, 16, false, 4)?,
        kv_heads: 2,
        seq_lens: vec![17, 200, 95, 61],
        seed: 3,
        data: entkv_kernels::paged_data::KeyData::Normal,
        spare_pages: 2,
    })
}

/// The lengths and block table of [`id_check_case`]'s inputs `x` (a block table of any width)
/// as the device holds them after planning, broken: sequence 0's length 7 past the longest,
/// two ids of sequence 1 outside the pool (past it, and −1), sequence 2's last page id
/// `i32::MAX`; sequence 3 untouched.
pub fn bad_device_ids(x: &PagedInputs) -> (Vec<i32>, Vec<i32>) {
    let (mp, n) = (x.shape.max_pages as usize, x.shape.num_pages as i32);
    let longest = x.seq_lens.iter().copied().max().unwrap_or(1);
    let mut lens = x.seq_lens.clone();
    lens[0] = longest + 7;
    let mut table = x.block_table.clone();
    table[mp + 3] = n + 5;
    table[mp + 7] = -1;
    table[2 * mp + 5] = i32::MAX;
    (lens, table)
}

/// What `guard_ids` should make of the device holding `lens` and `table` for a step planned on
/// `x` (of `spec`): the clamped copies and fault records (`guard_ids_reference`), and the
/// faults those records name.
pub fn expected_id_faults(
    spec: &PagedSpec,
    x: &PagedInputs,
    lens: &[i32],
    table: &[i32],
) -> (entkv_abi::GuardedIds, Vec<entkv_abi::IdFault>) {
    let longest = x.seq_lens.iter().copied().max().unwrap_or(1) as u32;
    let guarded = entkv_abi::guard_ids_reference(spec, &x.shape, longest, lens, table);
    let chunks = entkv_abi::guard_chunks(spec, longest);
    let faults = entkv_abi::IdFault::decode(&guarded.faults, chunks, longest, x.shape.num_pages);
    (guarded, faults)
}

/// [`run_engine`] where the append and the step read `device`'s lengths and block table (the
/// plan was made from `x`'s), with `Problem::check_device_ids` as given (its fault records are
/// the workspace slot `ids_faults`).
pub fn run_engine_on_device(
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
    bundle: &Arc<Bundle>,
    sm_count: u32,
    check_device_ids: bool,
    device: &DeviceIds,
) -> Result<EngineRun> {
    run_step(
        case,
        x,
        method,
        bundle,
        sm_count,
        (check_device_ids, Some(device)),
        |_| {},
    )
}

/// The run behind [`run_engine_with`] and [`run_engine_on_device`].
fn run_step(
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
    bundle: &Arc<Bundle>,
    sm_count: u32,
    (check_device_ids, device): (bool, Option<&DeviceIds>),
    tamper: impl FnOnce(&mut Vec<BoundCall>),
) -> Result<EngineRun> {
    let spec = &case.spec;
    let mut problem = case_problem(case, &x.shape, method);
    // Capacity above the batch: the layouts are bounds, plans use less.
    problem.max_batch += 2;
    problem.check_device_ids = check_device_ids;
    let planner = DecodePlanner::new(&problem, bundle.clone(), sm_count).context("making the planner")?;
    let kernels = kernels_of(bundle, spec)?;
    let mut p = Program::new();
    add_paged_inputs(&mut p, x);
    p.poisoned(
        "out",
        scalar_of_elem(spec.decode.out_dtype.into()),
        x.q.values.len(),
    );
    poison_region(&mut p, planner.workspace_layout());
    poison_region(&mut p, planner.metadata_layout());
    let plan = planner
        .plan(&x.seq_lens, &x.block_table)
        .context("planning the step")?;
    if method.uses_metadata() {
        let older: Vec<i32> = x.seq_lens.iter().map(|&l| (l - 2).max(1)).collect();
        let newer: Vec<i32> = x.seq_lens.iter().map(|&l| (l - 1).max(1)).collect();
        let pages = planner.full_pages(&older, &x.block_table)?;
        let slot = planner
            .metadata_layout()
            .get(entkv_runtime::engine::META_PAGES)
            .context("the metadata has no page-list slot")?;
        let mut list = vec![-1; slot.len as usize];
        list[..pages.len()].copy_from_slice(&pages);
        p.buffer(entkv_runtime::engine::META_PAGES, HostBuffer::I32(list));
        p.buffer("seq_lens", HostBuffer::I32(newer.clone()));
        add_calls(
            &mut p,
            &planner.plan_build_metadata(pages.len() as u32)?,
            &kernels,
        )?;
        add_calls(
            &mut p,
            &planner.plan(&newer, &x.block_table)?.append_calls,
            &kernels,
        )?;
        p.run_interp()
            .context("building the metadata and appending a token")?;
        p.calls.clear();
        p.buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()));
        ensure!(
            !plan.append_calls.is_empty(),
            "{method:?} reads metadata but plans no append"
        );
        add_calls(&mut p, &plan.append_calls, &kernels)?;
    } else {
        ensure!(
            plan.append_calls.is_empty() && planner.metadata_size() == 0,
            "{method:?} reads no metadata but plans an append or a metadata region"
        );
    }
    if let Some(d) = device {
        // Read when the program runs: by the append above and the step.
        p.buffer("seq_lens", HostBuffer::I32(d.seq_lens.to_vec()));
        p.buffer("block_table", HostBuffer::I32(d.block_table.to_vec()));
    }
    let mut calls = plan.calls.clone();
    tamper(&mut calls);
    add_calls(&mut p, &calls, &kernels)?;
    p.run_interp().context("running the step")?;
    Ok(EngineRun { plan, program: p })
}

/// What a run was compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Against {
    /// Entmax over every token of the cache (exact methods).
    FullCache,
    /// Entmax over the pages the step selected, read back (top-k, Gaussian).
    SelectedPages,
}

impl Against {
    /// `full cache` / `selected pages`.
    pub fn name(self) -> &'static str {
        match self {
            Against::FullCache => "full cache",
            Against::SelectedPages => "selected pages",
        }
    }
}

/// A run checked against its float64 reference.
pub struct EngineCheck {
    /// The run.
    pub run: EngineRun,
    /// The comparison on every head.
    pub check: DenseCheck,
    /// Which reference.
    pub against: Against,
    /// The selection read back (top-k, Gaussian).
    pub selection: Option<Vec<Vec<Vec<i32>>>>,
}

/// Compare a run with its reference: full-cache entmax for exact methods, entmax over each
/// head's selection (read back from the workspace) for the selectors.
pub fn check_run(case: &PagedCase, x: &PagedInputs, run: EngineRun) -> Result<EngineCheck> {
    let got = run.outputs()?;
    let (reference, against, selection) = match run.plan.method {
        Method::TopK { .. } | Method::Gaussian => {
            let sel = run.selection(&case.spec, x)?;
            (
                selected_reference(&case.spec, x, &sel),
                Against::SelectedPages,
                Some(sel),
            )
        }
        _ => (paged_reference(&case.spec, x), Against::FullCache, None),
    };
    Ok(EngineCheck {
        check: compare(&reference, &got, None),
        run,
        against,
        selection,
    })
}

/// [`run_engine`], then [`check_run`].
pub fn check_engine(
    case: &PagedCase,
    x: &PagedInputs,
    method: Method,
    bundle: &Arc<Bundle>,
    sm_count: u32,
) -> Result<EngineCheck> {
    check_run(case, x, run_engine(case, x, method, bundle, sm_count)?)
}
