//! # entkv-dsl
//!
//! Boundary: a typed kernel IR, the builder API kernels are written with, and a CPU
//! interpreter that executes any kernel with GPU semantics. No LLVM, no CUDA.
//!
//! - [`ir`]: what a kernel is (parameters, shared arrays, registers, structured statements).
//! - [`KernelBuilder`] + [`expr`]: how kernels are written; specialization happens in the Rust
//!   code that calls the builder, so the IR only ever holds folded constants.
//! - [`collective`]: warp/block reductions and scans built from shuffles and shared memory.
//! - [`mma`]: the fragment layouts of the warp-level matrix multiply (tensor cores).
//! - [`validate`]: static checks (types, access rules, resource limits).
//! - [`interp`]: the interpreter, which is also a sanitizer (out-of-bounds, misaligned vector
//!   accesses, barrier divergence, partial-warp shuffles, uninitialised shared memory, races
//!   on shared memory between warps).

pub mod builder;
pub mod collective;
pub mod expr;
pub mod interp;
pub mod ir;
pub mod mma;
pub mod validate;

pub use builder::{KernelBuilder, WARP};
pub use collective::Reduce;
pub use expr::{
    binary, boolc, cmp, dp4a, f32c, fma, i32c, i64c, lit, prmt, select, u32c, Buf, IntoExpr, Var,
};
pub use interp::{
    run, run_with, Arg, BufferStats, HostBuffer, InterpError, InterpOptions, LaunchDims, Location, RunStats,
    ScalarValue,
};
pub use ir::{Access, AtomicOp, Axis, Expr, Kernel, Scalar, ShuffleMode};
pub use validate::DslError;
