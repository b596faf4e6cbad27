//! The engine end to end without a GPU: a bundle made by `entkv bundle create`'s code path, the
//! runtime's planner (rows, tiers, region layouts, bound launches), and the generated kernels
//! behind each planned entry run in the interpreter — metadata build after prefill, `append`
//! for a token that completes a page, then the step — checked against float64 references for
//! every method.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use entkv_abi::{DType, DecodeSpec, PagedSpec};
use entkv_autotune::bundle_cmd::create_default_bundle;
use entkv_bundle::{Bundle, Tier};
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::Kernel;
use entkv_kernels::check::{compare, DenseOutputs};
use entkv_kernels::decode_checks::{add_paged_inputs, selected_reference};
use entkv_kernels::paged_data::{paged_reference, KeyData, PagedCase, PagedInputs};
use entkv_kernels::program::{ArgRef, Call, Program};
use entkv_kernels::{family_kernels, scalar_of_elem};
use entkv_runtime::engine::{BoundArg, BoundCall, DecodePlanner, Method, Problem, RegionLayout, StepPlan};
use entkv_runtime::KernelArg;

fn spec(alpha: f64, d: u32, group: u32, p: u32, dtype: DType, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, group, dtype).unwrap(), p, alibi, 8).unwrap()
}

/// Every kernel of every row of the bundle for `spec`, by entry name.
fn kernels_of(bundle: &Bundle, spec: &PagedSpec) -> BTreeMap<String, Rc<Kernel>> {
    let mut out = BTreeMap::new();
    for row in bundle.rows().iter().filter(|r| r.spec == spec.sketch_tag()) {
        for k in family_kernels(row.family, spec, &row.tile).unwrap() {
            out.insert(k.name.clone(), Rc::new(k));
        }
    }
    out
}

fn add_calls(p: &mut Program, calls: &[BoundCall], kernels: &BTreeMap<String, Rc<Kernel>>) {
    for c in calls {
        let kernel = kernels
            .get(&c.entry)
            .unwrap_or_else(|| panic!("no kernel for planned entry `{}`", c.entry))
            .clone();
        let args = c
            .args
            .iter()
            .map(|a| match a {
                BoundArg::Tensor(role) => ArgRef::buf(role.name()),
                BoundArg::Region { name, .. } => ArgRef::Buf(name.clone()),
                BoundArg::Scalar(KernelArg::I32(v)) => ArgRef::I32(*v),
                BoundArg::Scalar(KernelArg::U32(v)) => ArgRef::U32(*v),
                BoundArg::Scalar(KernelArg::I64(v)) => ArgRef::I64(*v),
                BoundArg::Scalar(KernelArg::F32(v)) => ArgRef::F32(*v),
                BoundArg::Scalar(other) => panic!("unexpected scalar {other:?}"),
            })
            .collect();
        p.calls.push(Call {
            kernel,
            geometry: c.geometry,
            args,
        });
    }
}

fn poison_region(p: &mut Program, layout: &RegionLayout) {
    for s in layout.slots() {
        p.poisoned(&s.name, scalar_of_elem(s.elem), s.len as usize);
    }
}

/// Selected logical pages per (sequence, KV head) read back from the workspace.
fn selection(ran: &Program, x: &PagedInputs) -> Vec<Vec<Vec<i32>>> {
    let pages = ran.get("sel_pages").to_f64_vec();
    let count = ran.get("sel_count").to_f64_vec();
    let (hkv, mp) = (x.shape.kv_heads as usize, x.shape.max_pages as usize);
    (0..x.seq_lens.len())
        .map(|b| {
            (0..hkv)
                .map(|h| {
                    let n = count[b * hkv + h] as usize;
                    assert!(n >= 1 && n <= mp, "sel_count {n}");
                    let row: Vec<i32> = pages[(b * hkv + h) * mp..][..n]
                        .iter()
                        .map(|&v| v as i32)
                        .collect();
                    assert!(
                        row.windows(2).all(|w| w[0] < w[1]),
                        "selection not ascending: {row:?}"
                    );
                    row
                })
                .collect()
        })
        .collect()
}

struct Ran {
    plan: StepPlan,
    program: Program,
}

/// Prefill metadata for lengths − 2, append the last two tokens, run the step.
fn run_engine(case: &PagedCase, method: Method, bundle: &Arc<Bundle>, sm_count: u32) -> Ran {
    let spec = &case.spec;
    let x = case.inputs();
    let problem = Problem {
        alpha: spec.decode.alpha.value(),
        head_dim: spec.decode.head_dim,
        page_size: spec.page_size,
        q_heads: case.q_heads(),
        kv_heads: case.kv_heads,
        kv_dtype: spec.decode.kv_dtype,
        alibi: spec.alibi,
        sketch_bits: spec.sketch_bits,
        method,
        // Capacity above the batch: the layouts are bounds, plans use less.
        max_batch: case.batch() + 2,
        num_pages: x.shape.num_pages,
        max_pages: x.shape.max_pages,
    };
    let planner = DecodePlanner::new(&problem, bundle.clone(), sm_count).unwrap();
    let kernels = kernels_of(bundle, spec);
    let mut p = Program::new();
    add_paged_inputs(&mut p, &x);
    p.poisoned(
        "out",
        scalar_of_elem(spec.decode.out_dtype.into()),
        x.q.values.len(),
    );
    poison_region(&mut p, planner.workspace_layout());
    poison_region(&mut p, planner.metadata_layout());
    let plan = planner.plan(&x.seq_lens, &x.block_table).unwrap();
    if method.uses_metadata() {
        // Prefill ended two tokens earlier; the last two arrive through `append`. Lengths with
        // `len − 1` a multiple of the page size make the first append complete a page that the
        // step then scores (it is no longer the last page), so a missing update shows.
        let older: Vec<i32> = x.seq_lens.iter().map(|&l| (l - 2).max(1)).collect();
        let newer: Vec<i32> = x.seq_lens.iter().map(|&l| (l - 1).max(1)).collect();
        let pages = planner.full_pages(&older, &x.block_table).unwrap();
        let slot = planner.metadata_layout().get("meta_pages").unwrap();
        let mut list = vec![-1; slot.len as usize];
        list[..pages.len()].copy_from_slice(&pages);
        p.buffer("meta_pages", HostBuffer::I32(list));
        p.buffer("seq_lens", HostBuffer::I32(newer.clone()));
        add_calls(
            &mut p,
            &planner.plan_build_metadata(pages.len() as u32).unwrap(),
            &kernels,
        );
        add_calls(
            &mut p,
            &planner.plan(&newer, &x.block_table).unwrap().append_calls,
            &kernels,
        );
        p.run_interp().unwrap();
        p.calls.clear();
        p.buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()));
        assert!(!plan.append_calls.is_empty());
        add_calls(&mut p, &plan.append_calls, &kernels);
    } else {
        assert!(plan.append_calls.is_empty() && planner.metadata_size() == 0);
    }
    add_calls(&mut p, &plan.calls, &kernels);
    p.run_interp().unwrap();
    Ran { plan, program: p }
}

fn outputs(ran: &Program) -> DenseOutputs {
    DenseOutputs {
        out: ran.get("out").to_f64_vec(),
        tau: ran.get("tau").to_f64_vec(),
        support: ran
            .get("support")
            .to_f64_vec()
            .into_iter()
            .map(|v| v as i64)
            .collect(),
    }
}

fn check_case(case: PagedCase, methods: &[Method], sm_count: u32) {
    let bundle = Arc::new(create_default_bundle(&[case.spec], 0).unwrap());
    let x = case.inputs();
    let full = paged_reference(&case.spec, &x);
    for &method in methods {
        let ran = run_engine(&case, method, &bundle, sm_count);
        assert!(
            ran.plan.kernels.iter().all(|k| k.tier == Tier::Default),
            "untuned bundle"
        );
        let got = outputs(&ran.program);
        let (reference, what) = match ran.plan.method {
            Method::TopK { budget_pages } => {
                let sel = selection(&ran.program, &x);
                for (b, per_head) in sel.iter().enumerate() {
                    let pages = (x.seq_lens[b] as u32).div_ceil(case.spec.page_size) as i32;
                    for row in per_head {
                        assert_eq!(*row.last().unwrap(), pages - 1, "last page kept");
                        assert_eq!(row.len() as i32, (budget_pages as i32).min(pages - 1) + 1);
                    }
                }
                (selected_reference(&case.spec, &x, &sel), "selected pages")
            }
            Method::Gaussian => {
                let sel = selection(&ran.program, &x);
                (selected_reference(&case.spec, &x, &sel), "selected pages")
            }
            _ => (full.clone(), "full cache"),
        };
        let c = compare(&reference, &got, None);
        println!(
            "{:?} → {:?}: vs {what}: rel err {:.2e}, τ err {:.2e}, mismatches {}, non-finite {}",
            method, ran.plan.method, c.max_rel_err, c.max_tau_err, c.support_mismatches, c.non_finite
        );
        assert!(c.passed, "{method:?}: {c:?}");
        if ran.plan.method == Method::Certified {
            let heads = case.batch() as usize * case.q_heads() as usize;
            let kept = &ran.program.get("kept").to_f64_vec()[..heads];
            assert!(kept.iter().all(|k| k.is_finite() && *k >= 1.0), "kept {kept:?}");
        }
    }
}

const ALL: [Method; 5] = [
    Method::Dense,
    Method::TopK { budget_pages: 3 },
    Method::Gaussian,
    Method::Certified,
    Method::Auto,
];

#[test]
fn every_method_matches_the_reference_paper_like() {
    // Odd lengths: one token, a page completed by an appended token (32 of 33), partial last
    // pages.
    let case = PagedCase {
        spec: spec(1.5, 32, 1, 16, DType::F16, false),
        kv_heads: 2,
        seq_lens: vec![1, 33, 300, 777],
        seed: 7,
        data: KeyData::Peaked,
        spare_pages: 3,
    };
    check_case(case, &ALL, 132);
}

#[test]
fn every_method_matches_the_reference_gqa_alibi_bf16() {
    let case = PagedCase {
        spec: spec(2.0, 64, 2, 32, DType::BF16, true),
        kv_heads: 2,
        seq_lens: vec![65, 333],
        seed: 9,
        data: KeyData::Normal,
        spare_pages: 2,
    };
    // A one-SM split plan: several chunks per split.
    check_case(case, &ALL, 1);
}
