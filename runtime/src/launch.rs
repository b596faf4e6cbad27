//! Kernel launches on a caller-provided stream.
//!
//! [`launch`] validates the geometry and arguments against the function's and device's limits
//! (cached when the [`Function`] was looked up, so no driver query), builds the
//! `void* kernelParams[]` array **on the stack** (a fixed `[*mut c_void; MAX_KERNEL_ARGS]`
//! pointing into the caller's `&[KernelArg]`), and calls `cuLaunchKernel` through
//! `cudarc::driver::result::launch_kernel`. Nothing is allocated and the host never waits,
//! so a launch is safe to record into a CUDA graph.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use crate::ctx::CtxGuard;
use crate::error::{Result, RuntimeError};
use crate::module::{Function, ParamInfo};

/// Most arguments one launch may pass (the stack array's length).
pub const MAX_KERNEL_ARGS: usize = 64;

/// One kernel argument, passed by value. `Ptr` is a device address (`CUdeviceptr`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelArg {
    /// A device pointer (8 bytes).
    Ptr(u64),
    /// `.s32` (4 bytes).
    I32(i32),
    /// `.u32` (4 bytes).
    U32(u32),
    /// `.s64` (8 bytes).
    I64(i64),
    /// `.u64` (8 bytes).
    U64(u64),
    /// `.f32` (4 bytes).
    F32(f32),
}

impl KernelArg {
    /// Size of the value in the kernel's parameter buffer.
    pub fn size(&self) -> usize {
        match self {
            KernelArg::I32(_) | KernelArg::U32(_) | KernelArg::F32(_) => 4,
            KernelArg::Ptr(_) | KernelArg::I64(_) | KernelArg::U64(_) => 8,
        }
    }

    /// Address of the payload, as `cuLaunchKernel` wants it (the driver only reads it).
    fn param_ptr(&self) -> *mut c_void {
        match self {
            KernelArg::Ptr(v) | KernelArg::U64(v) => v as *const u64 as *mut c_void,
            KernelArg::I64(v) => v as *const i64 as *mut c_void,
            KernelArg::I32(v) => v as *const i32 as *mut c_void,
            KernelArg::U32(v) => v as *const u32 as *mut c_void,
            KernelArg::F32(v) => v as *const f32 as *mut c_void,
        }
    }
}

impl From<i32> for KernelArg {
    fn from(v: i32) -> Self {
        KernelArg::I32(v)
    }
}
impl From<u32> for KernelArg {
    fn from(v: u32) -> Self {
        KernelArg::U32(v)
    }
}
impl From<i64> for KernelArg {
    fn from(v: i64) -> Self {
        KernelArg::I64(v)
    }
}
impl From<u64> for KernelArg {
    fn from(v: u64) -> Self {
        KernelArg::U64(v)
    }
}
impl From<f32> for KernelArg {
    fn from(v: f32) -> Self {
        KernelArg::F32(v)
    }
}

pub use entkv_abi::LaunchGeometry;

/// A raw CUDA stream handle (`CUstream`) owned by someone else: an engine's stream, PyTorch's
/// `torch.cuda.current_stream().cuda_stream`, or [`crate::Gpu::stream_raw`]. Constructing one
/// is safe; the functions that use it are `unsafe` and require it to be live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawStream(pub sys::CUstream);

// SAFETY: a stream handle is an opaque token; driver calls on it are thread-safe.
unsafe impl Send for RawStream {}
unsafe impl Sync for RawStream {}

impl RawStream {
    /// The legacy default stream (handle 0).
    pub const fn null() -> Self {
        RawStream(std::ptr::null_mut())
    }

    /// From an integer handle (C ABI / Python `cuda_stream` ints).
    pub fn from_raw(handle: usize) -> Self {
        RawStream(handle as sys::CUstream)
    }

    /// The handle as an integer.
    pub fn as_raw(self) -> usize {
        self.0 as usize
    }
}

/// Limits a launch is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaunchLimits<'a> {
    pub max_grid: [u32; 3],
    pub device_max_block: u32,
    pub function_max_block: u32,
    pub max_dynamic_shared: u32,
    pub static_shared: u32,
    pub max_shared_optin: u32,
    pub params: Option<&'a [ParamInfo]>,
}

/// Pure validation of a launch; `Err` holds the reason. Allocates only on the error path.
pub(crate) fn check_launch(
    geom: &LaunchGeometry,
    args: &[KernelArg],
    lim: &LaunchLimits<'_>,
) -> std::result::Result<(), String> {
    const AXES: [char; 3] = ['x', 'y', 'z'];
    for ((&g, &max), axis) in geom.grid.iter().zip(&lim.max_grid).zip(AXES) {
        if g == 0 {
            return Err(format!(
                "grid.{axis} is 0 (grid {:?}); every grid dimension must be >= 1",
                geom.grid
            ));
        }
        if g > max {
            return Err(format!("grid.{axis} = {g} exceeds the device limit {max}"));
        }
    }
    if geom.block == 0 {
        return Err("block is 0 threads; it must be >= 1".to_string());
    }
    if geom.block > lim.device_max_block {
        return Err(format!(
            "block = {} threads exceeds the device limit {}",
            geom.block, lim.device_max_block
        ));
    }
    if geom.block > lim.function_max_block {
        return Err(format!(
            "block = {} threads exceeds this kernel's max_threads_per_block {} \
             (limited by its registers or .maxntid)",
            geom.block, lim.function_max_block
        ));
    }
    if geom.shared_bytes > lim.max_dynamic_shared {
        return Err(format!(
            "{} B of dynamic shared memory requested, kernel allows {} B \
             (raise with Function::set_max_dynamic_shared_bytes, device opt-in limit {} B)",
            geom.shared_bytes, lim.max_dynamic_shared, lim.max_shared_optin
        ));
    }
    let total_shared = u64::from(geom.shared_bytes) + u64::from(lim.static_shared);
    if total_shared > u64::from(lim.max_shared_optin) {
        return Err(format!(
            "{} B static + {} B dynamic shared memory exceeds the device's {} B per block",
            lim.static_shared, geom.shared_bytes, lim.max_shared_optin
        ));
    }
    if args.len() > MAX_KERNEL_ARGS {
        return Err(format!(
            "{} arguments given, at most {MAX_KERNEL_ARGS} are supported",
            args.len()
        ));
    }
    if let Some(params) = lim.params {
        if params.len() != args.len() {
            return Err(format!(
                "kernel takes {} parameters, {} arguments given",
                params.len(),
                args.len()
            ));
        }
        for (i, (p, a)) in params.iter().zip(args).enumerate() {
            if p.size != a.size() {
                return Err(format!(
                    "argument {i} is {a:?} ({} bytes) but the kernel's parameter {i} is {} bytes",
                    a.size(),
                    p.size
                ));
            }
        }
    }
    Ok(())
}

impl Function {
    /// Checks a launch without performing it: grid dimensions ≥ 1 and within the device's
    /// limits, block within the device's and this kernel's limits, dynamic shared memory within
    /// what the kernel allows, and (when the driver reports the parameter layout) argument
    /// count and sizes. Engines can call this once at plan time; [`launch`] calls it every time.
    pub fn check_launch(&self, geom: &LaunchGeometry, args: &[KernelArg]) -> Result<()> {
        let info = self.device_info();
        let attrs = self.attrs();
        let limits = LaunchLimits {
            max_grid: info.max_grid_dims,
            device_max_block: info.max_threads_per_block,
            function_max_block: attrs.max_threads_per_block,
            max_dynamic_shared: self.max_dynamic_shared_bytes(),
            static_shared: attrs.shared_bytes,
            max_shared_optin: info.max_shared_bytes_per_block_optin,
            params: self.params(),
        };
        check_launch(geom, args, &limits).map_err(|reason| RuntimeError::InvalidLaunch {
            kernel: self.name().to_string(),
            reason,
        })
    }
}

/// Launches `f` with `geom` and `args` on `stream`, asynchronously.
///
/// The launch is validated first ([`Function::check_launch`]); a rejected launch returns
/// [`RuntimeError::InvalidLaunch`] and nothing is queued. A driver rejection returns
/// [`RuntimeError::Launch`]. Errors raised *while the kernel runs* (e.g. an illegal address)
/// surface later, at the next synchronising call on that stream or context.
///
/// Per call: no heap allocation (arguments go through a stack array of
/// [`MAX_KERNEL_ARGS`] pointers), no host synchronisation, one `cuCtxGetCurrent` (plus two
/// `cuCtxSetCurrent` only when another context is current; it is restored afterwards) and one
/// `cuLaunchKernel`.
///
/// # Safety
///
/// The caller guarantees that:
/// - `stream` is a live stream of the same CUDA context as `f`'s module (the device's primary
///   context when the `Gpu` came from [`crate::Gpu::open`]), or the null stream;
/// - `args` match the kernel's PTX signature in order and type (`Ptr`/`U64`/`I64` for 64-bit
///   parameters, `I32`/`U32`/`F32` for 32-bit ones). When the driver reports the parameter
///   layout, count and sizes are checked, but a pointer passed as `U64`, or an `I32` passed for
///   an `.f32`, cannot be detected;
/// - every `Ptr` is a device address in this context that stays valid, with enough bytes
///   for everything the kernel reads or writes given these arguments and geometry, until the
///   kernel has finished, and is not written concurrently by other work in a way that races
///   with the kernel;
/// - `f` (hence its module) stays alive until the kernel has finished.
pub unsafe fn launch(
    f: &Function,
    geom: &LaunchGeometry,
    stream: RawStream,
    args: &[KernelArg],
) -> Result<()> {
    f.check_launch(geom, args)?;
    let mut params = [std::ptr::null_mut::<c_void>(); MAX_KERNEL_ARGS];
    for (slot, arg) in params.iter_mut().zip(args) {
        *slot = arg.param_ptr();
    }
    let _guard = CtxGuard::bind(f.shared.module.gpu.cu_ctx())?;
    // SAFETY: the function handle is live (we hold its module); geometry and argument count
    // were validated; `params[..n]` points at `args`, which outlives this call (the driver
    // copies parameter values before `cuLaunchKernel` returns); the caller guarantees the
    // stream, argument types and pointers (see `# Safety`).
    unsafe {
        result::launch_kernel(
            f.shared.cu_function,
            (geom.grid[0], geom.grid[1], geom.grid[2]),
            (geom.block, 1, 1),
            geom.shared_bytes,
            stream.0,
            &mut params[..args.len()],
        )
    }
    .map_err(|source| RuntimeError::Launch {
        kernel: f.name().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(params: Option<&[ParamInfo]>) -> LaunchLimits<'_> {
        LaunchLimits {
            max_grid: [i32::MAX as u32, 65535, 65535],
            device_max_block: 1024,
            function_max_block: 256,
            max_dynamic_shared: 48 * 1024,
            static_shared: 1024,
            max_shared_optin: 227 * 1024,
            params,
        }
    }

    #[test]
    fn accepts_valid_launch() {
        let g = LaunchGeometry::linear(10, 128);
        assert_eq!(check_launch(&g, &[KernelArg::Ptr(0)], &limits(None)), Ok(()));
        let g = LaunchGeometry {
            grid: [i32::MAX as u32, 65535, 65535],
            block: 256,
            shared_bytes: 48 * 1024,
        };
        assert_eq!(check_launch(&g, &[], &limits(None)), Ok(()));
    }

    #[test]
    fn rejects_zero_and_oversized_grid() {
        for grid in [[0, 1, 1], [1, 0, 1], [1, 1, 0]] {
            let g = LaunchGeometry {
                grid,
                block: 32,
                shared_bytes: 0,
            };
            let e = check_launch(&g, &[], &limits(None)).unwrap_err();
            assert!(e.contains("is 0"), "{e}");
        }
        for grid in [[1 << 31, 1, 1], [1, 65536, 1], [1, 1, 65536]] {
            let g = LaunchGeometry {
                grid,
                block: 32,
                shared_bytes: 0,
            };
            let e = check_launch(&g, &[], &limits(None)).unwrap_err();
            assert!(e.contains("exceeds the device limit"), "{e}");
        }
    }

    #[test]
    fn rejects_bad_block() {
        let e = check_launch(&LaunchGeometry::linear(1, 0), &[], &limits(None)).unwrap_err();
        assert!(e.contains("block is 0"), "{e}");
        let e = check_launch(&LaunchGeometry::linear(1, 2048), &[], &limits(None)).unwrap_err();
        assert!(e.contains("device limit"), "{e}");
        let e = check_launch(&LaunchGeometry::linear(1, 512), &[], &limits(None)).unwrap_err();
        assert!(e.contains("max_threads_per_block 256"), "{e}");
    }

    #[test]
    fn rejects_too_much_shared() {
        let g = LaunchGeometry::linear(1, 32).with_shared_bytes(48 * 1024 + 1);
        let e = check_launch(&g, &[], &limits(None)).unwrap_err();
        assert!(e.contains("set_max_dynamic_shared_bytes"), "{e}");
        let mut lim = limits(None);
        lim.max_dynamic_shared = 227 * 1024;
        let g = LaunchGeometry::linear(1, 32).with_shared_bytes(227 * 1024);
        let e = check_launch(&g, &[], &lim).unwrap_err();
        assert!(e.contains("static"), "{e}");
    }

    #[test]
    fn checks_args_against_params() {
        let params = [ParamInfo { offset: 0, size: 8 }, ParamInfo { offset: 8, size: 4 }];
        let g = LaunchGeometry::linear(1, 32);
        let ok = [KernelArg::Ptr(16), KernelArg::F32(1.0)];
        assert_eq!(check_launch(&g, &ok, &limits(Some(&params))), Ok(()));
        let e = check_launch(&g, &ok[..1], &limits(Some(&params))).unwrap_err();
        assert!(e.contains("takes 2 parameters, 1 arguments"), "{e}");
        let bad = [KernelArg::Ptr(16), KernelArg::U64(1)];
        let e = check_launch(&g, &bad, &limits(Some(&params))).unwrap_err();
        assert!(e.contains("argument 1"), "{e}");
        let many = [KernelArg::U32(0); MAX_KERNEL_ARGS + 1];
        let e = check_launch(&g, &many, &limits(None)).unwrap_err();
        assert!(e.contains("at most"), "{e}");
    }

    #[test]
    fn arg_sizes_and_pointers() {
        let args = [
            KernelArg::Ptr(0xdead_beef),
            KernelArg::I32(-3),
            KernelArg::U32(7),
            KernelArg::I64(-9),
            KernelArg::U64(11),
            KernelArg::F32(2.5),
        ];
        let sizes: Vec<usize> = args.iter().map(KernelArg::size).collect();
        assert_eq!(sizes, [8, 4, 4, 8, 8, 4]);
        // The parameter pointers must point at the payloads inside the slice.
        unsafe {
            assert_eq!(*(args[0].param_ptr() as *const u64), 0xdead_beef);
            assert_eq!(*(args[1].param_ptr() as *const i32), -3);
            assert_eq!(*(args[2].param_ptr() as *const u32), 7);
            assert_eq!(*(args[3].param_ptr() as *const i64), -9);
            assert_eq!(*(args[4].param_ptr() as *const u64), 11);
            assert_eq!(*(args[5].param_ptr() as *const f32), 2.5);
        }
    }

    #[test]
    fn raw_stream_roundtrip() {
        assert_eq!(RawStream::null().as_raw(), 0);
        assert_eq!(RawStream::from_raw(0x1234).as_raw(), 0x1234);
        assert_eq!(LaunchGeometry::cover(1000, 256).grid, [4, 1, 1]);
        assert_eq!(LaunchGeometry::cover(0, 256).grid, [1, 1, 1]);
    }
}
