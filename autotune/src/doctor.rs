//! `entkv doctor`: what this machine has for entkv — version, LLVM, `ptxas`, the GPU (or why
//! there is none), and whether the autotune cache and the default bundle output directory can
//! be written — one verdict per item, so a failing GPU run or tuning session can be traced to
//! its cause first. Creates nothing permanent: writability is probed with a temporary file,
//! removed at once.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

/// How an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Present and usable.
    Ok,
    /// Usable with a limitation, or optional and absent.
    Warn,
    /// Absent or unusable.
    Missing,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Missing => "missing",
        }
    }
}

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    /// The file or directory the item is about, where there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// What the driver reports about GPU 0.
#[derive(Clone, Debug, Serialize)]
pub struct GpuDetails {
    pub devices: usize,
    pub name: String,
    /// `9.0`.
    pub compute_capability: String,
    pub sm_count: u32,
    pub memory_bytes: u64,
    /// Driver API version and kernel-module version when readable.
    pub driver: String,
    /// CUDA driver API version, `13.0`.
    pub cuda_driver: String,
}

/// Everything `entkv doctor` found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub items: Vec<Item>,
    /// GPU 0, when one is usable.
    pub gpu: Option<GpuDetails>,
}

/// Name of the GPU item, the one item allowed to be missing.
pub const GPU: &str = "gpu";

impl Report {
    /// Items missing other than the GPU (entkv works without a GPU: bundles, `verify
    /// --interp`).
    pub fn missing_besides_gpu(&self) -> Vec<&Item> {
        self.items
            .iter()
            .filter(|i| i.verdict == Verdict::Missing && i.name != GPU)
            .collect()
    }

    /// One line per item, then a verdict line.
    pub fn text(&self) -> String {
        let width = self.items.iter().map(|i| i.name.len()).max().unwrap_or(0);
        let mut s = String::new();
        for i in &self.items {
            s.push_str(&format!(
                "{:<8} {:<width$}  {}\n",
                i.verdict.word(),
                i.name,
                i.detail
            ));
        }
        let gpu_ok = self
            .items
            .iter()
            .any(|i| i.name == GPU && i.verdict == Verdict::Ok);
        let missing = self.missing_besides_gpu();
        s.push_str(&if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|i| i.name).collect();
            format!("verdict: not usable: missing {}\n", names.join(", "))
        } else if gpu_ok {
            "verdict: ready (GPU verbs included)\n".to_string()
        } else {
            "verdict: usable without a GPU (bundle create/verify --interp, emit); the GPU verbs \
             (gpu-check, bench, verify, autotune) need one\n"
                .to_string()
        });
        s
    }
}

/// Examine the machine; `out_dir` is the default bundle output directory (`out/`).
pub fn diagnose(out_dir: &Path) -> Report {
    let mut items = vec![
        Item {
            name: "entkv",
            verdict: Verdict::Ok,
            detail: format!("version {}", env!("CARGO_PKG_VERSION")),
            path: None,
        },
        llvm(),
        ptxas(),
    ];
    let (gpu_item, gpu) = gpu();
    items.push(gpu_item);
    items.push(match crate::tune::log::default_cache_dir() {
        Some(dir) => dir_item("autotune cache", &dir),
        None => Item {
            name: "autotune cache",
            verdict: Verdict::Missing,
            detail: "neither XDG_CACHE_HOME nor HOME is set, so there is no cache directory \
                     ($XDG_CACHE_HOME/entkv or ~/.cache/entkv); pass autotune a cache directory"
                .into(),
            path: None,
        },
    });
    let out = std::env::current_dir().map_or_else(|_| out_dir.to_path_buf(), |cwd| cwd.join(out_dir));
    items.push(dir_item("bundle output", &out));
    Report { items, gpu }
}

fn llvm() -> Item {
    let v = entkv_codegen::llvm_version();
    Item {
        name: "llvm",
        verdict: if v.is_empty() {
            Verdict::Missing
        } else {
            Verdict::Ok
        },
        detail: format!("{v} (linked statically, NVPTX backend for sm_90 PTX)"),
        path: None,
    }
}

fn ptxas() -> Item {
    let why = format!(
        "only the test suite's assembly and spill checks need it; set ENTKV_PTXAS or {}",
        entkv_codegen::ptxas::PTXAS_PIP
    );
    let Some(path) = entkv_codegen::ptxas::find_ptxas() else {
        return Item {
            name: "ptxas",
            verdict: Verdict::Warn,
            detail: format!("not found ({why})"),
            path: None,
        };
    };
    let (verdict, detail) = match std::process::Command::new(&path).arg("--version").output() {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            // `Cuda compilation tools, release 12.9, V12.9.86`.
            let version = text
                .lines()
                .find(|l| l.contains("release"))
                .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
                .unwrap_or("version unknown")
                .trim()
                .to_string();
            (Verdict::Ok, format!("{} ({version})", path.display()))
        }
        Ok(o) => (
            Verdict::Warn,
            format!("{} exits with {} on --version ({why})", path.display(), o.status),
        ),
        Err(e) => (
            Verdict::Warn,
            format!("{} cannot be run: {e} ({why})", path.display()),
        ),
    };
    Item {
        name: "ptxas",
        verdict,
        detail,
        path: Some(path),
    }
}

fn gpu() -> (Item, Option<GpuDetails>) {
    let missing = |detail: String| {
        (
            Item {
                name: GPU,
                verdict: Verdict::Missing,
                detail,
                path: None,
            },
            None,
        )
    };
    if let Some(reason) = entkv_runtime::gpu_unavailable_reason() {
        return missing(format!(
            "none: {reason} (the GPU verbs need one; `entkv verify --interp` runs bundles without)"
        ));
    }
    let gpu = match entkv_runtime::Gpu::open(0) {
        Ok(g) => g,
        Err(e) => return missing(format!("GPU 0 cannot be opened: {e}")),
    };
    let i = gpu.info();
    let d = GpuDetails {
        devices: entkv_runtime::device_count().unwrap_or(1),
        name: i.name.clone(),
        compute_capability: format!("{}.{}", i.compute_capability.0, i.compute_capability.1),
        sm_count: i.sm_count,
        memory_bytes: i.total_mem_bytes,
        driver: i.driver_version.clone(),
        cuda_driver: format!("{}.{}", i.cuda_driver_version.0, i.cuda_driver_version.1),
    };
    let sm = i.compute_capability.0 * 10 + i.compute_capability.1;
    let target = entkv_codegen::Target::default().sm;
    let detail = format!(
        "{} (sm_{sm}, {} SMs, {:.1} GiB), driver {}, CUDA {}; {} device(s)",
        d.name,
        d.sm_count,
        d.memory_bytes as f64 / (1u64 << 30) as f64,
        d.driver,
        d.cuda_driver,
        d.devices
    );
    let item = if sm >= target {
        Item {
            name: GPU,
            verdict: Verdict::Ok,
            detail,
            path: None,
        }
    } else {
        Item {
            name: GPU,
            verdict: Verdict::Warn,
            detail: format!("{detail}: older than the bundles' target sm_{target}, which it cannot run"),
            path: None,
        }
    };
    (item, Some(d))
}

/// Whether a file can be created in `dir` (created and removed at once).
fn probe(dir: &Path) -> std::io::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let p = dir.join(format!(".entkv-doctor-{}-{nanos}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)?;
    std::fs::remove_file(&p)
}

/// A directory entkv writes into: ok when it exists and is writable, or does not exist yet and
/// its nearest existing ancestor is writable (it is created on first use); warn otherwise.
fn dir_item(name: &'static str, dir: &Path) -> Item {
    let (verdict, detail) = if dir.is_dir() {
        match probe(dir) {
            Ok(()) => (Verdict::Ok, format!("{}: exists, writable", dir.display())),
            Err(e) => (
                Verdict::Warn,
                format!("{}: exists, not writable: {e}", dir.display()),
            ),
        }
    } else if dir.exists() {
        (
            Verdict::Warn,
            format!("{}: exists but is not a directory", dir.display()),
        )
    } else {
        match dir.ancestors().skip(1).find(|a| a.is_dir()) {
            Some(a) => match probe(a) {
                Ok(()) => (
                    Verdict::Ok,
                    format!(
                        "{}: does not exist yet; created on first use ({} is writable)",
                        dir.display(),
                        a.display()
                    ),
                ),
                Err(e) => (
                    Verdict::Warn,
                    format!(
                        "{}: does not exist, and {} is not writable: {e}",
                        dir.display(),
                        a.display()
                    ),
                ),
            },
            None => (
                Verdict::Warn,
                format!("{}: no existing parent directory", dir.display()),
            ),
        }
    };
    Item {
        name,
        verdict,
        detail,
        path: Some(dir.to_path_buf()),
    }
}

/// Run `entkv doctor`: print the report (or JSON); fail only when something besides the GPU is
/// missing.
pub fn run(json: bool) -> Result<()> {
    let report = diagnose(Path::new("out"));
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    let missing = report.missing_besides_gpu();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|i| i.name).collect();
        bail!("missing: {}", names.join(", "));
    }
    Ok(())
}
