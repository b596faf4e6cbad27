//! Device discovery, the [`Gpu`] handle and [`DeviceInfo`].

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute_enum as Attr};
use cudarc::driver::{result, CudaContext, DriverError};

use crate::ctx::CtxGuard;
use crate::error::{drv, Result, RuntimeError};
use crate::launch::RawStream;

/// What the driver reports about a device. Everything an autotune cache key or a launch check
/// needs; read once by [`Gpu::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal (as seen through `CUDA_VISIBLE_DEVICES`).
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// `(major, minor)`, e.g. `(9, 0)`.
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Total device memory in bytes.
    pub total_mem_bytes: u64,
    /// Human-readable driver version: the CUDA driver API version from `cuDriverGetVersion`
    /// (e.g. `13.0`), followed by the kernel-module version when `/proc/driver/nvidia/version`
    /// is readable, e.g. `13.0 (kernel module 580.159)`.
    pub driver_version: String,
    /// CUDA driver API version `(major, minor)` from `cuDriverGetVersion`.
    pub cuda_driver_version: (u32, u32),
    /// Kernel-module (NVRM) version, e.g. `580.159`, if `/proc/driver/nvidia/version` is readable.
    pub kernel_module_version: Option<String>,
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum grid dimensions `[x, y, z]`.
    pub max_grid_dims: [u32; 3],
    /// Shared memory per block available without opt-in (bytes; 48 KiB on every recent GPU).
    pub max_shared_bytes_per_block: u32,
    /// Shared memory per block available with opt-in (bytes; 227 KiB on sm_90).
    pub max_shared_bytes_per_block_optin: u32,
    /// Warp size.
    pub warp_size: u32,
}

/// Shared state behind a [`Gpu`]: kept alive by every module, function, buffer and timer made
/// from it, so dropping the `Gpu` handle first is fine.
pub(crate) struct GpuShared {
    ctx: ManuallyDrop<Arc<CudaContext>>,
    /// Stream created (and owned) by us, non-blocking.
    stream: sys::CUstream,
    pub(crate) info: DeviceInfo,
}

// SAFETY: the raw stream handle is only used through driver calls, which are thread-safe; the
// context is `Send + Sync` already.
unsafe impl Send for GpuShared {}
unsafe impl Sync for GpuShared {}

impl GpuShared {
    pub(crate) fn cu_ctx(&self) -> sys::CUcontext {
        self.ctx.cu_ctx()
    }

    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream
    }

    pub(crate) fn bind(&self) -> Result<CtxGuard> {
        CtxGuard::bind(self.cu_ctx())
    }
}

impl Drop for GpuShared {
    fn drop(&mut self) {
        let ours = self.ctx.cu_ctx();
        let prev = result::ctx::get_current().ok().flatten();
        if let Ok(_guard) = CtxGuard::bind(ours) {
            // SAFETY: we created this stream and nothing else destroys it. Waiting first makes
            // sure no queued work still refers to it.
            unsafe {
                let _ = result::stream::synchronize(self.stream);
                let _ = result::stream::destroy(self.stream);
            }
        }
        // SAFETY: dropped exactly once, here. cudarc's drop binds the context and releases it.
        unsafe { ManuallyDrop::drop(&mut self.ctx) };
        if prev != Some(ours) {
            // SAFETY: `prev` was current before (or null, which unbinds).
            let _ = unsafe { result::ctx::set_current(prev.unwrap_or(std::ptr::null_mut())) };
        }
    }
}

/// A device, its context and a stream owned by this handle (for standalone use: tests,
/// benchmarks, the autotuner). Cheap to clone; all clones share one context and stream.
///
/// Engines launch on their own stream instead: see [`crate::launch`] and [`RawStream`].
#[derive(Clone)]
pub struct Gpu {
    pub(crate) shared: Arc<GpuShared>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.shared.info)
            .field("stream", &self.shared.stream)
            .finish()
    }
}

impl Gpu {
    /// Opens device `ordinal`: retains its *primary* context (the one the CUDA runtime and
    /// PyTorch use, so pointers and streams from those are valid here), creates a non-blocking
    /// stream and reads [`DeviceInfo`].
    ///
    /// Returns [`RuntimeError::NoDriver`] when no `libcuda` can be loaded and
    /// [`RuntimeError::NoDevice`] when the ordinal does not exist; never panics for either.
    /// The calling thread's current context is left as it was.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(RuntimeError::NoDevice { ordinal, count });
        }
        let prev = result::ctx::get_current().map_err(drv("cuCtxGetCurrent"))?;
        // `CudaContext::new` = cuInit + cuDeviceGet + cuDevicePrimaryCtxRetain + make current.
        let built = CudaContext::new(ordinal)
            .map_err(drv("cuDevicePrimaryCtxRetain"))
            .and_then(Gpu::from_context);
        let restore = match &built {
            Ok(gpu) => prev != Some(gpu.shared.cu_ctx()),
            Err(_) => true,
        };
        if restore {
            // SAFETY: `prev` was current before this call (or null, which unbinds).
            unsafe { result::ctx::set_current(prev.unwrap_or(std::ptr::null_mut())) }
                .map_err(drv("cuCtxSetCurrent"))?;
        }
        built
    }

    /// Builds a `Gpu` on an existing cudarc context (for Rust engines that already hold one).
    /// Creates a stream of its own with the raw driver API, so the engine's context is not
    /// switched into cudarc's multi-stream/event-tracking mode.
    pub fn from_context(ctx: Arc<CudaContext>) -> Result<Gpu> {
        let guard = CtxGuard::bind(ctx.cu_ctx())?;
        let info = query_info(&ctx)?;
        let stream =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(drv("cuStreamCreate"))?;
        drop(guard);
        Ok(Gpu {
            shared: Arc::new(GpuShared {
                ctx: ManuallyDrop::new(ctx),
                stream,
                info,
            }),
        })
    }

    /// Device information read at open time.
    pub fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.shared.info.ordinal
    }

    /// The cudarc context (primary context of the device when made by [`Gpu::open`]).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.shared.ctx
    }

    /// The raw handle of the stream this `Gpu` owns. Valid while any clone of this `Gpu` (or
    /// anything made from it) is alive.
    pub fn stream_raw(&self) -> RawStream {
        RawStream(self.shared.stream)
    }

    /// Waits until all work queued in this device context (on every stream) has finished and
    /// reports any asynchronous error (e.g. an illegal address in an earlier kernel).
    ///
    /// A host synchronisation: for tests, benchmarks and tools, never a serving path.
    pub fn synchronize(&self) -> Result<()> {
        let _g = self.shared.bind()?;
        result::ctx::synchronize().map_err(drv("cuCtxSynchronize"))
    }

    /// Waits until all work queued on this `Gpu`'s own stream has finished.
    pub fn synchronize_stream(&self) -> Result<()> {
        let _g = self.shared.bind()?;
        // SAFETY: our own live stream.
        unsafe { result::stream::synchronize(self.shared.stream) }.map_err(drv("cuStreamSynchronize"))
    }
}

/// `None` when a CUDA device is usable, otherwise why not (no driver library, no device, driver
/// initialisation failed). GPU tests call this and print `skipping: <reason>`.
pub fn gpu_unavailable_reason() -> Option<String> {
    match device_count() {
        Ok(0) => Some("no CUDA device (the driver reports 0 devices)".to_string()),
        Ok(_) => None,
        Err(RuntimeError::NoDriver { .. }) => Some("no CUDA driver library (libcuda.so) found".to_string()),
        Err(e) => Some(format!("CUDA driver unusable: {e}")),
    }
}

/// Whether a CUDA driver library can be loaded at all (no driver call is made).
pub fn driver_library_present() -> bool {
    // SAFETY: only tries to dlopen the library names cudarc would use, then closes it.
    unsafe { sys::is_culib_present() }
}

/// Number of visible CUDA devices. Checks for the driver library first, so it never reaches a
/// cudarc call that would panic without one; `cuInit` reporting no device gives `Ok(0)`.
pub fn device_count() -> Result<usize> {
    if !driver_library_present() {
        return Err(RuntimeError::NoDriver {
            detail: "dlopen of libcuda.so, libcuda.so.1 and the other names cudarc tries \
                     failed; install the NVIDIA driver or set LD_LIBRARY_PATH"
                .to_string(),
        });
    }
    match result::init() {
        Ok(()) => {}
        Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => return Ok(0),
        Err(e) => return Err(drv("cuInit")(e)),
    }
    let n = result::device::get_count().map_err(drv("cuDeviceGetCount"))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

fn attr(dev: sys::CUdevice, a: Attr) -> Result<u32> {
    // SAFETY: `dev` comes from a live context.
    let v = unsafe { result::device::get_attribute(dev, a) }.map_err(drv("cuDeviceGetAttribute"))?;
    Ok(u32::try_from(v).unwrap_or(0))
}

fn query_info(ctx: &CudaContext) -> Result<DeviceInfo> {
    let dev = ctx.cu_device();
    let name = result::device::get_name(dev).map_err(drv("cuDeviceGetName"))?;
    // SAFETY: `dev` comes from a live context.
    let total = unsafe { result::device::total_mem(dev) }.map_err(drv("cuDeviceTotalMem"))?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(drv("cuDriverGetVersion"))?;
    let cuda_driver_version = split_driver_version(version);
    let kernel_module_version = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| parse_kernel_module_version(&t));
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name,
        compute_capability: (
            attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(dev, Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: u64::from(attr(dev, Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
        total_mem_bytes: total as u64,
        driver_version: format_driver_version(cuda_driver_version, kernel_module_version.as_deref()),
        cuda_driver_version,
        kernel_module_version,
        max_threads_per_block: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_grid_dims: [
            attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_bytes_per_block: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_bytes_per_block_optin: attr(
            dev,
            Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        warp_size: attr(dev, Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
    })
}

/// `cuDriverGetVersion` encodes `1000 * major + 10 * minor`.
pub(crate) fn split_driver_version(v: i32) -> (u32, u32) {
    let v = u32::try_from(v).unwrap_or(0);
    (v / 1000, (v % 1000) / 10)
}

pub(crate) fn format_driver_version(cuda: (u32, u32), kernel_module: Option<&str>) -> String {
    match kernel_module {
        Some(k) => format!("{}.{} (kernel module {k})", cuda.0, cuda.1),
        None => format!("{}.{}", cuda.0, cuda.1),
    }
}

/// Extracts `580.159` from the `NVRM version:` line of `/proc/driver/nvidia/version`.
pub(crate) fn parse_kernel_module_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|tok| {
            tok.starts_with(|c: char| c.is_ascii_digit())
                && tok.contains('.')
                && tok.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_split() {
        assert_eq!(split_driver_version(13000), (13, 0));
        assert_eq!(split_driver_version(12080), (12, 8));
        assert_eq!(split_driver_version(-1), (0, 0));
        assert_eq!(format_driver_version((13, 0), None), "13.0");
        assert_eq!(
            format_driver_version((13, 0), Some("580.159")),
            "13.0 (kernel module 580.159)"
        );
    }

    #[test]
    fn kernel_module_version_parse() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159  Thu Oct  2 \
                           2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(
            parse_kernel_module_version(proprietary).as_deref(),
            Some("580.159")
        );
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release \
                    Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:47:37 UTC 2025\n";
        assert_eq!(parse_kernel_module_version(open).as_deref(), Some("580.95.05"));
        assert_eq!(parse_kernel_module_version("garbage"), None);
        assert_eq!(parse_kernel_module_version(""), None);
    }
}
