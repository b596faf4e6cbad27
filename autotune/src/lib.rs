//! # entkv-autotune
//!
//! Boundary: entkv's command-line front ends — the `entkv` binary (`emit`, `bundle`, `verify`,
//! `bench`, `quality`, `doctor`, `gpu-check`) and the `autotune` binary (`tune`: the tile-config
//! search) — and the code behind them that ties kernels (entkv-kernels), codegen
//! (entkv-codegen), bundles (entkv-bundle) and the runtime's engine (entkv-runtime) together.

pub mod bench;
pub mod bench_cmd;
pub mod bundle_cmd;
pub mod device;
pub mod doctor;
pub mod emit;
pub mod engine_bench;
pub mod gpucheck;
pub mod interp_engine;
pub mod jit_pool;
pub mod paper;
pub mod quality;
pub mod record;
pub mod spec_args;
pub mod tune;
pub mod verify_cmd;

/// A binary's report of a failed command: the error and its causes on one line, `a: b: c`,
/// leaving out a cause whose text the line already ends with (library errors that print their
/// source in their own message, e.g. `BundleError::Io`, would otherwise repeat it). No
/// backtrace: these are user-facing errors.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_line;
    use anyhow::Context;

    #[test]
    fn error_line_chains_causes_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        // A source printed by its wrapper, then context on top.
        let wrapped = anyhow::Error::new(io)
            .context("b.json: no such file")
            .context("cannot open bundle b");
        assert_eq!(error_line(&wrapped), "cannot open bundle b: b.json: no such file");
        let plain: anyhow::Result<()> = Err(anyhow::anyhow!("inner")).context("outer");
        assert_eq!(error_line(&plain.unwrap_err()), "outer: inner");
    }
}
