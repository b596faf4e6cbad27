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
