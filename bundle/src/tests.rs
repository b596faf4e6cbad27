use super::*;
use crate::verify::{ptx_declares_entry, ptx_targets};
use entkv_abi::{DType, DecodeSpec, DenseTile, Selector};
use std::sync::atomic::{AtomicUsize, Ordering};

fn spec_g(group: u32) -> PagedSpec {
    PagedSpec::new(DecodeSpec::new(1.5, 32, group, DType::F16).unwrap(), 16, false, 8).unwrap()
}

fn spec() -> PagedSpec {
    spec_g(1)
}

use crate::stub::stub_ptx as fake_ptx;

fn meta() -> BundleMeta {
    BundleMeta {
        entkv_version: "0.1.0".into(),
        llvm_version: "19.1.7".into(),
        target_sm: 90,
        ptx_version: "8.0".into(),
        tuned_on: Some(TunedOn {
            gpu: "NVIDIA H200".into(),
            sm: 90,
            driver: "570.86.15".into(),
            cuda: "12.8".into(),
        }),
        created_unix_s: 1_795_960_980,
    }
}

fn module_name(f: KernelFamily, s: &PagedSpec) -> String {
    format!("{}__{}.ptx", f.name(), s.sketch_tag())
}

fn default_row(f: KernelFamily, s: &PagedSpec) -> TableRow {
    let tile = f.default_tile(s);
    TableRow {
        family: f,
        spec: s.sketch_tag(),
        bucket: Bucket::Any,
        selector: None,
        tile,
        module: module_name(f, s),
        entries: tile.entries(f, s).unwrap(),
        block_threads: 256,
        source: RowSource::Default,
    }
}

fn tuned_row(f: KernelFamily, s: &PagedSpec, lo: u64, hi: u64, median_us: f64) -> TableRow {
    TableRow {
        bucket: Bucket::Tokens { lo, hi },
        selector: None,
        source: RowSource::Tuned { median_us },
        ..default_row(f, s)
    }
}

/// Every family at `s` but those in `skip`: its module and default row.
fn add_default_rows(w: &mut BundleWriter, s: &PagedSpec, skip: &[KernelFamily]) {
    for f in KernelFamily::ALL {
        if skip.contains(&f) {
            continue;
        }
        let entries = f.default_tile(s).entries(f, s).unwrap();
        w.add_module(&module_name(f, s), fake_ptx(&entries), entries)
            .unwrap();
        w.add_row(default_row(f, s));
    }
}

/// A tuned row of `f` at `s` with `tile` for [1, 2²⁰), in a module of its own (named with the
/// tile's tag, returned).
fn add_tuned_tile_row(w: &mut BundleWriter, f: KernelFamily, s: &PagedSpec, tile: TileConfig) -> String {
    let entries = tile.entries(f, s).unwrap();
    let module = format!("{}__{}__{}.ptx", f.name(), s.sketch_tag(), tile.tag());
    w.add_module(&module, fake_ptx(&entries), entries.clone())
        .unwrap();
    w.add_row(TableRow {
        tile,
        module: module.clone(),
        entries,
        ..tuned_row(f, s, 1, 1 << 20, 1.0)
    });
    module
}

/// Every family at `spec()` with its default row, plus tuned decode_dense rows for
/// [1024, 4096) and [65536, 1048576), and families `skip` left out.
fn writer_with(skip: &[KernelFamily]) -> BundleWriter {
    let s = spec();
    let mut w = BundleWriter::new(meta());
    w.add_spec(s);
    w.add_spec(s); // deduplicated
    add_default_rows(&mut w, &s, skip);
    if !skip.contains(&KernelFamily::DecodeDense) {
        w.add_row(tuned_row(KernelFamily::DecodeDense, &s, 1024, 4096, 12.5));
        w.add_row(tuned_row(
            KernelFamily::DecodeDense,
            &s,
            65_536,
            1 << 20,
            0.1 + 0.2,
        ));
    }
    w
}

fn bundle() -> Bundle {
    writer_with(&[]).finish().unwrap()
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "entkv-bundle-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_manifest_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(MANIFEST_FILE)).unwrap()).unwrap()
}

fn write_manifest_json(dir: &Path, v: &serde_json::Value) {
    std::fs::write(dir.join(MANIFEST_FILE), serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Rewrite manifest.json with `edit` applied to the manifest, updating the digest.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Manifest)) {
    let v = read_manifest_json(dir);
    let mut m: Manifest = serde_json::from_value(v["manifest"].clone()).unwrap();
    edit(&mut m);
    let v = serde_json::json!({ "manifest": &m, "manifest_sha256": manifest_digest(&m) });
    write_manifest_json(dir, &v);
}

#[test]
fn dir_round_trip() {
    let b = bundle();
    let t = TempDir::new("dir");
    let dir = t.0.join("nested").join("b");
    b.write_dir(&dir).unwrap();
    let r = Bundle::open(&dir).unwrap();
    assert_eq!(r.manifest(), b.manifest());
    assert_eq!(r, b);
    for a in &b.manifest().artifacts {
        assert_eq!(r.ptx(&a.file), b.ptx(&a.file));
        assert!(r.ptx(&a.file).is_some());
    }
    assert_eq!(r.manifest().created_utc, "2026-11-29T14:03:00Z");
    assert_eq!(r.manifest().schema_version, SCHEMA_VERSION);
    assert_eq!(r.manifest().specs.len(), 1);
    assert_eq!(r.rows().len(), 10);
    assert_eq!(r.spec(&spec().sketch_tag()), Some(&spec()));
    assert!(r.spec("nope").is_none());
    assert!(r.ptx("nope.ptx").is_none());
    // Writing over an existing bundle directory works.
    b.write_dir(&dir).unwrap();
    assert_eq!(Bundle::open(&dir).unwrap(), b);
}

#[test]
fn single_file_round_trip() {
    let b = bundle();
    let bytes = b.to_single_file_bytes();
    assert!(bytes.starts_with(b"ENTKVBUNDLE\0"));
    assert_eq!(Bundle::from_single_file_bytes(&bytes).unwrap(), b);
    let t = TempDir::new("file");
    let f = t.0.join("k.entkvb");
    b.write_file(&f).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), bytes);
    assert_eq!(Bundle::open(&f).unwrap(), b);
    // dir → file → dir gives the same bundle.
    let d = t.0.join("d");
    Bundle::open(&f).unwrap().write_dir(&d).unwrap();
    assert_eq!(Bundle::open(&d).unwrap().to_single_file_bytes(), bytes);
}

#[test]
fn floats_round_trip_exactly() {
    let s = PagedSpec::new(
        DecodeSpec::new(1.234_567_890_123_456_7, 32, 1, DType::F16).unwrap(),
        16,
        true,
        4,
    )
    .unwrap();
    let mut w = BundleWriter::new(meta());
    w.add_spec(s);
    let f = KernelFamily::DecodeSparse;
    let entries = f.default_tile(&s).entries(f, &s).unwrap();
    w.add_module(&module_name(f, &s), fake_ptx(&entries), entries)
        .unwrap();
    w.add_row(default_row(f, &s));
    for (i, x) in [0.1 + 0.2, 1e-300, 123_456.789_012_345_67, f64::MIN_POSITIVE]
        .into_iter()
        .enumerate()
    {
        w.add_row(tuned_row(f, &s, 1 << (2 * i), 1 << (2 * i + 1), x));
    }
    let b = w.finish().unwrap();
    let t = TempDir::new("floats");
    b.write_dir(&t.0).unwrap();
    assert_eq!(Bundle::open(&t.0).unwrap(), b);
}

#[test]
fn tampered_artifact_fails_its_checksum() {
    let b = bundle();
    let t = TempDir::new("tamper");
    b.write_dir(&t.0).unwrap();
    let a = &b.manifest().artifacts[3];
    let p = t.0.join(&a.file);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&p, &bytes).unwrap();
    match Bundle::open(&t.0).unwrap_err() {
        BundleError::Checksum {
            file,
            expected,
            actual,
        } => {
            assert_eq!(file, a.file);
            assert_eq!(expected, a.sha256);
            assert_eq!(actual, sha256_hex(&bytes));
        }
        e => panic!("expected Checksum, got {e}"),
    }
    // Same in the single-file form: flip a byte of the last artifact.
    let mut bytes = b.to_single_file_bytes();
    let n = bytes.len();
    bytes[n - 10] ^= 1;
    let e = Bundle::from_single_file_bytes(&bytes).unwrap_err();
    assert!(matches!(e, BundleError::Checksum { .. }), "{e}");
    assert!(e.to_string().contains(".ptx"), "{e}");
}

#[test]
fn edited_manifest_is_detected() {
    let t = TempDir::new("edited");
    bundle().write_dir(&t.0).unwrap();
    let mut v = read_manifest_json(&t.0);
    v["manifest"]["table"][0]["block_threads"] = serde_json::json!(128);
    write_manifest_json(&t.0, &v);
    let e = Bundle::open(&t.0).unwrap_err();
    match &e {
        BundleError::ManifestChanged { recorded, actual } => {
            assert_eq!(recorded, v["manifest_sha256"].as_str().unwrap());
            assert_ne!(recorded, actual);
        }
        e => panic!("expected ManifestChanged, got {e}"),
    }
    assert!(e.to_string().contains("digest mismatch"), "{e}");

    // Compact rewriting of an unchanged manifest keeps the digest valid.
    let t2 = TempDir::new("compact");
    bundle().write_dir(&t2.0).unwrap();
    let v = read_manifest_json(&t2.0);
    std::fs::write(t2.0.join(MANIFEST_FILE), serde_json::to_vec(&v).unwrap()).unwrap();
    Bundle::open(&t2.0).unwrap();
}

/// A manifest field of the wrong type is named by its path (whatever the digest says: the
/// fields are read before it is compared).
#[test]
fn a_bad_manifest_field_is_named() {
    let t = TempDir::new("field");
    bundle().write_dir(&t.0).unwrap();
    let mut v = read_manifest_json(&t.0);
    v["manifest"]["table"][1]["block_threads"] = serde_json::json!(-1);
    write_manifest_json(&t.0, &v);
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(matches!(e, BundleError::Corrupt(_)), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("manifest.table[1].block_threads")
            && e.contains("-1")
            && e.contains(&format!("schema-{SCHEMA_VERSION}")),
        "{e}"
    );
}

#[test]
fn other_schema_versions_are_refused() {
    for update_digest in [false, true] {
        let t = TempDir::new("schema");
        bundle().write_dir(&t.0).unwrap();
        if update_digest {
            edit_manifest(&t.0, |m| m.schema_version = SCHEMA_VERSION + 1);
        } else {
            let mut v = read_manifest_json(&t.0);
            v["manifest"]["schema_version"] = serde_json::json!(SCHEMA_VERSION + 1);
            write_manifest_json(&t.0, &v);
        }
        let e = Bundle::open(&t.0).unwrap_err();
        assert!(
            matches!(
                e,
                BundleError::Schema { found, supported }
                    if found == u64::from(SCHEMA_VERSION) + 1 && supported == SCHEMA_VERSION
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains(&format!("schema version {}", SCHEMA_VERSION + 1))
                && e.to_string().contains(&format!("versions 6–{SCHEMA_VERSION}")),
            "{e}"
        );
        assert!(!e.to_string().contains("rebuild"), "{e}");
    }
    // A future schema that changed everything else, and has no digest, is still `Schema`.
    let t = TempDir::new("future");
    std::fs::write(
        t.0.join(MANIFEST_FILE),
        r#"{"manifest": {"schema_version": 99, "kernels": {"x": 1}}, "digest": "blake3:..."}"#,
    )
    .unwrap();
    assert!(matches!(
        Bundle::open(&t.0).unwrap_err(),
        BundleError::Schema { found: 99, supported } if supported == SCHEMA_VERSION
    ));
    // Versions 1–5 predate the page box sketch (1–4) or `page_bounds`' `heads_log2` (5): their
    // kernels take other arguments, so they are refused with a request to rebuild.
    for old in 1..OLDEST_SCHEMA_VERSION {
        let t = TempDir::new("old");
        bundle().write_dir(&t.0).unwrap();
        edit_manifest(&t.0, |m| m.schema_version = old);
        let e = Bundle::open(&t.0).unwrap_err();
        assert!(
            matches!(e, BundleError::Schema { found, .. } if found == old as u64),
            "{e}"
        );
        assert!(e.to_string().contains("rebuild it"), "{e}");
    }
}

/// A tuned certified row may share head bounds (its tile carries `share_bound`, its entries end
/// with `certified_init`), seed them (a full walk only) or serve the pruned walk (`selector:
/// pruned`); each reads back as written and resolves for its walk.
#[test]
fn certified_rows_may_share_bounds_or_serve_the_pruned_walk() {
    let s4 = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let f = KernelFamily::DecodeCertified;
    let TileConfig::Dense(def) = f.default_tile(&s4) else {
        unreachable!()
    };
    // Every family's default row, and a tuned certified row at `tuned` if given.
    let build_with = |tuned: Option<DenseTile>| {
        let mut w = BundleWriter::new(meta());
        w.add_spec(s4);
        add_default_rows(&mut w, &s4, &[]);
        if let Some(t) = tuned {
            add_tuned_tile_row(&mut w, f, &s4, TileConfig::Dense(t));
        }
        w.finish().unwrap()
    };
    let build = |share: bool| {
        build_with(share.then_some(DenseTile {
            share_bound: true,
            ..def
        }))
    };
    for share in [false, true] {
        let t = TempDir::new("shared");
        build(share).write_dir(&t.0).unwrap();
        let b = Bundle::open(&t.0).unwrap();
        let init = b
            .manifest()
            .table
            .iter()
            .any(|r| r.entries.iter().any(|e| e.starts_with("certified_init")));
        assert_eq!(init, share);
    }
    // A seeded full-walk row (`entkv_abi::seed`) never stands in for the pruned walk's: with
    // no pruned rows tuned, the pruned walk takes the default row, the full walk the seeded one.
    {
        let seeded = DenseTile {
            share_bound: true,
            seed: true,
            ..def
        };
        let tile = TileConfig::Dense(seeded);
        let t = TempDir::new("seeded");
        build_with(Some(seeded)).write_dir(&t.0).unwrap();
        let b = Bundle::open(&t.0).unwrap();
        let full = b.resolve(f, &s4, 1000, None).unwrap().row;
        assert_eq!(full.tile, tile);
        // Its entries are the full walk's only (schema 11).
        assert!(
            !full
                .entries
                .iter()
                .any(|e| e.starts_with("select_certified_sel") || e.starts_with("select_certified_rest")),
            "{:?}",
            full.entries
        );
        let pruned = b.resolve(f, &s4, 1000, Some(Selector::Pruned)).unwrap();
        assert_eq!(pruned.tier, Tier::Default);
        assert_ne!(pruned.row.tile, tile);
    }
    let t = TempDir::new("pruned");
    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        selector: Some(Selector::Pruned),
        ..tuned_row(f, &spec(), 1, 1 << 20, 1.0)
    });
    w.finish().unwrap().write_dir(&t.0).unwrap();
    let b = Bundle::open(&t.0).unwrap();
    let tier = |sel| b.resolve(f, &spec(), 1000, sel).unwrap().tier;
    assert_eq!(tier(Some(Selector::Pruned)), Tier::Exact);
    assert_eq!(tier(None), Tier::Default, "the full walk keeps its own rows");
}

/// Schema 7: a dense tile may carry `"mma": true` (tensor-core score passes). Such a row round-
/// trips; a schema-6 bundle (no such field anywhere) still opens; and a schema-6 reader's view,
/// the field dropped, fails the digest.
#[test]
fn tensor_core_rows_and_schema_6() {
    let f = KernelFamily::DecodeSparse;
    let s = spec();
    let TileConfig::Dense(t) = f.default_tile(&s) else {
        unreachable!()
    };
    let tile = TileConfig::Dense(DenseTile {
        lanes_per_token: 1,
        tokens_per_group: 4,
        mma: true,
        ..t
    });
    let mut w = writer_with(&[]);
    let module = add_tuned_tile_row(&mut w, f, &s, tile);
    assert!(module.contains("_tc"), "{module}");
    let t = TempDir::new("mma");
    w.finish().unwrap().write_dir(&t.0).unwrap();
    assert!(String::from_utf8(std::fs::read(t.0.join(MANIFEST_FILE)).unwrap())
        .unwrap()
        .contains("\"mma\": true"));
    let b = Bundle::open(&t.0).unwrap();
    assert_eq!(b.manifest().schema_version, SCHEMA_VERSION);
    assert_eq!(b.resolve(f, &s, 1000, None).unwrap().row.tile, tile);
    // What a schema-6 reader would re-serialize: the field gone, the digest no longer matches.
    let mut v = read_manifest_json(&t.0);
    for row in v["manifest"]["table"].as_array_mut().unwrap() {
        row["tile"]["Dense"].as_object_mut().map(|d| d.remove("mma"));
    }
    write_manifest_json(&t.0, &v);
    assert!(matches!(
        Bundle::open(&t.0).unwrap_err(),
        BundleError::Corrupt { .. }
    ));

    // Schema 6, written before the field existed: the same manifest but the version.
    let t6 = TempDir::new("schema6");
    bundle().write_dir(&t6.0).unwrap();
    edit_manifest(&t6.0, |m| m.schema_version = 6);
    assert!(
        !String::from_utf8(std::fs::read(t6.0.join(MANIFEST_FILE)).unwrap())
            .unwrap()
            .contains("mma")
    );
    assert_eq!(Bundle::open(&t6.0).unwrap().manifest().schema_version, 6);
}

/// A sparse row with the page lookahead (schema 9) round trips; a schema-8 reader's view, the
/// field dropped, fails the digest; a schema-8 bundle (no such field) still opens.
#[test]
fn lookahead_rows_and_schema_8() {
    let f = KernelFamily::DecodeSparse;
    let s = spec_g(2);
    let TileConfig::Dense(t) = f.default_tile(&s) else {
        unreachable!()
    };
    let tile = TileConfig::Dense(DenseTile { lookahead: true, ..t });
    let mut w = BundleWriter::new(meta());
    w.add_spec(s);
    add_default_rows(&mut w, &s, &[]);
    let module = add_tuned_tile_row(&mut w, f, &s, tile);
    assert!(module.contains("_la"), "{module}");
    let t = TempDir::new("lookahead");
    w.finish().unwrap().write_dir(&t.0).unwrap();
    assert!(String::from_utf8(std::fs::read(t.0.join(MANIFEST_FILE)).unwrap())
        .unwrap()
        .contains("\"lookahead\": true"));
    let b = Bundle::open(&t.0).unwrap();
    assert_eq!(
        b.resolve(f, &s, 1000, Some(Selector::Topk)).unwrap().row.tile,
        tile
    );
    let mut v = read_manifest_json(&t.0);
    for row in v["manifest"]["table"].as_array_mut().unwrap() {
        row["tile"]["Dense"]
            .as_object_mut()
            .map(|d| d.remove("lookahead"));
    }
    write_manifest_json(&t.0, &v);
    assert!(matches!(
        Bundle::open(&t.0).unwrap_err(),
        BundleError::Corrupt { .. }
    ));
    let t8 = TempDir::new("schema8");
    bundle().write_dir(&t8.0).unwrap();
    edit_manifest(&t8.0, |m| m.schema_version = 8);
    assert_eq!(Bundle::open(&t8.0).unwrap().manifest().schema_version, 8);
}

/// Before schema 11 a seeded certified row also listed the page-pruned walk's passes
/// (`select_certified_sel`, `select_certified_rest`, after the pass and its finish): such a
/// bundle still opens; the same row in a schema-11 manifest is corrupt, and so is the shorter
/// list in an older one.
#[test]
fn seeded_rows_before_schema_11_list_the_pruned_walk() {
    let f = KernelFamily::DecodeCertified;
    let s4 = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let TileConfig::Dense(def) = f.default_tile(&s4) else {
        unreachable!()
    };
    let seeded = DenseTile {
        share_bound: true,
        seed: true,
        ..def
    };
    let tile = TileConfig::Dense(seeded);
    let entries = tile.entries(f, &s4).unwrap();
    let mut legacy = entries.clone();
    legacy.splice(
        2..2,
        [
            entkv_abi::pipeline::certified_selected_entry(&s4, &seeded),
            entkv_abi::pipeline::certified_rest_entry(&s4, &seeded),
        ],
    );
    // A module that holds the legacy entries, as an older writer compiled it.
    let mut w = BundleWriter::new(meta());
    w.add_spec(s4);
    add_default_rows(&mut w, &s4, &[]);
    let module = format!("{}__{}__{}.ptx", f.name(), s4.sketch_tag(), tile.tag());
    w.add_module(&module, fake_ptx(&legacy), legacy.clone()).unwrap();
    w.add_row(TableRow {
        tile,
        module,
        entries,
        ..tuned_row(f, &s4, 1, 1 << 20, 1.0)
    });
    let b = w.finish().unwrap();
    let open = |schema: u32, row_entries: &[String]| {
        let t = TempDir::new("seeded_legacy");
        b.write_dir(&t.0).unwrap();
        edit_manifest(&t.0, |m| {
            m.schema_version = schema;
            let row = m.table.iter_mut().find(|r| r.tile == tile).unwrap();
            row.entries = row_entries.to_vec();
        });
        Bundle::open(&t.0).map(|b| b.manifest().schema_version)
    };
    assert_eq!(
        open(SCHEMA_VERSION, &b_entries(&b, tile)).unwrap(),
        SCHEMA_VERSION
    );
    assert_eq!(open(10, &legacy).unwrap(), 10);
    for (schema, list) in [(SCHEMA_VERSION, &legacy), (10, &b_entries(&b, tile))] {
        let e = open(schema, list).unwrap_err();
        assert!(
            matches!(&e, BundleError::Corrupt(m) if m.contains("are not the entries of tile")),
            "schema {schema}: {e}"
        );
    }
}

/// The entries of `b`'s row with `tile`.
fn b_entries(b: &Bundle, tile: TileConfig) -> Vec<String> {
    b.manifest()
        .table
        .iter()
        .find(|r| r.tile == tile)
        .unwrap()
        .entries
        .clone()
}

/// A certified row rescoring on the tensor cores (schema 10, 4-bit sketches) round trips; a
/// schema-9 bundle still opens.
#[test]
fn certified_tensor_core_rows_and_schema_9() {
    let f = KernelFamily::DecodeCertified;
    let s = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let TileConfig::Dense(t) = f.default_tile(&s) else {
        unreachable!()
    };
    let tile = TileConfig::Dense(DenseTile { mma: true, ..t });
    let mut w = BundleWriter::new(meta());
    w.add_spec(s);
    add_default_rows(&mut w, &s, &[]);
    let module = add_tuned_tile_row(&mut w, f, &s, tile);
    assert!(module.contains("_tc"), "{module}");
    let t = TempDir::new("certified_tc");
    w.finish().unwrap().write_dir(&t.0).unwrap();
    let b = Bundle::open(&t.0).unwrap();
    assert_eq!(b.manifest().schema_version, SCHEMA_VERSION);
    assert_eq!(b.resolve(f, &s, 1000, None).unwrap().row.tile, tile);
    let t9 = TempDir::new("schema9");
    bundle().write_dir(&t9.0).unwrap();
    edit_manifest(&t9.0, |m| m.schema_version = 9);
    assert_eq!(Bundle::open(&t9.0).unwrap().manifest().schema_version, 9);
}

#[test]
fn missing_artifact_and_missing_manifest() {
    let b = bundle();
    let t = TempDir::new("missing");
    b.write_dir(&t.0).unwrap();
    let a = &b.manifest().artifacts[5];
    std::fs::remove_file(t.0.join(&a.file)).unwrap();
    match Bundle::open(&t.0).unwrap_err() {
        BundleError::MissingArtifact { file } => assert_eq!(file, a.file),
        e => panic!("expected MissingArtifact, got {e}"),
    }
    std::fs::remove_file(t.0.join(MANIFEST_FILE)).unwrap();
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(matches!(e, BundleError::NotABundle { .. }), "{e}");
    assert!(e.to_string().contains("manifest.json"), "{e}");
    let e = Bundle::open(&t.0.join("does-not-exist")).unwrap_err();
    assert!(matches!(e, BundleError::Io { .. }), "{e}");
    assert!(e.to_string().contains("does-not-exist"), "{e}");
}

#[test]
fn bad_manifest_json_is_not_a_bundle() {
    let t = TempDir::new("badjson");
    for (text, want) in [
        ("{ nope", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ("{\"manifest_sha256\": \"00\"}", "no `manifest` object"),
        (
            "{\"manifest\": {}, \"manifest_sha256\": \"00\"}",
            "no schema_version",
        ),
        ("{\"manifest\": {\"schema_version\": 6}}", "manifest_sha256"),
    ] {
        std::fs::write(t.0.join(MANIFEST_FILE), text).unwrap();
        let e = Bundle::open(&t.0).unwrap_err();
        assert!(matches!(e, BundleError::NotABundle { .. }), "{text}: {e}");
        assert!(e.to_string().contains(want), "{text}: {e}");
    }
    // Right schema, wrong fields: Corrupt, naming the field.
    std::fs::write(
        t.0.join(MANIFEST_FILE),
        "{\"manifest\": {\"schema_version\": 6}, \"manifest_sha256\": \"00\"}",
    )
    .unwrap();
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(matches!(e, BundleError::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("entkv_version"), "{e}");
}

#[cfg(unix)]
#[test]
fn devices_are_not_read_as_bundles() {
    let e = Bundle::open(Path::new("/dev/zero")).unwrap_err();
    assert!(
        matches!(e, BundleError::NotABundle { .. }) && e.to_string().contains("regular"),
        "{e}"
    );
}

#[test]
fn truncated_or_garbage_single_files_are_refused_without_panics() {
    let bytes = bundle().to_single_file_bytes();
    for n in 0..bytes.len() {
        match Bundle::from_single_file_bytes(&bytes[..n]) {
            Err(BundleError::NotABundle { .. } | BundleError::Corrupt(_)) => {}
            other => panic!("prefix of {n} bytes: {other:?}"),
        }
    }
    let mut long = bytes.clone();
    long.push(0);
    let e = Bundle::from_single_file_bytes(&long).unwrap_err();
    assert!(e.to_string().contains("1 trailing bytes"), "{e}");
    let e = Bundle::from_single_file_bytes(b"PK\x03\x04 hello").unwrap_err();
    assert!(matches!(e, BundleError::NotABundle { .. }), "{e}");

    // Huge lengths and counts are refused before any allocation.
    let mut huge = bytes[..16].to_vec();
    huge.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        Bundle::from_single_file_bytes(&huge).unwrap_err(),
        BundleError::Corrupt(_)
    ));
    let mlen = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    let count_at = 24 + mlen;
    let mut many = bytes.clone();
    many[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = Bundle::from_single_file_bytes(&many).unwrap_err();
    assert!(matches!(e, BundleError::Corrupt(_)), "{e}");
    let mut long_name = bytes.clone();
    long_name[count_at + 4..count_at + 12].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    let e = Bundle::from_single_file_bytes(&long_name).unwrap_err();
    assert!(matches!(e, BundleError::Corrupt(_)), "{e}");
    // A name length that swallows the artifacts: the message echoes the name's start only.
    let left = (bytes.len() - (count_at + 12)) as u64;
    long_name[count_at + 4..count_at + 12].copy_from_slice(&left.to_le_bytes());
    let e = Bundle::from_single_file_bytes(&long_name)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad name") && e.contains(&format!("({left} bytes)")),
        "{e}"
    );
    assert!(e.len() < 300, "{} bytes of message", e.len());

    // Another container version.
    let mut v2 = bytes.clone();
    v2[12] = 2;
    let e = Bundle::from_single_file_bytes(&v2).unwrap_err();
    assert!(e.to_string().contains("container version 2"), "{e}");

    // Every single-byte corruption is an error (mostly Checksum/ManifestChanged/NotABundle),
    // never a panic or a different bundle.
    for i in (0..bytes.len()).step_by(7) {
        let mut c = bytes.clone();
        c[i] = c[i].wrapping_add(0x41);
        assert!(Bundle::from_single_file_bytes(&c).is_err(), "byte {i}");
    }

    let t = TempDir::new("truncfile");
    let f = t.0.join("t.entkvb");
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    assert!(Bundle::open(&f).is_err());
}

/// Where the certified decode's default is seeded (`wide`, 4-bit sketches), its page-pruned
/// walk has a default row of its own and resolves to it; the full walk and the other families
/// resolve to the row for every walk. A table without that row, or with one where the default
/// serves the walk, or with a seeded tile for the pruned walk, is corrupt.
#[test]
fn default_rows_per_walk() {
    let wide = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    let f = KernelFamily::DecodeCertified;
    let b = crate::stub::stub_bundle(&[wide], Vec::new()).unwrap();
    let full = b.resolve(f, &wide, 1 << 20, None).unwrap();
    let pruned = b.resolve(f, &wide, 1 << 20, Some(Selector::Pruned)).unwrap();
    assert_eq!((full.tier, pruned.tier), (Tier::Default, Tier::Default));
    assert_eq!(full.row.tile, f.default_tile(&wide));
    assert_eq!(pruned.row.tile, f.default_tile_for(&wide, Some(Selector::Pruned)));
    assert_ne!(full.row.tile, pruned.row.tile);
    assert_eq!(pruned.row.selector, Some(Selector::Pruned));

    let write = |rows: Vec<TableRow>| {
        let mut w = BundleWriter::new(meta());
        w.add_spec(wide);
        let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &rows {
            let m = modules.entry(r.module.clone()).or_default();
            m.extend(
                r.entries
                    .iter()
                    .filter(|e| !m.contains(e))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
        for (file, entries) in modules {
            w.add_module(&file, fake_ptx(&entries), entries).unwrap();
        }
        for r in rows {
            w.add_row(r);
        }
        w.finish().map(|_| ()).unwrap_err().to_string()
    };
    let rows = || -> Vec<TableRow> {
        KernelFamily::ALL
            .into_iter()
            .flat_map(|f| crate::stub::default_rows(f, &wide).unwrap())
            .collect()
    };
    let is_pruned_default = |r: &TableRow| r.family == f && r.selector == Some(Selector::Pruned);
    // Without the pruned walk's row.
    let e = write(rows().into_iter().filter(|r| !is_pruned_default(r)).collect());
    assert!(
        e.contains("0 default rows for selector pruned") && e.contains("cannot serve"),
        "{e}"
    );
    // Two of them.
    let mut two = rows();
    two.extend(rows().into_iter().filter(is_pruned_default));
    let e = write(two);
    assert!(e.contains("2 default rows for selector pruned"), "{e}");
    // A seeded tile for the pruned walk.
    let seeded: Vec<TableRow> = rows()
        .into_iter()
        .map(|r| {
            if is_pruned_default(&r) {
                TableRow {
                    selector: Some(Selector::Pruned),
                    ..crate::stub::default_row(f, &wide).unwrap()
                }
            } else {
                r
            }
        })
        .collect();
    let e = write(seeded);
    assert!(
        e.contains("cannot serve the walk of decode_certified (pruned)"),
        "{e}"
    );
    // A pruned default where the default serves that walk (8-bit sketches: unseeded).
    let s8 = spec();
    let mut w = BundleWriter::new(meta());
    w.add_spec(s8);
    add_default_rows(&mut w, &s8, &[]);
    w.add_row(TableRow {
        selector: Some(Selector::Pruned),
        ..default_row(f, &s8)
    });
    let e = w.finish().map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("1 default rows for selector pruned (0 expected"),
        "{e}"
    );
}

#[test]
fn resolve_by_selector() {
    // A selector's own tuned rows when it has any (tiers among them); else the rows tuned for
    // every selector; else the default. No selector: never another selector's rows.
    let s = spec();
    let ds = KernelFamily::DecodeSparse;
    let row = |sel: Option<Selector>, lo, hi, us| TableRow {
        selector: sel,
        ..tuned_row(ds, &s, lo, hi, us)
    };
    let mut w = writer_with(&[]);
    w.add_row(row(Some(Selector::Topk), 1, 100, 1.0));
    w.add_row(row(Some(Selector::Topk), 1000, 2000, 2.0));
    w.add_row(row(None, 1, 1 << 30, 3.0));
    let b = w.finish().unwrap();
    let r = |tokens, sel| {
        let r = b.resolve(ds, &s, tokens, sel).unwrap();
        (r.tier, r.row.source)
    };
    let us = |median_us| RowSource::Tuned { median_us };
    assert_eq!(r(50, Some(Selector::Topk)), (Tier::Exact, us(1.0)));
    assert_eq!(r(1500, Some(Selector::Topk)), (Tier::Exact, us(2.0)));
    assert_eq!(r(5000, Some(Selector::Topk)), (Tier::NearestBucket, us(2.0)));
    assert_eq!(r(50, Some(Selector::Gaussian)), (Tier::Exact, us(3.0)));
    assert_eq!(r(5000, None), (Tier::Exact, us(3.0)));
    let mut w = writer_with(&[]);
    w.add_row(row(Some(Selector::Topk), 1, 100, 1.0));
    let b = w.finish().unwrap();
    for sel in [None, Some(Selector::Gaussian)] {
        let got = b.resolve(ds, &s, 50, sel).unwrap();
        assert_eq!((got.tier, got.row.source), (Tier::Default, RowSource::Default));
    }
}

#[test]
fn resolve_tiers() {
    let b = bundle();
    let s = spec();
    let dd = KernelFamily::DecodeDense;
    let r = |tokens| b.resolve(dd, &s, tokens, None).unwrap();
    let bucket = |tokens| r(tokens).row.bucket;
    let tok = |lo, hi| Bucket::Tokens { lo, hi };

    assert_eq!(r(1024).tier, Tier::Exact);
    assert_eq!(bucket(1024), tok(1024, 4096));
    assert_eq!(bucket(4095), tok(1024, 4096));
    assert_eq!(r(100_000).tier, Tier::Exact);
    assert_eq!(bucket(100_000), tok(65_536, 1 << 20));

    // Below, between and above the buckets: the nearest in log2 tokens.
    for (tokens, want) in [
        (0, tok(1024, 4096)),
        (1, tok(1024, 4096)),
        (4096, tok(1024, 4096)),
        (10_000, tok(1024, 4096)),      // log2 distances 1.29 vs 2.71
        (40_000, tok(65_536, 1 << 20)), // 3.29 vs 0.71
        (1 << 30, tok(65_536, 1 << 20)),
    ] {
        let got = r(tokens);
        assert_eq!(got.tier, Tier::NearestBucket, "{tokens}");
        assert_eq!(got.row.bucket, want, "{tokens}");
    }
    // Equidistant: 64 is 1 (log2) above [16, 33) (largest length 32) and 1 below [128, 256);
    // the smaller lo wins, whichever row comes first.
    for flip in [false, true] {
        let mut w = writer_with(&[]);
        let mut rows = vec![
            tuned_row(KernelFamily::PageMeta, &s, 16, 33, 1.0),
            tuned_row(KernelFamily::PageMeta, &s, 128, 256, 1.0),
        ];
        if flip {
            rows.reverse();
        }
        rows.into_iter().for_each(|r| w.add_row(r));
        let b2 = w.finish().unwrap();
        let got = b2.resolve(KernelFamily::PageMeta, &s, 64, None).unwrap();
        assert_eq!(got.tier, Tier::NearestBucket);
        assert_eq!(got.row.bucket, tok(16, 33));
        assert_eq!(
            b2.resolve(KernelFamily::PageMeta, &s, 65, None)
                .unwrap()
                .row
                .bucket,
            tok(128, 256)
        );
    }

    // Families without tuned rows use their default row.
    let got = b.resolve(KernelFamily::SelectTopk, &s, 100_000, None).unwrap();
    assert_eq!(got.tier, Tier::Default);
    assert_eq!(got.row.source, RowSource::Default);
    assert_eq!(got.row.bucket, Bucket::Any);
    assert_eq!(got.row.module, module_name(KernelFamily::SelectTopk, &s));

    // A spec that is not in the bundle, and a family without rows.
    match b.resolve(dd, &spec_g(4), 100, None).unwrap_err() {
        BundleError::NoKernel { family, spec } => {
            assert_eq!(family, dd);
            assert_eq!(spec, spec_g(4).sketch_tag());
        }
        e => panic!("expected NoKernel, got {e}"),
    }
    let partial = writer_with(&[KernelFamily::PageScoreMoments]).finish().unwrap();
    let e = partial
        .resolve(KernelFamily::PageScoreMoments, &s, 100, None)
        .unwrap_err();
    assert!(matches!(e, BundleError::NoKernel { .. }), "{e}");
    assert!(e.to_string().contains("page_score_moments"), "{e}");
}

#[test]
fn writer_rejects_bad_file_names() {
    let mut w = writer_with(&[]);
    for bad in [
        "",
        ".ptx",
        ".hidden.ptx",
        "a.txt",
        "a.ptx.gz",
        "../a.ptx",
        "a/b.ptx",
        "a\\b.ptx",
        "/abs.ptx",
        "sp ace.ptx",
        "ü.ptx",
        "a:b.ptx",
    ] {
        let e = w.add_module(bad, String::new(), vec![]).unwrap_err();
        assert!(matches!(e, BundleError::Corrupt(_)), "{bad:?}: {e}");
    }
    let dup = module_name(KernelFamily::PageMeta, &spec());
    let e = w.add_module(&dup, String::new(), vec![]).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    w.add_module("extra-1.0_x.ptx", fake_ptx(&[]), vec![]).unwrap();
    w.finish().unwrap();
}

#[test]
fn inconsistent_tables_are_corrupt() {
    let s = spec();
    let dd = KernelFamily::DecodeDense;
    let corrupt = |w: BundleWriter, want: &str| match w.finish() {
        Err(BundleError::Corrupt(m)) => assert!(m.contains(want), "{m} (wanted {want:?})"),
        other => panic!("wanted Corrupt({want:?}), got {other:?}"),
    };

    let mut w = writer_with(&[]);
    w.add_row(default_row(dd, &s));
    corrupt(w, "2 default rows");

    let mut w = writer_with(&[]);
    w.add_row(tuned_row(dd, &s, 2048, 8192, 1.0));
    corrupt(w, "overlapping buckets [1024, 4096) and [2048, 8192)");

    let mut w = writer_with(&[]);
    w.add_row(tuned_row(dd, &s, 8192, 8192, 1.0));
    corrupt(w, "empty bucket");

    // Selectors: only on a family that reads a selection, never on a default row, and
    // buckets may overlap across selectors but not within one.
    let ds = KernelFamily::DecodeSparse;
    let for_sel = |sel, lo, hi| TableRow {
        selector: Some(sel),
        ..tuned_row(ds, &s, lo, hi, 1.0)
    };
    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        selector: Some(Selector::Topk),
        ..tuned_row(dd, &s, 1 << 22, 1 << 23, 1.0)
    });
    corrupt(w, "decode_dense reads no selection of selector topk");
    let mut w = writer_with(&[KernelFamily::DecodeSparse]);
    let entries = ds.default_tile(&s).entries(ds, &s).unwrap();
    w.add_module(&module_name(ds, &s), fake_ptx(&entries), entries)
        .unwrap();
    w.add_row(TableRow {
        selector: Some(Selector::Gaussian),
        ..default_row(ds, &s)
    });
    corrupt(w, "has 0 default rows for every walk");
    let mut w = writer_with(&[]);
    w.add_row(for_sel(Selector::Topk, 1, 100));
    w.add_row(for_sel(Selector::Gaussian, 50, 200));
    w.add_row(tuned_row(ds, &s, 1, 1000, 1.0));
    w.finish().expect("buckets of different selectors may overlap");
    let mut w = writer_with(&[]);
    w.add_row(for_sel(Selector::Gaussian, 1, 100));
    w.add_row(for_sel(Selector::Gaussian, 50, 200));
    corrupt(
        w,
        "tuned rows for selector gaussian with overlapping buckets [1, 100) and [50, 200)",
    );

    let mut w = writer_with(&[]);
    w.add_row(tuned_row(dd, &s, 8192, 9000, f64::NAN));
    corrupt(w, "median_us NaN");

    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        source: RowSource::Tuned { median_us: 1.0 },
        ..default_row(KernelFamily::PageMeta, &s)
    });
    corrupt(w, "tuned row must have a tokens bucket");

    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        bucket: Bucket::Tokens { lo: 1, hi: 2 },
        selector: None,
        ..default_row(KernelFamily::PageMeta, &s)
    });
    corrupt(w, "default row must have bucket `any`");

    let mut w = writer_with(&[KernelFamily::SelectTopk]);
    w.add_row(default_row(KernelFamily::SelectTopk, &s));
    corrupt(w, "module `select_topk__");

    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        spec: spec_g(2).sketch_tag(),
        ..tuned_row(dd, &s, 1 << 22, 1 << 23, 1.0)
    });
    corrupt(w, "is not among the manifest's specs");

    let mut w = writer_with(&[]);
    let mut row = tuned_row(dd, &s, 1 << 22, 1 << 23, 1.0);
    row.entries.reverse();
    w.add_row(row);
    corrupt(w, "are not the entries of tile");

    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        tile: KernelFamily::PageMeta.default_tile(&s),
        ..tuned_row(dd, &s, 1 << 22, 1 << 23, 1.0)
    });
    corrupt(w, "does not fit");

    let mut w = writer_with(&[]);
    w.add_row(TableRow {
        block_threads: 0,
        ..tuned_row(dd, &s, 1 << 22, 1 << 23, 1.0)
    });
    corrupt(w, "block_threads is 0");

    // The module lists the entries but its PTX does not define them.
    let mut w = writer_with(&[KernelFamily::DecodeSparse]);
    let f = KernelFamily::DecodeSparse;
    let entries = f.default_tile(&s).entries(f, &s).unwrap();
    w.add_module(&module_name(f, &s), fake_ptx(&entries[..1]), entries)
        .unwrap();
    w.add_row(default_row(f, &s));
    corrupt(w, "has no `.entry");

    // The PTX defines the entries but the artifact does not list them.
    let mut w = writer_with(&[KernelFamily::DecodeSparse]);
    let entries = f.default_tile(&s).entries(f, &s).unwrap();
    w.add_module(&module_name(f, &s), fake_ptx(&entries), entries[1..].to_vec())
        .unwrap();
    w.add_row(default_row(f, &s));
    corrupt(w, "is not in module");

    let mut bad_alpha = s;
    bad_alpha.decode.alpha = entkv_abi::Alpha::Other(1.5);
    let mut w = BundleWriter::new(meta());
    w.add_spec(bad_alpha);
    corrupt(w, "canonical");

    let mut w = BundleWriter::new(BundleMeta {
        target_sm: 0,
        ..meta()
    });
    w.add_spec(s);
    corrupt(w, "target_sm");
}

#[test]
fn target_sm_must_be_the_ptx_target() {
    let t = TempDir::new("target");
    bundle().write_dir(&t.0).unwrap();
    edit_manifest(&t.0, |m| m.target_sm = 80);
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(
        matches!(e, BundleError::Corrupt(_)) && e.to_string().contains("`.target sm_80`"),
        "{e}"
    );
    assert!(ptx_targets(".version 8.0\n.target sm_90a\n", 90));
    assert!(ptx_targets("  .target sm_90, debug\n", 90));
    assert!(!ptx_targets(".target sm_900\n", 90));
    assert!(!ptx_targets(".version 8.0\n", 90));
}

#[test]
fn corrupt_table_in_a_file_is_found_on_open() {
    // A consistent digest over an inconsistent table: open() runs the table checks too.
    let t = TempDir::new("table");
    bundle().write_dir(&t.0).unwrap();
    edit_manifest(&t.0, |m| {
        m.table[0].entries.pop();
    });
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(matches!(e, BundleError::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("table row 0 (page_meta"), "{e}");

    // An artifact name with a path in it is refused before anything is read.
    let t = TempDir::new("traversal");
    bundle().write_dir(&t.0).unwrap();
    edit_manifest(&t.0, |m| m.artifacts[0].file = "../../etc/passwd.ptx".into());
    let e = Bundle::open(&t.0).unwrap_err();
    assert!(e.to_string().contains("not a plain file name"), "{e}");
}

#[test]
fn entry_check_is_not_fooled_by_prefixes() {
    let ptx = ".visible .entry foo_bar(\n.entry  baz\t(\n";
    assert!(ptx_declares_entry(ptx, "foo_bar"));
    assert!(ptx_declares_entry(ptx, "baz"));
    assert!(!ptx_declares_entry(ptx, "foo"));
    assert!(!ptx_declares_entry(ptx, "ba"));
    assert!(!ptx_declares_entry("// foo_bar(", "foo_bar"));
    assert!(!ptx_declares_entry(".entryfoo(", "foo"));
}

#[test]
fn rfc3339() {
    assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339_utc(1_795_960_980), "2026-11-29T14:03:00Z");
    assert_eq!(rfc3339_utc(4_107_542_399), "2100-02-28T23:59:59Z");
    assert_eq!(rfc3339_utc(253_402_300_799), "9999-12-31T23:59:59Z");
}

#[test]
fn errors_name_the_problem() {
    let e = BundleError::Checksum {
        file: "a.ptx".into(),
        expected: "aa".into(),
        actual: "bb".into(),
    };
    assert_eq!(
        e.to_string(),
        "artifact `a.ptx` fails its checksum: manifest records sha256 aa, the file hashes to bb"
    );
    let e = BundleError::MissingArtifact { file: "a.ptx".into() };
    assert!(e.to_string().contains("`a.ptx`"));
    let e = BundleError::Schema {
        found: 8,
        supported: 7,
    };
    assert!(
        e.to_string().contains("version 8") && e.to_string().contains("versions 6–7"),
        "{e}"
    );
}

/// Schema 12: a seeded certified tile with `"pruned_walk": true` (`_pw`) serves the page-pruned
/// walk. Its tuned row resolves for that walk, and its entries add that walk's two passes and
/// the pruned sample pass to the seeded full walk's. A schema-11 manifest with such a row is
/// refused (a schema-11 reader would drop the field).
#[test]
fn seeded_pruned_walk_rows_and_schema_11() {
    let f = KernelFamily::DecodeCertified;
    let s4 = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let TileConfig::Dense(def) = f.default_tile(&s4) else {
        unreachable!()
    };
    let tile = TileConfig::Dense(DenseTile {
        share_bound: true,
        seed: true,
        pruned_walk: true,
        ..def
    });
    let mut w = BundleWriter::new(meta());
    w.add_spec(s4);
    add_default_rows(&mut w, &s4, &[]);
    let entries = tile.entries(f, &s4).unwrap();
    let module = format!("{}__{}__{}.ptx", f.name(), s4.sketch_tag(), tile.tag());
    assert!(module.contains("_seed_pw"), "{module}");
    w.add_module(&module, fake_ptx(&entries), entries.clone())
        .unwrap();
    w.add_row(TableRow {
        tile,
        module,
        entries: entries.clone(),
        selector: Some(Selector::Pruned),
        ..tuned_row(f, &s4, 1, 1 << 20, 1.0)
    });
    let t = TempDir::new("seeded_pw");
    w.finish().unwrap().write_dir(&t.0).unwrap();
    let b = Bundle::open(&t.0).unwrap();
    let r = b.resolve(f, &s4, 1000, Some(Selector::Pruned)).unwrap();
    assert_eq!((r.tier, r.row.tile), (Tier::Exact, tile));
    for first in [
        "select_certified__",
        "select_certified_sel__",
        "select_certified_rest__",
        "certified_seed_scores__",
        "certified_seed_scores_pruned__",
        "certified_verify__",
    ] {
        assert!(
            entries.iter().any(|e| e.starts_with(first)),
            "{first}: {entries:?}"
        );
    }
    assert!(String::from_utf8(std::fs::read(t.0.join(MANIFEST_FILE)).unwrap())
        .unwrap()
        .contains("\"pruned_walk\": true"));
    edit_manifest(&t.0, |m| m.schema_version = 11);
    let e = Bundle::open(&t.0).unwrap_err().to_string();
    assert!(e.contains("`_pw`") && e.contains("schema-11"), "{e}");
}

/// Schema 13: a certified tile may take its sketch sums on the tensor cores (`_im`, `wide`'s
/// default); its entries are the tile's without it. A schema-12 manifest with such a row is
/// refused (a schema-12 reader would drop the field).
#[test]
fn sketch_mma_rows_and_schema_12() {
    let f = KernelFamily::DecodeCertified;
    let wide = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
    assert!(
        matches!(f.default_tile(&wide), TileConfig::Dense(t) if t.sketch_mma),
        "`wide`'s default takes `_im`"
    );
    let s4 = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    let TileConfig::Dense(def) = f.default_tile(&s4) else {
        unreachable!()
    };
    let tile = TileConfig::Dense(DenseTile {
        sketch_mma: true,
        ..def
    });
    assert_eq!(
        tile.entries(f, &s4).unwrap().len(),
        TileConfig::Dense(def).entries(f, &s4).unwrap().len()
    );
    let mut w = BundleWriter::new(meta());
    w.add_spec(s4);
    add_default_rows(&mut w, &s4, &[]);
    let module = add_tuned_tile_row(&mut w, f, &s4, tile);
    assert!(module.contains("_im"), "{module}");
    let t = TempDir::new("sketch_mma");
    w.finish().unwrap().write_dir(&t.0).unwrap();
    let b = Bundle::open(&t.0).unwrap();
    assert_eq!(b.resolve(f, &s4, 1000, None).unwrap().row.tile, tile);
    assert!(String::from_utf8(std::fs::read(t.0.join(MANIFEST_FILE)).unwrap())
        .unwrap()
        .contains("\"sketch_mma\": true"));
    edit_manifest(&t.0, |m| m.schema_version = 12);
    let e = Bundle::open(&t.0).unwrap_err().to_string();
    assert!(e.contains("`_im`") && e.contains("schema-12"), "{e}");
}
