//! # entkv-tests
//!
//! Boundary: end-to-end tests that cross crates — every kernel module of every supported
//! specialization compiles through LLVM and assembles with `ptxas` for sm_90 without spills;
//! the runtime's dependency tree holds no LLVM or DSL. (Per-crate behaviour is tested in each
//! crate; the GPU checks are `entkv gpu-check`.)
