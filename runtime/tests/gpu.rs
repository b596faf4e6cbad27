//! End-to-end GPU checks of the runtime. Self-contained: the PTX is written by hand below.
//!
//! On a machine without a usable GPU this prints `skipping: <reason>` and passes. On a GPU run
//! it with output visible:
//!
//! ```text
//! cargo test -p entkv-runtime --test gpu -- --nocapture
//! ```
//!
//! Every check prints one line, `PASS <name>: <numbers>` or `FAIL <name>: <numbers>`, then a
//! summary; the test fails if any check failed.

use std::fmt::Display;

use entkv_runtime::{
    gpu_unavailable_reason, launch, DeviceBuffer, DeviceCopy, Function, Gpu, GpuTimer, KernelArg,
    LaunchGeometry, RawStream, RuntimeError,
};

/// Hand-written PTX (checked with `ptxas -arch=sm_90 -v`):
/// - `add_one(float* x, float delta, u32 n)`: `x[i] += delta` for `i < n`;
/// - `mix(u64* out, s32 a, u32 b, s64 c, u64 d, f32 e)`: echoes every argument kind;
/// - `limited(u32* out)`: `.maxntid 128`, 1 KiB static shared, `out[tid] = tid`;
/// - `dyn_shared(u32* out, u32 shared_bytes)`: `out[tid] = tid + 1` staged through the end of
///   the dynamic shared memory.
const PTX: &str = r#".version 8.0
.target sm_90
.address_size 64

// add_one(float* x, float delta, u32 n): x[i] += delta for i < n.
.visible .entry add_one(
    .param .u64 add_one_x,
    .param .f32 add_one_delta,
    .param .u32 add_one_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [add_one_x];
    ld.param.f32 %f1, [add_one_delta];
    ld.param.u32 %r1, [add_one_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    add.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
$L_done:
    ret;
}

// mix(u64* out, s32 a, u32 b, s64 c, u64 d, f32 e): one thread writes
// out[0]=sext(a), out[1]=zext(b), out[2]=c, out[3]=d, out[4]=bits(e).
.visible .entry mix(
    .param .u64 mix_out,
    .param .s32 mix_a,
    .param .u32 mix_b,
    .param .s64 mix_c,
    .param .u64 mix_d,
    .param .f32 mix_e
)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [mix_out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.s32 %r1, [mix_a];
    cvt.s64.s32 %rd3, %r1;
    st.global.u64 [%rd2], %rd3;
    ld.param.u32 %r2, [mix_b];
    cvt.u64.u32 %rd4, %r2;
    st.global.u64 [%rd2+8], %rd4;
    ld.param.s64 %rd5, [mix_c];
    st.global.u64 [%rd2+16], %rd5;
    ld.param.u64 %rd6, [mix_d];
    st.global.u64 [%rd2+24], %rd6;
    ld.param.f32 %f1, [mix_e];
    mov.b32 %r3, %f1;
    cvt.u64.u32 %rd7, %r3;
    st.global.u64 [%rd2+32], %rd7;
    ret;
}

// limited(u32* out): .maxntid 128 and 1 KiB of static shared memory.
// Each thread writes tid through shared memory: out[tid] = tid.
.visible .entry limited(
    .param .u64 limited_out
)
.maxntid 128, 1, 1
{
    .shared .align 4 .b8 smem[1024];
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [limited_out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    mov.u64 %rd4, smem;
    add.s64 %rd4, %rd4, %rd3;
    st.shared.u32 [%rd4], %r1;
    bar.sync 0;
    ld.shared.u32 %r2, [%rd4];
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r2;
    ret;
}

// dyn_shared(u32* out): out[tid] = tid + 1, staged through dynamic shared memory at byte
// offset (shared_bytes - 4*ntid), so a launch with more dynamic shared memory touches its end.
.extern .shared .align 16 .b8 dsmem[];
.visible .entry dyn_shared(
    .param .u64 dyn_shared_out,
    .param .u32 dyn_shared_bytes
)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [dyn_shared_out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.u32 %r1, [dyn_shared_bytes];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    shl.b32 %r4, %r3, 2;
    sub.u32 %r5, %r1, %r4;
    shl.b32 %r6, %r2, 2;
    add.u32 %r5, %r5, %r6;
    cvt.u64.u32 %rd3, %r5;
    mov.u64 %rd4, dsmem;
    add.s64 %rd4, %rd4, %rd3;
    add.u32 %r7, %r2, 1;
    st.shared.u32 [%rd4], %r7;
    bar.sync 0;
    ld.shared.u32 %r7, [%rd4];
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd5, %rd2, %rd5;
    st.global.u32 [%rd5], %r7;
    ret;
}
"#;

struct Checks {
    passed: usize,
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, detail: impl Display) {
        if ok {
            self.passed += 1;
            println!("PASS {name}: {detail}");
        } else {
            self.failed.push(name.to_string());
            println!("FAIL {name}: {detail}");
        }
    }

    fn info(&self, name: &str, detail: impl Display) {
        println!("INFO {name}: {detail}");
    }

    fn skip(&self, name: &str, detail: impl Display) {
        println!("SKIP {name}: {detail}");
    }
}

fn is_invalid_launch(r: &Result<(), RuntimeError>) -> bool {
    matches!(r, Err(RuntimeError::InvalidLaunch { .. }))
}

fn show(r: &Result<(), RuntimeError>) -> String {
    match r {
        Ok(()) => "Ok(())".to_string(),
        Err(e) => format!("Err({e})"),
    }
}

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

#[test]
fn gpu_end_to_end() {
    if let Some(reason) = gpu_unavailable_reason() {
        println!("skipping: {reason}");
        return;
    }
    let mut c = Checks {
        passed: 0,
        failed: Vec::new(),
    };
    if let Err(e) = run(&mut c) {
        c.check("no unexpected error", false, e);
    }
    println!(
        "SUMMARY: {} passed, {} failed{}",
        c.passed,
        c.failed.len(),
        if c.failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", c.failed.join(", "))
        }
    );
    assert!(c.failed.is_empty(), "failed checks: {:?}", c.failed);
}

fn run(c: &mut Checks) -> AnyResult {
    let gpu = Gpu::open(0)?;
    let info = gpu.info().clone();
    c.check(
        "device info",
        info.sm_count > 0 && info.l2_bytes > 0 && info.total_mem_bytes > 0,
        format!(
            "{} cc={}.{} sms={} l2={} MiB mem={} GiB driver={} max_shared_optin={} B",
            info.name,
            info.compute_capability.0,
            info.compute_capability.1,
            info.sm_count,
            info.l2_bytes >> 20,
            info.total_mem_bytes >> 30,
            info.driver_version,
            info.max_shared_bytes_per_block_optin
        ),
    );
    let bad = Gpu::open(1 << 20);
    c.check(
        "open(huge ordinal) -> NoDevice",
        matches!(bad, Err(RuntimeError::NoDevice { .. })),
        match &bad {
            Ok(_) => "Ok".to_string(),
            Err(e) => e.to_string(),
        },
    );

    let module = gpu.load_module(PTX)?;
    let jit_lines = module.jit_info_log().lines().count();
    c.check("load_module", true, format!("JIT info log: {jit_lines} lines"));
    for line in module.jit_info_log().lines() {
        println!("      | {line}");
    }
    let add_one = module.function("add_one")?;
    let mix = module.function("mix")?;
    let limited = module.function("limited")?;
    let dyn_shared = module.function("dyn_shared")?;

    check_attrs(c, &add_one, &limited, &dyn_shared);
    check_params(c, &add_one, &mix);
    check_add_one(c, &gpu, &add_one)?;
    check_mix(c, &gpu, &mix)?;
    check_limited(c, &gpu, &limited)?;
    check_dyn_shared(c, &gpu, &dyn_shared)?;
    check_invalid_launches(c, &gpu, &add_one)?;
    check_missing_and_bad_ptx(c, &gpu, &module);
    check_foreign_streams(c, &gpu, &add_one)?;
    check_buffers(c, &gpu)?;
    check_timer(c, &gpu, &add_one)?;
    gpu.synchronize()?;
    c.check("final synchronize", true, "no asynchronous error");
    Ok(())
}

fn check_attrs(c: &mut Checks, add_one: &Function, limited: &Function, dyn_shared: &Function) {
    let a = add_one.attrs();
    c.check(
        "attrs add_one",
        a.num_regs > 0
            && a.num_regs <= 255
            && a.local_bytes == 0
            && a.shared_bytes == 0
            && a.max_threads_per_block == 1024
            && a.ptx_version == 90
            && a.binary_version == 90,
        format!("{a:?} (expect regs in 1..=255, local 0, shared 0, max_threads 1024, ptx target 90, sm 90)"),
    );
    let l = limited.attrs();
    c.check(
        "attrs limited",
        l.max_threads_per_block == 128 && l.shared_bytes == 1024,
        format!(
            "max_threads_per_block={} shared_bytes={} (expect 128, 1024)",
            l.max_threads_per_block, l.shared_bytes
        ),
    );
    c.info(
        "max dynamic shared (default)",
        format!(
            "add_one={} B dyn_shared={} B",
            add_one.max_dynamic_shared_bytes(),
            dyn_shared.max_dynamic_shared_bytes()
        ),
    );
    match add_one.occupancy_blocks_per_sm(256, 0) {
        Ok(n) => c.check("occupancy add_one block=256", n >= 1, format!("{n} blocks/SM")),
        Err(e) => c.check("occupancy add_one block=256", false, e),
    }
}

fn check_params(c: &mut Checks, add_one: &Function, mix: &Function) {
    match (add_one.params(), mix.params()) {
        (Some(p1), Some(p2)) => {
            let s1: Vec<usize> = p1.iter().map(|p| p.size).collect();
            let s2: Vec<usize> = p2.iter().map(|p| p.size).collect();
            c.check(
                "param info",
                s1 == [8, 4, 4] && s2 == [8, 4, 4, 8, 8, 4],
                format!("add_one sizes {s1:?} (expect [8, 4, 4]); mix sizes {s2:?} (expect [8, 4, 4, 8, 8, 4]); mix {p2:?}"),
            );
        }
        other => c.skip(
            "param info",
            format!("driver did not report parameter layout: {other:?}"),
        ),
    }
}

fn check_add_one(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let n: u32 = 1000;
    let tail = 24usize;
    let host: Vec<f32> = (0..n as usize + tail).map(|i| i as f32 * 0.5).collect();
    let buf = DeviceBuffer::from_host(gpu, &host)?;
    let args = [buf.arg(), KernelArg::F32(1.0), KernelArg::U32(n)];
    let geom = LaunchGeometry::cover(n, 256);
    // SAFETY: add_one touches x[0..n], buf holds n + tail floats and outlives the launch.
    unsafe { launch(f, &geom, gpu.stream_raw(), &args)? };
    let out = buf.to_host()?;
    let max_err = (0..n as usize)
        .map(|i| (f64::from(out[i]) - (f64::from(host[i]) + 1.0)).abs())
        // A NaN output is an infinite error (`f64::max` would drop it).
        .fold(0.0f64, |m, e| if e.is_nan() { f64::INFINITY } else { m.max(e) });
    let tail_ok = (n as usize..host.len()).filter(|&i| out[i] == host[i]).count();
    c.check(
        "add_one n=1000 grid=4x256",
        max_err == 0.0 && tail_ok == tail,
        format!("max_abs_err={max_err} tail_untouched={tail_ok}/{tail}"),
    );
    Ok(())
}

fn check_mix(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let mut out = DeviceBuffer::<u64>::alloc_zeros(gpu, 5)?;
    out.fill_bytes(0xAB)?;
    let (a, b, cc, d, e) = (
        -123_456_789i32,
        0xFEDC_BA98u32,
        -0x1234_5678_9ABC_DEF0i64,
        0xFEDC_BA98_7654_3210u64,
        3.25f32,
    );
    let args = [
        out.arg(),
        KernelArg::I32(a),
        KernelArg::U32(b),
        KernelArg::I64(cc),
        KernelArg::U64(d),
        KernelArg::F32(e),
    ];
    // SAFETY: mix writes out[0..5] with one thread; out holds 5 u64.
    unsafe { launch(f, &LaunchGeometry::linear(1, 1), gpu.stream_raw(), &args)? };
    let got = out.to_host()?;
    let want = [
        i64::from(a) as u64,
        u64::from(b),
        cc as u64,
        d,
        u64::from(e.to_bits()),
    ];
    c.check(
        "mix (Ptr, I32, U32, I64, U64, F32)",
        got == want,
        format!("got {got:x?} want {want:x?}"),
    );
    Ok(())
}

fn check_limited(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let out = DeviceBuffer::<u32>::alloc_zeros(gpu, 256)?;
    // SAFETY: limited writes out[0..block]; out holds 256 u32.
    unsafe { launch(f, &LaunchGeometry::linear(1, 128), gpu.stream_raw(), &[out.arg()])? };
    let got = out.to_host()?;
    let ok = (0..128).all(|i| got[i] == i as u32) && got[128..].iter().all(|&v| v == 0);
    c.check(
        "limited block=128 (static shared)",
        ok,
        format!("out[0..4]={:?} out[127]={}", &got[..4], got[127]),
    );
    // SAFETY: rejected before reaching the driver.
    let r = unsafe { launch(f, &LaunchGeometry::linear(1, 256), gpu.stream_raw(), &[out.arg()]) };
    c.check(
        "limited block=256 > maxntid 128 -> InvalidLaunch",
        is_invalid_launch(&r),
        show(&r),
    );
    Ok(())
}

fn check_dyn_shared(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let block = 256u32;
    let out = DeviceBuffer::<u32>::alloc_zeros(gpu, block as usize)?;
    let run = |bytes: u32| -> Result<Vec<u32>, RuntimeError> {
        let mut o = DeviceBuffer::<u32>::alloc_zeros(gpu, block as usize)?;
        o.fill_bytes(0xFF)?;
        let geom = LaunchGeometry::linear(1, block).with_shared_bytes(bytes);
        // SAFETY: dyn_shared writes o[0..block] and shared bytes [bytes-4*block, bytes).
        unsafe { launch(f, &geom, gpu.stream_raw(), &[o.arg(), KernelArg::U32(bytes)])? };
        o.to_host()
    };
    let expect: Vec<u32> = (1..=block).collect();
    let got = run(block * 4)?;
    c.check(
        "dyn_shared 1 KiB",
        got == expect,
        format!("out[0..4]={:?} out[255]={}", &got[..4], got[255]),
    );
    let big = 100 * 1024u32;
    // SAFETY: rejected before reaching the driver (no opt-in yet).
    let r = unsafe {
        launch(
            f,
            &LaunchGeometry::linear(1, block).with_shared_bytes(big),
            gpu.stream_raw(),
            &[out.arg(), KernelArg::U32(big)],
        )
    };
    c.check(
        "dyn_shared 100 KiB without opt-in -> InvalidLaunch",
        is_invalid_launch(&r),
        show(&r),
    );
    match f.set_max_dynamic_shared_bytes(big) {
        Ok(()) => {
            let got = run(big)?;
            c.check(
                "dyn_shared 100 KiB after opt-in",
                got == expect,
                format!(
                    "max_dynamic_shared_bytes={} out[0..4]={:?}",
                    f.max_dynamic_shared_bytes(),
                    &got[..4]
                ),
            );
        }
        Err(e) => c.check("set_max_dynamic_shared_bytes(100 KiB)", false, e),
    }
    let too_much = gpu.info().max_shared_bytes_per_block_optin + 1;
    let r = f.set_max_dynamic_shared_bytes(too_much);
    c.check(
        "set_max_dynamic_shared_bytes(optin+1) -> InvalidArgument",
        matches!(r, Err(RuntimeError::InvalidArgument { .. })),
        show(&r),
    );
    Ok(())
}

fn check_invalid_launches(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let host = vec![7.0f32; 64];
    let buf = DeviceBuffer::from_host(gpu, &host)?;
    let good = [buf.arg(), KernelArg::F32(1.0), KernelArg::U32(64)];
    let g = |grid: [u32; 3], block: u32, shared: u32| LaunchGeometry {
        grid,
        block,
        shared_bytes: shared,
    };
    let cases: Vec<(&str, LaunchGeometry, Vec<KernelArg>)> = vec![
        ("grid.x=0", g([0, 1, 1], 64, 0), good.to_vec()),
        ("grid.z=0", g([1, 1, 0], 64, 0), good.to_vec()),
        ("grid.x=2^31", g([1 << 31, 1, 1], 64, 0), good.to_vec()),
        ("grid.y=65536", g([1, 65536, 1], 64, 0), good.to_vec()),
        ("block=0", g([1, 1, 1], 0, 0), good.to_vec()),
        ("block=2048", g([1, 1, 1], 2048, 0), good.to_vec()),
        ("shared=1 MiB", g([1, 1, 1], 64, 1 << 20), good.to_vec()),
    ];
    for (name, geom, args) in cases {
        // SAFETY: every case is rejected before reaching the driver.
        let r = unsafe { launch(f, &geom, gpu.stream_raw(), &args) };
        c.check(
            &format!("invalid launch {name} -> InvalidLaunch"),
            is_invalid_launch(&r),
            show(&r),
        );
    }
    if f.params().is_some() {
        // SAFETY: rejected before reaching the driver (argument check).
        let r = unsafe { launch(f, &LaunchGeometry::linear(1, 64), gpu.stream_raw(), &good[..2]) };
        c.check("too few args -> InvalidLaunch", is_invalid_launch(&r), show(&r));
        let wrong = [buf.arg(), KernelArg::F32(1.0), KernelArg::U64(64)];
        // SAFETY: as above.
        let r = unsafe { launch(f, &LaunchGeometry::linear(1, 64), gpu.stream_raw(), &wrong) };
        c.check(
            "U64 for a u32 param -> InvalidLaunch",
            is_invalid_launch(&r),
            show(&r),
        );
    } else {
        c.skip("argument checks", "driver did not report parameter layout");
    }
    let after = buf.to_host()?;
    c.check(
        "rejected launches queued nothing",
        after == host,
        format!("buffer still all 7.0: {}", after == host),
    );
    Ok(())
}

fn check_missing_and_bad_ptx(c: &mut Checks, gpu: &Gpu, module: &entkv_runtime::Module) {
    let r = module.function("add_two");
    c.check(
        "function(\"add_two\") -> MissingFunction",
        matches!(&r, Err(RuntimeError::MissingFunction { name }) if name == "add_two"),
        match &r {
            Ok(_) => "Ok".to_string(),
            Err(e) => e.to_string(),
        },
    );
    let r = module.function("add\0one");
    c.check(
        "function(name with NUL) -> MissingFunction",
        matches!(r, Err(RuntimeError::MissingFunction { .. })),
        "typed error",
    );
    let broken = ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry broken(\n    .param .u64 p\n)\n{\n    ld.param.u64 %rd1, [p];\n    ret;\n}\n";
    match gpu.load_module(broken) {
        Err(RuntimeError::ModuleLoad { jit_log, detail, .. }) => c.check(
            "bad PTX -> ModuleLoad with JIT log",
            !jit_log.trim().is_empty(),
            format!("{detail}; log: {}", jit_log.lines().next().unwrap_or("<empty>")),
        ),
        Err(e) => c.check("bad PTX -> ModuleLoad with JIT log", false, e),
        Ok(_) => c.check("bad PTX -> ModuleLoad with JIT log", false, "loaded"),
    }
    let r = gpu.load_module("abc\0def");
    c.check(
        "PTX with NUL -> ModuleLoad",
        matches!(r, Err(RuntimeError::ModuleLoad { .. })),
        "typed error",
    );
}

fn check_foreign_streams(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    use entkv_runtime::cudarc::driver::result;
    let n = 4096u32;
    let buf = DeviceBuffer::from_host(gpu, &vec![1.0f32; n as usize])?;
    let args = [buf.arg(), KernelArg::F32(2.0), KernelArg::U32(n)];
    let geom = LaunchGeometry::cover(n, 128);

    // The legacy default stream, with no context current on this thread beforehand.
    // SAFETY: unbinding is always allowed.
    unsafe { result::ctx::set_current(std::ptr::null_mut()) }?;
    // SAFETY: the null stream belongs to the current (primary) context during the launch.
    unsafe { launch(f, &geom, RawStream::null(), &args)? };
    let current_after = result::ctx::get_current()?;
    gpu.synchronize()?;
    let got = buf.to_host()?;
    c.check(
        "launch on null stream",
        got.iter().all(|&v| v == 3.0),
        format!("out[0]={} out[{}]={}", got[0], n - 1, got[n as usize - 1]),
    );
    c.check(
        "caller's (empty) current context restored after launch",
        current_after.is_none(),
        format!("current after launch = {current_after:?}"),
    );

    // An "engine" stream created outside the runtime, with the context already current.
    gpu.context().bind_to_thread()?;
    let engine_stream = result::stream::create(result::stream::StreamKind::NonBlocking)?;
    // SAFETY: engine_stream is a live stream of the same context; buf outlives the launch.
    unsafe { launch(f, &geom, RawStream(engine_stream), &args)? };
    // SAFETY: our stream, synchronised then destroyed once.
    unsafe {
        result::stream::synchronize(engine_stream)?;
        result::stream::destroy(engine_stream)?;
    }
    let got = buf.to_host()?;
    c.check(
        "launch on caller-created stream",
        got.iter().all(|&v| v == 5.0),
        format!("out[0]={} (expect 5)", got[0]),
    );
    Ok(())
}

fn roundtrip<T: DeviceCopy + PartialEq + std::fmt::Debug>(
    c: &mut Checks,
    gpu: &Gpu,
    name: &str,
    data: &[T],
    all_ff: T,
) -> AnyResult {
    let mut b = DeviceBuffer::from_host(gpu, data)?;
    let back = b.to_host()?;
    let size_ok = b.size_bytes() == std::mem::size_of_val(data) && b.len() == data.len();
    b.fill_bytes(0xFF)?;
    let poisoned = b.to_host()?;
    let z = DeviceBuffer::<T>::alloc_zeros(gpu, data.len())?;
    let zeros = z.to_host()?;
    c.check(
        &format!("buffer {name}"),
        back == data
            && size_ok
            && poisoned.iter().all(|v| *v == all_ff)
            && zeros.iter().all(|v| *v == T::default()),
        format!(
            "len={} bytes={} roundtrip={} poison={} zeros={}",
            b.len(),
            b.size_bytes(),
            back == data,
            poisoned.iter().all(|v| *v == all_ff),
            zeros.iter().all(|v| *v == T::default())
        ),
    );
    Ok(())
}

fn check_buffers(c: &mut Checks, gpu: &Gpu) -> AnyResult {
    roundtrip(c, gpu, "u8", &[1u8, 2, 255, 0, 7], u8::MAX)?;
    roundtrip(c, gpu, "u16 (f16 bits)", &[0x3C00u16, 0xC000, 0x7BFF], u16::MAX)?;
    roundtrip(c, gpu, "i32", &[-1i32, 0, i32::MIN, i32::MAX], -1)?;
    roundtrip(c, gpu, "u32", &[0u32, 1, u32::MAX], u32::MAX)?;
    roundtrip(c, gpu, "i64", &[i64::MIN, -5, i64::MAX], -1)?;
    roundtrip(c, gpu, "u64", &[u64::MAX, 0, 1 << 40], u64::MAX)?;
    let f = [1.5f32, -0.0, f32::MAX];
    let mut b = DeviceBuffer::from_host(gpu, &f)?;
    let back = b.to_host()?;
    b.fill_bytes(0xFF)?;
    let nan = b.to_host()?.iter().all(|v| v.is_nan());
    c.check(
        "buffer f32",
        back == f && nan,
        format!("roundtrip={} poison_is_nan={nan}", back == f),
    );
    let empty = DeviceBuffer::<f32>::alloc_zeros(gpu, 0)?;
    c.check(
        "empty buffer",
        empty.is_empty() && empty.device_ptr() == 0 && empty.to_host()?.is_empty(),
        "len 0, ptr 0, to_host empty",
    );
    let mut b = DeviceBuffer::<u32>::alloc_zeros(gpu, 4)?;
    let r = b.copy_from_host(&[1, 2, 3]);
    c.check(
        "copy_from_host length mismatch -> InvalidArgument",
        matches!(r, Err(RuntimeError::InvalidArgument { .. })),
        show(&r),
    );
    Ok(())
}

fn check_timer(c: &mut Checks, gpu: &Gpu, f: &Function) -> AnyResult {
    let t = GpuTimer::new(gpu)?;
    let r = t.elapsed_ms().map(|_| ());
    c.check(
        "timer elapsed before record -> InvalidArgument",
        matches!(r, Err(RuntimeError::InvalidArgument { .. })),
        show(&r),
    );
    let n: u32 = 64 << 20; // 256 MiB of f32, larger than L2
    let buf = DeviceBuffer::<f32>::alloc_zeros(gpu, n as usize)?;
    let args = [buf.arg(), KernelArg::F32(1.0), KernelArg::U32(n)];
    let geom = LaunchGeometry::cover(n, 256);
    let s = gpu.stream_raw();
    let reps = 20u32;
    // SAFETY: add_one touches buf[0..n]; buf outlives the launches (to_host below waits).
    unsafe {
        launch(f, &geom, s, &args)?; // warm-up
        let mut t = GpuTimer::new(gpu)?;
        t.record_start(s)?;
        for _ in 0..reps {
            launch(f, &geom, s, &args)?;
        }
        t.record_end(s)?;
        let ms = t.elapsed_ms()?;
        let bytes = 2.0 * 4.0 * f64::from(n) * f64::from(reps);
        let gbps = bytes / (f64::from(ms) * 1e-3) / 1e9;
        let first = buf.to_host()?[0];
        c.check(
            "timer add_one 256 MiB x20",
            ms > 0.0 && first == (reps + 1) as f32,
            format!(
                "{ms:.3} ms total, {:.3} ms/launch, {gbps:.0} GB/s, x[0]={first} (expect {})",
                ms / reps as f32,
                reps + 1
            ),
        );
    }
    Ok(())
}
