//! Verification, in the order `docs/bundle.md` gives: manifest JSON → schema version →
//! manifest fields → digest → artifacts present → checksums → consistency of the table.

use crate::{
    manifest_digest, rfc3339_utc, sha256_hex, valid_artifact_name, Bucket, Bundle, BundleError, Manifest,
    RowSource, TableRow, MANIFEST_FILE, OLDEST_SCHEMA_VERSION, SCHEMA_VERSION, SEEDED_FULL_WALK_ONLY_SCHEMA,
    SEEDED_PRUNED_WALK_SCHEMA, SKETCH_MMA_SCHEMA,
};
use entkv_abi::pipeline::{certified_rest_entry, certified_selected_entry};
use entkv_abi::{
    check_group, check_head_dim, check_page_size, Alpha, KernelFamily, PagedSpec, Selector, TileConfig,
    SUPPORTED_SKETCH_BITS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Open the directory form.
pub(crate) fn open_dir(dir: &Path) -> Result<Bundle, BundleError> {
    let manifest_path = dir.join(MANIFEST_FILE);
    let bytes = match std::fs::read(&manifest_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::NotABundle {
                path: dir.to_path_buf(),
                reason: format!("the directory has no {MANIFEST_FILE}"),
            })
        }
        Err(source) => {
            return Err(BundleError::Io {
                path: manifest_path,
                source,
            })
        }
    };
    let manifest = parse_manifest(dir, &bytes)?;
    check_artifact_names(&manifest)?;
    let mut files = BTreeMap::new();
    for a in &manifest.artifacts {
        let p = dir.join(&a.file);
        match std::fs::read(&p) {
            Ok(b) => {
                files.insert(a.file.clone(), b);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BundleError::MissingArtifact { file: a.file.clone() })
            }
            Err(source) => return Err(BundleError::Io { path: p, source }),
        }
    }
    finish_open(manifest, files)
}

/// Steps 1–4: the bytes of `manifest.json` → a manifest whose digest matches. `path` names the
/// bundle in errors.
pub(crate) fn parse_manifest(path: &Path, bytes: &[u8]) -> Result<Manifest, BundleError> {
    let not_a_bundle = |reason: String| BundleError::NotABundle {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| not_a_bundle(format!("{MANIFEST_FILE} is not JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(not_a_bundle(format!("{MANIFEST_FILE} is not a JSON object")));
    };
    let Some(manifest) = obj.get("manifest").filter(|m| m.is_object()) else {
        return Err(not_a_bundle(format!("{MANIFEST_FILE} has no `manifest` object")));
    };
    // The schema version first, on the raw JSON, so a future schema is reported as such rather
    // than as whatever field it changed.
    let found = match manifest.get("schema_version") {
        Some(v) => v.as_u64().ok_or_else(|| {
            not_a_bundle(format!(
                "manifest.schema_version is {v}, not a non-negative integer"
            ))
        })?,
        None => return Err(not_a_bundle("the manifest has no schema_version".into())),
    };
    if !(u64::from(OLDEST_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&found) {
        return Err(BundleError::Schema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let Some(recorded) = obj.get("manifest_sha256").and_then(|d| d.as_str()) else {
        return Err(not_a_bundle(format!(
            "{MANIFEST_FILE} has no `manifest_sha256` string"
        )));
    };
    if let Some(key) = obj.keys().find(|k| *k != "manifest" && *k != "manifest_sha256") {
        return Err(BundleError::Corrupt(format!(
            "{MANIFEST_FILE} has an unknown top-level key `{key}`"
        )));
    }
    let recorded = recorded.to_string();
    let manifest: Manifest = serde_path_to_error::deserialize(value["manifest"].clone()).map_err(|e| {
        BundleError::Corrupt(format!(
            "manifest.{}: {} (a schema-{found} manifest)",
            e.path(),
            e.inner()
        ))
    })?;
    let actual = manifest_digest(&manifest);
    if actual != recorded {
        return Err(BundleError::ManifestChanged { recorded, actual });
    }
    Ok(manifest)
}

/// Artifact names are plain `.ptx` file names and unique (before any file is read).
pub(crate) fn check_artifact_names(manifest: &Manifest) -> Result<(), BundleError> {
    let mut seen = BTreeSet::new();
    for a in &manifest.artifacts {
        if !valid_artifact_name(&a.file) {
            return Err(BundleError::Corrupt(format!(
                "artifact name `{}` is not a plain file name `[A-Za-z0-9_.-]+.ptx`",
                a.file
            )));
        }
        if !seen.insert(a.file.as_str()) {
            return Err(BundleError::Corrupt(format!(
                "artifact `{}` is listed twice",
                a.file
            )));
        }
    }
    Ok(())
}

/// Steps 6–7 given every artifact's bytes (step 5, presence, is the caller's): checksums, then
/// the consistency checks.
pub(crate) fn finish_open(
    manifest: Manifest,
    mut files: BTreeMap<String, Vec<u8>>,
) -> Result<Bundle, BundleError> {
    for a in &manifest.artifacts {
        let bytes = files
            .get(&a.file)
            .ok_or_else(|| BundleError::MissingArtifact { file: a.file.clone() })?;
        let actual = sha256_hex(bytes);
        if actual != a.sha256 {
            return Err(BundleError::Checksum {
                file: a.file.clone(),
                expected: a.sha256.clone(),
                actual,
            });
        }
        if bytes.len() as u64 != a.bytes {
            return Err(BundleError::Corrupt(format!(
                "artifact `{}`: the manifest records {} bytes, the file (whose sha256 matches) has {}",
                a.file,
                a.bytes,
                bytes.len()
            )));
        }
    }
    let mut ptx = BTreeMap::new();
    for a in &manifest.artifacts {
        let bytes = files.remove(&a.file).expect("checked above");
        let text = String::from_utf8(bytes)
            .map_err(|e| BundleError::Corrupt(format!("artifact `{}` is not UTF-8 text: {e}", a.file)))?;
        ptx.insert(a.file.clone(), text);
    }
    check_consistency(&manifest, &ptx)?;
    Ok(Bundle { manifest, ptx })
}

/// Everything after the checksums: header fields, specs, artifacts' entries, the table.
pub(crate) fn check_consistency(
    manifest: &Manifest,
    ptx: &BTreeMap<String, String>,
) -> Result<(), BundleError> {
    let corrupt = |s: String| Err(BundleError::Corrupt(s));
    if !(OLDEST_SCHEMA_VERSION..=SCHEMA_VERSION).contains(&manifest.schema_version) {
        return Err(BundleError::Schema {
            found: manifest.schema_version.into(),
            supported: SCHEMA_VERSION,
        });
    }
    if manifest.target_sm == 0 {
        return corrupt("target_sm is 0".into());
    }
    if manifest.ptx_version.is_empty() {
        return corrupt("ptx_version is empty".into());
    }
    let utc = rfc3339_utc(manifest.created_unix_s);
    if manifest.created_utc != utc {
        return corrupt(format!(
            "created_utc `{}` is not created_unix_s {} (= {utc})",
            manifest.created_utc, manifest.created_unix_s
        ));
    }

    let mut specs = BTreeMap::new();
    for s in &manifest.specs {
        check_spec(s).or_else(|e| corrupt(format!("spec `{}`: {e}", s.sketch_tag())))?;
        if specs.insert(s.sketch_tag(), s).is_some() {
            return corrupt(format!("spec `{}` is listed twice", s.sketch_tag()));
        }
    }

    check_artifact_names(manifest)?;
    let mut artifacts = BTreeMap::new();
    for a in &manifest.artifacts {
        let text = ptx
            .get(&a.file)
            .ok_or_else(|| BundleError::MissingArtifact { file: a.file.clone() })?;
        if !ptx_targets(text, manifest.target_sm) {
            return corrupt(format!(
                "artifact `{}` does not declare `.target sm_{}` (the manifest's target_sm)",
                a.file, manifest.target_sm
            ));
        }
        let mut entries = BTreeSet::new();
        for e in &a.entries {
            if !entries.insert(e.as_str()) {
                return corrupt(format!("artifact `{}` lists entry `{e}` twice", a.file));
            }
            if !ptx_declares_entry(text, e) {
                return corrupt(format!(
                    "artifact `{}` lists entry `{e}` but its PTX has no `.entry {e}`",
                    a.file
                ));
            }
        }
        artifacts.insert(a.file.as_str(), entries);
    }
    if let Some(extra) = ptx.keys().find(|f| !artifacts.contains_key(f.as_str())) {
        return corrupt(format!(
            "PTX `{extra}` is not listed among the manifest's artifacts"
        ));
    }

    // (family, spec) → (default rows, tuned buckets per selector).
    type Group<'a> = (Vec<&'a TableRow>, BTreeMap<Option<Selector>, Vec<(u64, u64)>>);
    let mut groups: BTreeMap<(entkv_abi::KernelFamily, &str), Group> = BTreeMap::new();
    for (i, row) in manifest.table.iter().enumerate() {
        let at = || {
            format!(
                "table row {i} ({} at `{}`, bucket {})",
                row.family, row.spec, row.bucket
            )
        };
        check_row(row, manifest.schema_version, &specs, &artifacts)
            .or_else(|e| corrupt(format!("{}: {e}", at())))?;
        let g = groups.entry((row.family, row.spec.as_str())).or_default();
        match (row.source, row.bucket) {
            (RowSource::Default, Bucket::Any) => g.0.push(row),
            (RowSource::Tuned { .. }, Bucket::Tokens { lo, hi }) => {
                g.1.entry(row.selector).or_default().push((lo, hi))
            }
            (RowSource::Default, Bucket::Tokens { .. }) => {
                return corrupt(format!("{}: a default row must have bucket `any`", at()))
            }
            (RowSource::Tuned { .. }, Bucket::Any) => {
                return corrupt(format!("{}: a tuned row must have a tokens bucket", at()))
            }
        }
    }
    for ((family, spec), (defaults, tuned)) in groups {
        check_defaults(family, spec, &defaults).or_else(corrupt)?;
        for (selector, mut buckets) in tuned {
            let of = selector.map(|s| format!(" for selector {s}")).unwrap_or_default();
            buckets.sort_unstable();
            for w in buckets.windows(2) {
                if w[0].1 > w[1].0 {
                    return corrupt(format!(
                        "{family} at `{spec}` has tuned rows{of} with overlapping buckets [{}, {}) and [{}, {})",
                        w[0].0, w[0].1, w[1].0, w[1].1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A (family, spec)'s default rows (bucket `any`): exactly one for every walk (no selector),
/// and one for each selector whose walk that row's tile cannot serve (the page-pruned walk of
/// a seeded certified default), none for the others.
fn check_defaults(family: entkv_abi::KernelFamily, spec: &str, defaults: &[&TableRow]) -> Result<(), String> {
    let of = |s: Option<Selector>| defaults.iter().filter(move |r| r.selector == s);
    let every: Vec<_> = of(None).collect();
    if every.len() != 1 {
        return Err(format!(
            "{family} at `{spec}` has {} default rows for every walk (exactly one with bucket `any` and no selector is required)",
            every.len()
        ));
    }
    let unserved = family.selectors_unserved_by(&every[0].tile);
    for &s in family.selectors() {
        let n = of(Some(s)).count();
        let needed = usize::from(unserved.contains(&s));
        if n != needed {
            return Err(format!(
                "{family} at `{spec}` has {n} default rows for selector {s} ({needed} expected: {})",
                if needed == 1 {
                    "its default tile cannot serve that walk"
                } else {
                    "its default tile serves that walk"
                }
            ));
        }
    }
    Ok(())
}

fn check_spec(s: &PagedSpec) -> Result<(), String> {
    let a = s.decode.alpha;
    match Alpha::new(a.value()) {
        Ok(canonical) if canonical == a => {}
        Ok(canonical) => return Err(format!("alpha {a:?} is not in canonical form {canonical:?}")),
        Err(e) => return Err(e.to_string()),
    }
    check_head_dim(s.decode.head_dim).map_err(|e| e.to_string())?;
    check_group(s.decode.group).map_err(|e| e.to_string())?;
    check_page_size(s.page_size).map_err(|e| e.to_string())?;
    if !SUPPORTED_SKETCH_BITS.contains(&s.sketch_bits) {
        return Err(format!(
            "unsupported sketch width {} bits (supported: {SUPPORTED_SKETCH_BITS:?})",
            s.sketch_bits
        ));
    }
    Ok(())
}

fn check_row(
    row: &TableRow,
    schema_version: u32,
    specs: &BTreeMap<String, &PagedSpec>,
    artifacts: &BTreeMap<&str, BTreeSet<&str>>,
) -> Result<(), String> {
    let spec = specs
        .get(&row.spec)
        .ok_or_else(|| format!("spec `{}` is not among the manifest's specs", row.spec))?;
    let module = artifacts
        .get(row.module.as_str())
        .ok_or_else(|| format!("module `{}` is not among the manifest's artifacts", row.module))?;
    let mut expected = row
        .tile
        .entries(row.family, spec)
        .map_err(|e| format!("tile {} does not fit: {e}", row.tile.tag()))?;
    if let (KernelFamily::DecodeCertified, TileConfig::Dense(t)) = (row.family, &row.tile) {
        if t.pruned_walk && schema_version < SEEDED_PRUNED_WALK_SCHEMA {
            return Err(format!(
                "tile {} serves the page-pruned walk seeded (`_pw`), which schema {SEEDED_PRUNED_WALK_SCHEMA} introduced (this is a schema-{schema_version} manifest)",
                row.tile.tag()
            ));
        }
        if t.sketch_mma && schema_version < SKETCH_MMA_SCHEMA {
            return Err(format!(
                "tile {} takes its sketch sums on the tensor cores (`_im`), which schema {SKETCH_MMA_SCHEMA} introduced (this is a schema-{schema_version} manifest)",
                row.tile.tag()
            ));
        }
        if schema_version < SEEDED_FULL_WALK_ONLY_SCHEMA && !t.serves_pruned_walk() {
            // Older writers listed (and compiled) the page-pruned walk's passes of a seeded
            // tile too, after the pass and its finish; they are never launched.
            let pruned = [certified_selected_entry(spec, t), certified_rest_entry(spec, t)];
            expected.splice(2..2, pruned);
        }
    }
    if row.entries != expected {
        return Err(format!(
            "entries {:?} are not the entries of tile {}, {expected:?}",
            row.entries,
            row.tile.tag()
        ));
    }
    if let Some(e) = row.entries.iter().find(|e| !module.contains(e.as_str())) {
        return Err(format!("entry `{e}` is not in module `{}`", row.module));
    }
    if row.block_threads == 0 {
        return Err("block_threads is 0".into());
    }
    if let Some(s) = row.selector {
        if !row.family.selectors().contains(&s) {
            return Err(format!("{} reads no selection of selector {s}", row.family));
        }
    }
    if !row.tile.serves(row.selector) {
        return Err(format!(
            "tile {} cannot serve the walk of {} (a seeded certified tile without `_pw` is a full walk's)",
            row.tile.tag(),
            row.family.label(row.selector)
        ));
    }
    if let Bucket::Tokens { lo, hi } = row.bucket {
        if lo >= hi {
            return Err(format!("empty bucket: lo {lo} ≥ hi {hi}"));
        }
    }
    if let RowSource::Tuned { median_us } = row.source {
        if !median_us.is_finite() || median_us < 0.0 {
            return Err(format!("median_us {median_us} is not a finite time ≥ 0"));
        }
    }
    Ok(())
}

/// Whether `ptx` has `.entry <name>` followed by something that cannot continue an identifier
/// (a cheap textual check, not a PTX parser).
/// Whether the PTX's `.target` directive names `sm_<sm>` (a feature suffix such as `sm_90a`
/// counts: it runs on the same devices).
pub(crate) fn ptx_targets(ptx: &str, sm: u32) -> bool {
    let want = format!("sm_{sm}");
    ptx.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(".target"))
        .and_then(|rest| rest.split([' ', '\t', ',']).find(|t| !t.is_empty()))
        .and_then(|t| t.strip_prefix(want.as_str()))
        .is_some_and(|suffix| suffix.chars().all(|c| c.is_ascii_lowercase()))
}

pub(crate) fn ptx_declares_entry(ptx: &str, name: &str) -> bool {
    ptx.match_indices(".entry").any(|(i, m)| {
        let rest = &ptx[i + m.len()..];
        let trimmed = rest.trim_start_matches([' ', '\t']);
        trimmed.len() < rest.len()
            && trimmed.strip_prefix(name).is_some_and(|after| {
                !after
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            })
    })
}
