//! Building a bundle in memory.

use crate::verify::{check_consistency, parse_manifest};
use crate::{
    rfc3339_utc, sha256_hex, valid_artifact_name, Artifact, Bundle, BundleError, Manifest, TableRow, TunedOn,
    SCHEMA_VERSION,
};
use entkv_abi::PagedSpec;
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest's header fields, as the writer's caller knows them.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleMeta {
    /// See [`Manifest::entkv_version`].
    pub entkv_version: String,
    /// See [`Manifest::llvm_version`].
    pub llvm_version: String,
    /// See [`Manifest::target_sm`].
    pub target_sm: u32,
    /// See [`Manifest::ptx_version`].
    pub ptx_version: String,
    /// See [`Manifest::tuned_on`].
    pub tuned_on: Option<TunedOn>,
    /// See [`Manifest::created_unix_s`] (`created_utc` is derived from it).
    pub created_unix_s: u64,
}

/// Collects specs, PTX modules and table rows, then checks them into a [`Bundle`].
#[derive(Clone, Debug)]
pub struct BundleWriter {
    meta: BundleMeta,
    specs: Vec<PagedSpec>,
    artifacts: Vec<Artifact>,
    ptx: BTreeMap<String, String>,
    rows: Vec<TableRow>,
}

impl BundleWriter {
    /// An empty bundle with these header fields.
    pub fn new(meta: BundleMeta) -> BundleWriter {
        BundleWriter {
            meta,
            specs: Vec::new(),
            artifacts: Vec::new(),
            ptx: BTreeMap::new(),
            rows: Vec::new(),
        }
    }

    /// Add a specialization (once per `sketch_tag`; later duplicates are ignored).
    pub fn add_spec(&mut self, spec: PagedSpec) {
        let tag = spec.sketch_tag();
        if !self.specs.iter().any(|s| s.sketch_tag() == tag) {
            self.specs.push(spec);
        }
    }

    /// Add a PTX module defining `entries`. Refuses a name already added and a name that is not
    /// a plain `[A-Za-z0-9_.-]+` file name ending in `.ptx`.
    pub fn add_module(&mut self, file: &str, ptx: String, entries: Vec<String>) -> Result<(), BundleError> {
        if !valid_artifact_name(file) {
            return Err(BundleError::Corrupt(format!(
                "artifact name `{file}` is not a plain file name `[A-Za-z0-9_.-]+.ptx`"
            )));
        }
        if self.ptx.contains_key(file) {
            return Err(BundleError::Corrupt(format!("artifact `{file}` is added twice")));
        }
        self.artifacts.push(Artifact {
            file: file.to_string(),
            sha256: sha256_hex(ptx.as_bytes()),
            bytes: ptx.len() as u64,
            entries,
        });
        self.ptx.insert(file.to_string(), ptx);
        Ok(())
    }

    /// Add a table row.
    pub fn add_row(&mut self, row: TableRow) {
        self.rows.push(row);
    }

    /// The bundle, after the same consistency checks [`Bundle::open`] runs, and a check that
    /// the manifest survives its JSON round trip exactly.
    pub fn finish(self) -> Result<Bundle, BundleError> {
        let m = self.meta;
        let manifest = Manifest {
            schema_version: SCHEMA_VERSION,
            entkv_version: m.entkv_version,
            llvm_version: m.llvm_version,
            target_sm: m.target_sm,
            ptx_version: m.ptx_version,
            tuned_on: m.tuned_on,
            created_unix_s: m.created_unix_s,
            created_utc: rfc3339_utc(m.created_unix_s),
            specs: self.specs,
            artifacts: self.artifacts,
            table: self.rows,
        };
        check_consistency(&manifest, &self.ptx)?;
        let bundle = Bundle {
            manifest,
            ptx: self.ptx,
        };
        let reread = parse_manifest(Path::new("<bundle being written>"), &bundle.manifest_file_bytes())?;
        if reread != bundle.manifest {
            return Err(BundleError::Corrupt(
                "the manifest does not read back equal to itself after serialization".into(),
            ));
        }
        Ok(bundle)
    }
}
