//! Owned device buffers for tests, benchmarks and the autotuner.
//!
//! Engines pass their own device pointers to kernels ([`crate::KernelArg::Ptr`]); this module
//! is for code that owns its data. Buffers are raw `cuMemAlloc` allocations (not cudarc
//! `CudaSlice`, so no per-use event tracking), and all copies and memsets are queued on the
//! owning [`Gpu`]'s stream.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::error::{drv, Result, RuntimeError};
use crate::gpu::{Gpu, GpuShared};
use crate::launch::KernelArg;

mod sealed {
    pub trait Sealed {}
}

/// Plain-old-data element types a [`DeviceBuffer`] can hold: every bit pattern is a valid
/// value, so bytes copied back from the device are always sound. Half-precision values
/// (f16/bf16) travel as their `u16` bit patterns.
pub trait DeviceCopy: Copy + Default + Send + Sync + 'static + sealed::Sealed {}

macro_rules! device_copy {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl DeviceCopy for $t {}
    )*};
}
device_copy!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

/// `len` elements of `T` in device memory, owned. Dropping it waits for the device context to
/// go idle (so no queued kernel still uses it) and frees it.
pub struct DeviceBuffer<T: DeviceCopy> {
    gpu: Arc<GpuShared>,
    ptr: sys::CUdeviceptr,
    len: usize,
    _marker: PhantomData<T>,
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("type", &std::any::type_name::<T>())
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

fn bytes_for<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| RuntimeError::InvalidArgument {
            reason: format!(
                "{len} elements of {} overflow the address space",
                std::any::type_name::<T>()
            ),
        })
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates without initialising. A zero-length buffer allocates nothing (pointer 0).
    fn alloc_uninit(gpu: &Gpu, len: usize) -> Result<Self> {
        let bytes = bytes_for::<T>(len)?;
        let ptr = if bytes == 0 {
            0
        } else {
            let _g = gpu.shared.bind()?;
            // SAFETY: context current; `T` is plain data, and callers initialise the memory
            // before it is read back.
            unsafe { result::malloc_sync(bytes) }.map_err(drv("cuMemAlloc"))?
        };
        Ok(DeviceBuffer {
            gpu: gpu.shared.clone(),
            ptr,
            len,
            _marker: PhantomData,
        })
    }

    /// The same allocation viewed as bytes (ownership moves; nothing is copied).
    pub fn into_bytes(self) -> DeviceBuffer<u8> {
        let bytes = DeviceBuffer {
            gpu: self.gpu.clone(),
            ptr: self.ptr,
            len: self.len * std::mem::size_of::<T>(),
            _marker: PhantomData,
        };
        // The allocation now belongs to `bytes`; dropping `self` would free it.
        std::mem::forget(self);
        bytes
    }

    /// `len` zeroed elements (memset queued on the `Gpu`'s stream).
    pub fn alloc_zeros(gpu: &Gpu, len: usize) -> Result<Self> {
        let mut buf = Self::alloc_uninit(gpu, len)?;
        buf.fill_bytes(0)?;
        Ok(buf)
    }

    /// A copy of `data` on the device. Waits for the copy to finish, so `data` may be dropped
    /// right after.
    pub fn from_host(gpu: &Gpu, data: &[T]) -> Result<Self> {
        let mut buf = Self::alloc_uninit(gpu, data.len())?;
        buf.copy_from_host(data)?;
        Ok(buf)
    }

    /// Overwrites the whole buffer with `data` (same length required) and waits for the copy.
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "copy_from_host: {} host elements for a buffer of {}",
                    data.len(),
                    self.len
                ),
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        let _g = self.gpu.bind()?;
        // SAFETY: `ptr` holds `len` elements; `data` is exactly that long and stays borrowed
        // until the stream has been synchronised below.
        unsafe {
            result::memcpy_htod_async(self.ptr, data, self.gpu.stream()).map_err(drv("cuMemcpyHtoDAsync"))?;
            result::stream::synchronize(self.gpu.stream()).map_err(drv("cuStreamSynchronize"))
        }
    }

    /// Copies the buffer back to the host. Queued on the `Gpu`'s stream after everything already
    /// there, then waits. Kernels launched on *other* streams must be synchronised first
    /// (e.g. [`Gpu::synchronize`]).
    pub fn to_host(&self) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.len];
        if self.len == 0 {
            return Ok(out);
        }
        let _g = self.gpu.bind()?;
        // SAFETY: `out` has exactly `len` elements and is not touched until the stream is
        // synchronised; any bit pattern is a valid `T` (`DeviceCopy`).
        unsafe {
            result::memcpy_dtoh_async(&mut out, self.ptr, self.gpu.stream())
                .map_err(drv("cuMemcpyDtoHAsync"))?;
            result::stream::synchronize(self.gpu.stream()).map_err(drv("cuStreamSynchronize"))?;
        }
        Ok(out)
    }

    /// Copies elements `start..start + len` back to the host (like [`DeviceBuffer::to_host`]),
    /// e.g. one slot of a large workspace.
    pub fn range_to_host(&self, start: usize, len: usize) -> Result<Vec<T>> {
        let end = start.checked_add(len).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(RuntimeError::InvalidArgument {
                reason: format!(
                    "range_to_host: elements {start}..{start}+{len} of a buffer of {}",
                    self.len
                ),
            });
        }
        let mut out = vec![T::default(); len];
        if len == 0 {
            return Ok(out);
        }
        let _g = self.gpu.bind()?;
        let src = self.ptr + (start * std::mem::size_of::<T>()) as u64;
        // SAFETY: `start..start+len` lies inside the allocation (checked above); `out` has
        // exactly `len` elements and is not touched until the stream is synchronised.
        unsafe {
            result::memcpy_dtoh_async(&mut out, src, self.gpu.stream()).map_err(drv("cuMemcpyDtoHAsync"))?;
            result::stream::synchronize(self.gpu.stream()).map_err(drv("cuStreamSynchronize"))?;
        }
        Ok(out)
    }

    /// Sets every byte to `byte` (`cuMemsetD8Async` on the `Gpu`'s stream, not waited for).
    /// Use it to poison outputs before a run (e.g. `0xFF` makes every f32 a NaN).
    pub fn fill_bytes(&mut self, byte: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let _g = self.gpu.bind()?;
        // SAFETY: `ptr` holds `size_bytes()` bytes; stream-ordered.
        unsafe { result::memset_d8_async(self.ptr, byte, self.size_bytes(), self.gpu.stream()) }
            .map_err(drv("cuMemsetD8Async"))
    }

    /// The device address (0 for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The device address as a kernel argument.
    pub fn arg(&self) -> KernelArg {
        KernelArg::Ptr(self.ptr)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        if let Ok(_g) = self.gpu.bind() {
            // Wait for every stream of the context, not just ours: a test may have launched on
            // another stream. Then free.
            let _ = result::ctx::synchronize();
            // SAFETY: allocated by `cuMemAlloc`, freed once, no work pending.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}
