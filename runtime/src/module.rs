//! PTX modules and kernel [`Function`] handles.

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cudarc::driver::sys::{self, CUfunction_attribute_enum as FnAttr, CUjit_option_enum as Jit};
use cudarc::driver::{result, DriverError};

use crate::error::{drv, Result, RuntimeError};
use crate::gpu::{Gpu, GpuShared};

/// Size of each JIT log buffer handed to `cuModuleLoadDataEx`.
const JIT_LOG_BYTES: usize = 16 * 1024;

pub(crate) struct ModuleShared {
    pub(crate) gpu: Arc<GpuShared>,
    cu_module: sys::CUmodule,
    info_log: String,
}

// SAFETY: module handles may be used from any thread; driver calls are thread-safe.
unsafe impl Send for ModuleShared {}
unsafe impl Sync for ModuleShared {}

impl Drop for ModuleShared {
    fn drop(&mut self) {
        if let Ok(_g) = self.gpu.bind() {
            // SAFETY: loaded by us, unloaded once. Functions hold an `Arc` to this, so none
            // outlives the module.
            let _ = unsafe { result::module::unload(self.cu_module) };
        }
    }
}

/// A loaded PTX module. Cheap to clone. Keep it (or a [`Function`] from it) alive until every
/// launch of its kernels has finished: dropping the last handle unloads the module.
#[derive(Clone)]
pub struct Module {
    shared: Arc<ModuleShared>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("cu_module", &self.shared.cu_module)
            .finish()
    }
}

impl Gpu {
    /// JIT-compiles PTX text for this device and loads it (`cuModuleLoadDataEx`).
    ///
    /// On failure the error carries the driver's JIT error log (ptxas messages). On success the
    /// verbose JIT info log (registers, spills per kernel) is kept: [`Module::jit_info_log`].
    pub fn load_module(&self, ptx: &str) -> Result<Module> {
        let image = CString::new(ptx).map_err(|e| RuntimeError::ModuleLoad {
            detail: format!("PTX text contains a NUL byte at offset {}", e.nul_position()),
            jit_log: String::new(),
            source: None,
        })?;
        let _g = self.shared.bind()?;
        let mut error_log = vec![0u8; JIT_LOG_BYTES];
        let mut info_log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            Jit::CU_JIT_ERROR_LOG_BUFFER,
            Jit::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            Jit::CU_JIT_INFO_LOG_BUFFER,
            Jit::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            Jit::CU_JIT_LOG_VERBOSE,
        ];
        // Option values are passed as pointer-sized words; sizes and flags go by value.
        let mut values: [*mut c_void; 5] = [
            error_log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            info_log.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            std::ptr::without_provenance_mut(1),
        ];
        let mut cu_module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is a NUL-terminated PTX string; the option arrays have equal length
        // and the log buffers outlive the call; the context is current.
        let res = unsafe {
            sys::cuModuleLoadDataEx(
                &mut cu_module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        }
        .result();
        match res {
            Ok(()) => Ok(Module {
                shared: Arc::new(ModuleShared {
                    gpu: self.shared.clone(),
                    cu_module,
                    info_log: log_text(&info_log),
                }),
            }),
            Err(e) => Err(RuntimeError::ModuleLoad {
                detail: format!("cuModuleLoadDataEx: {e}"),
                jit_log: log_text(&error_log),
                source: Some(e),
            }),
        }
    }
}

/// Text up to the first NUL of a driver-filled log buffer.
fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim_end().to_string()
}

impl Module {
    /// The JIT compiler's verbose info log from loading (per-kernel registers, spills, shared
    /// memory, as `ptxas -v` prints them). May be empty.
    pub fn jit_info_log(&self) -> &str {
        &self.shared.info_log
    }

    /// Looks up a kernel entry and reads its attributes from the driver.
    ///
    /// [`RuntimeError::MissingFunction`] names the entry when the module has no such kernel.
    pub fn function(&self, name: &str) -> Result<Function> {
        let missing = || RuntimeError::MissingFunction {
            name: name.to_string(),
        };
        let c_name = CString::new(name).map_err(|_| missing())?;
        let _g = self.shared.gpu.bind()?;
        // SAFETY: live module; context current.
        let cu_function = match unsafe { result::module::get_function(self.shared.cu_module, c_name) } {
            Ok(f) => f,
            Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_FOUND)) => return Err(missing()),
            Err(e) => return Err(drv("cuModuleGetFunction")(e)),
        };
        let get = |a: FnAttr| -> Result<u32> {
            // SAFETY: live function handle; context current.
            let v = unsafe { result::function::get_function_attribute(cu_function, a) }
                .map_err(drv("cuFuncGetAttribute"))?;
            Ok(u32::try_from(v).unwrap_or(0))
        };
        let attrs = FunctionAttrs {
            num_regs: get(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            shared_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            const_bytes: get(FnAttr::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            max_threads_per_block: get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            ptx_version: get(FnAttr::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: get(FnAttr::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        };
        let max_dynamic_shared = get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        let params = query_params(cu_function);
        Ok(Function {
            shared: Arc::new(FunctionShared {
                module: self.shared.clone(),
                cu_function,
                name: name.to_string(),
                attrs,
                params,
                max_dynamic_shared: AtomicU32::new(max_dynamic_shared),
            }),
        })
    }
}

/// Static resource usage of a kernel, as the driver reports it after JIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionAttrs {
    /// Registers per thread.
    pub num_regs: u32,
    /// Local memory per thread in bytes (register spills and stack).
    pub local_bytes: u32,
    /// Statically allocated shared memory per block in bytes.
    pub shared_bytes: u32,
    /// Constant memory used in bytes.
    pub const_bytes: u32,
    /// Largest block this kernel can be launched with (limited by registers and `.maxntid`).
    pub max_threads_per_block: u32,
    /// Virtual architecture of the PTX the kernel was JIT-compiled from, `10 * major + minor`
    /// (e.g. 90 for `.target sm_90`; this is the PTX *target*, not the `.version` ISA).
    pub ptx_version: u32,
    /// SASS architecture, `10 * major + minor` (e.g. 90 for sm_90).
    pub binary_version: u32,
}

/// One kernel parameter's position in the parameter buffer (from `cuFuncGetParamInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// Byte offset in the parameter buffer.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

pub(crate) struct FunctionShared {
    pub(crate) module: Arc<ModuleShared>,
    pub(crate) cu_function: sys::CUfunction,
    pub(crate) name: String,
    pub(crate) attrs: FunctionAttrs,
    pub(crate) params: Option<Vec<ParamInfo>>,
    pub(crate) max_dynamic_shared: AtomicU32,
}

// SAFETY: function handles may be used from any thread; driver calls are thread-safe.
unsafe impl Send for FunctionShared {}
unsafe impl Sync for FunctionShared {}

/// A kernel entry of a loaded [`Module`]. Cheap to clone; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    pub(crate) shared: Arc<FunctionShared>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.shared.name)
            .field("attrs", &self.shared.attrs)
            .field("params", &self.shared.params)
            .field("max_dynamic_shared_bytes", &self.max_dynamic_shared_bytes())
            .finish()
    }
}

impl Function {
    /// The kernel's entry name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Registers, spills, shared memory, limits (read once when the function was looked up).
    pub fn attrs(&self) -> FunctionAttrs {
        self.shared.attrs
    }

    /// The kernel's parameter layout, when the driver can report it (`cuFuncGetParamInfo`,
    /// driver ≥ 12.4; `None` for kernels without parameters or on older drivers). When known,
    /// launches check the argument count and sizes against it.
    pub fn params(&self) -> Option<&[ParamInfo]> {
        self.shared.params.as_deref()
    }

    /// Largest dynamic shared memory (bytes) a launch may request right now. Defaults to what
    /// the driver allows without opt-in; raise it with [`Function::set_max_dynamic_shared_bytes`].
    pub fn max_dynamic_shared_bytes(&self) -> u32 {
        self.shared.max_dynamic_shared.load(Ordering::Relaxed)
    }

    /// Opts this kernel in to `bytes` of dynamic shared memory per block
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`). Needed above 48 KiB. Fails with
    /// [`RuntimeError::InvalidArgument`] when static + dynamic would exceed the device's
    /// opt-in limit. Not for the serving path (call it once after loading).
    pub fn set_max_dynamic_shared_bytes(&self, bytes: u32) -> Result<()> {
        let info = &self.shared.module.gpu.info;
        let limit = info
            .max_shared_bytes_per_block_optin
            .saturating_sub(self.shared.attrs.shared_bytes);
        if bytes > limit {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "`{}`: {bytes} B of dynamic shared memory requested, but the device allows \
                     {} B per block with opt-in and the kernel uses {} B statically (max {limit} B)",
                    self.shared.name, info.max_shared_bytes_per_block_optin, self.shared.attrs.shared_bytes
                ),
            });
        }
        let _g = self.shared.module.gpu.bind()?;
        // SAFETY: live function handle; context current; value checked above (fits i32).
        unsafe {
            result::function::set_function_attribute(
                self.shared.cu_function,
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(drv("cuFuncSetAttribute"))?;
        self.shared.max_dynamic_shared.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Maximum number of resident blocks per SM for `block` threads and `dynamic_shared_bytes`
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub fn occupancy_blocks_per_sm(&self, block: u32, dynamic_shared_bytes: u32) -> Result<u32> {
        let block = i32::try_from(block).map_err(|_| RuntimeError::InvalidArgument {
            reason: format!("block size {block} does not fit in i32"),
        })?;
        let _g = self.shared.module.gpu.bind()?;
        let mut n: std::ffi::c_int = 0;
        // SAFETY: live function; valid out-pointer; context current.
        unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut n,
                self.shared.cu_function,
                block,
                dynamic_shared_bytes as usize,
            )
        }
        .result()
        .map_err(drv("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// The raw driver handle (valid while this `Function` is alive).
    pub fn cu_function(&self) -> sys::CUfunction {
        self.shared.cu_function
    }

    pub(crate) fn device_info(&self) -> &crate::gpu::DeviceInfo {
        &self.shared.module.gpu.info
    }
}

/// Reads the parameter layout with `cuFuncGetParamInfo` when the loaded driver exports it.
/// Returns `None` on drivers older than 12.4 or if the query fails, which only turns off the
/// argument check in [`crate::launch`].
fn query_params(f: sys::CUfunction) -> Option<Vec<ParamInfo>> {
    // cudarc panics when a lazily resolved symbol is missing, so look it up ourselves first.
    // SAFETY: `culib()` is already loaded (we only get here with a live context) and we only
    // test for the symbol's presence.
    let present = unsafe { sys::culib().get::<*const c_void>("cuFuncGetParamInfo").is_ok() };
    if !present {
        return None;
    }
    let mut params = Vec::new();
    // Kernel parameter space is at most 32764 bytes, so at most that many parameters.
    for index in 0..32_768usize {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: live function handle; valid out-pointers; context current.
        match unsafe { sys::cuFuncGetParamInfo(f, index, &mut offset, &mut size) }.result() {
            Ok(()) => params.push(ParamInfo { offset, size }),
            Err(DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE)) => break,
            Err(_) => return None,
        }
    }
    // Be conservative: an empty or inconsistent answer means "unknown", never "no
    // parameters", so a driver quirk cannot make valid launches fail.
    let consistent = !params.is_empty()
        && params.iter().all(|p| p.size > 0)
        && params.windows(2).all(|w| w[1].offset >= w[0].offset + w[0].size);
    consistent.then_some(params)
}
