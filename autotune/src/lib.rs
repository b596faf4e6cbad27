//! # entkv-autotune
//!
//! Boundary: entkv's command-line front ends — the `entkv` binary (`emit`, `bundle`,
//! `gpu-check`) and the `autotune` binary — and the code behind them that ties kernels
//! (entkv-kernels), codegen (entkv-codegen), bundles (entkv-bundle) and the runtime
//! (entkv-runtime) together. Tile-config search lands here too (issue #5).

pub mod bench;
pub mod bundle_cmd;
pub mod device;
pub mod emit;
pub mod gpucheck;
pub mod paper;
pub mod record;
pub mod spec_args;
