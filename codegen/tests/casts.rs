//! Every value cast and bitcast between the scalar types.
mod common;
use common::*;
use entkv_dsl::*;

const NUMERIC: [Scalar; 7] = [
    Scalar::I32,
    Scalar::U32,
    Scalar::I64,
    Scalar::U64,
    Scalar::F16,
    Scalar::BF16,
    Scalar::F32,
];

/// Load one `src` value per thread and store its cast to every other type (and its bitcast
/// to every other type of the same size).
fn cast_kernel(src: Scalar) -> Kernel {
    let mut k = KernelBuilder::new(format!("cast_from_{}", src.name()), 64);
    let i = k.let_("i", k.global_thread_id().i64());
    let x = if src == Scalar::Bool {
        let a = k.buffer("a", Scalar::U32, Access::Read);
        k.let_("x", a.at(i).ne_(0u32))
    } else {
        let a = k.buffer("a", src, Access::Read);
        k.let_("x", a.at(i))
    };
    for dst in NUMERIC {
        if dst == src {
            continue;
        }
        let o = k.buffer(&format!("to_{}", dst.name()), dst, Access::Write);
        k.store(o, i, x.cast(dst));
        if src != Scalar::Bool && dst.size_bytes() == src.size_bytes() {
            let o = k.buffer(&format!("bits_{}", dst.name()), dst, Access::Write);
            k.store(o, i, x.e().bitcast(dst));
        }
    }
    k.finish().unwrap()
}

#[test]
fn every_cast_pair() {
    let mut srcs = vec![Scalar::Bool];
    srcs.extend(NUMERIC);
    let ks: Vec<Kernel> = srcs.into_iter().map(cast_kernel).collect();
    let refs: Vec<&Kernel> = ks.iter().collect();
    let c = check(&refs);
    // Float -> int: truncating, saturating (the PTX `cvt.rzi` is saturating, NaN -> 0).
    let f32k = c.entry("cast_from_f32");
    for insn in [
        "cvt.rzi.s32.f32",
        "cvt.rzi.u32.f32",
        "cvt.rzi.s64.f32",
        "cvt.rzi.u64.f32",
        "cvt.rn.f16.f32",
        "cvt.rn.bf16.f32",
    ] {
        assert_insn(f32k, insn);
    }
    assert_insn(c.entry("cast_from_f16"), "cvt.f32.f16");
    assert_insn(c.entry("cast_from_bf16"), "cvt.f32.bf16");
    // Int -> float by the source's signedness; int -> int by the source's signedness.
    assert_insn(c.entry("cast_from_i32"), "cvt.rn.f32.s32");
    assert_insn(c.entry("cast_from_u32"), "cvt.rn.f32.u32");
    assert_insn(c.entry("cast_from_i64"), "cvt.rn.f32.s64");
    assert_insn(c.entry("cast_from_u64"), "cvt.rn.f32.u64");
    assert_insn(c.entry("cast_from_i32"), "cvt.s64.s32");
    assert_insn(c.entry("cast_from_u32"), "cvt.u64.u32");
    // The saturating conversion intrinsics are what the lowering emits.
    assert!(c.ir_unoptimized().contains("@llvm.fptosi.sat.i32.f32"));
    assert!(c.ir_unoptimized().contains("@llvm.fptoui.sat.i64.f16"));
}
