//! Stub bundles for host-side tests (planners, bindings, C ABI argument checks): every family's
//! default row per spec plus any extra rows, in modules whose PTX declares each entry with an
//! empty body. They verify like real bundles; their kernels must never be launched.

use std::collections::BTreeMap;

use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};

use crate::{Bucket, Bundle, BundleError, BundleMeta, BundleWriter, RowSource, TableRow, TunedOn};

/// PTX text declaring `entries` (one `.u64` parameter, empty body).
pub fn stub_ptx(entries: &[String]) -> String {
    let mut s = String::from(".version 8.0\n.target sm_90\n.address_size 64\n\n");
    for e in entries {
        s.push_str(&format!(
            ".visible .entry {e}(\n\t.param .u64 {e}_param_0\n)\n{{\n\tret;\n}}\n\n"
        ));
    }
    s
}

/// The untuned row of `family` at `spec` for every walk, in module `<family>__<sketch tag>.ptx`.
pub fn default_row(family: KernelFamily, spec: &PagedSpec) -> Result<TableRow, BundleError> {
    default_row_for(family, spec, None, family.default_tile(spec))
}

/// The untuned rows of `family` at `spec` ([`KernelFamily::default_rows`]), in module
/// `<family>__<sketch tag>.ptx`.
pub fn default_rows(family: KernelFamily, spec: &PagedSpec) -> Result<Vec<TableRow>, BundleError> {
    family
        .default_rows(spec)
        .into_iter()
        .map(|(selector, tile)| default_row_for(family, spec, selector, tile))
        .collect()
}

fn default_row_for(
    family: KernelFamily,
    spec: &PagedSpec,
    selector: Option<Selector>,
    tile: TileConfig,
) -> Result<TableRow, BundleError> {
    Ok(TableRow {
        family,
        spec: spec.sketch_tag(),
        bucket: Bucket::Any,
        selector,
        tile,
        module: format!("{}__{}.ptx", family.name(), spec.sketch_tag()),
        entries: tile
            .entries(family, spec)
            .map_err(|e| BundleError::Corrupt(e.to_string()))?,
        block_threads: 256,
        source: RowSource::Default,
    })
}

/// A stub bundle of every family's default row for each of `specs`, plus `extra` rows (e.g.
/// tuned ones, made from [`default_row`]), tuned on an "NVIDIA H200" when `extra` is not empty.
pub fn stub_bundle(specs: &[PagedSpec], extra: Vec<TableRow>) -> Result<Bundle, BundleError> {
    let mut w = BundleWriter::new(BundleMeta {
        entkv_version: env!("CARGO_PKG_VERSION").into(),
        llvm_version: "stub".into(),
        target_sm: 90,
        ptx_version: "8.0".into(),
        tuned_on: (!extra.is_empty()).then(|| TunedOn {
            gpu: "NVIDIA H200".into(),
            sm: 90,
            driver: "stub".into(),
            cuda: "stub".into(),
        }),
        created_unix_s: 0,
    });
    let mut rows = Vec::new();
    for spec in specs {
        w.add_spec(*spec);
        for family in KernelFamily::ALL {
            rows.extend(default_rows(family, spec)?);
        }
    }
    rows.extend(extra);
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &rows {
        let entries = modules.entry(r.module.clone()).or_default();
        // A decode module also defines the step's optional id check (`entkv_abi::guard`).
        let extra = r.family.module_extra_entries(spec_of(specs, r)?);
        for e in r.entries.iter().chain(&extra) {
            if !entries.contains(e) {
                entries.push(e.clone());
            }
        }
    }
    for (file, entries) in modules {
        w.add_module(&file, stub_ptx(&entries), entries)?;
    }
    for r in rows {
        w.add_row(r);
    }
    w.finish()
}

/// The spec of row `r` among `specs` (rows name theirs by sketch tag).
fn spec_of<'a>(specs: &'a [PagedSpec], r: &TableRow) -> Result<&'a PagedSpec, BundleError> {
    specs
        .iter()
        .find(|s| s.sketch_tag() == r.spec)
        .ok_or_else(|| BundleError::Corrupt(format!("row spec `{}` is not among the stub's specs", r.spec)))
}
