//! `entkv verify`, `entkv bench` and `entkv doctor` without a GPU: bundle views, every row of a
//! default and of a tuned bundle verified in the interpreter, a broken step caught, and the
//! binaries' outputs and errors. One default bundle (and one tuned) per test binary.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};

use entkv_abi::{DType, DecodeSpec, DenseTile, KernelFamily, PagedSpec, Selector, TileConfig};
use entkv_autotune::bundle_cmd::{build_bundle, create_default_bundle, RowPlan, SpecPlan};
use entkv_autotune::interp_engine::{check_engine, check_run, run_engine_with, H200_SMS};
use entkv_autotune::verify_cmd::{
    bundle_with_row_as_default, default_rows_only, verify, verify_cases, Backend,
};
use entkv_bundle::{Bucket, Bundle, RowSource};
use entkv_runtime::engine::Method;

/// BENCH.md `paper`'s spec: α 1.5, d 32, group 1, f16, P 16.
fn paper_spec() -> PagedSpec {
    PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16).unwrap()
}

fn default_bundle() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| create_default_bundle(&[paper_spec()], 0).unwrap())
}

/// A tile unlike the default (fewer threads, two lanes a token, a small finish stage that
/// spills candidates to the workspace).
fn other_tile() -> TileConfig {
    let spec = paper_spec();
    let t = DenseTile {
        threads: 128,
        lanes_per_token: 2,
        tokens_per_group: 8,
        newton_steps: 2,
        finish_capacity: 64,
        ..DenseTile::default_for(&spec.decode)
    };
    TileConfig::Dense(t)
}

/// The paper bundle plus tuned rows of `other_tile` for the dense and sparse decodes.
fn tuned_bundle() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| {
        let mut plan = SpecPlan::defaults(&paper_spec());
        for fp in &mut plan.families {
            if matches!(fp.family, KernelFamily::DecodeDense | KernelFamily::DecodeSparse) {
                fp.rows.push(RowPlan {
                    bucket: Bucket::Tokens {
                        lo: 1024,
                        hi: 1 << 20,
                    },
                    selector: None,
                    tile: other_tile(),
                    source: RowSource::Tuned { median_us: 12.5 },
                });
            }
        }
        build_bundle(&[plan], None, 0).unwrap()
    })
}

#[test]
fn every_row_of_a_default_bundle_verifies_in_the_interpreter() {
    let report = verify(default_bundle(), &Backend::Interp).unwrap();
    println!("{}", report.table());
    assert_eq!(report.failures(), 0);
    // 8 rows; page_meta runs in 3 methods, decode_sparse in 2, the others in 1; 2 key kinds.
    assert_eq!(report.checks.len(), 2 * (3 + 2 + 6));
    // Every view of a default bundle is the bundle: one run per (method, data).
    assert_eq!(report.runs, 4 * 2);
    assert!(report
        .checks
        .iter()
        .all(|c| c.check.as_ref().is_some_and(|k| k.heads > 0)));
}

#[test]
fn a_row_as_default_round_trips_and_verifies() {
    let bundle = default_bundle();
    for row in bundle.rows() {
        assert_eq!(
            &bundle_with_row_as_default(bundle, row).unwrap(),
            bundle,
            "{row:?}"
        );
    }
    assert_eq!(&default_rows_only(bundle).unwrap(), bundle);

    let tuned = tuned_bundle();
    let tuned_rows: Vec<_> = tuned
        .rows()
        .iter()
        .filter(|r| matches!(r.source, RowSource::Tuned { .. }))
        .collect();
    assert_eq!(tuned_rows.len(), 2);
    for row in tuned_rows {
        let view = bundle_with_row_as_default(tuned, row).unwrap();
        assert_eq!(view.rows().len(), 8, "one default row per family");
        let promoted = view.rows().iter().find(|r| r.family == row.family).unwrap();
        assert_eq!(promoted.tile, other_tile());
        assert_eq!(
            (promoted.bucket, promoted.source),
            (Bucket::Any, RowSource::Default)
        );
        for r in view.rows().iter().filter(|r| r.family != row.family) {
            assert_eq!(r.tile, r.family.default_tile(&paper_spec()), "{r:?}");
        }
        // A complete bundle: it survives its single-file form and verification.
        assert_eq!(
            Bundle::from_single_file_bytes(&view.to_single_file_bytes()).unwrap(),
            view
        );
    }
    let untuned = default_rows_only(tuned).unwrap();
    assert!(untuned.rows().iter().all(|r| r.source == RowSource::Default));
    assert_eq!(untuned.rows().len(), 8);
    let foreign = entkv_bundle::TableRow {
        tile: other_tile(),
        ..default_bundle().rows()[7].clone()
    };
    assert!(bundle_with_row_as_default(default_bundle(), &foreign).is_err());
}

#[test]
fn every_row_of_a_tuned_bundle_verifies_in_the_interpreter() {
    let report = verify(tuned_bundle(), &Backend::Interp).unwrap();
    println!("{}", report.table());
    assert_eq!(report.failures(), 0);
    let tuned: Vec<_> = report
        .checks
        .iter()
        .filter(|c| c.source.starts_with("tuned"))
        .collect();
    // Dense: dense; sparse: top-k and Gaussian; both key kinds; each a run of its own.
    assert_eq!(tuned.len(), 2 * (1 + 2));
    assert!(tuned.iter().all(|c| c.tile == other_tile().tag() && !c.shared));
}

/// `spec`'s untuned bundle plus a tuned certified row of `tile` for `selector`'s walk over
/// [1024, 2²⁰) tokens.
fn with_tuned_certified_row(spec: &PagedSpec, tile: TileConfig, selector: Option<Selector>) -> Arc<Bundle> {
    let f = KernelFamily::DecodeCertified;
    let mut plan = SpecPlan::defaults(spec);
    for fp in plan.families.iter_mut().filter(|fp| fp.family == f) {
        fp.rows.push(RowPlan {
            bucket: Bucket::Tokens {
                lo: 1024,
                hi: 1 << 20,
            },
            selector,
            tile,
            source: RowSource::Tuned { median_us: 10.0 },
        });
    }
    Arc::new(build_bundle(&[plan], None, 0).unwrap())
}

/// A tuned seeded certified row (`entkv_abi::seed`) through the engine: the full walk takes it
/// (the seed kernels, the gated repair launches) and is exact; the page-pruned walk, which a
/// seeded tile cannot serve, takes the default row and is exact too. GQA 2 with a sequence long
/// enough to take a seed beside one too short to.
#[test]
fn a_seeded_certified_row_serves_the_full_walk_only() {
    let spec = PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16).unwrap();
    let f = KernelFamily::DecodeCertified;
    let TileConfig::Dense(def) = f.default_tile(&spec) else {
        unreachable!()
    };
    let seeded = TileConfig::Dense(DenseTile {
        share_bound: true,
        seed: true,
        ..def
    });
    let bundle = with_tuned_certified_row(&spec, seeded, None);
    assert_walks_seed(&bundle, &spec, 2, vec![2500, 200], false);
}

/// A tuned seeded row of the page-pruned walk (`_pw`, `DenseTile::pruned_walk`) through the
/// engine: on iid keys the pruning keeps every page, so the seeded full walk of that row takes
/// every pair; the long sequence's heads get an estimate (the short one's is too short to seed),
/// and the output is exact. The full walk keeps its default row. GQA 2.
#[test]
fn a_seeded_pruned_walk_row_serves_the_page_pruned_walk() {
    let spec = PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16).unwrap();
    let f = KernelFamily::DecodeCertified;
    let TileConfig::Dense(def) = f.default_tile(&spec) else {
        unreachable!()
    };
    let pw = TileConfig::Dense(DenseTile {
        share_bound: true,
        seed: true,
        pruned_walk: true,
        ..def
    });
    let bundle = with_tuned_certified_row(&spec, pw, Some(Selector::Pruned));
    let case = entkv_kernels::paged_data::PagedCase {
        spec,
        kv_heads: 2,
        seq_lens: vec![2500, 200],
        seed: 4,
        data: entkv_kernels::paged_data::KeyData::Normal,
        spare_pages: 1,
    };
    let x = case.inputs();
    for (method, tile) in [
        (Method::CertifiedPruned, pw),
        (Method::Certified, f.default_tile(&spec)),
    ] {
        let checked = check_engine(&case, &x, method, &bundle, 8).unwrap();
        let chosen = checked
            .run
            .plan
            .kernels
            .iter()
            .find(|k| k.family == KernelFamily::DecodeCertified)
            .unwrap();
        assert_eq!(chosen.tile, tile, "{method:?}");
        assert!(checked.check.passed, "{method:?}: {:?}", checked.check);
        if method == Method::CertifiedPruned {
            // Query heads of sequence 0 (2 KV heads × G 2) are seeded, sequence 1's are not.
            let seeds = checked.run.program.get("seed").to_f64_vec();
            assert!(seeds[..4].iter().all(|s| s.is_finite()), "{seeds:?}");
            assert!(seeds[4..8].iter().all(|s| *s == f64::NEG_INFINITY), "{seeds:?}");
        }
    }
}

/// Through the engine on iid keys (`kv_heads` pairs a sequence of `seq_lens`): the full
/// certified walk runs a seeded tile, the page-pruned walk one seeded as `pruned_seeds` says,
/// both exact.
fn assert_walks_seed(
    bundle: &Arc<Bundle>,
    spec: &PagedSpec,
    kv_heads: u32,
    seq_lens: Vec<u32>,
    pruned_seeds: bool,
) {
    let case = entkv_kernels::paged_data::PagedCase {
        spec: *spec,
        kv_heads,
        seq_lens,
        seed: 3,
        data: entkv_kernels::paged_data::KeyData::Normal,
        spare_pages: 1,
    };
    let x = case.inputs();
    let seeded = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.seed);
    for (method, takes_seed) in [(Method::Certified, true), (Method::CertifiedPruned, pruned_seeds)] {
        let checked = check_engine(&case, &x, method, bundle, 8).unwrap();
        let chosen = checked
            .run
            .plan
            .kernels
            .iter()
            .find(|k| k.family == KernelFamily::DecodeCertified)
            .unwrap();
        assert_eq!(
            seeded(&chosen.tile),
            takes_seed,
            "{method:?}: {}",
            chosen.tile.tag()
        );
        assert!(checked.check.passed, "{method:?}: {:?}", checked.check);
    }
}

/// The untuned bundle of a spec whose certified default is seeded (`wide`: d 128, G 4, 4-bit
/// sketches): two default rows for that family, the full walk takes the seeded one (the seed
/// kernels, the gated repair) and the page-pruned walk its own, seeded too (`_seed_pw`, one
/// token a lane), both exact in the engine; a view with the pruned row as the default drops
/// the pruned walk's row (that tile serves every walk), one with the seeded row is the bundle.
#[test]
fn an_untuned_bundle_seeds_the_full_walk_where_that_is_the_default() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let f = KernelFamily::DecodeCertified;
    let bundle = Arc::new(create_default_bundle(&[spec], 0).unwrap());
    let rows: Vec<_> = bundle.rows().iter().filter(|r| r.family == f).collect();
    assert_eq!(rows.len(), 2);
    let seeded = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.seed);
    assert!(seeded(&rows[0].tile) && rows[0].selector.is_none());
    let pruned_walk = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.pruned_walk);
    assert!(!pruned_walk(&rows[0].tile));
    assert!(
        seeded(&rows[1].tile)
            && pruned_walk(&rows[1].tile)
            && rows[1].selector == Some(entkv_abi::Selector::Pruned)
    );
    assert_eq!(&bundle_with_row_as_default(&bundle, rows[0]).unwrap(), &*bundle);
    let view = bundle_with_row_as_default(&bundle, rows[1]).unwrap();
    let viewed: Vec<_> = view.rows().iter().filter(|r| r.family == f).collect();
    assert_eq!(viewed.len(), 1);
    assert_eq!((viewed[0].tile, viewed[0].selector), (rows[1].tile, None));

    assert_walks_seed(&bundle, &spec, 1, vec![1100, 70], true);
}

#[test]
fn a_step_with_a_launch_removed_fails_its_check() {
    let bundle = Arc::new(default_bundle().clone());
    let case = verify_cases(&paper_spec()).remove(0);
    let x = case.inputs();
    let max_pages = x.shape.max_pages;
    for method in [
        Method::Dense,
        Method::TopK {
            budget_pages: max_pages / 4,
        },
        Method::Certified,
    ] {
        let whole = run_engine_with(&case, &x, method, &bundle, H200_SMS, |_| {}).unwrap();
        assert!(check_run(&case, &x, whole).unwrap().check.passed, "{method:?}");
        // Without its last launch (the decode's finish pass) the output stays poisoned.
        let broken = run_engine_with(&case, &x, method, &bundle, H200_SMS, |calls| {
            calls.pop();
        });
        let failed = match broken.and_then(|run| check_run(&case, &x, run)) {
            Ok(c) => !c.check.passed,
            Err(e) => {
                println!("{method:?}: broken run reported {e:#}");
                true
            }
        };
        assert!(failed, "{method:?}: a step missing a launch passed");
    }
}

// ---- the binary ----

fn entkv() -> Command {
    Command::new(env!("CARGO_BIN_EXE_entkv"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("entkv-tools-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The default bundle written as a directory (milliseconds: it is compiled once per binary).
fn bundle_dir(name: &str) -> PathBuf {
    let d = tmp(name);
    default_bundle().write_dir(&d).unwrap();
    d
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn fails_with(cmd: &mut Command, needles: &[&str]) {
    let o = cmd.output().unwrap();
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{cmd:?} should fail:\n{out}");
    for n in needles {
        assert!(err.contains(n), "{cmd:?}: stderr does not mention `{n}`:\n{err}");
    }
}

fn no_gpu() -> bool {
    let none = entkv_runtime::gpu_unavailable_reason().is_some();
    if !none {
        println!("skipping the no-GPU part: a GPU is present");
    }
    none
}

#[test]
fn verify_interp_cli_passes_and_gpu_mode_points_to_interp() {
    let dir = bundle_dir("verify");
    let o = entkv().args(["verify", "--interp"]).arg(&dir).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("decode_certified") && out.contains(", 0 failed,"),
        "{out}"
    );
    let o = entkv()
        .args(["verify", "--interp", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 22);
    assert!(checks.iter().all(|c| c["passed"] == true));
    if no_gpu() {
        fails_with(entkv().arg("verify").arg(&dir), &["no usable GPU", "--interp"]);
    }
    fails_with(
        entkv().args(["verify", "--interp", "/nonexistent/bundle"]),
        &["cannot open bundle"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_checks_workload_and_bundle_then_needs_a_gpu() {
    let dir = bundle_dir("bench");
    let b = dir.to_str().unwrap();
    fails_with(
        entkv().args(["bench", "--bundle", b, "--workload", "gqa"]),
        &[
            "has no spec `a1p5_d32_g2_bf16q_bf16kv_f32o_p16_nb_s4`",
            "entkv bundle create --alpha 1.5 --head-dim 32 --page-size 16 --group 2 --kv-dtype bf16",
        ],
    );
    fails_with(
        entkv().args(["bench", "--bundle", b, "--workload", "skewed"]),
        &["unknown workload `skewed` (paper, gqa, peaked, wide"],
    );
    fails_with(
        entkv().args(["bench", "--bundle", b, "--methods", "dense,sdpa"]),
        &["unknown method `sdpa` (dense, topk, gaussian, certified, certified-pruned, auto, softmax-topk)"],
    );
    fails_with(
        entkv().args(["bench", "--bundle", b, "--sweep", "--n", "4096"]),
        &["--sweep", "--n"],
    );
    fails_with(
        entkv().args(["bench", "--bundle", b, "--check-samples", "0"]),
        &["--check-samples must be ≥ 1"],
    );
    if no_gpu() {
        fails_with(
            entkv().args(["bench", "--bundle", b, "--n", "4096", "--iters", "1"]),
            &["no usable GPU"],
        );
        // `peaked` runs on the paper bundle (same spec) with every method: it passes the
        // argument and bundle checks and stops at the GPU.
        fails_with(
            entkv().args([
                "bench",
                "--bundle",
                b,
                "--workload",
                "peaked",
                "--n",
                "32768",
                "--methods",
                "dense,topk,gaussian,certified,certified-pruned,auto,softmax-topk",
            ]),
            &["no usable GPU"],
        );
        // The new flags pass the argument and bundle checks and stop at the GPU.
        fails_with(
            entkv().args([
                "bench",
                "--bundle",
                b,
                "--sweep",
                "--no-defaults",
                "--check-samples",
                "1",
                "--methods",
                "dense,topk,gaussian,certified,softmax-topk",
            ]),
            &["no usable GPU"],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn doctor_runs_without_a_gpu_and_creates_nothing() {
    let cache_home = tmp("xdg");
    let o = entkv()
        .arg("doctor")
        .env("XDG_CACHE_HOME", &cache_home)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let cache = cache_home.join("entkv");
    assert!(out.contains(&cache.display().to_string()), "{out}");
    for item in [
        "entkv",
        "llvm",
        "ptxas",
        "gpu",
        "autotune cache",
        "bundle output",
        "verdict:",
    ] {
        assert!(out.contains(item), "no `{item}` line:\n{out}");
    }
    if no_gpu() {
        assert!(
            out.contains("missing  gpu") && out.contains("usable without a GPU"),
            "{out}"
        );
    }
    assert!(!cache_home.exists(), "doctor created {}", cache_home.display());

    let o = entkv()
        .args(["doctor", "--json"])
        .env("XDG_CACHE_HOME", &cache_home)
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let item = |name: &str| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no item `{name}`"))
    };
    assert_eq!(item("autotune cache")["path"], cache.display().to_string());
    assert_eq!(item("llvm")["verdict"], "ok");
    assert_eq!(item("gpu")["verdict"] == "missing", v["gpu"].is_null());
}

/// scripts/bench_report.py on the recorded kernel-set run (skipped without python3; without
/// matplotlib it writes the doc only).
#[test]
fn bench_report_renders_a_recorded_run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    if Command::new("python3").arg("--version").output().is_err() {
        println!("skipping: no python3");
        return;
    }
    let dir = tmp("bench-report");
    std::fs::create_dir_all(&dir).unwrap();
    let (doc, png) = (dir.join("benchmarks.md"), dir.join("benchmarks.png"));
    let o = Command::new("python3")
        .arg(root.join("scripts/bench_report.py"))
        .arg(root.join("results/2026-11-29-kernel-set-final"))
        .arg("--doc")
        .arg(&doc)
        .arg("--png")
        .arg(&png)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let md = std::fs::read_to_string(&doc).unwrap();
    for needle in [
        "Generated by `scripts/bench_report.py`",
        "report.json",
        "| entmax Gaussian, 1M: ≥ 5× faster than SDPA | 6.21× (1.479 ms vs 9.186 ms) | met |",
        "### `paper`, n = 1M",
        "torch SDPA (softmax)",
    ] {
        assert!(md.contains(needle), "no `{needle}` in:\n{md}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// scripts/bench_report.py with `peaked` records (the recorded `paper` bench relabelled, so
/// the numbers are known): a `peaked` section whose SDPA column is `paper`'s, and the `peaked`
/// target computed from them; without them the target stays "not measured".
#[test]
fn bench_report_computes_the_peaked_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    if Command::new("python3").arg("--version").output().is_err() {
        println!("skipping: no python3");
        return;
    }
    let recorded = root.join("results/2026-11-29-bench-2");
    let dir = tmp("bench-report-peaked");
    let peaked = dir.join("peaked");
    std::fs::create_dir_all(&peaked).unwrap();
    let mut report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(recorded.join("bench-paper.json")).unwrap()).unwrap();
    report["workload"]["name"] = "peaked".into();
    for key in ["records", "rows"] {
        for r in report[key].as_array_mut().unwrap() {
            r["workload"] = "peaked".into();
        }
    }
    std::fs::write(peaked.join("bench-peaked.json"), report.to_string()).unwrap();
    let render = |dirs: &[&std::path::Path]| -> String {
        let doc = dir.join("benchmarks.md");
        let o = Command::new("python3")
            .arg(root.join("scripts/bench_report.py"))
            .args(dirs)
            .arg("--doc")
            .arg(&doc)
            .arg("--png")
            .arg(dir.join("benchmarks.png"))
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        std::fs::read_to_string(&doc).unwrap()
    };
    let md = render(&[&recorded, &peaked]);
    for needle in [
        "| certified-exact, `peaked`, 1M: ≥ 8× faster than SDPA | 2.80× (3.312 ms vs 9.277 ms, SDPA of the `paper` run) | **missed** |",
        "- certified-exact, `peaked`, 1M: ≥ 8× faster than SDPA: kernels: decode_certified 3.312 ms",
        "## `peaked`: median step time (ms)",
        "torch SDPA: the `paper` run's records",
        "| 1M | 3.214 | 1.694 | 1.385 | 3.312 | 9.277 |",
        "### `peaked`, n = 1M",
        "| certified-exact | 3.312 | 3.282 | 3.327 | 50 | 0.0056% of tokens | 8.054 | 1.882 | 1.76 | 2.80× |",
    ] {
        assert!(md.contains(needle), "no `{needle}` in:\n{md}");
    }
    // The peaked target is listed once, with `paper`'s; SDPA is borrowed only at `peaked`'s
    // lengths (the paper sweep's 4k is not one).
    assert_eq!(md.matches("`peaked`, 1M: ≥ 8×").count(), 2, "{md}");
    assert!(!md.contains("## Targets (`peaked`)"), "{md}");
    let section = &md[md.find("## `peaked`").unwrap()..];
    assert!(!section.contains("| 4k |"), "{section}");
    let md = render(&[&recorded]);
    assert!(
        md.contains("| certified-exact, `peaked`, 1M: ≥ 8× faster than SDPA | not measured: no `peaked`"),
        "{md}"
    );
    assert!(!md.contains("## `peaked`"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}
