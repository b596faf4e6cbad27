//! # entkv-bundle
//!
//! Boundary: the kernel-bundle format — PTX modules plus the lookup table from (kernel family,
//! specialization, context length) to tile config and entries — with its reader, writer and
//! verification; pure data and files, no LLVM, no DSL, no CUDA, so the runtime can depend on it.
//!
//! The format is specified in `docs/bundle.md`. In short: a bundle is a directory holding
//! `manifest.json` (a [`Manifest`] plus its SHA-256) and one `.ptx` file per [`Artifact`], or the
//! same content packed into one `.entkvb` file. [`Bundle::open`] reads either form and verifies
//! everything before returning; [`Bundle::resolve`] picks a table row for a launch.

#![deny(missing_docs)]

mod container;
pub mod stub;
mod verify;
mod writer;

use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use writer::{BundleMeta, BundleWriter};

/// The manifest schema this crate writes. Bumped on every change an older reader would misread
/// or refuse; readers refuse versions outside [`OLDEST_SCHEMA_VERSION`]..=`SCHEMA_VERSION`
/// ([`BundleError::Schema`]). History: 2 added the rows' optional `selector`, 3 the per-token
/// 4-bit sketch grid, 4 the certified tiles' optional `share_bound` and the `pruned` selector,
/// 5 the page box sketch (`page_meta` writes `meta_box`, `page_bounds` reads it), 6 several KV
/// heads a `page_bounds` block (its `heads_log2` argument), 7 the dense tiles' optional `mma`
/// (tensor-core score passes; a schema-6 reader would drop it and fail the digest), 8 the
/// certified tiles' optional `seed` (a seeded row's pass and finish take `repair, gate`, and its
/// entries add `certified_seed_scores`, `certified_seed`, `certified_verify`), 9 the sparse
/// tiles' optional `lookahead` (pages looked up a chunk ahead; same entries and arguments) and
/// default rows of the page-pruned walk beside a seeded certified default (a schema-8 reader
/// refuses a default row with a selector), 10 certified rows with `mma` (rescoring on the
/// tensor cores; same entries and arguments; a schema-9 reader refuses the tile), 11 seeded
/// certified rows without the page-pruned walk's entries (`select_certified_sel`, `_rest`:
/// a seeded tile never serves that walk; a schema-10 reader would call the shorter list
/// corrupt), 12 the certified tiles' optional `pruned_walk` (`_pw`: a seeded tile that also
/// serves the page-pruned walk, seeded; its entries add that walk's passes, which take
/// `repair, gate`, and `certified_seed_scores_pruned`; a schema-11 reader would drop the field
/// and fail the digest), 13 the certified tiles' optional `sketch_mma` (`_im`: the sketch sums
/// on the integer tensor cores; same entries and arguments; a schema-12 reader would drop the
/// field and fail the digest), 14 the 4-bit sketch's norm words at head dims ≥ 128 (f16, bf16 keys)
/// (`entkv_abi::PagedSpec::sketch_norm`: larger sketch blocks, which a schema-13 reader's engine
/// would allocate too small; a schema-13 bundle's kernels of such specs use its own smaller
/// blocks throughout, so it still reads), 15 `guard_ids` in every decode module, beside the
/// rows' entries (the step's optional device-side id check, `entkv_abi::guard`; a runtime
/// refuses that check with an older bundle, whose steps otherwise run as before).
pub const SCHEMA_VERSION: u32 = 15;

/// The first schema whose seeded certified rows list (and whose modules hold) the full walk's
/// entries only; older seeded rows also list the page-pruned walk's, which are never launched.
pub const SEEDED_FULL_WALK_ONLY_SCHEMA: u32 = 11;

/// The first schema whose certified tiles may carry `pruned_walk` (`_pw`).
pub const SEEDED_PRUNED_WALK_SCHEMA: u32 = 12;

/// The first schema whose certified tiles may carry `sketch_mma` (`_im`).
pub const SKETCH_MMA_SCHEMA: u32 = 13;

/// The oldest schema this crate reads: the `page_meta` and `page_bounds` kernels of older
/// bundles take other arguments (schemas 1–4: no page box sketch; 5: `page_bounds` without
/// `heads_log2`), so launching them with today's arguments would be undefined; they are
/// refused with a request to rebuild. Schemas 6 to 13 differ from 14 only by the absent `mma`,
/// `seed`, `pruned_walk`, `lookahead` and `sketch_mma` (false), by never rescoring on the tensor
/// cores, by the seeded rows' two extra entries before 11 and by 4-bit sketches without norm
/// words before 14 (their `page_meta` and certified kernels agree on that layout), and by
/// decode modules without `guard_ids` before 15: their kernels are otherwise today's.
pub const OLDEST_SCHEMA_VERSION: u32 = 6;

/// The manifest's file name inside a bundle directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// What a bundle holds besides its PTX: provenance, specializations, artifacts and the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Version of the entkv crates that generated the kernels.
    pub entkv_version: String,
    /// LLVM version that compiled them (`19.1.7`).
    pub llvm_version: String,
    /// Compute capability the PTX targets: 90 for sm_90.
    pub target_sm: u32,
    /// PTX ISA version of the modules (`8.0`).
    pub ptx_version: String,
    /// The machine the tuned rows were measured on; `None` for an untuned bundle.
    pub tuned_on: Option<TunedOn>,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The same instant as RFC 3339 UTC, `2026-11-29T14:03:00Z`.
    pub created_utc: String,
    /// Specializations the bundle serves; table rows name them by [`PagedSpec::sketch_tag`].
    pub specs: Vec<PagedSpec>,
    /// PTX modules, one file each.
    pub artifacts: Vec<Artifact>,
    /// The lookup table.
    pub table: Vec<TableRow>,
}

/// Where tuned rows were measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedOn {
    /// GPU name as the driver reports it (`NVIDIA H200`).
    pub gpu: String,
    /// Its compute capability (90).
    pub sm: u32,
    /// Driver version.
    pub driver: String,
    /// CUDA version.
    pub cuda: String,
}

/// One PTX module of the bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// File name: `[A-Za-z0-9_.-]+` ending in `.ptx`, no path separators
    /// (by convention `<family>__<spec sketch_tag>.ptx`).
    pub file: String,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Kernel entries the module defines.
    pub entries: Vec<String>,
}

/// One row of the lookup table: how to launch `family` at `spec` for contexts in `bucket`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableRow {
    /// The pipeline stage.
    pub family: KernelFamily,
    /// [`PagedSpec::sketch_tag`] of one of [`Manifest::specs`].
    pub spec: String,
    /// Context lengths the row is for.
    pub bucket: Bucket,
    /// For a family that reads a selection ([`KernelFamily::selectors`]): the selector whose
    /// selections the row was tuned on. Absent on default rows and on rows tuned for every
    /// selector (bundles written before rows were kept per selector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Selector>,
    /// The tile the entries were generated with.
    pub tile: TileConfig,
    /// [`Artifact::file`] of the module holding the entries.
    pub module: String,
    /// `tile.entries(family, spec)`, in launch order.
    pub entries: Vec<String>,
    /// Threads per block of the first entry (informational: launch geometry comes from the
    /// `entkv-abi` plans for `tile`).
    pub block_threads: u32,
    /// Whether the row is the untuned default or a measured winner.
    pub source: RowSource,
}

/// Context lengths (tokens) a row applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Every length (the default row).
    Any,
    /// Lengths in `[lo, hi)`.
    Tokens {
        /// Smallest length in the bucket.
        lo: u64,
        /// One past the largest length in the bucket.
        hi: u64,
    },
}

impl Bucket {
    /// Whether a context of `tokens` tokens falls in the bucket.
    pub fn contains(&self, tokens: u64) -> bool {
        match *self {
            Bucket::Any => true,
            Bucket::Tokens { lo, hi } => lo <= tokens && tokens < hi,
        }
    }

    /// Distance from `tokens` to the bucket in log2 tokens (0 inside; lengths below 1 count as
    /// 1).
    pub fn log2_distance(&self, tokens: u64) -> f64 {
        let l = |x: u64| (x.max(1) as f64).log2();
        match *self {
            Bucket::Any => 0.0,
            Bucket::Tokens { lo, hi } => {
                if tokens < lo {
                    l(lo) - l(tokens)
                } else if tokens >= hi {
                    l(tokens) - l(hi - 1)
                } else {
                    0.0
                }
            }
        }
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bucket::Any => f.write_str("any"),
            Bucket::Tokens { lo, hi } => write!(f, "[{lo}, {hi})"),
        }
    }
}

/// Where a row comes from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowSource {
    /// The family's default tile (`KernelFamily::default_tile`), bucket [`Bucket::Any`].
    Default,
    /// The tuner's winner for the row's bucket.
    Tuned {
        /// Median time of the family's entries at the tuning shape, microseconds.
        median_us: f64,
    },
}

impl fmt::Display for RowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowSource::Default => f.write_str("default"),
            RowSource::Tuned { median_us } => write!(f, "tuned ({median_us} us)"),
        }
    }
}

/// How [`Bundle::resolve`] found its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// A tuned row whose bucket contains the context length.
    Exact,
    /// A tuned row of the nearest bucket (no bucket contains the length).
    NearestBucket,
    /// The default row (no tuned row for this family and spec).
    Default,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Exact => "exact",
            Tier::NearestBucket => "nearest bucket",
            Tier::Default => "default",
        })
    }
}

/// A row chosen by [`Bundle::resolve`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved<'a> {
    /// The row to launch.
    pub row: &'a TableRow,
    /// How it was found.
    pub tier: Tier,
}

/// Everything that can go wrong reading, writing or using a bundle. Every variant names the
/// problem (file, expected and actual values).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The path is not a bundle: no manifest.json, bad magic, or a manifest that is not JSON of
    /// the expected outline.
    #[error("{} is not an entkv bundle: {reason}", path.display())]
    NotABundle {
        /// The bundle path given.
        path: PathBuf,
        /// What is missing or malformed.
        reason: String,
    },
    /// The manifest's `schema_version` is not one this reader supports.
    #[error(
        "bundle schema version {found} is not supported (this reader supports versions {}–{supported}){}",
        OLDEST_SCHEMA_VERSION,
        if *found < u64::from(OLDEST_SCHEMA_VERSION) {
            ": its kernels predate this entkv's page metadata; rebuild it (`entkv bundle create` or `autotune`)"
        } else {
            ""
        }
    )]
    Schema {
        /// The manifest's version.
        found: u64,
        /// [`SCHEMA_VERSION`].
        supported: u32,
    },
    /// The manifest does not match the digest recorded next to it (it was edited).
    #[error("manifest digest mismatch: manifest_sha256 records {recorded}, the manifest hashes to {actual} (was manifest.json edited?)")]
    ManifestChanged {
        /// `manifest_sha256` in manifest.json.
        recorded: String,
        /// SHA-256 of the parsed manifest's compact serialization.
        actual: String,
    },
    /// An artifact listed in the manifest is not there.
    #[error("artifact `{file}` listed in the manifest is missing")]
    MissingArtifact {
        /// Its file name.
        file: String,
    },
    /// An artifact's bytes do not hash to the manifest's SHA-256.
    #[error("artifact `{file}` fails its checksum: manifest records sha256 {expected}, the file hashes to {actual}")]
    Checksum {
        /// Its file name.
        file: String,
        /// SHA-256 recorded in the manifest.
        expected: String,
        /// SHA-256 of the bytes found.
        actual: String,
    },
    /// The bundle is inconsistent in some other way (the message names it).
    #[error("corrupt bundle: {0}")]
    Corrupt(String),
    /// The bundle has no row for this family at this specialization.
    #[error("the bundle has no kernel for family `{family}` at spec `{spec}`")]
    NoKernel {
        /// The family asked for.
        family: KernelFamily,
        /// `sketch_tag` of the spec asked for.
        spec: String,
    },
}

/// A verified bundle: its manifest and the text of every PTX artifact.
#[derive(Clone, Debug, PartialEq)]
pub struct Bundle {
    manifest: Manifest,
    ptx: BTreeMap<String, String>,
}

impl Bundle {
    /// Open and verify a bundle: a directory holding `manifest.json`, or a single `.entkvb`
    /// file. Nothing is returned unless every check of `docs/bundle.md` passes.
    pub fn open(path: &Path) -> Result<Bundle, BundleError> {
        let meta = std::fs::metadata(path).map_err(|source| BundleError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.is_dir() {
            verify::open_dir(path)
        } else if !meta.is_file() {
            // A FIFO or a device would be read until it ends, which may be never.
            Err(BundleError::NotABundle {
                path: path.to_path_buf(),
                reason: "neither a bundle directory nor a regular (.entkvb) file".into(),
            })
        } else {
            let bytes = std::fs::read(path).map_err(|source| BundleError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            container::decode(&bytes, path)
        }
    }

    /// Verify a bundle from the bytes of its single-file (`.entkvb`) form.
    pub fn from_single_file_bytes(bytes: &[u8]) -> Result<Bundle, BundleError> {
        container::decode(bytes, Path::new("<single-file bundle bytes>"))
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The PTX text of artifact `file`.
    pub fn ptx(&self, file: &str) -> Option<&str> {
        self.ptx.get(file).map(String::as_str)
    }

    /// The specialization with this [`PagedSpec::sketch_tag`].
    pub fn spec(&self, sketch_tag: &str) -> Option<&PagedSpec> {
        self.manifest.specs.iter().find(|s| s.sketch_tag() == sketch_tag)
    }

    /// The lookup table.
    pub fn rows(&self) -> &[TableRow] {
        &self.manifest.table
    }

    /// The row for `family` at `spec` for a context of `tokens` tokens, fed by `selector`'s
    /// selections (`None` for a family that reads no selection):
    /// [`Tier::Exact`] = a tuned row whose `Tokens` bucket contains `tokens`;
    /// [`Tier::NearestBucket`] = a tuned row of the nearest bucket (distance in log2 tokens to
    /// the bucket, see [`Bucket::log2_distance`]; ties go to the smaller `lo`);
    /// [`Tier::Default`] = the [`RowSource::Default`] row (bucket [`Bucket::Any`]) of
    /// `selector`'s walk where the family has one, else the one for every walk.
    /// The tuned rows searched are `selector`'s when the family has any, else those tuned for
    /// every selector. [`BundleError::NoKernel`] when the spec is not in the bundle or the
    /// family has no row for it.
    pub fn resolve(
        &self,
        family: KernelFamily,
        spec: &PagedSpec,
        tokens: u64,
        selector: Option<Selector>,
    ) -> Result<Resolved<'_>, BundleError> {
        let tag = spec.sketch_tag();
        let no_kernel = || BundleError::NoKernel {
            family,
            spec: tag.clone(),
        };
        if self.spec(&tag).is_none() {
            return Err(no_kernel());
        }
        let rows = || {
            self.manifest
                .table
                .iter()
                .filter(|r| r.family == family && r.spec == tag)
        };
        // A row of another selector's may stand in only with a tile that serves this one (a
        // seeded certified row is a full walk: not the page-pruned walk's).
        let tuned_for = |s: Option<Selector>| {
            rows().filter(move |r| {
                matches!(r.source, RowSource::Tuned { .. }) && r.selector == s && r.tile.serves(selector)
            })
        };
        let own = if selector.is_some() && tuned_for(selector).next().is_some() {
            selector
        } else {
            None
        };
        let tuned = || tuned_for(own);
        if let Some(row) = tuned().find(|r| r.bucket.contains(tokens)) {
            return Ok(Resolved {
                row,
                tier: Tier::Exact,
            });
        }
        let lo = |r: &TableRow| match r.bucket {
            Bucket::Any => 0,
            Bucket::Tokens { lo, .. } => lo,
        };
        let nearest = tuned().min_by(|a, b| {
            let (da, db) = (a.bucket.log2_distance(tokens), b.bucket.log2_distance(tokens));
            da.total_cmp(&db).then(lo(a).cmp(&lo(b)))
        });
        if let Some(row) = nearest {
            return Ok(Resolved {
                row,
                tier: Tier::NearestBucket,
            });
        }
        // The walk's own default row where it has one (the page-pruned walk beside a seeded
        // certified default), else the row for every walk.
        let default =
            |s: Option<Selector>| rows().find(move |r| r.source == RowSource::Default && r.selector == s);
        selector
            .and_then(|s| default(Some(s)))
            .or_else(|| default(None).filter(|r| r.tile.serves(selector)))
            .map(|row| Resolved {
                row,
                tier: Tier::Default,
            })
            .ok_or_else(no_kernel)
    }

    /// Write the directory form: create `dir` (and parents), write every artifact, then
    /// `manifest.json` (last, through a temporary file and a rename, so a half-written
    /// directory is never a bundle). Every file is on disk before the manifest names it, and
    /// the rename is on disk when this returns.
    pub fn write_dir(&self, dir: &Path) -> Result<(), BundleError> {
        let io = |path: PathBuf| move |source| BundleError::Io { path, source };
        std::fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
        for (file, ptx) in &self.ptx {
            let p = dir.join(file);
            write_synced(&p, ptx.as_bytes())?;
        }
        write_atomic(&dir.join(MANIFEST_FILE), &self.manifest_file_bytes())
    }

    /// Write the single-file (`.entkvb`) form to `path` (through a temporary file and a
    /// rename).
    pub fn write_file(&self, path: &Path) -> Result<(), BundleError> {
        write_atomic(path, &self.to_single_file_bytes())
    }

    /// The single-file (`.entkvb`) form.
    pub fn to_single_file_bytes(&self) -> Vec<u8> {
        container::encode(&self.manifest_file_bytes(), &self.manifest.artifacts, &self.ptx)
    }

    /// The bytes of `manifest.json`: the manifest and its digest, pretty-printed.
    fn manifest_file_bytes(&self) -> Vec<u8> {
        // A struct, not `json!`, so the fields keep their order in the file.
        #[derive(Serialize)]
        struct ManifestFile<'a> {
            manifest: &'a Manifest,
            manifest_sha256: String,
        }
        let file = ManifestFile {
            manifest: &self.manifest,
            manifest_sha256: manifest_digest(&self.manifest),
        };
        let mut out = serde_json::to_vec_pretty(&file).expect("a manifest always serializes");
        out.push(b'\n');
        out
    }
}

/// SHA-256 (lowercase hex) of the compact serialization of `manifest`.
fn manifest_digest(manifest: &Manifest) -> String {
    sha256_hex(&serde_json::to_vec(manifest).expect("a manifest always serializes"))
}

/// Lowercase hex SHA-256 of `bytes` (the digest artifacts are recorded with).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    let digest = sha2::Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        write!(s, "{b:02x}").expect("writing to a String");
    }
    s
}

/// Write `bytes` to `path` and flush them to disk before returning.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    use std::io::Write;
    let io = |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Replace `path` with `bytes` all at once: a synced temporary file renamed over it, then the
/// directory synced, so a crash leaves the old file or the new one, never a torn or empty one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    let name = path
        .file_name()
        .ok_or_else(|| BundleError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
        })?
        .to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    if let Err(e) = write_synced(&tmp, bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        BundleError::Io {
            path: path.to_path_buf(),
            source,
        }
    })?;
    sync_parent_dir(path)
}

/// Flush the directory entry of `path` (the rename) to disk. Unix only: elsewhere a directory
/// cannot be opened for syncing, and the rename's durability is the filesystem's.
fn sync_parent_dir(path: &Path) -> Result<(), BundleError> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| BundleError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Whether `file` is a valid artifact name: `[A-Za-z0-9_.-]+` ending in `.ptx`, not starting
/// with a dot.
fn valid_artifact_name(file: &str) -> bool {
    file.len() > ".ptx".len()
        && file.ends_with(".ptx")
        && !file.starts_with('.')
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// RFC 3339 UTC (`2026-11-29T14:03:00Z`) of `unix_s` seconds since the epoch.
fn rfc3339_utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs % 3_600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests;
