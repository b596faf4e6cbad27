//! `entkv bundle create`'s library entry point end to end: every kernel family of one
//! specialization compiled with its default tile into a bundle whose table rows name entries
//! that exist in their PTX; the bundle survives both on-disk forms, a tampered PTX byte is
//! caught, and (when ptxas is there) every artifact assembles for sm_90.

use entkv_abi::{DType, DecodeSpec, KernelFamily, PagedSpec};
use entkv_autotune::bundle_cmd::{create_default_bundle, summary, table_text};
use entkv_bundle::{Bucket, Bundle, BundleError, RowSource, Tier, MANIFEST_FILE, SCHEMA_VERSION};
use std::path::PathBuf;
use std::time::Instant;

fn spec() -> PagedSpec {
    PagedSpec::with_defaults(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16).unwrap()
}

fn tmp_dir(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("entkv-bundle-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn default_bundle_round_trips_and_detects_tampering() {
    let s = spec();
    let t0 = Instant::now();
    // The same spec twice is bundled once.
    let bundle = create_default_bundle(&[s, s], 1_795_960_980).unwrap();
    println!(
        "create_default_bundle: {:.2} s for {} families",
        t0.elapsed().as_secs_f64(),
        KernelFamily::ALL.len()
    );

    let m = bundle.manifest();
    assert_eq!(m.schema_version, SCHEMA_VERSION);
    assert_eq!(m.target_sm, 90);
    assert_eq!(m.created_utc, "2026-11-29T14:03:00Z");
    assert!(m.tuned_on.is_none());
    assert_eq!(m.specs, vec![s]);
    assert_eq!(m.artifacts.len(), KernelFamily::ALL.len());
    assert_eq!(bundle.rows().len(), KernelFamily::ALL.len());
    for (row, family) in bundle.rows().iter().zip(KernelFamily::ALL) {
        assert_eq!(row.family, family);
        assert_eq!(row.spec, s.sketch_tag());
        assert_eq!(row.bucket, Bucket::Any);
        assert_eq!(row.source, RowSource::Default);
        assert_eq!(row.tile, family.default_tile(&s));
        assert_eq!(row.entries, row.tile.entries(family, &s).unwrap());
        assert_eq!(row.module, format!("{}__{}.ptx", family.name(), s.sketch_tag()));
        let ptx = bundle.ptx(&row.module).unwrap();
        assert!(ptx.contains(".target sm_90"), "{}", row.module);
        for e in &row.entries {
            assert!(ptx.contains(&format!(".entry {e}(")), "{e} not in {}", row.module);
        }
        assert!(
            ptx.contains(&format!(".maxntid {}, 1, 1", row.block_threads)),
            "{}: block_threads {}",
            row.module,
            row.block_threads
        );
        let r = bundle.resolve(family, &s, 100_000, None).unwrap();
        assert_eq!((r.row, r.tier), (row, Tier::Default));
    }
    assert!(summary(&bundle).contains("8 artifact(s)"));
    assert_eq!(table_text(&bundle).lines().count(), 1 + KernelFamily::ALL.len());

    // Directory form.
    let root = tmp_dir("roundtrip");
    let dir = root.join("b");
    bundle.write_dir(&dir).unwrap();
    assert!(dir.join(MANIFEST_FILE).is_file());
    assert_eq!(Bundle::open(&dir).unwrap(), bundle);

    // Single-file form.
    let file = root.join("b.entkvb");
    bundle.write_file(&file).unwrap();
    let from_file = Bundle::open(&file).unwrap();
    assert_eq!(from_file, bundle);
    assert_eq!(
        Bundle::from_single_file_bytes(&std::fs::read(&file).unwrap()).unwrap(),
        bundle
    );

    // One flipped PTX byte.
    let victim = &bundle.rows()[5].module;
    let p = dir.join(victim);
    let mut bytes = std::fs::read(&p).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x20;
    std::fs::write(&p, &bytes).unwrap();
    match Bundle::open(&dir).unwrap_err() {
        BundleError::Checksum { file, .. } => assert_eq!(&file, victim),
        e => panic!("expected a checksum error, got {e}"),
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn default_bundle_artifacts_assemble() {
    if !entkv_tests::ptxas_available() {
        return;
    }
    let bundle = create_default_bundle(&[spec()], 0).unwrap();
    let t0 = Instant::now();
    for a in &bundle.manifest().artifacts {
        let report = entkv_codegen::ptxas::assemble(bundle.ptx(&a.file).unwrap(), 90).unwrap();
        let mut names: Vec<&str> = report.functions.iter().map(|f| f.name.as_str()).collect();
        let mut want: Vec<&str> = a.entries.iter().map(String::as_str).collect();
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want, "{}", a.file);
    }
    println!("ptxas: {:.2} s", t0.elapsed().as_secs_f64());
}
