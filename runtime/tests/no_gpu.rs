//! Runs everywhere, including CI machines with no GPU and no libcuda: opening a device must
//! give a typed error, never a panic, and agree with `gpu_unavailable_reason`.

use entkv_runtime::{device_count, driver_library_present, gpu_unavailable_reason, Gpu, RuntimeError};

#[test]
fn open_reports_typed_error_or_works() {
    let reason = gpu_unavailable_reason();
    let opened = Gpu::open(0);
    match (&reason, &opened) {
        (Some(reason), Err(e)) => {
            assert!(
                matches!(e, RuntimeError::NoDriver { .. } | RuntimeError::NoDevice { .. }),
                "unexpected error kind: {e:?}"
            );
            println!("no GPU here, as expected: reason = {reason}; Gpu::open(0) = {e}");
        }
        (None, Ok(gpu)) => println!("GPU present: {:?}", gpu.info()),
        (reason, opened) => panic!(
            "gpu_unavailable_reason() = {reason:?} disagrees with Gpu::open(0) = {:?}",
            opened.as_ref().map(|g| g.info().name.clone())
        ),
    }
}

#[test]
fn no_driver_library_means_no_driver_error() {
    if driver_library_present() {
        println!("libcuda is present; the no-driver path cannot be exercised here");
        return;
    }
    let reason = gpu_unavailable_reason().expect("no libcuda must give a reason");
    assert!(reason.contains("libcuda"), "reason: {reason}");
    assert!(matches!(device_count(), Err(RuntimeError::NoDriver { .. })));
    let err = Gpu::open(0).expect_err("open must fail without libcuda");
    assert!(matches!(err, RuntimeError::NoDriver { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with("no CUDA driver library"), "{msg}");
    // Calling again must still not panic (cudarc caches its library handle lazily).
    assert!(Gpu::open(0).is_err());
    assert!(gpu_unavailable_reason().is_some());
}

#[test]
fn huge_ordinal_is_typed_error() {
    match Gpu::open(usize::MAX) {
        Err(RuntimeError::NoDriver { .. }) => {}
        Err(RuntimeError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, usize::MAX),
        other => panic!("unexpected: {other:?}"),
    }
}

#[test]
fn error_messages_are_readable() {
    let e = RuntimeError::NoDevice { ordinal: 3, count: 1 };
    assert_eq!(
        e.to_string(),
        "no CUDA device with ordinal 3 (1 device(s) visible)"
    );
    let e = RuntimeError::ModuleLoad {
        detail: "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX".into(),
        jit_log: "ptxas application ptx input, line 7; error   : Unknown symbol 'x'\n".into(),
        source: None,
    };
    let s = e.to_string();
    assert!(s.contains("JIT log:\nptxas application ptx input, line 7"), "{s}");
    let e = RuntimeError::MissingFunction {
        name: "add_two".into(),
    };
    assert_eq!(e.to_string(), "kernel entry `add_two` not found in module");
    assert!(e.cuda_code().is_none());
}
