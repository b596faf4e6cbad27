//! Typed errors for every fallible runtime operation.

use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;

/// Result alias used throughout the crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// Everything that can go wrong in the runtime. No public function of this crate panics on bad
/// input or on a missing driver; it returns one of these instead.
#[derive(thiserror::Error, Debug)]
pub enum RuntimeError {
    /// No CUDA driver library (`libcuda.so`) could be loaded on this machine.
    #[error("no CUDA driver library (libcuda.so) found: {detail}")]
    NoDriver {
        /// Human-readable detail (what was searched for).
        detail: String,
    },

    /// The requested device ordinal does not exist (`count` devices are visible).
    #[error("no CUDA device with ordinal {ordinal} ({count} device(s) visible)")]
    NoDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Number of devices the driver reports.
        count: usize,
    },

    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed: {source}")]
    Driver {
        /// The driver entry point (or cudarc wrapper) that failed.
        call: &'static str,
        /// The driver's error code and message.
        #[source]
        source: DriverError,
    },

    /// Loading PTX into a module failed. `jit_log` holds the driver's JIT error log
    /// (ptxas messages) when it produced one.
    #[error("loading PTX module failed: {detail}{}", fmt_log(jit_log))]
    ModuleLoad {
        /// What failed (driver error text or input problem).
        detail: String,
        /// The JIT compiler's error log (may be empty).
        jit_log: String,
        /// The driver error, when the failure came from the driver.
        #[source]
        source: Option<DriverError>,
    },

    /// The module has no kernel entry with this name.
    #[error("kernel entry `{name}` not found in module")]
    MissingFunction {
        /// The requested entry name.
        name: String,
    },

    /// A launch was rejected before reaching the driver (bad geometry, argument mismatch).
    #[error("invalid launch of `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel's entry name.
        kernel: String,
        /// Why the launch was rejected.
        reason: String,
    },

    /// The driver rejected a kernel launch.
    #[error("launch of `{kernel}` failed: {source}")]
    Launch {
        /// The kernel's entry name.
        kernel: String,
        /// The driver error.
        #[source]
        source: DriverError,
    },

    /// An argument to a runtime call (not a launch) was invalid.
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// Why the argument was rejected.
        reason: String,
    },
}

fn fmt_log(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{}", log.trim_end())
    }
}

impl RuntimeError {
    /// The CUDA error code behind this error, if it came from the driver.
    pub fn cuda_code(&self) -> Option<CUresult> {
        match self {
            RuntimeError::Driver { source, .. } | RuntimeError::Launch { source, .. } => Some(source.0),
            RuntimeError::ModuleLoad {
                source: Some(source), ..
            } => Some(source.0),
            _ => None,
        }
    }
}

/// `map_err` helper: wrap a [`DriverError`] with the name of the call that produced it.
pub(crate) fn drv(call: &'static str) -> impl FnOnce(DriverError) -> RuntimeError {
    move |source| RuntimeError::Driver { call, source }
}
