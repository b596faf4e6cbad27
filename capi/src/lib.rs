//! # entkv-capi
//!
//! A C ABI over the decode engine of `entkv-runtime` (`libentkv.so`, header
//! `capi/include/entkv.h`, written by hand and kept equal to the `#[repr(C)]` types here; a test
//! compiles the header and compares every size and offset). For C, C++ and Python (ctypes)
//! engines: opaque handles, integer codes, plain structs; no Rust type crosses the boundary.
//!
//! Every exported function checks its pointers (`ENTKV_ERR_NULL_ARGUMENT`, naming the
//! argument), catches panics (`ENTKV_ERR_PANIC`), and on failure stores a message for
//! [`entkv_last_error`] on the calling thread. Like the engine it wraps, this crate links no
//! LLVM and no DSL.

#![deny(missing_docs)]

mod error;
mod types;

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use entkv_runtime::engine::{DecodePlanner, Decoder, Step};
use entkv_runtime::{Bundle, Gpu, RawStream};

pub use error::{
    entkv_status, status_name, ENTKV_ERR_BATCH, ENTKV_ERR_BUNDLE, ENTKV_ERR_DEVICE, ENTKV_ERR_INTERNAL,
    ENTKV_ERR_INVALID_ARGUMENT, ENTKV_ERR_NULL_ARGUMENT, ENTKV_ERR_PANIC, ENTKV_ERR_RUNTIME, ENTKV_ERR_SPEC,
    ENTKV_ERR_TENSOR, ENTKV_ERR_WRONG_STEP, ENTKV_OK,
};
pub use types::{
    entkv_buffers, entkv_id_fault, entkv_problem, entkv_tensor, DEFAULT_SKETCH_BITS, ENTKV_AUTO, ENTKV_BF16,
    ENTKV_CERTIFIED, ENTKV_CHECK_DEVICE_IDS, ENTKV_DENSE, ENTKV_F16, ENTKV_F32, ENTKV_GAUSSIAN, ENTKV_I32,
    ENTKV_TOPK,
};

use error::{ffi, Error};

/// SM count the problem is validated with before a GPU is opened (the H200's): only sizes the
/// validation's workspace layout, which [`Decoder::new`] recomputes for the real device.
const VALIDATION_SM_COUNT: u32 = 132;

/// `entkv_bundle`: a verified kernel bundle (opaque to C).
#[derive(Debug)]
pub struct EntkvBundle(Arc<Bundle>);

/// `entkv_decoder`: a decoder for one problem on one GPU (opaque to C).
#[derive(Debug)]
pub struct EntkvDecoder(Decoder);

/// `entkv_step`: a planned step with its kernels loaded (opaque to C).
#[derive(Debug)]
pub struct EntkvStep(Step);

/// `&*p`, or `ENTKV_ERR_NULL_ARGUMENT` naming `arg`.
///
/// # Safety
/// `p` is NULL or points to a live, properly aligned `T` that is not mutated for `'a`.
unsafe fn arg<'a, T>(p: *const T, arg: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller guarantees `p` is NULL or valid for reads for `'a`.
    unsafe { p.as_ref() }.ok_or_else(|| Error::null(arg))
}

/// Check an out-pointer and clear what it points to (so a failed call leaves NULL there).
///
/// # Safety
/// `p` is NULL or points to a writable `*mut T`.
unsafe fn out_arg<'a, T>(p: *mut *mut T, arg: &str) -> Result<&'a mut *mut T, Error> {
    // SAFETY: the caller guarantees `p` is NULL or valid for writes.
    let slot = unsafe { p.as_mut() }.ok_or_else(|| Error::null(arg))?;
    *slot = std::ptr::null_mut();
    Ok(slot)
}

/// Check a scalar out-pointer.
///
/// # Safety
/// `p` is NULL or points to a writable `T`.
unsafe fn out_val<'a, T>(p: *mut T, arg: &str) -> Result<&'a mut T, Error> {
    // SAFETY: the caller guarantees `p` is NULL or valid for writes.
    unsafe { p.as_mut() }.ok_or_else(|| Error::null(arg))
}

/// A host array of `len` i32s; `p` may be NULL only when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` readable i32s that are not mutated for `'a`.
unsafe fn host_i32s<'a>(p: *const i32, len: u64, arg: &str) -> Result<&'a [i32], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(arg));
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= isize::MAX as usize / std::mem::size_of::<i32>())
        .ok_or_else(|| Error::invalid(format!("`{arg}` length {len} is too large")))?;
    // SAFETY: non-null, and the caller guarantees `len` readable, aligned i32s; the length was
    // checked to fit `isize` bytes.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for `'a`.
unsafe fn str_arg<'a>(p: *const c_char, arg: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::null(arg));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map_err(|e| Error::invalid(format!("`{arg}` is not valid UTF-8: {e}")))
}

/// A NUL-terminated path argument (any bytes on Unix; UTF-8 elsewhere).
///
/// # Safety
/// As [`str_arg`].
unsafe fn path_arg<'a>(p: *const c_char, arg: &str) -> Result<&'a std::path::Path, Error> {
    if p.is_null() {
        return Err(Error::null(arg));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: non-null and NUL-terminated by the caller's contract.
        let c = unsafe { CStr::from_ptr(p) };
        Ok(std::path::Path::new(std::ffi::OsStr::from_bytes(c.to_bytes())))
    }
    #[cfg(not(unix))]
    {
        // SAFETY: forwarded contract.
        Ok(std::path::Path::new(unsafe { str_arg(p, arg) }?))
    }
}

/// The library version (`"0.1.0"`), a static string.
#[no_mangle]
pub extern "C" fn entkv_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failing `entkv_*` call on this thread (`""` when none). Valid until
/// the next failing call on this thread, or the thread's exit. Never NULL.
#[no_mangle]
pub extern "C" fn entkv_last_error() -> *const c_char {
    error::last_error_ptr()
}

/// The name of a status code (`"ENTKV_ERR_SPEC"`; `"ENTKV_ERR_UNKNOWN"` for other values), a
/// static string.
#[no_mangle]
pub extern "C" fn entkv_status_name(status: entkv_status) -> *const c_char {
    status_name(status).as_ptr()
}

/// Open and verify a bundle (a directory with `manifest.json`, or a `.entkvb` file).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_bundle_open(path: *const c_char, out: *mut *mut EntkvBundle) -> entkv_status {
    ffi("entkv_bundle_open", || {
        // SAFETY: forwarded contract of this function.
        let path = unsafe { path_arg(path, "path") }?;
        // SAFETY: forwarded contract.
        let out = unsafe { out_arg(out, "out") }?;
        let bundle = Bundle::open(path).map_err(|e| {
            let mut err = Error::from(e);
            let shown = path.display().to_string();
            err.message = if err.message.contains(&shown) {
                format!("cannot open bundle: {}", err.message)
            } else {
                format!("cannot open bundle {shown}: {}", err.message)
            };
            err
        })?;
        *out = Box::into_raw(Box::new(EntkvBundle(Arc::new(bundle))));
        Ok(())
    })
}

/// Free a bundle (NULL is a no-op). Decoders made from it keep their own reference.
///
/// # Safety
/// `bundle` is NULL or a handle from [`entkv_bundle_open`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn entkv_bundle_free(bundle: *mut EntkvBundle) {
    if !bundle.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `entkv_bundle_open` and is freed once.
        drop(unsafe { Box::from_raw(bundle) });
    }
}

/// Create a decoder for `problem` on CUDA device `device_ordinal`. The problem is checked
/// against the bundle before the GPU is opened.
///
/// # Safety
/// `bundle` and `problem` are NULL or valid; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_create(
    bundle: *const EntkvBundle,
    device_ordinal: i32,
    problem: *const entkv_problem,
    out: *mut *mut EntkvDecoder,
) -> entkv_status {
    // SAFETY: forwarded contract.
    unsafe { create_decoder("entkv_decoder_create", bundle, device_ordinal, problem, 0, out) }
}

/// [`entkv_decoder_create`] with `flags`: [`ENTKV_CHECK_DEVICE_IDS`] checks the device's
/// lengths and page ids in every step (`Problem::check_device_ids`; bundles of schema 15 on).
///
/// # Safety
/// As [`entkv_decoder_create`].
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_create_ex(
    bundle: *const EntkvBundle,
    device_ordinal: i32,
    problem: *const entkv_problem,
    flags: u32,
    out: *mut *mut EntkvDecoder,
) -> entkv_status {
    // SAFETY: forwarded contract.
    unsafe {
        create_decoder(
            "entkv_decoder_create_ex",
            bundle,
            device_ordinal,
            problem,
            flags,
            out,
        )
    }
}

/// The body of both creates.
///
/// # Safety
/// As [`entkv_decoder_create`].
unsafe fn create_decoder(
    name: &str,
    bundle: *const EntkvBundle,
    device_ordinal: i32,
    problem: *const entkv_problem,
    flags: u32,
    out: *mut *mut EntkvDecoder,
) -> entkv_status {
    ffi(name, || {
        // SAFETY: forwarded contract of this function (for the three pointers).
        let (bundle, problem, out) = unsafe {
            (
                arg(bundle, "bundle")?,
                arg(problem, "problem")?,
                out_arg(out, "out")?,
            )
        };
        if flags & !ENTKV_CHECK_DEVICE_IDS != 0 {
            return Err(Error::invalid(format!(
                "flags {flags:#x} has bits other than ENTKV_CHECK_DEVICE_IDS ({ENTKV_CHECK_DEVICE_IDS:#x})"
            )));
        }
        let problem = entkv_runtime::Problem {
            check_device_ids: flags & ENTKV_CHECK_DEVICE_IDS != 0,
            ..problem.engine_problem()?
        };
        // Everything host-side first, so a bad problem is reported as such on any machine.
        DecodePlanner::new(&problem, bundle.0.clone(), VALIDATION_SM_COUNT)?;
        let ordinal = usize::try_from(device_ordinal)
            .map_err(|_| Error::invalid(format!("device_ordinal {device_ordinal} is negative")))?;
        let gpu = Gpu::open(ordinal).map_err(|e| {
            Error::new(
                error::ENTKV_ERR_DEVICE,
                format!("cannot open CUDA device {ordinal}: {e}"),
            )
        })?;
        let decoder = Decoder::new(&gpu, bundle.0.clone(), &problem)?;
        *out = Box::into_raw(Box::new(EntkvDecoder(decoder)));
        Ok(())
    })
}

/// Free a decoder (NULL is a no-op). Steps it planned can still be freed.
///
/// # Safety
/// `decoder` is NULL or a handle from [`entkv_decoder_create`] not freed before, and no call on
/// it is in flight.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_free(decoder: *mut EntkvDecoder) {
    if !decoder.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `entkv_decoder_create`, freed once.
        drop(unsafe { Box::from_raw(decoder) });
    }
}

/// Bytes of workspace a step needs.
///
/// # Safety
/// `decoder` is NULL or valid; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_workspace_size(
    decoder: *const EntkvDecoder,
    bytes: *mut u64,
) -> entkv_status {
    ffi("entkv_decoder_workspace_size", || {
        // SAFETY: forwarded contract.
        let (d, bytes) = unsafe { (arg(decoder, "decoder")?, out_val(bytes, "bytes")?) };
        *bytes = d.0.workspace_size();
        Ok(())
    })
}

/// Load every kernel module the decoder's method can launch now (the driver's JIT), rather than
/// in the first `entkv_decoder_plan` that needs each; `modules` (optional) gets their count.
///
/// # Safety
/// `decoder` is NULL or valid; `modules` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_load_modules(
    decoder: *const EntkvDecoder,
    modules: *mut u32,
) -> entkv_status {
    ffi("entkv_decoder_load_modules", || {
        // SAFETY: forwarded contract.
        let d = unsafe { arg(decoder, "decoder")? };
        let n = d.0.load_modules()?;
        if !modules.is_null() {
            // SAFETY: non-null and writable by the contract.
            unsafe { *modules = u32::try_from(n).unwrap_or(u32::MAX) };
        }
        Ok(())
    })
}

/// Bytes of page metadata the decoder keeps (0 for the dense method).
///
/// # Safety
/// `decoder` is NULL or valid; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_metadata_size(
    decoder: *const EntkvDecoder,
    bytes: *mut u64,
) -> entkv_status {
    ffi("entkv_decoder_metadata_size", || {
        // SAFETY: forwarded contract.
        let (d, bytes) = unsafe { (arg(decoder, "decoder")?, out_val(bytes, "bytes")?) };
        *bytes = d.0.metadata_size();
        Ok(())
    })
}

/// Where workspace buffer `name` (`tau`, `support`, `kept`, `sel_pages`, `sel_count`, …) lives:
/// byte offset from the workspace base and capacity in elements.
///
/// # Safety
/// `decoder` is NULL or valid; `name` is NULL or NUL-terminated; the out-pointers are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_workspace_slot(
    decoder: *const EntkvDecoder,
    name: *const c_char,
    offset_bytes: *mut u64,
    elems: *mut u64,
) -> entkv_status {
    ffi("entkv_decoder_workspace_slot", || {
        // SAFETY: forwarded contract.
        let (d, name, offset_bytes, elems) = unsafe {
            (
                arg(decoder, "decoder")?,
                str_arg(name, "name")?,
                out_val(offset_bytes, "offset_bytes")?,
                out_val(elems, "elems")?,
            )
        };
        let layout = d.0.planner().workspace_layout();
        let slot = layout.get(name).ok_or_else(|| {
            let names: Vec<&str> = layout.slots().iter().map(|s| s.name.as_str()).collect();
            Error::invalid(format!(
                "this decoder's workspace has no slot `{name}` (it has: {})",
                names.join(", ")
            ))
        })?;
        *offset_bytes = slot.offset;
        *elems = slot.len;
        Ok(())
    })
}

/// Plan a step for host copies of the lengths (`batch` i32s) and block table
/// (`block_table_len` = `batch × max_pages` i32s) and load its kernels.
///
/// # Safety
/// `decoder` is NULL or valid; `seq_lens` / `block_table` are NULL (only with a length of 0) or
/// point to that many i32s; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_plan(
    decoder: *const EntkvDecoder,
    seq_lens: *const i32,
    batch: u32,
    block_table: *const i32,
    block_table_len: u64,
    out: *mut *mut EntkvStep,
) -> entkv_status {
    ffi("entkv_decoder_plan", || {
        // SAFETY: forwarded contract.
        let (d, seq_lens, block_table, out) = unsafe {
            (
                arg(decoder, "decoder")?,
                host_i32s(seq_lens, batch as u64, "seq_lens")?,
                host_i32s(block_table, block_table_len, "block_table")?,
                out_arg(out, "out")?,
            )
        };
        let step = d.0.plan(seq_lens, block_table)?;
        *out = Box::into_raw(Box::new(EntkvStep(step)));
        Ok(())
    })
}

/// Free a step (NULL is a no-op).
///
/// # Safety
/// `step` is NULL or a handle from [`entkv_decoder_plan`] not freed before.
#[no_mangle]
pub unsafe extern "C" fn entkv_step_free(step: *mut EntkvStep) {
    if !step.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `entkv_decoder_plan`, freed once.
        drop(unsafe { Box::from_raw(step) });
    }
}

/// The method a step runs (`ENTKV_AUTO` resolved to `ENTKV_DENSE` or `ENTKV_CERTIFIED`).
///
/// # Safety
/// `step` is NULL or valid; `method` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn entkv_step_method(step: *const EntkvStep, method: *mut i32) -> entkv_status {
    ffi("entkv_step_method", || {
        // SAFETY: forwarded contract.
        let (s, method) = unsafe { (arg(step, "step")?, out_val(method, "method")?) };
        *method = types::method_code(&s.0.plan().method);
        Ok(())
    })
}

/// `run` or `append`.
///
/// # Safety
/// As [`entkv_decoder_run`].
unsafe fn launch_step(
    name: &str,
    append: bool,
    decoder: *const EntkvDecoder,
    step: *const EntkvStep,
    cu_stream: *mut c_void,
    buffers: *const entkv_buffers,
) -> entkv_status {
    ffi(name, || {
        // SAFETY: forwarded contract.
        let (d, s, b) = unsafe {
            (
                arg(decoder, "decoder")?,
                arg(step, "step")?,
                arg(buffers, "buffers")?,
            )
        };
        let b = b.decode_buffers()?;
        let stream = RawStream::from_raw(cu_stream as usize);
        // SAFETY: the C caller upholds the contract of `entkv_decoder_run` (live stream of the
        // device's context, device pointers of the described shapes valid until the step ends),
        // which is `Decoder::run`'s.
        unsafe {
            if append {
                d.0.append(&s.0, stream, &b)?;
            } else {
                d.0.run(&s.0, stream, &b)?;
            }
        }
        Ok(())
    })
}

/// Run a decode step on `cu_stream` (a `CUstream`; NULL = the legacy default stream):
/// asynchronous, no allocation, no host synchronisation, capturable in a CUDA graph.
///
/// # Safety
/// Handles NULL or valid. `cu_stream` is a live stream of the decoder's device context, and
/// every pointer in `buffers` is device memory of that context with the described shape, valid
/// until the step has finished on the stream. The device's lengths and block table hold what
/// the step was planned for: page ids may change, but each length stays between 1 and the
/// planned one and every page id it references in [0, num_pages) (checked by
/// `entkv_decoder_plan` on its host copies, and on the device's only by a decoder made with
/// [`ENTKV_CHECK_DEVICE_IDS`], which clamps them and records what was bad).
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_run(
    decoder: *const EntkvDecoder,
    step: *const EntkvStep,
    cu_stream: *mut c_void,
    buffers: *const entkv_buffers,
) -> entkv_status {
    // SAFETY: forwarded contract.
    unsafe { launch_step("entkv_decoder_run", false, decoder, step, cu_stream, buffers) }
}

/// Bring the page metadata up to date after each sequence of the step gained one token (its K
/// and V written, its length incremented). A no-op for the dense method.
///
/// # Safety
/// As [`entkv_decoder_run`].
#[no_mangle]
pub unsafe extern "C" fn entkv_decoder_append(
    decoder: *const EntkvDecoder,
    step: *const EntkvStep,
    cu_stream: *mut c_void,
    buffers: *const entkv_buffers,
) -> entkv_status {
    // SAFETY: forwarded contract.
    unsafe { launch_step("entkv_decoder_append", true, decoder, step, cu_stream, buffers) }
}

/// The bad lengths and page ids the last run or append of `step` found on the device, for a
/// decoder made with [`ENTKV_CHECK_DEVICE_IDS`]: one [`entkv_id_fault`] a sequence that had any.
/// `count` gets how many sequences had one; the first `min(count, capacity)` go to `faults`
/// (NULL only with `capacity` 0). Waits for `cu_stream` (a host sync: between steps, never
/// inside a captured graph).
///
/// # Safety
/// Handles NULL or valid; `faults` NULL or `capacity` writable records; `count` NULL or
/// writable; `cu_stream` and the workspace region as in [`entkv_decoder_run`], with a step of
/// `step` run on them.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn entkv_decoder_device_id_faults(
    decoder: *const EntkvDecoder,
    step: *const EntkvStep,
    cu_stream: *mut c_void,
    workspace_ptr: u64,
    workspace_bytes: u64,
    faults: *mut entkv_id_fault,
    capacity: u32,
    count: *mut u32,
) -> entkv_status {
    ffi("entkv_decoder_device_id_faults", || {
        // SAFETY: forwarded contract.
        let (d, s, count) = unsafe {
            (
                arg(decoder, "decoder")?,
                arg(step, "step")?,
                out_val(count, "count")?,
            )
        };
        if faults.is_null() && capacity > 0 {
            return Err(Error::null("faults"));
        }
        let workspace = entkv_runtime::engine::DeviceRegion {
            ptr: workspace_ptr,
            bytes: workspace_bytes,
        };
        let stream = RawStream::from_raw(cu_stream as usize);
        // SAFETY: the C caller upholds `Decoder::run`'s contract for the stream and workspace.
        let found = unsafe { d.0.device_id_faults(&s.0, stream, workspace)? };
        *count = u32::try_from(found.len()).unwrap_or(u32::MAX);
        for (i, f) in found.iter().take(capacity as usize).enumerate() {
            // SAFETY: `faults` holds `capacity` writable records (checked non-null above when
            // `capacity` > 0) and `i < capacity`.
            unsafe { faults.add(i).write(entkv_id_fault::of(f)) };
        }
        Ok(())
    })
}

/// Build the metadata of every full page of a batch after prefill (host copies of its lengths
/// and block table). A no-op for the dense method. Stages the page list with a pageable
/// host→device copy: not for a captured graph.
///
/// # Safety
/// `decoder`, `k_pool` NULL or valid; host arrays as in [`entkv_decoder_plan`]; `cu_stream`,
/// `k_pool` and the metadata region as in [`entkv_decoder_run`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn entkv_decoder_build_metadata(
    decoder: *const EntkvDecoder,
    cu_stream: *mut c_void,
    seq_lens: *const i32,
    batch: u32,
    block_table: *const i32,
    block_table_len: u64,
    k_pool: *const entkv_tensor,
    metadata_ptr: u64,
    metadata_bytes: u64,
) -> entkv_status {
    ffi("entkv_decoder_build_metadata", || {
        // SAFETY: forwarded contract.
        let (d, seq_lens, block_table, k_pool) = unsafe {
            (
                arg(decoder, "decoder")?,
                host_i32s(seq_lens, batch as u64, "seq_lens")?,
                host_i32s(block_table, block_table_len, "block_table")?,
                arg(k_pool, "k_pool")?,
            )
        };
        let k_pool = k_pool.device_tensor("k_pool")?;
        let metadata = entkv_runtime::DeviceRegion {
            ptr: metadata_ptr,
            bytes: metadata_bytes,
        };
        let stream = RawStream::from_raw(cu_stream as usize);
        // SAFETY: the C caller upholds this function's contract, which is
        // `Decoder::build_metadata`'s.
        unsafe {
            d.0.build_metadata(stream, seq_lens, block_table, &k_pool, metadata)
        }?;
        Ok(())
    })
}
