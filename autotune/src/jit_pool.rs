//! The driver's PTX JIT spread over worker processes.
//!
//! The driver JIT-compiles one module at a time per process: 60 modules took 12.6 s on one
//! thread and 13.4 s on 16 (H200, driver 580.159.04, results/2026-11-30-jit-pool). It keeps
//! what it compiles in its on-disk compute cache (`~/.nv/ComputeCache`, `CUDA_CACHE_PATH`),
//! keyed by the PTX text and the JIT options. So worker processes that load the same texts
//! fill the cache in parallel (4.4 s for those 60), and the caller's own
//! [`entkv_runtime::Gpu::load_module`] then takes milliseconds and yields the driver's JIT
//! output exactly: the code the runtime runs. (`cuLinkComplete` returns cubins directly, but
//! it compiles relocatable code, with other register counts, so it is not used.)
//!
//! Workers are the calling binary itself, started with [`WORKER_ENV`] set. A binary opts in by
//! calling [`serve_if_worker`] first thing in `main`; only the token that returns can build a
//! [`JitPool`], so no binary is ever re-executed without knowing it. Workers start once (a
//! CUDA context each, about a second for 16 at once) and stay for the pool's life: the parent
//! writes one PTX file path a line to a worker's stdin, the worker answers one line on its
//! stdout when that module is loaded (`ok`, or `error: ...`). Everything here is an
//! optimization: when a worker fails, or the cache is off, the caller's loads JIT the modules
//! themselves and nothing changes but the time.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Set (to the GPU ordinal) in a worker's environment; it reads PTX file paths from stdin.
pub const WORKER_ENV: &str = "ENTKV_JIT_WORKER";

/// Most workers a pool starts: each holds a CUDA context (a few hundred MB of device memory).
pub const MAX_WORKERS: usize = 16;

/// Proof that the running binary serves worker mode ([`serve_if_worker`] returned).
#[derive(Clone, Copy, Debug)]
pub struct ServesWorkers(());

/// In a worker (the environment has [`WORKER_ENV`]): open that GPU, then for each line of
/// stdin (a PTX file path) load the module and answer one line on stdout, `ok` or
/// `error: <why>`; exit at the end of stdin (status 0), or with status 1 and the reason on
/// stderr when the GPU cannot be opened. Otherwise return the token [`JitPool::new`] needs.
pub fn serve_if_worker() -> ServesWorkers {
    let Ok(ordinal) = std::env::var(WORKER_ENV) else {
        return ServesWorkers(());
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    std::process::exit(match run_worker(&ordinal, stdin, stdout) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("entkv JIT worker: {e}");
            1
        }
    })
}

fn run_worker(ordinal: &str, input: impl BufRead, mut output: impl Write) -> Result<(), String> {
    let ordinal: usize = ordinal
        .parse()
        .map_err(|_| format!("{WORKER_ENV}={ordinal:?} is not a GPU ordinal"))?;
    let gpu = entkv_runtime::Gpu::open(ordinal).map_err(|e| format!("opening GPU {ordinal}: {e}"))?;
    for line in input.lines() {
        let path = line.map_err(|e| format!("reading stdin: {e}"))?;
        let loaded = std::fs::read_to_string(&path)
            .map_err(|e| format!("{path}: {e}"))
            .and_then(|ptx| {
                gpu.load_module(&ptx)
                    .map(drop)
                    .map_err(|e| format!("{path}: {e}"))
            });
        let answer = match loaded {
            Ok(()) => "ok".to_string(),
            // One line per answer: the JIT log may span several.
            Err(e) => format!("error: {}", e.replace('\n', " | ")),
        };
        writeln!(output, "{answer}")
            .and_then(|()| output.flush())
            .map_err(|e| format!("writing stdout: {e}"))?;
    }
    Ok(())
}

/// Why a pool would not help here, or `None` when it can: the driver's compute cache is what
/// carries the workers' results back, so with `CUDA_CACHE_DISABLE=1` they would be wasted.
pub fn cache_unavailable_reason() -> Option<String> {
    match std::env::var("CUDA_CACHE_DISABLE") {
        Ok(v) if v.trim() == "1" => Some("CUDA_CACHE_DISABLE=1 turns off the driver's JIT cache".into()),
        _ => None,
    }
}

/// What [`JitPool::warm`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WarmReport {
    pub modules: usize,
    pub workers: usize,
    /// Workers that failed, and modules a worker could not load (the caller compiles those).
    pub failed: Vec<String>,
    pub wall_s: f64,
}

/// One worker process and its pipes.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// Closes its stdin (a live worker exits at its end) and reaps the process.
    fn finish(self) {
        let Worker { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait();
    }

    /// Has it load `path`; `Err` when the worker is gone, `Ok(Err)` when it could not load it.
    fn load(&mut self, path: &Path) -> Result<Result<(), String>, String> {
        let gone = |e: std::io::Error| format!("JIT worker {}: {e}", self.child.id());
        writeln!(self.stdin, "{}", path.display())
            .and_then(|()| self.stdin.flush())
            .map_err(gone)?;
        let mut answer = String::new();
        match self.stdout.read_line(&mut answer) {
            Ok(0) => Err(format!("JIT worker {} exited", self.child.id())),
            Ok(_) if answer.trim_end() == "ok" => Ok(Ok(())),
            Ok(_) => Ok(Err(answer.trim_end().to_string())),
            Err(e) => Err(gone(e)),
        }
    }
}

/// Worker processes (this executable) that JIT modules into the driver's cache.
pub struct JitPool {
    exe: PathBuf,
    ordinal: usize,
    workers: usize,
    /// Started on the first [`JitPool::warm`]; a worker that failed is reaped and its slot
    /// emptied.
    running: Option<Vec<Option<Worker>>>,
}

impl std::fmt::Debug for JitPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitPool")
            .field("exe", &self.exe)
            .field("ordinal", &self.ordinal)
            .field("workers", &self.workers)
            .finish()
    }
}

impl JitPool {
    /// A pool of up to `workers` processes (capped at [`MAX_WORKERS`]) on GPU `ordinal`; `None`
    /// for zero workers, when this executable's path is unknown, or when the cache is off.
    pub fn new(serves: ServesWorkers, ordinal: usize, workers: usize) -> Option<JitPool> {
        JitPool::with_executable(serves, std::env::current_exe().ok()?, ordinal, workers)
    }

    /// As [`JitPool::new`], with workers run from `exe`: another binary that calls
    /// [`serve_if_worker`] first thing (the tests run the `autotune` binary's workers).
    pub fn with_executable(
        _serves: ServesWorkers,
        exe: PathBuf,
        ordinal: usize,
        workers: usize,
    ) -> Option<JitPool> {
        if workers == 0 || cache_unavailable_reason().is_some() {
            return None;
        }
        Some(JitPool {
            exe,
            ordinal,
            workers: workers.min(MAX_WORKERS),
            running: None,
        })
    }

    /// Workers the pool starts at most.
    pub fn workers(&self) -> usize {
        self.workers
    }

    fn start(&self, failed: &mut Vec<String>) -> Vec<Option<Worker>> {
        (0..self.workers)
            .map(|_| {
                let spawned = Command::new(&self.exe)
                    .env(WORKER_ENV, self.ordinal.to_string())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn();
                let worker = match spawned {
                    Ok(mut child) => match (child.stdin.take(), child.stdout.take()) {
                        (Some(stdin), Some(stdout)) => Some(Worker {
                            child,
                            stdin,
                            stdout: BufReader::new(stdout),
                        }),
                        _ => None,
                    },
                    Err(e) => {
                        failed.push(format!("starting a JIT worker: {e}"));
                        None
                    }
                };
                worker
            })
            .collect()
    }

    /// JIT-compile `modules` (PTX texts) in the worker processes, into the driver's cache,
    /// largest first, each worker taking the next module when it is done with one. Never an
    /// error: what a worker could not do is reported, and the caller's loads compile it.
    pub fn warm(&mut self, modules: &[&str]) -> WarmReport {
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
        if self.running.is_none() {
            self.running = Some(self.start(&mut report.failed));
        }
        let workers = self.running.as_deref_mut().unwrap_or_default();
        // Largest first (PTX size stands in for JIT time), handed out as workers free up.
        let mut order: Vec<usize> = (0..modules.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(modules[i].len()));
        let next = AtomicUsize::new(0);
        let failed = Mutex::new(Vec::new());
        let busy = AtomicUsize::new(0);
        let answered = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for slot in workers.iter_mut() {
                let (next, order, files) = (&next, &order, &files);
                let (failed, busy, answered) = (&failed, &busy, &answered);
                scope.spawn(move || {
                    let Some(worker) = slot.as_mut() else { return };
                    busy.fetch_add(1, Ordering::Relaxed);
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = order.get(k) else { break };
                        let answer = worker.load(&files[i]);
                        if answer.is_ok() {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        match answer {
                            Ok(Ok(())) => {}
                            Ok(Err(why)) => failed.lock().unwrap_or_else(|e| e.into_inner()).push(why),
                            Err(gone) => {
                                failed.lock().unwrap_or_else(|e| e.into_inner()).push(gone);
                                if let Some(w) = slot.take() {
                                    w.finish();
                                }
                                break;
                            }
                        }
                    }
                });
            }
        });
        report.workers = busy.into_inner();
        report
            .failed
            .extend(failed.into_inner().unwrap_or_else(|e| e.into_inner()));
        let unanswered = modules.len() - answered.into_inner();
        if unanswered > 0 {
            report.failed.push(format!(
                "{unanswered} of {} module(s) not compiled by a worker ({} running)",
                modules.len(),
                report.workers
            ));
        }
        report.wall_s = t.elapsed().as_secs_f64();
        report
    }
}

impl Drop for JitPool {
    /// Closes the workers' stdin (they exit at its end) and waits for them.
    fn drop(&mut self) {
        for w in self.running.take().into_iter().flatten().flatten() {
            w.finish();
        }
    }
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
    fn a_worker_without_its_gpu_says_why() {
        let mut out = Vec::new();
        let e = run_worker("x", &b"a.ptx\n"[..], &mut out).unwrap_err();
        assert!(e.contains("is not a GPU ordinal"), "{e}");
        if let Some(reason) = entkv_runtime::gpu_unavailable_reason() {
            let e = run_worker("0", &b"a.ptx\n"[..], &mut out).unwrap_err();
            assert!(e.contains("opening GPU 0"), "{e} ({reason})");
        }
        assert!(out.is_empty(), "no answers before the GPU is open");
    }

    #[test]
    fn no_pool_without_workers() {
        assert!(JitPool::new(ServesWorkers(()), 0, 0).is_none());
    }
}
