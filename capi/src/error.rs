//! Status codes, the thread-local last error, and the mapping of every Rust error to a code.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use entkv_abi::{BatchError, SpecError};
use entkv_bundle::BundleError;
use entkv_runtime::{EngineError, RuntimeError};

/// Result code of every fallible `entkv_*` call (`ENTKV_OK` = 0).
#[allow(non_camel_case_types)]
pub type entkv_status = i32;

/// Success.
pub const ENTKV_OK: entkv_status = 0;
/// A required pointer argument was NULL.
pub const ENTKV_ERR_NULL_ARGUMENT: entkv_status = 1;
/// An argument is malformed: an unknown enum code, a string that is not UTF-8, an unknown slot.
pub const ENTKV_ERR_INVALID_ARGUMENT: entkv_status = 2;
/// The problem is not supported: α, head dim, page size, GQA group, dtype, sketch width, heads,
/// capacity or top-k budget.
pub const ENTKV_ERR_SPEC: entkv_status = 3;
/// The bundle cannot be read or verified, or has no kernel for the problem.
pub const ENTKV_ERR_BUNDLE: entkv_status = 4;
/// No usable GPU: no driver, no device with that ordinal, or a device older than the bundle.
pub const ENTKV_ERR_DEVICE: entkv_status = 5;
/// Sequence lengths or block table do not fit the decoder, or the batch is empty or too large.
pub const ENTKV_ERR_BATCH: entkv_status = 6;
/// A device tensor or region is missing or has the wrong dtype, shape, strides or alignment.
pub const ENTKV_ERR_TENSOR: entkv_status = 7;
/// The step was planned by another decoder.
pub const ENTKV_ERR_WRONG_STEP: entkv_status = 8;
/// A CUDA driver call, module load or kernel launch failed.
pub const ENTKV_ERR_RUNTIME: entkv_status = 9;
/// An internal inconsistency (a bug in entkv or a bundle that contradicts itself).
pub const ENTKV_ERR_INTERNAL: entkv_status = 10;
/// A panic inside entkv was caught at the boundary (a bug in entkv).
pub const ENTKV_ERR_PANIC: entkv_status = 11;

/// The `ENTKV_*` name of a status code (`ENTKV_ERR_UNKNOWN` for other values).
pub fn status_name(status: entkv_status) -> &'static CStr {
    match status {
        ENTKV_OK => c"ENTKV_OK",
        ENTKV_ERR_NULL_ARGUMENT => c"ENTKV_ERR_NULL_ARGUMENT",
        ENTKV_ERR_INVALID_ARGUMENT => c"ENTKV_ERR_INVALID_ARGUMENT",
        ENTKV_ERR_SPEC => c"ENTKV_ERR_SPEC",
        ENTKV_ERR_BUNDLE => c"ENTKV_ERR_BUNDLE",
        ENTKV_ERR_DEVICE => c"ENTKV_ERR_DEVICE",
        ENTKV_ERR_BATCH => c"ENTKV_ERR_BATCH",
        ENTKV_ERR_TENSOR => c"ENTKV_ERR_TENSOR",
        ENTKV_ERR_WRONG_STEP => c"ENTKV_ERR_WRONG_STEP",
        ENTKV_ERR_RUNTIME => c"ENTKV_ERR_RUNTIME",
        ENTKV_ERR_INTERNAL => c"ENTKV_ERR_INTERNAL",
        ENTKV_ERR_PANIC => c"ENTKV_ERR_PANIC",
        _ => c"ENTKV_ERR_UNKNOWN",
    }
}

/// A failed call: its status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub status: entkv_status,
    pub message: String,
}

impl Error {
    pub fn new(status: entkv_status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn null(arg: &str) -> Error {
        Error::new(ENTKV_ERR_NULL_ARGUMENT, format!("argument `{arg}` is NULL"))
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ENTKV_ERR_INVALID_ARGUMENT, message)
    }
}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Error {
        Error::new(engine_status(&e), e.to_string())
    }
}

impl From<BundleError> for Error {
    fn from(e: BundleError) -> Error {
        Error::new(bundle_status(&e), e.to_string())
    }
}

/// The code of an engine error. Exhaustive on purpose: a new variant must be given a code.
pub(crate) fn engine_status(e: &EngineError) -> entkv_status {
    match e {
        EngineError::Spec(s) => spec_status(s),
        EngineError::Heads { .. } | EngineError::Capacity(_) | EngineError::Budget(_) => ENTKV_ERR_SPEC,
        EngineError::Bundle(b) => bundle_status(b),
        EngineError::Runtime(r) => runtime_status(r),
        EngineError::DeviceMismatch { .. } => ENTKV_ERR_DEVICE,
        EngineError::Batch(b) => batch_status(b),
        EngineError::EmptyBatch | EngineError::BatchTooLarge { .. } => ENTKV_ERR_BATCH,
        EngineError::BadTensor { .. } | EngineError::MissingTensor(_) => ENTKV_ERR_TENSOR,
        EngineError::WrongPlan => ENTKV_ERR_WRONG_STEP,
        EngineError::NoDeviceIdCheck { .. } => ENTKV_ERR_BUNDLE,
        EngineError::DeviceIdCheckOff => ENTKV_ERR_INVALID_ARGUMENT,
        EngineError::Internal(_) => ENTKV_ERR_INTERNAL,
    }
}

/// The code of a specialization error (exhaustive).
pub(crate) fn spec_status(e: &SpecError) -> entkv_status {
    match e {
        SpecError::BadAlpha(_)
        | SpecError::BadHeadDim(_)
        | SpecError::BadPageSize(_)
        | SpecError::BadGroup(_)
        | SpecError::BadDType(_)
        | SpecError::BadSketchBits(_)
        | SpecError::BadShape(_)
        | SpecError::BadTile { .. } => ENTKV_ERR_SPEC,
        SpecError::Batch(b) => batch_status(b),
    }
}

/// The code of a batch error (exhaustive).
pub(crate) fn batch_status(e: &BatchError) -> entkv_status {
    match e {
        BatchError::SeqLensCount { .. }
        | BatchError::BlockTableCount { .. }
        | BatchError::EmptySequence { .. }
        | BatchError::SequenceTooLong { .. }
        | BatchError::PageOutOfPool { .. }
        | BatchError::LongerThanPlanned { .. } => ENTKV_ERR_BATCH,
    }
}

/// The code of a bundle error (exhaustive).
pub(crate) fn bundle_status(e: &BundleError) -> entkv_status {
    match e {
        BundleError::Io { .. }
        | BundleError::NotABundle { .. }
        | BundleError::Schema { .. }
        | BundleError::ManifestChanged { .. }
        | BundleError::MissingArtifact { .. }
        | BundleError::Checksum { .. }
        | BundleError::Corrupt(_)
        | BundleError::NoKernel { .. } => ENTKV_ERR_BUNDLE,
    }
}

/// The code of a runtime error (exhaustive): no driver or device is `DEVICE`, everything the
/// driver or a launch reports later is `RUNTIME`.
pub(crate) fn runtime_status(e: &RuntimeError) -> entkv_status {
    match e {
        RuntimeError::NoDriver { .. } | RuntimeError::NoDevice { .. } => ENTKV_ERR_DEVICE,
        RuntimeError::Driver { .. }
        | RuntimeError::ModuleLoad { .. }
        | RuntimeError::MissingFunction { .. }
        | RuntimeError::InvalidLaunch { .. }
        | RuntimeError::Launch { .. }
        | RuntimeError::InvalidArgument { .. } => ENTKV_ERR_RUNTIME,
    }
}

thread_local! {
    /// The message of the last failing call on this thread (empty before the first failure).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Record `message` as this thread's last error.
pub(crate) fn set_last_error(message: &str) {
    // Interior NULs would truncate the C string; they never occur in our messages, but a path
    // could hold one in principle.
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // `try_with`: during thread teardown the slot may be gone; dropping the message is fine.
    let _ = LAST_ERROR.try_with(|slot| {
        if let Ok(mut s) = slot.try_borrow_mut() {
            *s = c;
        }
    });
}

/// Pointer to this thread's last error message (`""` when none). Valid until the next failing
/// call on this thread replaces it, or the thread exits.
pub(crate) fn last_error_ptr() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    LAST_ERROR
        .try_with(|slot| slot.try_borrow().map(|s| s.as_ptr()).ok())
        .ok()
        .flatten()
        .unwrap_or(EMPTY.as_ptr().cast())
}

/// Run the body of exported function `name`: catch panics, record the message of a failure
/// (prefixed with `name`) as this thread's last error, and return the status.
pub(crate) fn ffi(name: &str, body: impl FnOnce() -> Result<(), Error>) -> entkv_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ENTKV_OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{name}: {}", e.message));
            e.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_string());
            set_last_error(&format!(
                "{name}: panic inside entkv (a bug, please report it): {what}"
            ));
            ENTKV_ERR_PANIC
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: `last_error_ptr` returns a NUL-terminated string that lives until the next
        // failing call on this thread; it is copied before any.
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn panics_become_a_status_and_a_message() {
        let s = ffi("entkv_test", || panic!("boom {}", 42));
        assert_eq!(s, ENTKV_ERR_PANIC);
        assert!(last().contains("entkv_test: panic inside entkv"), "{}", last());
        assert!(last().contains("boom 42"), "{}", last());
        let s = ffi("entkv_test", || panic!("static"));
        assert_eq!(s, ENTKV_ERR_PANIC);
        assert!(last().ends_with("static"), "{}", last());
    }

    #[test]
    fn errors_are_prefixed_and_success_keeps_the_last_error() {
        assert_eq!(
            ffi("f", || Err(Error::invalid("bad\0thing"))),
            ENTKV_ERR_INVALID_ARGUMENT
        );
        assert_eq!(last(), "f: bad\\0thing");
        assert_eq!(ffi("g", || Ok(())), ENTKV_OK);
        assert_eq!(last(), "f: bad\\0thing");
    }

    #[test]
    fn every_code_has_a_name() {
        for s in ENTKV_OK..=ENTKV_ERR_PANIC {
            assert!(status_name(s).to_str().unwrap().starts_with("ENTKV_"));
            assert_ne!(status_name(s), c"ENTKV_ERR_UNKNOWN");
        }
        assert_eq!(status_name(99), c"ENTKV_ERR_UNKNOWN");
    }
}
