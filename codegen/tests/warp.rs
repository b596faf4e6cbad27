//! Shuffles (every mode, every 32-bit type), ballot, and the collectives built on them.
mod common;
use common::*;
use entkv_dsl::*;

#[test]
fn every_shuffle_mode_and_ballot() {
    let mut k = KernelBuilder::new("shuffles", 128);
    let ai = k.buffer("ai", Scalar::I32, Access::Read);
    let au = k.buffer("au", Scalar::U32, Access::Read);
    let af = k.buffer("af", Scalar::F32, Access::Read);
    let oi = k.buffer("oi", Scalar::I32, Access::Write);
    let ou = k.buffer("ou", Scalar::U32, Access::Write);
    let of = k.buffer("of", Scalar::F32, Access::Write);
    let t = k.let_("t", k.global_thread_id());
    let lane = k.let_("lane", k.lane());
    let src = k.let_("src", (lane + 5u32) & 31u32);
    let modes = [
        (ShuffleMode::Xor, u32c(1)),
        (ShuffleMode::Down, u32c(2)),
        (ShuffleMode::Up, u32c(3)),
        (ShuffleMode::Idx, src.e()),
    ];
    for (buf, out) in [(ai, oi), (au, ou), (af, of)] {
        let x = k.let_("x", buf.at(t));
        for (j, (mode, arg)) in modes.iter().enumerate() {
            let r = k.shuffle(*mode, x, arg.clone());
            k.store(out, t * 4u32 + j as u32, r);
        }
    }
    let b = k.ballot(af.at(t).gt(0.0f32));
    k.store(ou, t + 1024u32, b);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    for insn in [
        "shfl.sync.bfly.b32",
        "shfl.sync.down.b32",
        "shfl.sync.up.b32",
        "shfl.sync.idx.b32",
        "vote.sync.ballot.b32",
    ] {
        assert_insn(p, insn);
    }
    // 3 types x 4 modes, none merged or dropped.
    let n = instructions(p).filter(|l| l.starts_with("shfl.sync")).count();
    assert_eq!(n, 12, "{p}");
    // Full-warp mask and the clamp operands: 0x1f for bfly/down/idx, 0 for up.
    assert!(p.contains("shfl.sync.up.b32") && p.contains(", 3, 0, -1;"), "{p}");
    assert!(p.contains(", 1, 31, -1;"), "{p}");
    assert!(p.contains(", 2, 31, -1;"), "{p}");
}

/// `warp_sync` lowers to `bar.warp.sync` with the full mask, between a lane's shared store and
/// another lane's load of it.
#[test]
fn warp_sync_orders_lanes() {
    let mut k = KernelBuilder::new("warp_sync", 64);
    let o = k.buffer("o", Scalar::U32, Access::Write);
    let s = k.shared("s", Scalar::U32, 64);
    let t = k.let_("t", k.thread_idx());
    k.store(s, t, t * 3u32);
    k.warp_sync();
    let other = k.let_("other", (t & 0xFFFF_FFE0u32) + ((t + 1u32) & 31u32));
    k.store(o, t, s.at(other));
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    assert_insn(p, "bar.warp.sync");
    assert!(p.contains("bar.warp.sync \t-1;"), "full mask: {p}");
}

#[test]
fn block_allreduce_many_and_warp_reductions() {
    let mut k = KernelBuilder::new("block_reduce", 256);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let ou = k.buffer("ou", Scalar::U32, Access::Write);
    let scratch = k.shared("scratch", Scalar::F32, 8 * 3);
    let t = k.let_("t", k.thread_idx());
    let x = k.let_("x", a.at(k.global_thread_id()));
    let r = k.block_allreduce_many(
        &[(Reduce::Sum, x.e()), (Reduce::Max, x.e()), (Reduce::Min, x.e())],
        scratch,
    );
    let w = k.warp_allreduce(Reduce::Max, t.e());
    let wi = k.warp_allreduce(Reduce::Min, t.i32() - 7);
    k.if_(t.eq_(0u32), |k| {
        for (j, v) in r.iter().enumerate() {
            k.store(o, k.block_idx(Axis::X) * 3u32 + j as u32, *v);
        }
    });
    k.store(ou, k.global_thread_id(), w + wi.u32());
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    assert_insn(p, "shfl.sync.bfly.b32");
    assert_insn(p, "bar.sync");
    assert_insn(p, "st.shared.f32");
    assert_insn(p, "ld.shared.f32");
    if let Some(r) = &c.report {
        assert_eq!(r.function("block_reduce").unwrap().shared_bytes, 96);
    }
}

#[test]
fn block_exclusive_scan_multi_and_single_warp() {
    let mut k = KernelBuilder::new("block_scan", 512);
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let o = k.buffer("o", Scalar::U32, Access::Write);
    let tot = k.buffer("tot", Scalar::U32, Access::Write);
    let scratch = k.shared("scratch", Scalar::U32, 16);
    let g = k.let_("g", k.global_thread_id());
    let (excl, total) = k.block_exclusive_scan(a.at(g), scratch);
    k.store(o, g, excl);
    k.if_(k.thread_idx().eq_(0u32), |k| {
        k.store(tot, k.block_idx(Axis::X), total)
    });
    let multi = k.finish().unwrap();

    let mut k = KernelBuilder::new("warp_scan", 32);
    let a = k.buffer("a", Scalar::I32, Access::Read);
    let o = k.buffer("o", Scalar::I32, Access::Write);
    let scratch = k.shared("scratch", Scalar::I32, 1);
    let g = k.let_("g", k.global_thread_id());
    let (excl, total) = k.block_exclusive_scan(a.at(g), scratch);
    k.store(o, g, excl + total);
    let single = k.finish().unwrap();

    let c = check(&[&multi, &single]);
    assert_insn(c.entry("block_scan"), "shfl.sync.up.b32");
    assert_insn(c.entry("block_scan"), "shfl.sync.idx.b32");
    assert_insn(c.entry("block_scan"), "bar.sync");
    assert_insn(c.entry("warp_scan"), "shfl.sync.up.b32");
    assert_no_insn(c.entry("warp_scan"), "bar.sync");
}

/// One warp-wide `D = A·B + C` per warp, fragments loaded lane by lane (the layout does not
/// matter to codegen).
fn mma_kernel(ab: Scalar) -> Kernel {
    let mut k = KernelBuilder::new(format!("mma_{ab}"), 64);
    let a = k.buffer("a", ab, Access::Read);
    let c = k.buffer("c", Scalar::F32, Access::Read);
    let d = k.buffer("d", Scalar::F32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    // Eight contiguous 16-bit elements a lane: one 16-byte load, packed into A's registers.
    let av = k.load_vec("av", a, tid * 8u32, 8);
    let av: Vec<Expr> = av.iter().map(|v| v.e()).collect();
    let cv: Vec<Expr> = (0..4u32).map(|i| c.at(tid * 4u32 + i)).collect();
    let out = k.mma(&av, &av[..4], &cv);
    k.store_vec(d, tid * 4u32, out.iter().map(|v| v.e()).collect());
    k.finish().unwrap()
}

#[test]
fn mma_lowers_to_tensor_core_mma_sync() {
    for (ab, insn) in [
        (Scalar::F16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        (
            Scalar::BF16,
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        ),
    ] {
        let kernel = mma_kernel(ab);
        let c = check(&[&kernel]);
        let e = c.entry(&kernel.name);
        assert_insn(e, insn);
        // The packed halves go straight from the vector load into the mma: no repacking.
        assert_no_insn(e, "mov.b32");
        assert_no_insn(e, "prmt");
    }
    // mma.m16n8k16 needs sm_80.
    let k = mma_kernel(Scalar::BF16);
    let old = entkv_codegen::Target {
        sm: 75,
        ptx_version: 80,
    };
    let e = entkv_codegen::compile_module("m", &[&k], &old).unwrap_err();
    assert!(e.to_string().contains("sm_80"), "{e}");
}

/// The integer form: A and B words straight from a vector load, i32 C and D.
fn imma_kernel(a_signed: bool, b_signed: bool) -> Kernel {
    let mut k = KernelBuilder::new(format!("imma_{a_signed}_{b_signed}"), 64);
    let x = k.buffer("x", Scalar::U32, Access::Read);
    let c = k.buffer("c", Scalar::I32, Access::Read);
    let d = k.buffer("d", Scalar::I32, Access::Write);
    let tid = k.let_("tid", k.thread_idx());
    let xv = k.load_vec("xv", x, tid * 4u32, 4);
    let xv: Vec<Expr> = xv.iter().map(|v| v.e()).collect();
    let cv: Vec<Expr> = (0..4u32).map(|i| c.at(tid * 4u32 + i)).collect();
    let out = k.mma_i8(&xv, a_signed, &xv[..2], b_signed, &cv);
    k.store_vec(d, tid * 4u32, out.iter().map(|v| v.e()).collect());
    k.finish().unwrap()
}

#[test]
fn integer_mma_lowers_to_tensor_core_mma_sync() {
    for (a_signed, b_signed, types) in [
        (true, false, "s8.u8"),
        (false, true, "u8.s8"),
        (true, true, "s8.s8"),
        (false, false, "u8.u8"),
    ] {
        let kernel = imma_kernel(a_signed, b_signed);
        let c = check(&[&kernel]);
        let e = c.entry(&kernel.name);
        assert_insn(e, &format!("mma.sync.aligned.m16n8k32.row.col.s32.{types}.s32"));
        assert_no_insn(e, "prmt");
    }
}
