//! Run NVIDIA's `ptxas` on generated PTX and read its resource report. No LLVM here: this is
//! the assembler of record on machines without a GPU (the driver JIT is the other one).
//!
//! `ptxas` is looked up, in order, from the `ENTKV_PTXAS` environment variable, `ptxas` on
//! `PATH`, and the PyPI packages of CUDA 13.0 ([`PTXAS_PIP`]) and 12 (`nvidia-cuda-nvcc-cu12`).
//! 13.0 is the H200 driver's JIT (580.x): its register allocation is what the GPU runs, and
//! 12.9's can differ at the register limit (a certified pass that 12.9 assembled without
//! spills spilled 64 B under the driver; results/2026-11-30-stream-gate).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Environment variable naming the `ptxas` binary to use.
pub const PTXAS_ENV: &str = "ENTKV_PTXAS";

/// How to install the `ptxas` that matches the GPU driver's JIT (`scripts/setup.sh` does).
pub const PTXAS_PIP: &str = "pip install nvidia-cuda-nvcc==13.0.88";

#[derive(thiserror::Error, Debug)]
pub enum PtxasError {
    #[error("ptxas not found (set {PTXAS_ENV} or {PTXAS_PIP})")]
    NotFound,
    #[error("could not run {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("ptxas failed (exit status {status}):\n{stderr}")]
    Failed { status: String, stderr: String },
    #[error("could not parse ptxas output ({reason}):\n{output}")]
    Unparsable { reason: String, output: String },
}

/// What `ptxas -v` reports for one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionReport {
    pub name: String,
    /// `true` for kernel entries (`Compiling entry function`).
    pub is_entry: bool,
    pub registers: u32,
    pub spill_store_bytes: u64,
    pub spill_load_bytes: u64,
    pub stack_frame_bytes: u64,
    /// Static shared memory (`smem`).
    pub shared_bytes: u64,
    /// Local memory, when reported separately (`lmem`).
    pub local_bytes: u64,
    /// Named barriers used (`used N barriers`).
    pub barriers: u32,
    /// Constant memory by bank (`N bytes cmem[K]`), as `(bank, bytes)`.
    pub constant_bytes: Vec<(u32, u64)>,
}

impl FunctionReport {
    pub fn spills(&self) -> u64 {
        self.spill_store_bytes + self.spill_load_bytes
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    pub functions: Vec<FunctionReport>,
    /// `ptxas warning` lines.
    pub warnings: Vec<String>,
    /// The full `-v` output (stdout and stderr).
    pub raw: String,
}

impl PtxasReport {
    pub fn function(&self, name: &str) -> Option<&FunctionReport> {
        self.functions.iter().find(|f| f.name == name)
    }
}

fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// Locate `ptxas`: `$ENTKV_PTXAS`, then `PATH`, then the CUDA 13.0 pip package (`nvidia.cu13`),
/// then the CUDA 12 one (`nvidia.cuda_nvcc`).
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(PTXAS_ENV) {
        let p = PathBuf::from(p);
        // An explicit setting wins even when wrong, so the error names the path it was given.
        return Some(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("ptxas");
            if is_executable(&p) {
                return Some(p);
            }
        }
    }
    ["nvidia.cu13", "nvidia.cuda_nvcc"]
        .into_iter()
        .find_map(pip_ptxas)
}

/// `bin/ptxas` of an installed pip package `module`.
fn pip_ptxas(module: &str) -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", &format!("import {module} as m; print(list(m.__path__)[0])")])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let p = Path::new(&dir).join("bin").join("ptxas");
    is_executable(&p).then_some(p)
}

fn temp_base() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "entkv-ptxas-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos
    ))
}

/// Assemble `ptx` for `sm_{sm}` with `ptxas -v` and parse the per-function report.
pub fn assemble(ptx: &str, sm: u32) -> Result<PtxasReport, PtxasError> {
    let exe = find_ptxas().ok_or(PtxasError::NotFound)?;
    assemble_with(&exe, ptx, sm)
}

/// Like [`assemble`], with an explicit `ptxas` binary.
pub fn assemble_with(exe: &Path, ptx: &str, sm: u32) -> Result<PtxasReport, PtxasError> {
    let base = temp_base();
    let src = base.with_extension("ptx");
    let cubin = base.with_extension("cubin");
    let io = |source| PtxasError::Io {
        path: src.clone(),
        source,
    };
    std::fs::write(&src, ptx).map_err(io)?;
    let out = Command::new(exe)
        .arg(format!("-arch=sm_{sm}"))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&cubin)
        .output();
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&cubin);
    let out = out.map_err(|source| PtxasError::Io {
        path: exe.to_path_buf(),
        source,
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(PtxasError::Failed {
            status: out.status.to_string(),
            stderr: format!("{stderr}{stdout}"),
        });
    }
    parse_report(&format!("{stdout}{stderr}"))
}

fn leading_number(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Parse the `-v` output of ptxas (CUDA 11–13 formats).
pub fn parse_report(text: &str) -> Result<PtxasReport, PtxasError> {
    let bad = |reason: String| PtxasError::Unparsable {
        reason,
        output: text.to_string(),
    };
    let mut report = PtxasReport {
        raw: text.to_string(),
        ..Default::default()
    };
    let mut current: Option<usize> = None;
    let find_or_add = |report: &mut PtxasReport, name: &str| -> usize {
        if let Some(i) = report.functions.iter().position(|f| f.name == name) {
            i
        } else {
            report.functions.push(FunctionReport {
                name: name.to_string(),
                ..Default::default()
            });
            report.functions.len() - 1
        }
    };
    let quoted = |line: &str| -> Option<String> {
        let a = line.find('\'')?;
        let b = line[a + 1..].find('\'')?;
        Some(line[a + 1..a + 1 + b].to_string())
    };
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("ptxas warning") {
            report.warnings.push(l.to_string());
            continue;
        }
        let body = match l.strip_prefix("ptxas info") {
            Some(rest) => rest.trim_start().trim_start_matches(':').trim(),
            None => l,
        };
        if let Some(rest) = body.strip_prefix("Compiling entry function") {
            let name = quoted(rest).ok_or_else(|| bad(format!("no function name in `{l}`")))?;
            let i = find_or_add(&mut report, &name);
            report.functions[i].is_entry = true;
            current = Some(i);
        } else if let Some(rest) = body.strip_prefix("Function properties for") {
            let name = rest.trim().trim_matches('\'').to_string();
            current = Some(find_or_add(&mut report, &name));
        } else if body.contains("bytes stack frame") {
            let i = current.ok_or_else(|| bad(format!("`{l}` outside a function")))?;
            let f = &mut report.functions[i];
            for part in body.split(',') {
                let part = part.trim();
                let n = leading_number(part).ok_or_else(|| bad(format!("number in `{part}`")))?;
                if part.ends_with("stack frame") {
                    f.stack_frame_bytes = n;
                } else if part.ends_with("spill stores") {
                    f.spill_store_bytes = n;
                } else if part.ends_with("spill loads") {
                    f.spill_load_bytes = n;
                }
            }
        } else if let Some(rest) = body.strip_prefix("Used") {
            let i = current.ok_or_else(|| bad(format!("`{l}` outside a function")))?;
            let f = &mut report.functions[i];
            for part in rest.split(',') {
                let part = part.trim();
                let words: Vec<&str> = part.split_whitespace().collect();
                let num = |w: &str| -> Result<u64, PtxasError> {
                    w.parse().map_err(|_| bad(format!("number in `{part}`")))
                };
                match words.as_slice() {
                    [n, "registers"] => f.registers = num(n)? as u32,
                    ["used", n, "barriers"] | ["used", n, "barrier"] => f.barriers = num(n)? as u32,
                    [n, "bytes", "smem"] => f.shared_bytes = num(n)?,
                    [n, "bytes", "lmem"] => f.local_bytes = num(n)?,
                    [n, "bytes", bank] if bank.starts_with("cmem[") => {
                        let k = bank
                            .trim_start_matches("cmem[")
                            .trim_end_matches(']')
                            .parse()
                            .map_err(|_| bad(format!("cmem bank in `{part}`")))?;
                        f.constant_bytes.push((k, num(n)?));
                    }
                    // Unknown entries (new ptxas versions add some) are kept in `raw` only.
                    _ => {}
                }
            }
        }
    }
    if report.functions.is_empty() && text.contains("Compiling") {
        return Err(bad("no function reports found".into()));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pin is written twice, in two languages: here and in the setup script that CI and
    /// users run. They must name the same package.
    #[test]
    fn setup_script_installs_the_pinned_ptxas() {
        let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/setup.sh"))
            .expect("scripts/setup.sh");
        let pkg = PTXAS_PIP.trim_start_matches("pip install ");
        assert!(
            script.contains(&format!("PTXAS_PKG=\"{pkg}\"")),
            "scripts/setup.sh does not install {pkg} (PTXAS_PIP)"
        );
    }

    #[test]
    fn parses_cuda_12_9_output() {
        let out = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k2' for 'sm_90'
ptxas info    : Function properties for k2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers, used 0 barriers
ptxas info    : Compile time = 16.176 ms
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 8 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compile time = 4.031 ms
";
        let r = parse_report(out).unwrap();
        assert_eq!(r.functions.len(), 2);
        let k2 = r.function("k2").unwrap();
        assert!(k2.is_entry);
        assert_eq!(k2.registers, 4);
        assert_eq!(k2.spills(), 0);
        let k = r.function("k").unwrap();
        assert_eq!((k.registers, k.barriers, k.shared_bytes), (8, 1, 1024));
        assert_eq!(
            (k.stack_frame_bytes, k.spill_store_bytes, k.spill_load_bytes),
            (16, 8, 4)
        );
        assert_eq!(k.constant_bytes, vec![(0, 368)]);
    }

    #[test]
    fn rejects_garbage_in_known_lines() {
        let out = "ptxas info    : Function properties for k\n    x bytes stack frame\n";
        assert!(matches!(parse_report(out), Err(PtxasError::Unparsable { .. })));
    }
}
