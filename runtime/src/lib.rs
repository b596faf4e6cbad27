//! # entkv-runtime
//!
//! The GPU runtime of entkv: it **loads PTX with cudarc 0.19 and launches kernels on the
//! caller's stream; no LLVM, no DSL dependency**. It must never depend on `entkv-dsl`,
//! `entkv-codegen`, `inkwell` or `llvm-sys` (a test in `entkv-tests` enforces this), so that
//! inference engines can embed it cheaply: Rust engines built on cudarc directly, Python and
//! C++ engines later through a thin C ABI.
//!
//! ## Embedding model
//! - **Caller's stream, caller's memory.** Kernels are launched with [`launch`] on a
//!   [`RawStream`] (any `CUstream` of the device's context, e.g. an engine's or PyTorch's
//!   current stream) with device pointers the caller owns ([`KernelArg::Ptr`]).
//! - **No allocation, no host synchronisation per launch.** [`launch`] validates against limits
//!   cached at load time, builds the parameter array on the stack and calls `cuLaunchKernel`;
//!   it is CUDA-graph-capturable.
//! - **Primary context.** [`Gpu::open`] retains the device's primary context (shared with the
//!   CUDA runtime and PyTorch), so engine pointers and streams are valid here. Every call makes
//!   that context current only for its own duration and restores the caller's.
//! - **Typed errors, no panics.** Every fallible call returns [`RuntimeError`]; a machine with
//!   no driver library gets [`RuntimeError::NoDriver`] (checked before cudarc could panic).
//!
//! ## Standalone use (tests, benchmarks, autotuner)
//! [`Gpu`] owns a stream ([`Gpu::stream_raw`]); [`DeviceBuffer`] owns memory on it;
//! [`GpuTimer`] times work with CUDA events; [`gpu_unavailable_reason`] lets GPU tests skip
//! cleanly on machines without a GPU.
//!
//! ```no_run
//! use entkv_runtime::{launch, DeviceBuffer, Gpu, KernelArg, LaunchGeometry};
//! # fn main() -> Result<(), entkv_runtime::RuntimeError> {
//! # let ptx = "";
//! let gpu = Gpu::open(0)?;
//! let f = gpu.load_module(ptx)?.function("add_one")?;
//! let buf = DeviceBuffer::from_host(&gpu, &[1.0f32; 1000])?;
//! let args = [buf.arg(), KernelArg::F32(1.0), KernelArg::U32(1000)];
//! // SAFETY: `add_one(float*, float, u32)` touches `n` floats of `buf`, which outlives the run.
//! unsafe { launch(&f, &LaunchGeometry::cover(1000, 256), gpu.stream_raw(), &args)? };
//! assert_eq!(buf.to_host()?[0], 2.0);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod ctx;
pub mod engine;
mod error;
mod gpu;
mod launch;
mod memory;
mod module;
mod timer;

pub use engine::{
    DecodeBuffers, DecodePlanner, Decoder, DeviceRegion, DeviceTensor, EngineError, Method, Problem, Step,
};
pub use entkv_abi::{BatchError, DType, Elem};
pub use entkv_bundle::{Bundle, BundleError, Tier};
pub use error::{Result, RuntimeError};
pub use gpu::{device_count, driver_library_present, gpu_unavailable_reason, DeviceInfo, Gpu};
pub use launch::{launch, KernelArg, LaunchGeometry, RawStream, MAX_KERNEL_ARGS};
pub use memory::{DeviceBuffer, DeviceCopy};
pub use module::{Function, FunctionAttrs, Module, ParamInfo};
pub use timer::GpuTimer;

/// Re-export of the cudarc version this crate is built against, so engines can name
/// `entkv_runtime::cudarc::driver::sys::CUstream` without a version skew.
pub use cudarc;
