//! Structured control flow (If, For with and without unroll hints, While), launch bounds,
//! multi-kernel modules and error reporting.
mod common;
use common::*;
use entkv_codegen::{compile_module, CodegenError, Target};
use entkv_dsl::ir::{Block, Kernel as IrKernel, Stmt};
use entkv_dsl::*;

#[test]
fn for_with_unroll_hint() {
    let mut k = KernelBuilder::new("unrolled", 128);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let n = k.scalar_param("n", Scalar::I32);
    let acc = k.let_("acc", 0.0f32);
    let t = k.let_("t", k.thread_idx().i32());
    // Dynamic trip count: the hint makes LLVM unroll by 4 with a remainder loop.
    k.for_unrolled("j", 0i32, n.clone(), 1i32, 4, |k, j| {
        k.assign(acc, acc + a.at(j * 128 + t));
    });
    // The interpreter's rule: `end` and `step` are re-evaluated every iteration.
    let step = k.let_("step", 1i32);
    k.for_("m", 0i32, n.clone() * 2, step, |k, m| {
        k.assign(acc, acc * 0.5f32 + a.at(m));
        k.assign(step, step + 1);
    });
    k.store(o, t, acc);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let ir = c.ir_unoptimized();
    assert!(ir.contains("!\"llvm.loop.unroll.count\", i32 4"), "{ir}");
    assert!(ir.contains("!llvm.loop"), "{ir}");
    // The unrolled body: at least 4 loads of `a` in one iteration of the main loop.
    let loads = instructions(c.ptx())
        .filter(|l| l.starts_with("ld.global.nc.f32"))
        .count();
    assert!(
        loads >= 5,
        "unrolled by 4 (+ remainder + second loop): {loads}\n{}",
        c.ptx()
    );
}

#[test]
fn for_loops_of_every_int_type_and_unroll_disable() {
    let mut k = KernelBuilder::new("loops", 64);
    let o = k.buffer("o", Scalar::U64, Access::Write);
    let n = k.scalar_param("n", Scalar::U64);
    let acc = k.let_typed("acc", Scalar::U64, 0u64);
    k.for_("a", -5i32, 7i32, 3i32, |k, i| {
        k.assign(acc, acc + i.cast(Scalar::U64))
    });
    k.for_("b", 1u32, 100u32, 7u32, |k, i| {
        k.assign(acc, acc ^ i.cast(Scalar::U64))
    });
    k.for_("c", -100i64, 100i64, 9i64, |k, i| {
        k.assign(acc, acc + i.cast(Scalar::U64))
    });
    k.for_unrolled("d", 0u64, n, 1u64, 1, |k, i| k.assign(acc, acc * 3u64 + i));
    k.store(o, k.thread_idx(), acc);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let ir = c.ir_unoptimized();
    assert!(ir.contains("llvm.loop.unroll.disable"), "{ir}");
    assert!(ir.contains("icmp slt i32"), "signed loop compare:\n{ir}");
    assert!(ir.contains("icmp ult i32"), "unsigned loop compare:\n{ir}");
    assert!(ir.contains("icmp slt i64"), "{ir}");
    assert!(ir.contains("icmp ult i64"), "{ir}");
}

#[test]
fn while_and_nested_if() {
    let mut k = KernelBuilder::new("collatz", 128);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let o = k.buffer("o", Scalar::U32, Access::Write);
    let t = k.let_("t", k.global_thread_id());
    let x = k.let_("x", a.at(t));
    let steps = k.let_("steps", 0u32);
    k.while_(x.gt(1u32), |k| {
        k.if_else(
            (x & 1u32).eq_(0u32),
            |k| k.assign(x, x >> 1u32),
            |k| k.assign(x, x * 3u32 + 1u32),
        );
        k.assign(steps, steps + 1u32);
    });
    let y = k.let_("y", 0u32);
    k.if_else(
        steps.gt(10u32),
        |k| {
            k.if_else(
                steps.gt(100u32),
                |k| k.assign(y, 3u32),
                |k| k.if_(steps.gt(50u32), |k| k.assign(y, 2u32)),
            );
        },
        |k| {
            k.if_(steps.eq_(0u32), |k| k.assign(y, 7u32));
        },
    );
    k.store(o, t, steps + y);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert_insn(c.ptx(), "bra");
    assert!(c.ir_unoptimized().contains("while.cond"));
}

#[test]
fn launch_bounds_and_multi_kernel_module() {
    let mk = |name: &str, threads: u32, min_blocks: Option<u32>| {
        let mut k = KernelBuilder::new(name, threads);
        if let Some(m) = min_blocks {
            k.set_min_blocks_per_sm(m);
        }
        let o = k.buffer("o", Scalar::F32, Access::Write);
        // Same shared array name in every kernel: names are prefixed per kernel.
        let s = k.shared("tile", Scalar::F32, threads);
        let t = k.let_("t", k.thread_idx());
        k.store(s, t, t.f32());
        k.barrier();
        k.store(o, k.global_thread_id(), s.at((t + 1u32) % threads));
        k.finish().unwrap()
    };
    let a = mk("k_a", 1024, Some(2));
    let b = mk("k_b", 32, None);
    let c = mk("k_c", 256, Some(4));
    let m = check(&[&a, &b, &c]);
    assert!(m.entry("k_a").contains(".minnctapersm 2"));
    assert!(m.entry("k_c").contains(".minnctapersm 4"));
    assert!(m.entry("k_b").contains(".maxntid 32, 1, 1"));
    for name in ["k_a__tile", "k_b__tile", "k_c__tile"] {
        assert!(m.ptx().contains(name), "{name}");
    }
    assert_eq!(m.module.entries, vec!["k_a", "k_b", "k_c"]);
}

fn trivial(name: &str) -> Kernel {
    let mut k = KernelBuilder::new(name, 32);
    let o = k.buffer("o", Scalar::U32, Access::Write);
    k.store(o, k.thread_idx(), k.thread_idx());
    k.finish().unwrap()
}

#[test]
fn errors_are_typed() {
    let t = Target::default();
    // A kernel that fails validation (built by hand: the builder would refuse it).
    let bad = IrKernel {
        name: "bad".into(),
        params: vec![],
        shared: vec![],
        vars: vec![],
        body: Block::from([Stmt::Barrier]),
        block_threads: 100,
        min_blocks_per_sm: None,
    };
    assert!(matches!(
        compile_module("m", &[&bad], &t),
        Err(CodegenError::InvalidKernel(_))
    ));
    let k = trivial("k");
    assert!(matches!(
        compile_module("m", &[&k, &k], &t),
        Err(CodegenError::InvalidModule { .. })
    ));
    assert!(matches!(
        compile_module("m", &[], &t),
        Err(CodegenError::InvalidModule { .. })
    ));
    let dotted = trivial("a.b");
    assert!(matches!(
        compile_module("m", &[&dotted], &t),
        Err(CodegenError::InvalidModule { .. })
    ));
    let old = Target {
        sm: 60,
        ptx_version: 80,
    };
    assert!(matches!(
        compile_module("m", &[&k], &old),
        Err(CodegenError::Target(_))
    ));
    // A kernel named like another kernel's shared array.
    let mut sk = KernelBuilder::new("s", 32);
    let o = sk.buffer("o", Scalar::U32, Access::Write);
    let arr = sk.shared("x", Scalar::U32, 32);
    sk.store(arr, sk.thread_idx(), 1u32);
    sk.store(o, sk.thread_idx(), arr.at(0u32));
    let sk = sk.finish().unwrap();
    let clash = trivial("s__x");
    assert!(matches!(
        compile_module("m", &[&sk, &clash], &t),
        Err(CodegenError::InvalidModule { .. })
    ));
    let future = Target {
        sm: 90,
        ptx_version: 99,
    };
    assert!(matches!(
        compile_module("m", &[&k], &future),
        Err(CodegenError::Target(_))
    ));
    // Errors print something useful.
    let e = compile_module("m", &[&bad], &t).unwrap_err().to_string();
    assert!(e.contains("block_threads"), "{e}");
}

#[test]
fn other_targets_and_versions() {
    let k = trivial("k");
    let m = compile_module(
        "m",
        &[&k],
        &Target {
            sm: 80,
            ptx_version: 78,
        },
    )
    .unwrap();
    assert!(m.ptx.contains(".version 7.8"), "{}", m.ptx);
    assert!(m.ptx.contains(".target sm_80"), "{}", m.ptx);
    assert!(entkv_codegen::llvm_version().starts_with("19."));
}
