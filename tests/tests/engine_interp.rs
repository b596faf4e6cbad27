//! The engine end to end without a GPU: a bundle made by `entkv bundle create`'s code path, the
//! runtime's planner (rows, tiers, region layouts, bound launches), and the generated kernels
//! behind each planned entry run in the interpreter — metadata build after prefill, `append`
//! for a token that completes a page, then the step — checked against float64 references for
//! every method. The runner is `entkv_autotune::interp_engine` (also behind
//! `entkv verify --interp`); this test adds the method-specific assertions.

use std::sync::Arc;

use entkv_abi::{DType, DecodeSpec, PagedSpec};
use entkv_autotune::bundle_cmd::create_default_bundle;
use entkv_autotune::interp_engine::{check_engine, EVERY_METHOD};
use entkv_bundle::Tier;
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_runtime::engine::Method;

fn spec(alpha: f64, d: u32, group: u32, p: u32, dtype: DType, alibi: bool) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(alpha, d, group, dtype).unwrap(), p, alibi, 8).unwrap()
}

fn check_case(case: PagedCase, methods: &[Method], sm_count: u32) {
    let bundle = Arc::new(create_default_bundle(&[case.spec], 0).unwrap());
    let x = case.inputs();
    for &method in methods {
        let checked = check_engine(&case, &x, method, &bundle, sm_count).unwrap();
        let plan = &checked.run.plan;
        assert!(
            plan.kernels.iter().all(|k| k.tier == Tier::Default),
            "untuned bundle"
        );
        if let (Method::TopK { budget_pages }, Some(sel)) = (plan.method, &checked.selection) {
            for (b, per_head) in sel.iter().enumerate() {
                let pages = (x.seq_lens[b] as u32).div_ceil(case.spec.page_size) as i32;
                for row in per_head {
                    assert_eq!(*row.last().unwrap(), pages - 1, "last page kept");
                    assert_eq!(row.len() as i32, (budget_pages as i32).min(pages - 1) + 1);
                }
            }
        }
        let c = &checked.check;
        println!(
            "{:?} → {:?}: vs {}: rel err {:.2e}, τ err {:.2e}, mismatches {}, non-finite {}",
            method,
            plan.method,
            checked.against.name(),
            c.max_rel_err,
            c.max_tau_err,
            c.support_mismatches,
            c.non_finite
        );
        assert!(c.passed, "{method:?}: {c:?}");
        if matches!(plan.method, Method::Certified | Method::CertifiedPruned) {
            let heads = case.batch() as usize * case.q_heads() as usize;
            let kept = &checked.run.program.get("kept").to_f64_vec()[..heads];
            assert!(kept.iter().all(|k| k.is_finite() && *k >= 1.0), "kept {kept:?}");
        }
    }
}

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
    check_case(case, &EVERY_METHOD, 132);
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
    check_case(case, &EVERY_METHOD, 1);
}

/// `check_device_ids`: after planning, the device's block table gets ids outside the pool and a
/// length grows past the plan. Unchecked, every method's step reads outside its buffers (the
/// interpreter's sanitizer stops it). Checked, the step runs: its records name each bad input
/// as `guard_ids_reference` does, the untouched sequence's output is the one it has with good
/// inputs, and with good inputs the checked step matches the float64 reference and records
/// nothing.
#[test]
fn checked_steps_survive_bad_device_ids_and_name_them() {
    use entkv_autotune::interp_engine::{
        bad_device_ids, check_run, expected_id_faults, id_check_case, run_engine_on_device, DeviceIds,
    };

    let case = id_check_case().unwrap();
    let bundle = Arc::new(create_default_bundle(&[case.spec], 0).unwrap());
    // Four block-table columns past the longest sequence's pages, holding garbage: no launch
    // may read them (the copy leaves them unwritten, i.e. poisoned).
    let mut x = case.inputs();
    let cols = x.shape.max_pages as usize;
    x.block_table = x
        .block_table
        .chunks(cols)
        .flat_map(|r| r.iter().copied().chain([-9; 4]))
        .collect();
    x.shape.max_pages += 4;
    let mp = x.shape.max_pages as usize;
    let (lens, table) = bad_device_ids(&x);
    let good = DeviceIds {
        seq_lens: &x.seq_lens,
        block_table: &x.block_table,
    };
    let bad = DeviceIds {
        seq_lens: &lens,
        block_table: &table,
    };
    let (want, faults) = expected_id_faults(&case.spec, &x, &lens, &table);
    assert_eq!(faults.iter().map(|f| f.seq).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(faults[1].count, 2);
    let out_row = (x.q.values.len() / 4) as usize;
    for method in EVERY_METHOD {
        let e = run_engine_on_device(&case, &x, method, &bundle, 132, false, &bad).err();
        let e = e.unwrap_or_else(|| panic!("{method:?}: an unchecked step with bad ids ran"));
        println!("{method:?} unchecked: {:#}", e.root_cause());

        let ok = run_engine_on_device(&case, &x, method, &bundle, 132, true, &good).unwrap();
        let records = ok.program.get("ids_faults").as_i32().unwrap()[..want.faults.len()].to_vec();
        assert!(records.iter().all(|&w| w == 0), "{method:?}: {records:?}");
        let ok_out = ok.program.get("out").to_f64_vec();
        let c = check_run(&case, &x, ok).unwrap();
        assert!(c.check.passed, "{method:?}: {:?}", c.check);

        let run = run_engine_on_device(&case, &x, method, &bundle, 132, true, &bad).unwrap();
        let got = |name: &str, len: usize| run.program.get(name).as_i32().unwrap()[..len].to_vec();
        assert_eq!(got("ids_faults", want.faults.len()), want.faults, "{method:?}");
        assert_eq!(got("ids_seq_lens", 4), want.seq_lens, "{method:?}");
        let copy = got("ids_block_table", 4 * mp);
        for b in 0..4 {
            let cols = want.columns;
            assert_eq!(
                copy[b * mp..][..cols],
                want.block_table[b * cols..][..cols],
                "{method:?}"
            );
        }
        let out = run.program.get("out").to_f64_vec();
        assert!(out.iter().all(|v| v.is_finite()), "{method:?}: non-finite output");
        assert_eq!(
            out[3 * out_row..],
            ok_out[3 * out_row..],
            "{method:?}: sequence 3 changed"
        );
    }
}
