//! Every atomic operation on every type it supports, on global and on shared memory.
mod common;
use common::*;
use entkv_dsl::*;

/// The (op, type) pairs the IR allows.
fn supported() -> Vec<(AtomicOp, Scalar)> {
    use Scalar::*;
    let mut v = vec![];
    for t in [I32, U32, U64, F32] {
        v.push((AtomicOp::Add, t));
    }
    for t in [I32, U32, I64, U64] {
        v.push((AtomicOp::Min, t));
        v.push((AtomicOp::Max, t));
    }
    for t in [I32, U32, I64, U64, F32] {
        v.push((AtomicOp::Exch, t));
    }
    v
}

fn one(t: Scalar) -> Expr {
    lit(t, 1.0)
}

#[test]
fn every_atomic_on_global_memory() {
    let mut k = KernelBuilder::new("atomics_global", 128);
    let t = k.let_("t", k.global_thread_id());
    for (j, (op, ty)) in supported().into_iter().enumerate() {
        let buf = k.buffer(&format!("g{j}"), ty, Access::ReadWrite);
        let olds = k.buffer(&format!("old{j}"), ty, Access::Write);
        let v = k.let_("v", t.cast(ty) + one(ty));
        // With the old value used...
        let old = k.atomic(op, buf, t % 8u32, v);
        k.store(olds, t, old);
        // ...and without.
        k.atomic_no_ret(op, buf, t % 8u32 + 8u32, v);
    }
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    for insn in [
        "atom.global.add.u32",
        "atom.global.add.u64",
        "atom.global.add.f32",
        "atom.global.min.s32",
        "atom.global.min.u32",
        "atom.global.min.s64",
        "atom.global.min.u64",
        "atom.global.max.s32",
        "atom.global.max.u32",
        "atom.global.max.s64",
        "atom.global.max.u64",
        "atom.global.exch.b32",
        "atom.global.exch.b64",
    ] {
        assert_insn(p, insn);
    }
    let n = instructions(p)
        .filter(|l| l.starts_with("atom.") || l.starts_with("red."))
        .count();
    assert_eq!(n, 2 * supported().len(), "{p}");
    assert!(c.ir_unoptimized().contains("atomicrmw fadd"));
    assert!(c.ir_unoptimized().contains("monotonic"));
}

#[test]
fn every_atomic_on_shared_memory() {
    let mut k = KernelBuilder::new("atomics_shared", 64);
    let t = k.let_("t", k.thread_idx());
    for (j, (op, ty)) in supported().into_iter().enumerate() {
        let sh = k.shared(&format!("s{j}"), ty, 4);
        let out = k.buffer(&format!("out{j}"), ty, Access::Write);
        k.if_(t.lt(4u32), |k| k.store(sh, t, lit(ty, 0.0)));
        k.barrier();
        let old = k.atomic(op, sh, t % 4u32, t.cast(ty));
        k.atomic_no_ret(op, sh, (t + 1u32) % 4u32, one(ty));
        k.barrier();
        k.if_(t.lt(4u32), |k| k.store(out, t * 2u32, sh.at(t)));
        k.store(out, t * 2u32 + 1u32, old);
    }
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    for insn in [
        "atom.shared.add.u32",
        "atom.shared.add.u64",
        "atom.shared.add.f32",
        "atom.shared.min.s32",
        "atom.shared.min.u64",
        "atom.shared.max.s64",
        "atom.shared.max.u32",
        "atom.shared.exch.b32",
        "atom.shared.exch.b64",
    ] {
        assert_insn(p, insn);
    }
    assert_no_insn(p, "atom.global");
}
