//! `ENTKV_KERNEL_CODE`: a digest of the sources that decide what a kernel is, how it is
//! compiled and how the tuner measures it (the DSL, the kernel generators, the ABI, codegen,
//! the runtime that plans and launches the timed steps, the tuner's GPU backend with its
//! timing — `StepTimer` and the timed launches — and the device limits that decide which tiles
//! are valid). It keys the
//! tuning records, so a tuning cache written by another build of the kernels, or timed another
//! way, is never reused for this one.
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const SOURCES: [&str; 9] = [
    "../dsl/src",
    "../kernels-gen/src",
    "../abi/src",
    "../codegen/src",
    "../runtime/src",
    "src/tune/gpu.rs",
    "src/tune/space.rs",
    "src/device.rs",
    "src/engine_bench.rs",
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    let mut paths = Vec::new();
    for dir in SOURCES {
        println!("cargo:rerun-if-changed={dir}");
        files(Path::new(dir), &mut paths);
    }
    paths.sort();
    let mut h = Sha256::new();
    for p in &paths {
        h.update(p.to_string_lossy().as_bytes());
        h.update(std::fs::read(p).unwrap_or_default());
    }
    let digest: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=ENTKV_KERNEL_CODE={digest}");
}
