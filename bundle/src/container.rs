//! The single-file (`.entkvb`) form: magic, container version, manifest.json, artifacts.
//! Every length is checked against the bytes left before anything is sliced or allocated.

use crate::verify::{check_artifact_names, finish_open, parse_manifest};
use crate::{valid_artifact_name, Artifact, Bundle, BundleError};
use std::collections::BTreeMap;
use std::path::Path;

/// First bytes of every `.entkvb` file.
pub(crate) const MAGIC: &[u8; 12] = b"ENTKVBUNDLE\0";
/// The container layout version this crate reads and writes.
pub(crate) const CONTAINER_VERSION: u32 = 1;

pub(crate) fn encode(
    manifest_json: &[u8],
    artifacts: &[Artifact],
    ptx: &BTreeMap<String, String>,
) -> Vec<u8> {
    let size = MAGIC.len()
        + 4
        + 8
        + manifest_json.len()
        + 4
        + artifacts
            .iter()
            .map(|a| 16 + a.file.len() + ptx[&a.file].len())
            .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&CONTAINER_VERSION.to_le_bytes());
    out.extend_from_slice(&(manifest_json.len() as u64).to_le_bytes());
    out.extend_from_slice(manifest_json);
    out.extend_from_slice(&(artifacts.len() as u32).to_le_bytes());
    for a in artifacts {
        let data = ptx[&a.file].as_bytes();
        out.extend_from_slice(&(a.file.len() as u64).to_le_bytes());
        out.extend_from_slice(a.file.as_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    debug_assert_eq!(out.len(), size);
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], BundleError> {
        if n > self.left() as u64 {
            return Err(BundleError::Corrupt(format!(
                "single-file bundle truncated: {what} needs {n} bytes at offset {}, {} are left",
                self.pos,
                self.left()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, BundleError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self, what: &str) -> Result<u64, BundleError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
}

pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<Bundle, BundleError> {
    if !bytes.starts_with(MAGIC) {
        return Err(BundleError::NotABundle {
            path: path.to_path_buf(),
            reason: "not a directory and does not start with the .entkvb magic `ENTKVBUNDLE\\0`".into(),
        });
    }
    let mut r = Reader {
        bytes,
        pos: MAGIC.len(),
    };
    let version = r.u32("the container version")?;
    if version != CONTAINER_VERSION {
        return Err(BundleError::NotABundle {
            path: path.to_path_buf(),
            reason: format!("container version {version} (this reader supports {CONTAINER_VERSION})"),
        });
    }
    let len = r.u64("the manifest length")?;
    let manifest_json = r.take(len, "manifest.json")?;
    let count = r.u32("the artifact count")?;
    // Each artifact takes at least its two 8-byte lengths.
    if count as u64 * 16 > r.left() as u64 {
        return Err(BundleError::Corrupt(format!(
            "single-file bundle truncated: {count} artifacts need at least {} bytes, {} are left",
            count as u64 * 16,
            r.left()
        )));
    }
    let mut files = BTreeMap::new();
    for i in 0..count {
        let n = r.u64("an artifact name length")?;
        let name = r.take(n, "an artifact name")?;
        let name = std::str::from_utf8(name)
            .ok()
            .filter(|n| valid_artifact_name(n))
            .ok_or_else(|| {
                // A corrupt length can make the "name" megabytes of PTX: echo its start only.
                const SHOWN: usize = 80;
                let shown = String::from_utf8_lossy(&name[..name.len().min(SHOWN)]).into_owned();
                let more = if name.len() > SHOWN {
                    format!(" … ({} bytes)", name.len())
                } else {
                    String::new()
                };
                BundleError::Corrupt(format!(
                    "artifact {i} of the single-file bundle has a bad name {shown:?}{more}"
                ))
            })?
            .to_string();
        let n = r.u64("an artifact length")?;
        let data = r.take(n, &format!("artifact `{name}`"))?;
        if files.insert(name.clone(), data.to_vec()).is_some() {
            return Err(BundleError::Corrupt(format!(
                "the single-file bundle holds artifact `{name}` twice"
            )));
        }
    }
    if r.left() != 0 {
        return Err(BundleError::Corrupt(format!(
            "{} trailing bytes after the last artifact of the single-file bundle",
            r.left()
        )));
    }

    let manifest = parse_manifest(path, manifest_json)?;
    check_artifact_names(&manifest)?;
    if let Some(a) = manifest.artifacts.iter().find(|a| !files.contains_key(&a.file)) {
        return Err(BundleError::MissingArtifact { file: a.file.clone() });
    }
    if let Some(extra) = files
        .keys()
        .find(|f| !manifest.artifacts.iter().any(|a| &a.file == *f))
    {
        return Err(BundleError::Corrupt(format!(
            "the single-file bundle holds `{extra}`, which the manifest does not list"
        )));
    }
    finish_open(manifest, files)
}
