//! The experiment behind `entkv_autotune::jit_pool` (results/2026-11-30-jit-pool): is the
//! driver's PTX JIT serialized within a process? Loads every `.ptx` file of a directory (1) on
//! one thread, (2) on N threads, (3) as cubins the driver's linker made in N child processes
//! (and compares their registers with the JIT's), (4) after N child processes JIT-compiled the
//! same texts into the driver's compute cache.
//!
//! `jit_parallel DIR N` on a GPU machine (children: `--child OUTDIR FILE...`,
//! `--child-jit FILE...`).

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cudarc::driver::sys;

fn ptx_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    v.sort();
    v
}

fn check(r: sys::CUresult, what: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
}

/// PTX → cubin with the driver's linker (`cuLink*`).
fn link(ptx: &str) -> Vec<u8> {
    let c = CString::new(ptx).unwrap();
    let name = CString::new("m").unwrap();
    // SAFETY: NUL-terminated inputs that outlive the calls; the image is copied before the
    // link state that owns it is destroyed; the context is current.
    unsafe {
        let mut state: sys::CUlinkState = std::ptr::null_mut();
        check(
            sys::cuLinkCreate_v2(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut state),
            "cuLinkCreate",
        );
        check(
            sys::cuLinkAddData_v2(
                state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                c.as_ptr() as *mut c_void,
                c.as_bytes_with_nul().len(),
                name.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            ),
            "cuLinkAddData",
        );
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        check(sys::cuLinkComplete(state, &mut out, &mut size), "cuLinkComplete");
        let v = std::slice::from_raw_parts(out as *const u8, size).to_vec();
        check(sys::cuLinkDestroy(state), "cuLinkDestroy");
        v
    }
}

/// Loads a cubin (no JIT) in the current context; returns the module handle.
fn load_cubin(cubin: &[u8]) -> sys::CUmodule {
    let mut m: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: a complete cubin image; the context is current.
    check(
        unsafe { sys::cuModuleLoadData(&mut m, cubin.as_ptr().cast()) },
        "cuModuleLoadData",
    );
    m
}

/// Registers of `entry` in a module loaded by `load_cubin`.
fn cubin_regs(m: sys::CUmodule, entry: &str) -> i32 {
    let name = CString::new(entry).unwrap();
    let mut f: sys::CUfunction = std::ptr::null_mut();
    let mut regs = 0;
    // SAFETY: a live module; the context is current.
    unsafe {
        check(
            sys::cuModuleGetFunction(&mut f, m, name.as_ptr()),
            "cuModuleGetFunction",
        );
        check(
            sys::cuFuncGetAttribute(
                &mut regs,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                f,
            ),
            "cuFuncGetAttribute",
        );
    }
    regs
}

/// Writes `texts` into `dir` as `{prefix}NNN.ptx`.
fn write_inputs(dir: &Path, prefix: &str, texts: &[String]) -> Vec<PathBuf> {
    texts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = dir.join(format!("{prefix}{i:03}.ptx"));
            std::fs::write(&f, p).unwrap();
            f
        })
        .collect()
}

/// Runs this executable with `mode` in `n` children, the inputs dealt round-robin, and waits.
fn run_children(mode: &[&str], inputs: &[PathBuf], n: usize) {
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..n)
        .map(|k| {
            let mine: Vec<&PathBuf> = inputs.iter().skip(k).step_by(n).collect();
            std::process::Command::new(&me)
                .args(mode)
                .args(mine)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "--child-jit" {
        let gpu = entkv_runtime::Gpu::open(0).unwrap();
        for f in &args[2..] {
            gpu.load_module(&std::fs::read_to_string(f).unwrap()).unwrap();
        }
        return;
    }
    if args[1] == "--child" {
        let _gpu = entkv_runtime::Gpu::open(0).unwrap();
        let ctx = cudarc::driver::CudaContext::new(0).unwrap();
        ctx.bind_to_thread().unwrap();
        let out = PathBuf::from(&args[2]);
        for f in &args[3..] {
            let ptx = std::fs::read_to_string(f).unwrap();
            let cubin = link(&ptx);
            let name = Path::new(f).file_stem().unwrap().to_str().unwrap().to_string();
            std::fs::write(out.join(format!("{name}.cubin")), cubin).unwrap();
        }
        return;
    }
    let dir = PathBuf::from(&args[1]);
    let n: usize = args[2].parse().unwrap();
    let files = ptx_files(&dir);
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    println!(
        "{} PTX files, {} bytes",
        files.len(),
        texts.iter().map(|t| t.len()).sum::<usize>()
    );
    let gpu = entkv_runtime::Gpu::open(0).unwrap();

    // Each mode gets its own copy of the modules with a distinct comment, so no cache hits.
    let salted = |tag: &str| -> Vec<String> {
        texts
            .iter()
            .map(|t| format!("// {tag} {}\n{t}", std::process::id()))
            .collect()
    };

    let s = salted("one-thread");
    let t = Instant::now();
    for p in &s {
        gpu.load_module(p).unwrap();
    }
    let one = t.elapsed().as_secs_f64();
    println!("one thread: {one:.2} s");

    let s = salted("threads");
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..n {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = s.get(i) else { break };
                gpu.load_module(p).unwrap();
            });
        }
    });
    println!("{n} threads: {:.2} s", t.elapsed().as_secs_f64());

    let s = salted("procs");
    let tmp = std::env::temp_dir().join(format!("jitp-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let inputs = write_inputs(&tmp, "in", &s);
    let t = Instant::now();
    run_children(&["--child", tmp.to_str().unwrap()], &inputs, n);
    let compiled = t.elapsed().as_secs_f64();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    ctx.bind_to_thread().unwrap();
    let t2 = Instant::now();
    let mut loaded = Vec::new();
    for i in 0..inputs.len() {
        let cubin = std::fs::read(tmp.join(format!("in{i:03}.cubin"))).unwrap();
        loaded.push(load_cubin(&cubin));
    }
    println!(
        "{n} processes: {compiled:.2} s to cubins, {:.2} s to load them",
        t2.elapsed().as_secs_f64()
    );
    // Same code? Compare the registers of every entry, JIT vs linked cubin.
    let mut same = 0;
    for (i, p) in texts.iter().enumerate() {
        let jit = gpu.load_module(p).unwrap();
        for line in p.lines().filter(|l| l.contains(".entry")) {
            let name = line.split_whitespace().last().unwrap().trim_end_matches('(');
            let a = jit.function(name).unwrap().attrs().num_regs as i32;
            ctx.bind_to_thread().unwrap();
            let b = cubin_regs(loaded[i], name);
            if a == b {
                same += 1;
            } else {
                println!("DIFF {name}: regs {a} (JIT) vs {b} (cuLink)");
            }
        }
    }
    println!("{same} entries with identical attributes");

    // The driver's compute cache: JIT in child processes, then load the same text here.
    let s = salted("cache");
    let inputs = write_inputs(&tmp, "c", &s);
    let t = Instant::now();
    run_children(&["--child-jit"], &inputs, n);
    let warmed = t.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let mut cached = Vec::new();
    for p in &s {
        cached.push(gpu.load_module(p).unwrap());
    }
    println!(
        "{n} processes JIT (compute cache): {warmed:.2} s, then {:.2} s to load here",
        t2.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
