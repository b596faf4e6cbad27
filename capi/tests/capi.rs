//! The C API through its exported functions, on a machine without a GPU: bundles, argument and
//! problem checks, error codes and messages, the thread-local last error, the struct layout,
//! and (when a C compiler is present) the header compiled and linked against `libentkv.so`.

use std::ffi::{c_char, CStr, CString};
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use entkv::*;
use entkv_abi::{DType, DecodeSpec, PagedSpec};
use entkv_bundle::stub::stub_bundle;

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "entkv-capi-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The one specialization of the fake bundle: α 1.5, d 32, group 1, f16, page 16, 8-bit sketch.
fn spec() -> PagedSpec {
    PagedSpec::new(
        DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(),
        16,
        false,
        entkv_abi::DEFAULT_SKETCH_BITS,
    )
    .unwrap()
}

/// A bundle directory with every family's default row for [`spec`] (stub PTX, never loaded).
fn fake_bundle(t: &TempDir) -> PathBuf {
    let dir = t.0.join("bundle");
    stub_bundle(&[spec()], Vec::new())
        .unwrap()
        .write_dir(&dir)
        .unwrap();
    dir
}

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated, valid until the next failing call on this thread;
    // copied right away.
    unsafe { CStr::from_ptr(entkv_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn cstr(p: &Path) -> CString {
    CString::new(p.to_str().unwrap()).unwrap()
}

/// Open `dir`, asserting success.
fn open(dir: &Path) -> *mut EntkvBundle {
    let mut b = null_mut();
    // SAFETY: valid string and out-pointer.
    let s = unsafe { entkv_bundle_open(cstr(dir).as_ptr(), &mut b) };
    assert_eq!(s, ENTKV_OK, "{}", last_error());
    assert!(!b.is_null());
    b
}

fn problem() -> entkv_problem {
    entkv_problem {
        alpha: 1.5,
        head_dim: 32,
        page_size: 16,
        q_heads: 4,
        kv_heads: 4,
        kv_dtype: ENTKV_F16,
        alibi: 0,
        sketch_bits: 0,
        method: ENTKV_CERTIFIED,
        topk_budget_pages: 0,
        max_batch: 2,
        num_pages: 64,
        max_pages: 32,
    }
}

/// `entkv_decoder_create` on device 0; frees the decoder when one was made.
fn create(bundle: *const EntkvBundle, p: &entkv_problem) -> (entkv_status, String) {
    create_on(bundle, 0, p)
}

fn create_on(bundle: *const EntkvBundle, ordinal: i32, p: &entkv_problem) -> (entkv_status, String) {
    let mut d = null_mut::<EntkvDecoder>();
    // SAFETY: valid bundle handle, problem and out-pointer.
    let s = unsafe { entkv_decoder_create(bundle, ordinal, p, &mut d) };
    if s == ENTKV_OK {
        assert!(!d.is_null());
        // SAFETY: a handle just created, freed once.
        unsafe { entkv_decoder_free(d) };
        (s, String::new())
    } else {
        assert!(d.is_null(), "a failed create leaves NULL");
        (s, last_error())
    }
}

fn gpu_missing() -> bool {
    entkv_runtime::gpu_unavailable_reason().is_some()
}

// ------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------

#[test]
fn version_and_status_names_are_static_strings() {
    // SAFETY: static NUL-terminated strings.
    let v = unsafe { CStr::from_ptr(entkv_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    let name = |s| {
        // SAFETY: as above.
        unsafe { CStr::from_ptr(entkv_status_name(s)) }
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(name(ENTKV_OK), "ENTKV_OK");
    assert_eq!(name(ENTKV_ERR_SPEC), "ENTKV_ERR_SPEC");
    assert_eq!(name(ENTKV_ERR_PANIC), "ENTKV_ERR_PANIC");
    assert_eq!(name(-1), "ENTKV_ERR_UNKNOWN");
    let codes = [
        ENTKV_OK,
        ENTKV_ERR_NULL_ARGUMENT,
        ENTKV_ERR_INVALID_ARGUMENT,
        ENTKV_ERR_SPEC,
        ENTKV_ERR_BUNDLE,
        ENTKV_ERR_DEVICE,
        ENTKV_ERR_BATCH,
        ENTKV_ERR_TENSOR,
        ENTKV_ERR_WRONG_STEP,
        ENTKV_ERR_RUNTIME,
        ENTKV_ERR_INTERNAL,
        ENTKV_ERR_PANIC,
    ];
    assert_eq!(
        codes,
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        "the header's values"
    );
}

#[test]
fn bundles_open_and_missing_paths_name_the_path() {
    let t = TempDir::new("open");
    let dir = fake_bundle(&t);
    let b = open(&dir);
    // SAFETY: a handle from `open`, freed once; NULL is a no-op.
    unsafe {
        entkv_bundle_free(b);
        entkv_bundle_free(null_mut());
    }

    let missing = t.0.join("no-such-bundle");
    let mut b = std::ptr::dangling_mut::<EntkvBundle>(); // must be reset to NULL
                                                         // SAFETY: valid string and out-pointer.
    let s = unsafe { entkv_bundle_open(cstr(&missing).as_ptr(), &mut b) };
    assert_eq!(s, ENTKV_ERR_BUNDLE);
    assert!(b.is_null());
    let e = last_error();
    assert!(e.starts_with("entkv_bundle_open: cannot open bundle: "), "{e}");
    assert_eq!(e.matches(missing.to_str().unwrap()).count(), 1, "{e}");
    assert!(e.contains(missing.to_str().unwrap()), "{e}");

    // A directory that is not a bundle, and a tampered manifest.
    // SAFETY: as above.
    let s = unsafe { entkv_bundle_open(cstr(&t.0).as_ptr(), &mut b) };
    assert_eq!(s, ENTKV_ERR_BUNDLE);
    assert!(last_error().contains("not an entkv bundle"), "{}", last_error());
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"llvm_version\": \"stub\"", "\"llvm_version\": \"edited\"");
    std::fs::write(&manifest, text).unwrap();
    // SAFETY: as above.
    let s = unsafe { entkv_bundle_open(cstr(&dir).as_ptr(), &mut b) };
    assert_eq!(s, ENTKV_ERR_BUNDLE);
    assert!(last_error().contains("digest mismatch"), "{}", last_error());

    // Paths need not be UTF-8 (Unix); this one just does not exist.
    let raw = CString::new(b"/nonexistent/\xff\xfe".to_vec()).unwrap();
    // SAFETY: as above.
    let s = unsafe { entkv_bundle_open(raw.as_ptr(), &mut b) };
    assert_eq!(s, ENTKV_ERR_BUNDLE);
}

/// Call `$call` (unsafe), expect `ENTKV_ERR_NULL_ARGUMENT` and a message naming `$arg`.
macro_rules! expect_null {
    ($f:literal, $arg:literal, $call:expr) => {{
        // SAFETY: every non-NULL pointer passed is valid; the NULL one is what is tested.
        let s = unsafe { $call };
        assert_eq!(s, ENTKV_ERR_NULL_ARGUMENT, "{}", last_error());
        assert_eq!(last_error(), format!("{}: argument `{}` is NULL", $f, $arg));
    }};
}

#[test]
fn null_arguments_are_named() {
    let t = TempDir::new("null");
    let bundle = open(&fake_bundle(&t));
    let p = problem();
    let mut b = null_mut();
    let mut d = null_mut();
    let mut step = null_mut();
    let (mut x, mut y) = (0u64, 0u64);
    let mut m = 0i32;
    let buffers = entkv_buffers::default();
    let tensor = entkv_tensor::default();
    let lens = [5i32];
    let table = [0i32; 32];
    let (dn, sn) = (null::<EntkvDecoder>(), null::<EntkvStep>());
    expect_null!("entkv_bundle_open", "path", entkv_bundle_open(null(), &mut b));
    expect_null!(
        "entkv_bundle_open",
        "out",
        entkv_bundle_open(c"/x".as_ptr(), null_mut())
    );
    expect_null!(
        "entkv_decoder_create",
        "bundle",
        entkv_decoder_create(null(), 0, &p, &mut d)
    );
    expect_null!(
        "entkv_decoder_create",
        "problem",
        entkv_decoder_create(bundle, 0, null(), &mut d)
    );
    expect_null!(
        "entkv_decoder_create",
        "out",
        entkv_decoder_create(bundle, 0, &p, null_mut())
    );
    expect_null!(
        "entkv_decoder_create_ex",
        "bundle",
        entkv_decoder_create_ex(null(), 0, &p, ENTKV_CHECK_DEVICE_IDS, &mut d)
    );
    expect_null!(
        "entkv_decoder_create_ex",
        "out",
        entkv_decoder_create_ex(bundle, 0, &p, 0, null_mut())
    );
    let mut found = 0u32;
    expect_null!(
        "entkv_decoder_device_id_faults",
        "decoder",
        entkv_decoder_device_id_faults(dn, sn, null_mut(), 0, 0, null_mut(), 0, &mut found)
    );
    expect_null!(
        "entkv_decoder_workspace_size",
        "decoder",
        entkv_decoder_workspace_size(dn, &mut x)
    );
    expect_null!(
        "entkv_decoder_load_modules",
        "decoder",
        entkv_decoder_load_modules(dn, null_mut())
    );
    expect_null!(
        "entkv_decoder_metadata_size",
        "decoder",
        entkv_decoder_metadata_size(dn, &mut x)
    );
    expect_null!(
        "entkv_decoder_workspace_slot",
        "decoder",
        entkv_decoder_workspace_slot(dn, c"tau".as_ptr(), &mut x, &mut y)
    );
    expect_null!(
        "entkv_decoder_plan",
        "decoder",
        entkv_decoder_plan(dn, lens.as_ptr(), 1, table.as_ptr(), 32, &mut step)
    );
    expect_null!("entkv_step_method", "step", entkv_step_method(sn, &mut m));
    expect_null!(
        "entkv_decoder_run",
        "decoder",
        entkv_decoder_run(dn, sn, null_mut(), &buffers)
    );
    expect_null!(
        "entkv_decoder_append",
        "decoder",
        entkv_decoder_append(dn, sn, null_mut(), &buffers)
    );
    expect_null!(
        "entkv_decoder_build_metadata",
        "decoder",
        entkv_decoder_build_metadata(
            dn,
            null_mut(),
            lens.as_ptr(),
            1,
            table.as_ptr(),
            32,
            &tensor,
            0,
            0
        )
    );
    // SAFETY: frees are no-ops on NULL; the bundle is freed once.
    unsafe {
        entkv_decoder_free(null_mut());
        entkv_step_free(null_mut());
        entkv_bundle_free(bundle);
    }
}

/// An edit of the valid [`problem`], the status it must get, and a part of the message.
type ProblemCase = (fn(&mut entkv_problem), entkv_status, &'static str);

#[test]
fn bad_problems_are_refused_before_the_gpu_is_opened() {
    let t = TempDir::new("problems");
    let bundle = open(&fake_bundle(&t));
    let cases: &[ProblemCase] = &[
        (
            |p| p.alpha = 1.0,
            ENTKV_ERR_SPEC,
            "alpha must be a finite number > 1, got 1",
        ),
        (
            |p| p.alpha = f64::NAN,
            ENTKV_ERR_SPEC,
            "alpha must be a finite number > 1",
        ),
        (|p| p.head_dim = 48, ENTKV_ERR_SPEC, "unsupported head dim 48"),
        (|p| p.page_size = 8, ENTKV_ERR_SPEC, "unsupported page size 8"),
        (
            |p| (p.q_heads, p.kv_heads) = (3, 2),
            ENTKV_ERR_SPEC,
            "q_heads 3 must be a positive multiple of kv_heads 2",
        ),
        (|p| p.kv_heads = 0, ENTKV_ERR_SPEC, "kv_heads 0"),
        (
            |p| (p.q_heads, p.kv_heads) = (5, 1),
            ENTKV_ERR_SPEC,
            "unsupported GQA group size 5",
        ),
        (
            |p| p.sketch_bits = 5,
            ENTKV_ERR_SPEC,
            "unsupported sketch width 5 bits",
        ),
        (|p| p.max_batch = 0, ENTKV_ERR_SPEC, "max_batch must be ≥ 1"),
        (
            |p| (p.method, p.topk_budget_pages) = (ENTKV_TOPK, 0),
            ENTKV_ERR_SPEC,
            "top-k budget must be 1..=2147483647 pages, got 0",
        ),
        (
            // A C caller's -1.
            |p| (p.method, p.topk_budget_pages) = (ENTKV_TOPK, u32::MAX),
            ENTKV_ERR_SPEC,
            "top-k budget must be 1..=2147483647 pages, got 4294967295",
        ),
        (
            |p| p.kv_dtype = 9,
            ENTKV_ERR_INVALID_ARGUMENT,
            "problem.kv_dtype: unknown dtype code 9",
        ),
        (
            |p| p.kv_dtype = ENTKV_I32,
            ENTKV_ERR_SPEC,
            "problem.kv_dtype: I32 is not a K/V dtype",
        ),
        (
            |p| p.method = 7,
            ENTKV_ERR_INVALID_ARGUMENT,
            "problem.method: unknown method code 7",
        ),
        (
            |p| p.method = -1,
            ENTKV_ERR_INVALID_ARGUMENT,
            "unknown method code -1",
        ),
        (
            |p| p.alibi = 2,
            ENTKV_ERR_INVALID_ARGUMENT,
            "problem.alibi must be 0 or 1, got 2",
        ),
        // Supported, but not in this bundle.
        (
            |p| p.head_dim = 64,
            ENTKV_ERR_BUNDLE,
            "the bundle has no kernel for family `page_meta` at spec `a1p5_d64_g1",
        ),
        (
            |p| (p.q_heads, p.kv_heads, p.method) = (4, 2, ENTKV_DENSE),
            ENTKV_ERR_BUNDLE,
            "no kernel for family `decode_dense` at spec `a1p5_d32_g2",
        ),
        (|p| p.alibi = 1, ENTKV_ERR_BUNDLE, "_p16_alibi_s4"),
    ];
    for (i, (edit, status, msg)) in cases.iter().enumerate() {
        let mut p = problem();
        edit(&mut p);
        let (s, e) = create(bundle, &p);
        assert_eq!(s, *status, "case {i}: {e}");
        assert!(e.starts_with("entkv_decoder_create: "), "case {i}: {e}");
        assert!(e.contains(msg), "case {i}: expected `{msg}` in `{e}`");
    }

    // A negative ordinal is refused after the problem checks, before any driver call.
    let (s, e) = create_on(bundle, -1, &problem());
    assert_eq!(s, ENTKV_ERR_INVALID_ARGUMENT, "{e}");
    assert!(e.contains("device_ordinal -1 is negative"), "{e}");

    // Valid problems of every method: without a GPU, ENTKV_ERR_DEVICE naming the device.
    for (method, budget) in [
        (ENTKV_DENSE, 0),
        (ENTKV_TOPK, 4),
        (ENTKV_GAUSSIAN, 0),
        (ENTKV_CERTIFIED, 0),
        (ENTKV_AUTO, 0),
    ] {
        let p = entkv_problem {
            method,
            topk_budget_pages: budget,
            ..problem()
        };
        let (s, e) = create(bundle, &p);
        if gpu_missing() {
            assert_eq!(s, ENTKV_ERR_DEVICE, "method {method}: {e}");
            assert!(
                e.contains("entkv_decoder_create: cannot open CUDA device 0: "),
                "{e}"
            );
        } else {
            assert_eq!(s, ENTKV_OK, "method {method}: {e}");
        }
    }
    let (s, e) = create_on(bundle, 4096, &problem());
    assert_eq!(s, ENTKV_ERR_DEVICE, "{e}");
    assert!(e.contains("cannot open CUDA device 4096"), "{e}");
    // With the device-side id check: unknown flag bits are refused before anything else; the
    // stub bundle's decode modules define `guard_ids`, so the problem passes and the device
    // decides, as without the flag.
    let mut d = null_mut::<EntkvDecoder>();
    // SAFETY: valid handles and out-pointer.
    let s = unsafe { entkv_decoder_create_ex(bundle, 0, &problem(), 2, &mut d) };
    assert_eq!(s, ENTKV_ERR_INVALID_ARGUMENT);
    assert!(d.is_null());
    assert!(
        last_error().contains("flags 0x2 has bits other than ENTKV_CHECK_DEVICE_IDS"),
        "{}",
        last_error()
    );
    // SAFETY: valid handles and out-pointer.
    let s = unsafe { entkv_decoder_create_ex(bundle, 0, &problem(), ENTKV_CHECK_DEVICE_IDS, &mut d) };
    if gpu_missing() {
        assert_eq!(s, ENTKV_ERR_DEVICE, "{}", last_error());
        assert!(last_error().starts_with("entkv_decoder_create_ex: cannot open CUDA device 0"));
    } else {
        assert_eq!(s, ENTKV_OK, "{}", last_error());
        // SAFETY: a handle just created, freed once.
        unsafe { entkv_decoder_free(d) };
    }
    // SAFETY: freed once.
    unsafe { entkv_bundle_free(bundle) };
}

#[test]
fn decoders_outlive_their_bundle_handle() {
    if gpu_missing() {
        eprintln!(
            "skipped: no GPU ({})",
            entkv_runtime::gpu_unavailable_reason().unwrap()
        );
        return;
    }
    let t = TempDir::new("outlive");
    let bundle = open(&fake_bundle(&t));
    let mut d = null_mut();
    // SAFETY: valid handles and pointers; the bundle is freed before the decoder is used.
    unsafe {
        assert_eq!(
            entkv_decoder_create(bundle, 0, &problem(), &mut d),
            ENTKV_OK,
            "{}",
            last_error()
        );
        entkv_bundle_free(bundle);
        let (mut off, mut n, mut ws, mut md) = (0u64, 0u64, 0u64, 0u64);
        assert_eq!(entkv_decoder_workspace_size(d, &mut ws), ENTKV_OK);
        assert_eq!(entkv_decoder_metadata_size(d, &mut md), ENTKV_OK);
        assert!(ws > 0 && md > 0 && ws % 256 == 0 && md % 256 == 0);
        for name in [c"tau", c"support", c"kept"] {
            assert_eq!(
                entkv_decoder_workspace_slot(d, name.as_ptr(), &mut off, &mut n),
                ENTKV_OK
            );
            assert_eq!(off % 256, 0);
            assert!(n >= 2 * 4 && off + 4 * n <= ws);
        }
        let s = entkv_decoder_workspace_slot(d, c"sel_pages".as_ptr(), &mut off, &mut n);
        assert_eq!(s, ENTKV_ERR_INVALID_ARGUMENT);
        assert!(
            last_error().contains("no slot `sel_pages` (it has: "),
            "{}",
            last_error()
        );
        let bad = [0xffu8, 0];
        let s = entkv_decoder_workspace_slot(d, bad.as_ptr().cast::<c_char>(), &mut off, &mut n);
        assert_eq!(s, ENTKV_ERR_INVALID_ARGUMENT);
        assert!(
            last_error().contains("`name` is not valid UTF-8"),
            "{}",
            last_error()
        );
        // A batch that does not fit is refused before any kernel is loaded.
        let mut step = null_mut();
        let s = entkv_decoder_plan(d, [5i32, 6, 7].as_ptr(), 3, [0i32; 96].as_ptr(), 96, &mut step);
        assert_eq!(s, ENTKV_ERR_BATCH, "{}", last_error());
        assert!(step.is_null());
        let s = entkv_decoder_plan(d, null(), 0, null(), 0, &mut step);
        assert_eq!(s, ENTKV_ERR_BATCH, "{}", last_error());
        assert!(last_error().contains("at least one sequence"), "{}", last_error());
        entkv_decoder_free(d);
    }
}

#[test]
fn the_last_error_is_per_thread() {
    let mut b = null_mut();
    // SAFETY: valid out-pointer; NULL path is the failure.
    assert_eq!(
        unsafe { entkv_bundle_open(null(), &mut b) },
        ENTKV_ERR_NULL_ARGUMENT
    );
    let mine = last_error();
    assert!(mine.contains("`path`"), "{mine}");
    let theirs = std::thread::spawn(|| {
        let before = last_error();
        let mut x = 0u64;
        // SAFETY: NULL decoder is the failure.
        let s = unsafe { entkv_decoder_workspace_size(null(), &mut x) };
        (before, s, last_error())
    })
    .join()
    .unwrap();
    assert_eq!(theirs.0, "", "a fresh thread has no last error");
    assert_eq!(theirs.1, ENTKV_ERR_NULL_ARGUMENT);
    assert!(theirs.2.contains("entkv_decoder_workspace_size"), "{}", theirs.2);
    assert_eq!(
        last_error(),
        mine,
        "another thread's failure does not touch this thread's"
    );
    // A successful call keeps the last failure's message.
    // SAFETY: static string.
    let _ = unsafe { CStr::from_ptr(entkv_version()) };
    assert_eq!(last_error(), mine);
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<EntkvBundle>();
    assert_send_sync::<EntkvDecoder>();
    assert_send_sync::<EntkvStep>();
}

// ------------------------------------------------------------------------------------------
// Layout: Rust vs. the header
// ------------------------------------------------------------------------------------------

/// `size_of` a field, by a projection.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! field {
    ($t:ident, $f:ident) => {
        format!(
            "{}.{} {} {}",
            stringify!($t),
            stringify!($f),
            offset_of!($t, $f),
            field_size::<$t, _>(|x| &x.$f)
        )
    };
}

/// The lines `smoke.c` prints for the layout, computed from the Rust types.
fn rust_layout() -> Vec<String> {
    vec![
        format!("entkv_problem {}", size_of::<entkv_problem>()),
        field!(entkv_problem, alpha),
        field!(entkv_problem, head_dim),
        field!(entkv_problem, page_size),
        field!(entkv_problem, q_heads),
        field!(entkv_problem, kv_heads),
        field!(entkv_problem, kv_dtype),
        field!(entkv_problem, alibi),
        field!(entkv_problem, sketch_bits),
        field!(entkv_problem, method),
        field!(entkv_problem, topk_budget_pages),
        field!(entkv_problem, max_batch),
        field!(entkv_problem, num_pages),
        field!(entkv_problem, max_pages),
        format!("entkv_tensor {}", size_of::<entkv_tensor>()),
        field!(entkv_tensor, ptr),
        field!(entkv_tensor, dtype),
        field!(entkv_tensor, rank),
        field!(entkv_tensor, shape),
        field!(entkv_tensor, strides),
        format!("entkv_buffers {}", size_of::<entkv_buffers>()),
        field!(entkv_buffers, q),
        field!(entkv_buffers, k_pool),
        field!(entkv_buffers, v_pool),
        field!(entkv_buffers, block_table),
        field!(entkv_buffers, seq_lens),
        field!(entkv_buffers, alibi_slopes),
        field!(entkv_buffers, out),
        field!(entkv_buffers, metadata_ptr),
        field!(entkv_buffers, metadata_bytes),
        field!(entkv_buffers, workspace_ptr),
        field!(entkv_buffers, workspace_bytes),
        format!("entkv_id_fault {}", size_of::<entkv_id_fault>()),
        field!(entkv_id_fault, seq),
        field!(entkv_id_fault, count),
        field!(entkv_id_fault, logical_page),
        field!(entkv_id_fault, value),
    ]
}

#[test]
fn struct_layout_matches_the_header() {
    assert_eq!(size_of::<entkv_problem>(), 56);
    assert_eq!(std::mem::align_of::<entkv_problem>(), 8);
    assert_eq!(
        [
            offset_of!(entkv_problem, head_dim),
            offset_of!(entkv_problem, kv_dtype),
            offset_of!(entkv_problem, sketch_bits),
            offset_of!(entkv_problem, method),
            offset_of!(entkv_problem, topk_budget_pages),
            offset_of!(entkv_problem, max_pages),
        ],
        [8, 24, 32, 36, 40, 52]
    );
    assert_eq!(size_of::<entkv_tensor>(), 80);
    assert_eq!(
        [
            offset_of!(entkv_tensor, dtype),
            offset_of!(entkv_tensor, rank),
            offset_of!(entkv_tensor, shape),
            offset_of!(entkv_tensor, strides),
        ],
        [8, 12, 16, 48]
    );
    assert_eq!(size_of::<entkv_buffers>(), 7 * 80 + 4 * 8);
    assert_eq!(offset_of!(entkv_buffers, out), 6 * 80);
    assert_eq!(offset_of!(entkv_buffers, metadata_ptr), 560);
    assert_eq!(offset_of!(entkv_buffers, workspace_bytes), 584);
    assert_eq!(size_of::<entkv_id_fault>(), 16);
    assert_eq!(rust_layout().len(), 37);
}

/// Where the test binary's `libentkv.so` is (cargo builds the cdylib next to the test binaries).
fn cdylib_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.to_path_buf(), deps.parent()?.to_path_buf()]
        .into_iter()
        .find(|d| d.join("libentkv.so").is_file())
}

#[test]
fn header_compiles_and_links_against_the_cdylib() {
    if !cfg!(target_os = "linux") {
        eprintln!("skipped: the C smoke test links libentkv.so (Linux only)");
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if std::process::Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler (`{cc}`)");
        return;
    }
    let Some(lib) = cdylib_dir() else {
        eprintln!("skipped: libentkv.so not found next to the test binary");
        return;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = TempDir::new("cc");
    let exe = t.0.join("smoke");
    let out = std::process::Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(manifest.join("include"))
        .arg(manifest.join("tests/smoke.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg("-lentkv")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "compiling smoke.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Also as C++ when a C++ compiler is there (the header's extern "C" block).
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    if let Ok(o) = std::process::Command::new(&cxx)
        .args(["-fsyntax-only", "-Wall", "-Werror", "-x", "c++", "-I"])
        .arg(manifest.join("include"))
        .arg(manifest.join("include/entkv.h"))
        .output()
    {
        assert!(
            o.status.success(),
            "entkv.h as C++:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let missing = t.0.join("missing.entkvb");
    let run = std::process::Command::new(&exe).arg(&missing).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "smoke failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let layout = rust_layout();
    assert_eq!(
        lines[..layout.len()],
        layout.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
    let rest = &lines[layout.len()..];
    assert_eq!(rest[0], format!("version {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(rest[1], "open ENTKV_ERR_BUNDLE");
    assert_eq!(
        rest[2],
        "null ENTKV_ERR_NULL_ARGUMENT: entkv_decoder_workspace_size: argument `decoder` is NULL"
    );
    assert_eq!(rest[3], "OK");
}
