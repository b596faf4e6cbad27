//! CUDA-event timing.

use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::error::{drv, Result, RuntimeError};
use crate::gpu::{Gpu, GpuShared};
use crate::launch::RawStream;

/// A start/end pair of timing-enabled CUDA events.
///
/// ```no_run
/// # use entkv_runtime::{Gpu, GpuTimer};
/// # fn main() -> Result<(), entkv_runtime::RuntimeError> {
/// let gpu = Gpu::open(0)?;
/// let mut t = GpuTimer::new(&gpu)?;
/// unsafe { t.record_start(gpu.stream_raw())? };
/// // ... launches on gpu.stream_raw() ...
/// unsafe { t.record_end(gpu.stream_raw())? };
/// let ms = t.elapsed_ms()?;
/// # let _ = ms; Ok(()) }
/// ```
pub struct GpuTimer {
    gpu: Arc<GpuShared>,
    start: sys::CUevent,
    end: sys::CUevent,
    started: bool,
    ended: bool,
}

// SAFETY: event handles may be used from any thread; driver calls are thread-safe.
unsafe impl Send for GpuTimer {}

impl std::fmt::Debug for GpuTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuTimer")
            .field("started", &self.started)
            .field("ended", &self.ended)
            .finish()
    }
}

impl GpuTimer {
    /// Creates the two events (timing enabled, default flags).
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let _g = gpu.shared.bind()?;
        let start =
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv("cuEventCreate"))?;
        let end = match result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: created just above, destroyed once.
                let _ = unsafe { result::event::destroy(start) };
                return Err(drv("cuEventCreate")(e));
            }
        };
        Ok(GpuTimer {
            gpu: gpu.shared.clone(),
            start,
            end,
            started: false,
            ended: false,
        })
    }

    /// Records the start event on `stream` (no host wait).
    ///
    /// # Safety
    /// `stream` must be a live stream of this `Gpu`'s context, or the null stream.
    pub unsafe fn record_start(&mut self, stream: RawStream) -> Result<()> {
        let _g = self.gpu.bind()?;
        // SAFETY: our live event; the caller guarantees the stream.
        unsafe { result::event::record(self.start, stream.0) }.map_err(drv("cuEventRecord"))?;
        self.started = true;
        self.ended = false;
        Ok(())
    }

    /// Records the end event on `stream` (no host wait).
    ///
    /// # Safety
    /// `stream` must be a live stream of this `Gpu`'s context, or the null stream.
    pub unsafe fn record_end(&mut self, stream: RawStream) -> Result<()> {
        if !self.started {
            return Err(RuntimeError::InvalidArgument {
                reason: "GpuTimer::record_end called before record_start".to_string(),
            });
        }
        let _g = self.gpu.bind()?;
        // SAFETY: our live event; the caller guarantees the stream.
        unsafe { result::event::record(self.end, stream.0) }.map_err(drv("cuEventRecord"))?;
        self.ended = true;
        Ok(())
    }

    /// Milliseconds between the recorded start and end. Waits (on the host) for the end event.
    pub fn elapsed_ms(&self) -> Result<f32> {
        if !(self.started && self.ended) {
            return Err(RuntimeError::InvalidArgument {
                reason: "GpuTimer::elapsed_ms needs record_start and record_end first".to_string(),
            });
        }
        let _g = self.gpu.bind()?;
        // SAFETY: both events are ours, live and recorded.
        unsafe {
            result::event::synchronize(self.end).map_err(drv("cuEventSynchronize"))?;
            result::event::elapsed(self.start, self.end).map_err(drv("cuEventElapsedTime"))
        }
    }
}

impl Drop for GpuTimer {
    fn drop(&mut self) {
        if let Ok(_g) = self.gpu.bind() {
            // SAFETY: our events, destroyed once (the driver defers destruction until recorded
            // work completes).
            unsafe {
                let _ = result::event::destroy(self.start);
                let _ = result::event::destroy(self.end);
            }
        }
    }
}
