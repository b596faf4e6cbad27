//! The driver's PTX JIT spread over worker processes.
//!
//! The driver JIT-compiles one module at a time per process: 60 modules took 11.6 s on one
//! thread and 12.7 s on 16 (H200, driver 580.159.04, results/2026-11-30-jit-pool). It keeps
//! what it compiles in its on-disk compute cache (`~/.nv/ComputeCache`, `CUDA_CACHE_PATH`),
//! keyed by the PTX text and the JIT options. So worker processes that load the same texts
//! fill the cache in parallel (4.8 s for those 60), and the caller's own
//! [`entkv_runtime::Gpu::load_module`] then takes milliseconds and yields the driver's JIT
//! output exactly: the code the runtime runs. (`cuLinkComplete` returns cubins directly, but
//! it compiles relocatable code, with other register counts, so it is not used.)
//!
//! Workers are the calling binary itself, started with [`WORKER_ENV`] set. A binary opts in by
//! calling [`serve_if_worker`] first thing in `main`; only the token that returns can build a
//! [`JitPool`], so no binary is ever re-executed without knowing it. Everything here is an
//! optimization: when a worker fails, or the cache is off, the caller's loads JIT the modules
//! themselves and nothing changes but the time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Set (to the GPU ordinal) in a worker's environment; its arguments are PTX files to load.
pub const WORKER_ENV: &str = "ENTKV_JIT_WORKER";

/// Most workers a pool starts: each holds a CUDA context (a few hundred MB of device memory).
pub const MAX_WORKERS: usize = 16;

/// Proof that the running binary serves worker mode ([`serve_if_worker`] returned).
#[derive(Clone, Copy, Debug)]
pub struct ServesWorkers(());

/// In a worker (the environment has [`WORKER_ENV`]): load every PTX file named on the command
/// line on that GPU, then exit the process (status 0 when all loaded, 1 otherwise; the parent
/// only uses the status for its report). Otherwise return the token [`JitPool::new`] needs.
pub fn serve_if_worker() -> ServesWorkers {
    let Ok(ordinal) = std::env::var(WORKER_ENV) else {
        return ServesWorkers(());
    };
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    std::process::exit(match run_worker(&ordinal, &files) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("entkv JIT worker: {e}");
            1
        }
    })
}

fn run_worker(ordinal: &str, files: &[PathBuf]) -> Result<(), String> {
    let ordinal: usize = ordinal
        .parse()
        .map_err(|_| format!("{WORKER_ENV}={ordinal:?} is not a GPU ordinal"))?;
    let gpu = entkv_runtime::Gpu::open(ordinal).map_err(|e| format!("opening GPU {ordinal}: {e}"))?;
    let mut failed = Vec::new();
    for f in files {
        let loaded = std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|ptx| gpu.load_module(&ptx).map(drop).map_err(|e| e.to_string()));
        if let Err(e) = loaded {
            failed.push(format!("{}: {e}", f.display()));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// Why a pool would not help here, or `None` when it can: the driver's compute cache is what
/// carries the workers' results back, so with `CUDA_CACHE_DISABLE=1` they would be wasted.
pub fn cache_unavailable_reason() -> Option<String> {
    match std::env::var("CUDA_CACHE_DISABLE") {
        Ok(v) if v.trim() == "1" => Some("CUDA_CACHE_DISABLE=1 turns off the driver's JIT cache".into()),
        _ => None,
    }
}

/// What one [`JitPool::warm`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WarmReport {
    pub modules: usize,
    pub workers: usize,
    /// Workers that exited with an error (their modules are JIT-compiled by the caller).
    pub failed: Vec<String>,
    pub wall_s: f64,
}

/// Starts workers (this executable) that JIT modules into the driver's cache.
#[derive(Debug)]
pub struct JitPool {
    exe: PathBuf,
    ordinal: usize,
    workers: usize,
}

impl JitPool {
    /// A pool of up to `workers` processes (capped at [`MAX_WORKERS`]) on GPU `ordinal`; `None`
    /// for zero workers, when this executable's path is unknown, or when the cache is off.
    pub fn new(_serves: ServesWorkers, ordinal: usize, workers: usize) -> Option<JitPool> {
        if workers == 0 || cache_unavailable_reason().is_some() {
            return None;
        }
        Some(JitPool {
            exe: std::env::current_exe().ok()?,
            ordinal,
            workers: workers.min(MAX_WORKERS),
        })
    }

    /// Workers the pool starts at most.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// JIT-compile `modules` (PTX texts) in parallel worker processes, into the driver's cache.
    /// Returns when every worker has exited; a worker that could not start or failed is
    /// reported, never an error: the caller's loads compile what is missing.
    pub fn warm(&self, modules: &[&str]) -> WarmReport {
        let t = Instant::now();
        let mut report = WarmReport {
            modules: modules.len(),
            ..WarmReport::default()
        };
        if modules.is_empty() {
            return report;
        }
        let dir = match ScratchDir::new() {
            Ok(d) => d,
            Err(e) => {
                report.failed.push(format!("scratch directory: {e}"));
                return report;
            }
        };
        let mut files = Vec::with_capacity(modules.len());
        for (i, ptx) in modules.iter().enumerate() {
            let f = dir.path().join(format!("m{i:05}.ptx"));
            if let Err(e) = std::fs::write(&f, ptx) {
                report.failed.push(format!("writing {}: {e}", f.display()));
                return report;
            }
            files.push(f);
        }
        let sizes: Vec<usize> = modules.iter().map(|m| m.len()).collect();
        let shares = balance(&sizes, self.workers);
        report.workers = shares.len();
        let children: Vec<_> = shares
            .iter()
            .map(|share| {
                Command::new(&self.exe)
                    .env(WORKER_ENV, self.ordinal.to_string())
                    .args(share.iter().map(|&i| &files[i]))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
            })
            .collect();
        for child in children {
            let outcome = child
                .and_then(|c| c.wait_with_output())
                .map_err(|e| e.to_string())
                .and_then(|out| {
                    if out.status.success() {
                        Ok(())
                    } else {
                        Err(format!(
                            "{}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        ))
                    }
                });
            if let Err(e) = outcome {
                report.failed.push(e);
            }
        }
        report.wall_s = t.elapsed().as_secs_f64();
        report
    }
}

/// Module indices per worker, at most `workers` non-empty shares: the largest module first to
/// the least loaded worker (PTX size stands in for JIT time).
pub fn balance(sizes: &[usize], workers: usize) -> Vec<Vec<usize>> {
    let n = workers.clamp(1, sizes.len().max(1));
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut shares: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); n];
    for i in order {
        let least = shares
            .iter_mut()
            .min_by_key(|(load, _)| *load)
            .expect("at least one share");
        least.0 += sizes[i];
        least.1.push(i);
    }
    shares
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A directory under the system temp dir, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> std::io::Result<ScratchDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "entkv-jit-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p)?;
        Ok(ScratchDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_covers_every_module_once_and_evens_the_load() {
        let sizes = [90, 10, 40, 40, 30, 30, 5, 5];
        let shares = balance(&sizes, 3);
        assert_eq!(shares.len(), 3);
        let mut all: Vec<usize> = shares.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..sizes.len()).collect::<Vec<_>>());
        let loads: Vec<usize> = shares.iter().map(|s| s.iter().map(|&i| sizes[i]).sum()).collect();
        // 250 in all: the largest module alone bounds the best split at 90.
        assert_eq!(*loads.iter().max().unwrap(), 90, "{loads:?}");
        // Fewer modules than workers: one share each; none: no shares.
        assert_eq!(balance(&[7, 3], 16).len(), 2);
        assert!(balance(&[], 4).is_empty());
        assert_eq!(balance(&[1, 2, 3], 0).len(), 1);
    }

    #[test]
    fn no_pool_without_workers() {
        assert!(JitPool::new(ServesWorkers(()), 0, 0).is_none());
    }
}
