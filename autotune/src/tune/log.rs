//! Evaluation records, the append-only record log (`--log`, `--resume`) and the per-device
//! cache (`--cache-dir`).
//!
//! A record is one line of JSON, written and fsync'd the moment its measurement ends, so a run
//! killed at any point loses at most the measurement in flight. A line cut short by the kill is
//! ignored with a warning (and cut off the file before anything is appended). Records are keyed
//! by everything that can change a result: device (GPU, sm, driver, CUDA), entkv and LLVM
//! versions, spec, family, tile, workload, and the measurement (stage, repetitions, and for
//! interleaved timings the group timed together); a later record with the same key supersedes
//! an earlier one. The cache holds the same records in one file per device, so a second
//! identical run reuses every measurement without touching the GPU.

use super::{DeviceKey, EvalError, Prepared, Workload};
use anyhow::{Context, Result};
use entkv_abi::{KernelFamily, TileConfig};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a measurement was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// A candidate's evaluation: prepare, verify, then timed alone.
    Eval,
    /// A successive-halving round (1, 2, …): survivors timed interleaved.
    Round(u32),
    /// The leaders (and the default) re-timed interleaved before choosing.
    Final,
}

/// How an evaluation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Invalid,
    CompileError,
    Spills,
    LaunchError,
    WrongResult,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::Invalid,
        Status::CompileError,
        Status::Spills,
        Status::LaunchError,
        Status::WrongResult,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Invalid => "invalid",
            Status::CompileError => "compile_error",
            Status::Spills => "spills",
            Status::LaunchError => "launch_error",
            Status::WrongResult => "wrong_result",
        }
    }

    /// Whether the outcome is a property of the code and the GPU, and so may be kept in the
    /// device cache for later runs: a timing, an analytic rejection, spills. Failures are
    /// not: a launch error or a wrong result can come from a context an earlier candidate
    /// broke, a module load from another process's memory; a later run measures them again
    /// (a resumed run still reuses its own log's).
    pub fn lasts(self) -> bool {
        matches!(self, Status::Ok | Status::Invalid | Status::Spills)
    }

    /// The status and message of a backend error.
    pub fn of(e: &EvalError) -> (Status, String) {
        match e {
            EvalError::Invalid(s) => (Status::Invalid, s.clone()),
            EvalError::CompileError(s) => (Status::CompileError, s.clone()),
            EvalError::Spills(s) => (Status::Spills, s.clone()),
            EvalError::LaunchError(s) => (Status::LaunchError, s.clone()),
            EvalError::WrongResult(s) => (Status::WrongResult, s.clone()),
        }
    }
}

/// The identity of a measurement: equal keys mean the same measurement could be reused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordKey {
    pub device: DeviceKey,
    pub entkv_version: String,
    /// [`super::search::Versions::kernel_code`]: records of other kernel code never match
    /// (older records, which lack it, read as empty).
    #[serde(default)]
    pub kernel_code: String,
    pub llvm_version: String,
    /// `PagedSpec::sketch_tag`.
    pub spec: String,
    pub family: KernelFamily,
    /// `TileConfig::tag`.
    pub tile_tag: String,
    pub workload: Workload,
    pub stage: Stage,
    /// Timing repetitions asked for.
    pub reps: u32,
    /// For interleaved timings: a digest of the tags timed together ([`group_digest`]); the
    /// measurement is reused only when the whole group is recorded.
    pub group: Option<String>,
}

/// One line of the log and the cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub key: RecordKey,
    pub tile: TileConfig,
    pub status: Status,
    /// Why the candidate failed (or a note on a success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub median_us: Option<f64>,
    pub min_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub registers: Option<u32>,
    pub local_bytes: Option<u64>,
    pub codegen_ms: Option<f64>,
    pub load_ms: Option<f64>,
    /// When the measurement ended: seconds since the epoch and RFC 3339 UTC.
    pub unix_s: u64,
    pub utc: String,
    /// In a run's log: measured by an earlier run and served from the device cache, listed so
    /// that the log holds every record the run's choices rest on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_cache: bool,
}

impl Record {
    /// A record for `key` with nothing measured yet.
    pub fn new(key: RecordKey, tile: TileConfig, status: Status) -> Record {
        Record {
            key,
            tile,
            status,
            detail: None,
            median_us: None,
            min_us: None,
            p90_us: None,
            registers: None,
            local_bytes: None,
            codegen_ms: None,
            load_ms: None,
            unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            utc: crate::record::utc_now(),
            from_cache: false,
        }
    }

    pub fn with_prepared(mut self, p: &Prepared) -> Record {
        self.registers = Some(p.registers);
        self.local_bytes = Some(p.local_bytes);
        self.codegen_ms = Some(p.codegen_ms);
        self.load_ms = Some(p.load_ms);
        self
    }

    /// Median, min and p90 of `times_us`.
    pub fn with_times(mut self, times_us: &[f64]) -> Record {
        let (median, min, p90) = crate::record::summarize(times_us);
        self.median_us = Some(median);
        self.min_us = Some(min);
        self.p90_us = Some(p90);
        self
    }

    pub fn with_error(mut self, e: &EvalError) -> Record {
        let (status, detail) = Status::of(e);
        self.status = status;
        self.detail = Some(detail);
        self
    }
}

/// Digest of a set of tile tags timed together (order-independent): FNV-1a 64 of the sorted
/// tags, in hex.
pub fn group_digest(tags: &[String]) -> String {
    let mut sorted: Vec<&str> = tags.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for t in sorted {
        for b in t.bytes().chain(std::iter::once(0)) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// Where a known record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The record log of an earlier, interrupted run (`--resume`).
    Log,
    /// The device cache.
    Cache,
    /// Measured by this run.
    Measured,
}

/// The records of one JSONL file, with warnings for lines that could not be read. A last line
/// without its newline was cut short by a kill and is dropped; `valid_len` is the length of the
/// file up to the last complete line.
pub struct JsonlContents {
    pub records: Vec<Record>,
    pub warnings: Vec<String>,
    pub valid_len: u64,
}

/// Read a JSONL record file (missing file: no records).
pub fn read_jsonl(path: &Path) -> Result<JsonlContents> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("reading record file {}", path.display())),
    };
    Ok(parse_jsonl(&bytes, path))
}

fn parse_jsonl(bytes: &[u8], path: &Path) -> JsonlContents {
    let mut out = JsonlContents {
        records: Vec::new(),
        warnings: Vec::new(),
        valid_len: 0,
    };
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < bytes.len() {
        line_no += 1;
        let Some(nl) = bytes[start..].iter().position(|&b| b == b'\n') else {
            out.warnings.push(format!(
                "{}: ignoring a truncated last line ({} bytes; a run was killed while writing it)",
                path.display(),
                bytes.len() - start
            ));
            break;
        };
        let line = &bytes[start..start + nl];
        start += nl + 1;
        out.valid_len = start as u64;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(r) => out.records.push(r),
            Err(e) => out.warnings.push(format!(
                "{}:{line_no}: ignoring an unreadable record ({e})",
                path.display()
            )),
        }
    }
    out
}

/// Take `file`'s exclusive advisory lock (flock(2)), held until it is closed, or say which run's
/// file it is when another process holds it.
fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this `File` owns and keeps open; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        anyhow::bail!(
            "{} is in use by another autotune run (one run a record file: wait for it, or give \
             this run another --cache-dir or --log)",
            path.display()
        );
    }
    Err(e).with_context(|| format!("locking record file {}", path.display()))
}

/// An append-only JSONL file: each batch is one write, flushed and fsync'd.
struct Appender {
    path: PathBuf,
    file: File,
}

impl Appender {
    /// Open `path` for appending (creating parents) under an exclusive lock held while this
    /// run lasts, so that a second run cannot cut off or interleave its records; then read
    /// what it holds (with `fresh`, nothing: the file is emptied). A truncated tail is cut off
    /// first, so the next record does not continue a half-written line.
    fn open(path: &Path, fresh: bool) -> Result<(Appender, JsonlContents)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening record file {}", path.display()))?;
        lock_exclusive(&file, path)?;
        let contents = if fresh {
            parse_jsonl(&[], path)
        } else {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)
                .with_context(|| format!("reading record file {}", path.display()))?;
            parse_jsonl(&bytes, path)
        };
        if file.metadata().map(|m| m.len()).unwrap_or(0) > contents.valid_len {
            file.set_len(contents.valid_len)
                .with_context(|| format!("truncating {} to its last complete record", path.display()))?;
        }
        Ok((
            Appender {
                path: path.to_path_buf(),
                file,
            },
            contents,
        ))
    }

    fn append(&mut self, records: &[Record]) -> Result<()> {
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r).context("serializing a record")?;
            buf.push(b'\n');
        }
        self.file
            .write_all(&buf)
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("appending to {}", self.path.display()))
    }
}

/// The cache file of `device` under `cache_dir`: `tune/<gpu>_sm<sm>_<driver>_cuda<cuda>.jsonl`
/// (characters other than `[A-Za-z0-9.-]` become `-`).
pub fn cache_file(cache_dir: &Path, device: &DeviceKey) -> PathBuf {
    let raw = format!(
        "{}_sm{}_{}_cuda{}",
        device.gpu, device.sm, device.driver, device.cuda
    );
    let slug: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    cache_dir.join("tune").join(format!("{slug}.jsonl"))
}

/// The default cache directory: `$XDG_CACHE_HOME/entkv`, else `~/.cache/entkv`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("entkv"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache").join("entkv"))
}

/// Where records are written and found.
pub struct StoreConfig {
    /// The run's record log.
    pub log: Option<PathBuf>,
    /// Continue from the log's records instead of starting a new log.
    pub resume: bool,
    /// The cache directory (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
}

/// The records a search can reuse, and the files it appends to.
pub struct RecordStore {
    log: Option<Appender>,
    cache: Option<Appender>,
    known: HashMap<RecordKey, (Record, Origin)>,
    /// Cached records already copied into this run's log.
    logged_from_cache: HashSet<RecordKey>,
    /// Files read at open time, and what was found in them.
    pub opened: Vec<String>,
    /// Lines that could not be read.
    pub warnings: Vec<String>,
}

impl RecordStore {
    /// Open the log and `device`'s cache file. With `resume`, the log's records are known;
    /// without, the log starts empty. The cache's records are known in both cases.
    pub fn open(cfg: &StoreConfig, device: &DeviceKey) -> Result<RecordStore> {
        let mut store = RecordStore::in_memory();
        if let Some(dir) = &cfg.cache_dir {
            let path = cache_file(dir, device);
            let (appender, c) = Appender::open(&path, false)?;
            store
                .opened
                .push(format!("cache {}: {} record(s)", path.display(), c.records.len()));
            // Failures recorded by older builds are measured again (`Status::lasts`).
            let lasting = c.records.into_iter().filter(|r| r.status.lasts()).collect();
            store.absorb(lasting, Origin::Cache);
            store.warnings.extend(c.warnings);
            store.cache = Some(appender);
        }
        if let Some(path) = &cfg.log {
            if !cfg.resume && std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
                store.opened.push(format!(
                    "log {}: started anew (--resume continues an earlier run's log)",
                    path.display()
                ));
            }
            let (appender, c) = Appender::open(path, !cfg.resume)?;
            if cfg.resume {
                store.opened.push(format!(
                    "log {}: {} record(s) to resume from",
                    path.display(),
                    c.records.len()
                ));
                // Log records take precedence over cached ones with the same key.
                store.absorb(c.records, Origin::Log);
                store.warnings.extend(c.warnings);
            }
            store.log = Some(appender);
        }
        Ok(store)
    }

    /// A store that writes nothing (tests, dry runs).
    pub fn in_memory() -> RecordStore {
        RecordStore {
            log: None,
            cache: None,
            known: HashMap::new(),
            logged_from_cache: HashSet::new(),
            opened: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn absorb(&mut self, records: Vec<Record>, origin: Origin) {
        for r in records {
            self.known.insert(r.key.clone(), (r, origin));
        }
    }

    /// The latest record with this key, and where it came from.
    pub fn lookup(&self, key: &RecordKey) -> Option<(&Record, Origin)> {
        self.known.get(key).map(|(r, o)| (r, *o))
    }

    /// The latest record with this key, and where it came from, for the run to use: one from
    /// the device cache is also copied into the run's log (once, marked `from_cache`), so the
    /// log alone shows what every choice of the run rests on. Records of the log itself
    /// (`--resume`) and of this run are there already.
    pub fn reuse(&mut self, key: &RecordKey) -> Result<Option<(Record, Origin)>> {
        let Some((r, origin)) = self.known.get(key) else {
            return Ok(None);
        };
        let (r, origin) = (r.clone(), *origin);
        if origin == Origin::Cache && !self.logged_from_cache.contains(key) {
            if let Some(log) = &mut self.log {
                log.append(&[Record {
                    from_cache: true,
                    ..r.clone()
                }])?;
            }
            self.logged_from_cache.insert(key.clone());
        }
        Ok(Some((r, origin)))
    }

    /// Append `records` (one measurement: a candidate, or a group timed together) to the log
    /// and the cache, fsync'd, and remember them.
    pub fn append(&mut self, records: &[Record]) -> Result<()> {
        if let Some(log) = &mut self.log {
            log.append(records)?;
        }
        if let Some(cache) = &mut self.cache {
            let lasting: Vec<Record> = records.iter().filter(|r| r.status.lasts()).cloned().collect();
            if !lasting.is_empty() {
                cache.append(&lasting)?;
            }
        }
        self.absorb(records.to_vec(), Origin::Measured);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::DataKind;
    use entkv_abi::MetaTile;

    fn key(tag: &str) -> RecordKey {
        RecordKey {
            device: DeviceKey {
                gpu: "NVIDIA H200".into(),
                sm: 90,
                driver: "570.1".into(),
                cuda: "12.8".into(),
            },
            entkv_version: "0.1.0".into(),
            kernel_code: "0123456789abcdef".into(),
            llvm_version: "19.1.7".into(),
            spec: "s".into(),
            family: KernelFamily::PageMeta,
            tile_tag: tag.into(),
            workload: Workload {
                batch: 8,
                q_heads: 24,
                kv_heads: 24,
                context: 32768,
                data: DataKind::Normal,
                selector: None,
            },
            stage: Stage::Eval,
            reps: 10,
            group: None,
        }
    }

    fn rec(tag: &str) -> Record {
        Record::new(key(tag), TileConfig::Meta(MetaTile { threads: 32 }), Status::Ok)
            .with_times(&[3.0, 1.0, 2.0])
    }

    #[test]
    fn record_round_trips_as_one_line() {
        let r = rec("t32");
        let line = serde_json::to_string(&r).unwrap();
        assert!(!line.contains('\n'));
        assert!(
            line.contains("\"status\":\"ok\"") && line.contains("\"family\":\"page_meta\""),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), r);
        assert_eq!(r.median_us, Some(2.0));
    }

    #[test]
    fn truncated_tail_is_ignored_and_cut_before_appending() {
        let dir = std::env::temp_dir().join(format!("entkv-tune-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("log.jsonl");
        let cfg = StoreConfig {
            log: Some(path.clone()),
            resume: true,
            cache_dir: None,
        };
        let dev = key("x").device;
        let mut s = RecordStore::open(&cfg, &dev).unwrap();
        s.append(&[rec("a"), rec("b")]).unwrap();
        drop(s);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"device\":{\"gpu\":\"NVI").unwrap();
        drop(f);
        let mut s = RecordStore::open(&cfg, &dev).unwrap();
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("truncated"));
        assert!(s.lookup(&key("a")).is_some() && s.lookup(&key("b")).is_some());
        s.append(&[rec("c")]).unwrap();
        let c = read_jsonl(&path).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.records.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_of_other_kernel_code_are_not_reused() {
        let dir = std::env::temp_dir().join(format!("entkv-tune-code-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = StoreConfig {
            log: None,
            resume: false,
            cache_dir: Some(dir.clone()),
        };
        let dev = key("x").device;
        let mut s = RecordStore::open(&cfg, &dev).unwrap();
        s.append(&[rec("a")]).unwrap();
        // A cache line written before records carried the kernel code reads as empty code.
        let mut old = serde_json::to_value(rec("b")).unwrap();
        old.as_object_mut().unwrap().remove("kernel_code");
        let mut f = OpenOptions::new()
            .append(true)
            .open(cache_file(&dir, &dev))
            .unwrap();
        writeln!(f, "{old}").unwrap();
        drop((s, f));
        let s = RecordStore::open(&cfg, &dev).unwrap();
        assert!(s.lookup(&key("a")).is_some());
        assert!(s.lookup(&key("b")).is_none());
        let mut other = key("a");
        other.kernel_code = "fedcba9876543210".into();
        assert!(s.lookup(&other).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn group_digest_ignores_order() {
        let a = group_digest(&["x".into(), "y".into()]);
        assert_eq!(a, group_digest(&["y".into(), "x".into()]));
        assert_ne!(a, group_digest(&["x".into(), "z".into()]));
        assert_ne!(
            group_digest(&["ab".into(), "c".into()]),
            group_digest(&["a".into(), "bc".into()])
        );
    }

    #[test]
    fn cache_file_names_the_device() {
        let mut d = key("x").device;
        let a = cache_file(Path::new("/c"), &d);
        assert_eq!(a, Path::new("/c/tune/NVIDIA-H200_sm90_570.1_cuda12.8.jsonl"));
        d.driver = "575.2".into();
        assert_ne!(a, cache_file(Path::new("/c"), &d));
    }
}
