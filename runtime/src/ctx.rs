//! Current-context handling.
//!
//! Driver calls act on the calling thread's *current* context. An engine embedding this crate
//! may have its own context current, so every runtime operation makes our context current only
//! for its duration and then puts the caller's context back ([`CtxGuard`]). When the engine
//! uses the device's primary context (the CUDA runtime and PyTorch do, and so does
//! [`crate::Gpu::open`]) the guard costs one `cuCtxGetCurrent` and switches nothing.

use cudarc::driver::{result, sys};

use crate::error::{drv, Result};

/// Makes a context current on construction and restores the previous one on drop.
pub(crate) struct CtxGuard {
    /// `Some(prev)` when we switched; `prev` may be null (no context was current).
    restore: Option<sys::CUcontext>,
}

impl CtxGuard {
    /// Makes `ctx` current on this thread until the guard is dropped.
    ///
    /// Does not allocate and does not synchronise.
    pub(crate) fn bind(ctx: sys::CUcontext) -> Result<Self> {
        let current = result::ctx::get_current().map_err(drv("cuCtxGetCurrent"))?;
        if current == Some(ctx) {
            return Ok(CtxGuard { restore: None });
        }
        // SAFETY: `ctx` is a live context owned (retained) by the caller of `bind`.
        unsafe { result::ctx::set_current(ctx) }.map_err(drv("cuCtxSetCurrent"))?;
        Ok(CtxGuard {
            restore: Some(current.unwrap_or(std::ptr::null_mut())),
        })
    }
}

impl Drop for CtxGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.restore {
            // SAFETY: `prev` was current on this thread when the guard was made (or null,
            // which unbinds). Errors cannot be reported from drop.
            let _ = unsafe { result::ctx::set_current(prev) };
        }
    }
}
