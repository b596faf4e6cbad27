//! The CPU interpreter: runs any validated [`Kernel`] with GPU semantics, and checks it on the
//! way (a sanitizer for CI).
//!
//! ```
//! use entkv_dsl::*;
//! use entkv_dsl::interp::*;
//! let mut k = KernelBuilder::new("scale", 32);
//! let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
//! let s = k.scalar_param("s", Scalar::F32);
//! let i = k.let_("i", k.global_thread_id());
//! k.store(x, i, x.at(i) * s);
//! let kernel = k.finish().unwrap();
//! let mut buf = HostBuffer::F32((0..64).map(|i| i as f32).collect());
//! let stats = run(&kernel, LaunchDims::linear(2, 32), &mut [Arg::Buf(&mut buf), Arg::scalar(2.0f32)]).unwrap();
//! assert_eq!(buf.as_f32().unwrap()[63], 126.0);
//! assert_eq!(stats.global_bytes_loaded, 64 * 4);
//! ```
//!
//! # Execution model
//!
//! Blocks run one after another (`z`, then `y`, then `x` fastest). Within a block all threads
//! run in lockstep: each statement executes for every active thread before the next one, and
//! each expression node is evaluated once over all active lanes (values are kept as columns of
//! raw `u64`s, see [`values`]). `If` runs the then-branch on the lanes whose condition holds,
//! then the else-branch on the others; loops run while any lane still iterates, each lane
//! leaving when its own condition fails.
//!
//! # What is checked
//!
//! - Arguments (count, buffer element types, scalar types), launch dimensions, and
//!   [`crate::validate::validate`].
//! - Every global and shared access is bounds-checked element by element (negative indices are
//!   out of bounds); vector accesses must start at a multiple of their length.
//! - Reads of registers and shared-memory elements never written in this thread / block.
//! - Barriers must be reached by all threads of the block; shuffles and ballots by all 32 lanes
//!   of every warp that executes them.
//! - Integer division by zero and signed `MIN / -1`, shifts by `>=` the bit width or by a
//!   negative amount, non-positive runtime `For` steps.
//! - Races between warps of one block (optional, [`InterpOptions::check_races`]), in shared
//!   memory and in the global buffers a kernel may write: the block's history is divided into
//!   epochs by barriers; within an epoch, a read of an element that another warp wrote, or a
//!   write to an element another warp read or wrote, is an error. Atomics do not race with
//!   atomics. (The interpreter runs a block's threads statement by statement, so such a race
//!   would otherwise read the value the GPU may not have written yet.)
//! - A step budget ([`InterpOptions::max_steps`]) so a kernel that never terminates fails
//!   with [`InterpError::Timeout`] instead of hanging.
//!
//! # Limitations
//!
//! - Accesses by lanes of one warp are considered ordered, so intra-warp shared-memory races
//!   (legal to write on Volta+ only with `__syncwarp`) are not reported, and lanes of one
//!   warp storing to the same address within one statement silently resolve in thread order.
//! - Global memory has no initialisation tracking (poison outputs with
//!   [`HostBuffer::filled_f64`] and `NaN` to catch unwritten results), and races between
//!   blocks are not detected (see below).
//! - `Select` evaluates both arms on every active lane (it is a data-parallel select, not a
//!   branch): an out-of-bounds load or an uninitialised register in the unused arm is still an
//!   error. Clamp the index (as `select(valid, i, 0)`) or initialise the register.
//! - `Exp2`/`Log2` are computed exactly and rounded to `f32` where the GPU uses ~2-ulp
//!   approximations; denormals are never flushed (GPU code may flush them, e.g.
//!   `ex2.approx.ftz.f32`, and `f32` atomic adds on global memory).
//! - NaN payloads and signs follow the host CPU, not the GPU's canonical `0x7fffffff`; this
//!   is only visible through a bitcast.
//! - Shuffles use `arg % 32` in every mode, like PTX `shfl.sync` (which reads the operand's
//!   low 5 bits): `Down` by 35 reads from `lane + 3`.
//! - Blocks run sequentially, so inter-block races on global memory are not detected, and
//!   atomics resolve in block order, then thread order.

mod error;
mod exec;
mod ops;
pub mod values;

pub use error::{InterpError, Location, MemAccess, RaceAccess};
pub use values::{Arg, HostBuffer, ScalarValue};

use crate::ir::{Kernel, ParamKind};

/// Grid and block dimensions of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Blocks along `x`, `y`, `z` (each at least 1).
    pub grid: [u32; 3],
    /// Threads per block; must equal [`Kernel::block_threads`].
    pub block: u32,
}

impl LaunchDims {
    pub fn new(grid: [u32; 3], block: u32) -> Self {
        LaunchDims { grid, block }
    }
    /// A one-dimensional grid of `blocks` blocks.
    pub fn linear(blocks: u32, block: u32) -> Self {
        LaunchDims {
            grid: [blocks, 1, 1],
            block,
        }
    }
}

/// Interpreter settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpOptions {
    /// Budget of statement executions × active threads (plus one per block); exceeding it is
    /// [`InterpError::Timeout`].
    pub max_steps: u64,
    /// Detect races between the warps of a block, in shared memory and in writable global
    /// buffers (see the module docs).
    pub check_races: bool,
}

impl Default for InterpOptions {
    fn default() -> Self {
        InterpOptions {
            max_steps: 20_000_000_000,
            check_races: true,
        }
    }
}

/// Bytes moved through one global-buffer parameter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferStats {
    pub name: String,
    pub bytes_loaded: u64,
    pub bytes_stored: u64,
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Bytes read from global memory (loads, vector loads and atomics).
    pub global_bytes_loaded: u64,
    /// Bytes written to global memory (stores, vector stores and atomics).
    pub global_bytes_stored: u64,
    pub shared_bytes_loaded: u64,
    pub shared_bytes_stored: u64,
    /// Statement executions × active threads (loop headers count once per iteration).
    pub statements: u64,
    /// Expression nodes evaluated × active lanes: the interpreter's unit of work.
    pub lane_ops: u64,
    pub blocks: u64,
    /// Barriers executed (per block).
    pub barriers: u64,
    /// Per global-buffer parameter, in parameter order.
    pub buffers: Vec<BufferStats>,
}

impl RunStats {
    /// Statistics of the buffer parameter called `name`.
    pub fn buffer(&self, name: &str) -> Option<&BufferStats> {
        self.buffers.iter().find(|b| b.name == name)
    }
}

/// Run `kernel` over the whole grid with default options.
pub fn run(kernel: &Kernel, dims: LaunchDims, args: &mut [Arg<'_>]) -> Result<RunStats, InterpError> {
    run_with(kernel, dims, args, &InterpOptions::default())
}

/// Run `kernel` over the whole grid. Buffers are updated in place; on error they hold whatever
/// the kernel wrote before the failing statement.
pub fn run_with(
    kernel: &Kernel,
    dims: LaunchDims,
    args: &mut [Arg<'_>],
    opts: &InterpOptions,
) -> Result<RunStats, InterpError> {
    crate::validate::validate(kernel)?;
    check_args(kernel, dims, args)?;
    exec::execute(kernel, dims, args, opts)
}

/// Check arguments and launch dimensions against the kernel (done by [`run`] too).
pub fn check_args(kernel: &Kernel, dims: LaunchDims, args: &[Arg<'_>]) -> Result<(), InterpError> {
    let bad = |param: &str, message: String| InterpError::BadArgs {
        kernel: kernel.name.clone(),
        param: param.to_string(),
        message,
    };
    if dims.block != kernel.block_threads {
        return Err(bad(
            "block",
            format!(
                "launched with {} threads per block; the kernel needs exactly {}",
                dims.block, kernel.block_threads
            ),
        ));
    }
    let limits = [i32::MAX as u32, 65535, 65535];
    for (axis, (&g, &lim)) in ["x", "y", "z"].iter().zip(dims.grid.iter().zip(&limits)) {
        if g == 0 || g > lim {
            return Err(bad("grid", format!("grid.{axis} = {g} must be in 1..={lim}")));
        }
    }
    for (i, p) in kernel.params.iter().enumerate() {
        let msg = match (args.get(i), &p.kind) {
            (None, _) => Some(format!(
                "missing: the kernel has {} parameters, {} arguments were given",
                kernel.params.len(),
                args.len()
            )),
            (Some(Arg::Buf(b)), ParamKind::Buffer { elem, .. }) => {
                (b.elem() != *elem).then(|| format!("buffer of {} passed for a buffer of {elem}", b.elem()))
            }
            (Some(Arg::Scalar(v)), ParamKind::Scalar(t)) => {
                (v.ty() != *t).then(|| format!("scalar {} passed for a scalar {t}", v.ty()))
            }
            (Some(Arg::Buf(b)), ParamKind::Scalar(t)) => {
                Some(format!("buffer of {} passed for a scalar {t}", b.elem()))
            }
            (Some(Arg::Scalar(v)), ParamKind::Buffer { elem, .. }) => {
                Some(format!("scalar {} passed for a buffer of {elem}", v.ty()))
            }
        };
        if let Some(m) = msg {
            return Err(bad(&p.name, m));
        }
    }
    if args.len() > kernel.params.len() {
        return Err(bad(
            &format!("#{}", kernel.params.len()),
            format!(
                "too many arguments: the kernel has {} parameters, {} arguments were given",
                kernel.params.len(),
                args.len()
            ),
        ));
    }
    Ok(())
}
