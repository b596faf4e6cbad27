//! Scalar and vector loads/stores on global and shared memory, index types, barriers.
mod common;
use common::*;
use entkv_dsl::*;

/// (element type, vector length, expected load, expected store): every vector access is one
/// instruction each way, and reads of read-only buffers take the non-coherent path.
const VECS: [(Scalar, u32, &str, &str); 11] = [
    (Scalar::F16, 8, "ld.global.nc.v4.u32", "st.global.v4.b32"),
    (Scalar::BF16, 8, "ld.global.nc.v4.u32", "st.global.v4.b32"),
    (Scalar::F32, 4, "ld.global.nc.v4.f32", "st.global.v4.f32"),
    (Scalar::U32, 4, "ld.global.nc.v4.u32", "st.global.v4.u32"),
    (Scalar::I64, 2, "ld.global.nc.v2.u64", "st.global.v2.u64"),
    (Scalar::U64, 2, "ld.global.nc.v2.u64", "st.global.v2.u64"),
    (Scalar::F16, 4, "ld.global.nc.v2.u32", "st.global.v4"),
    (Scalar::BF16, 4, "ld.global.nc.v2.u32", "st.global.v4"),
    (Scalar::F32, 2, "ld.global.nc.v2.f32", "st.global.v2.f32"),
    (Scalar::I32, 2, "ld.global.nc.v2.u32", "st.global.v2.u32"),
    (Scalar::F16, 2, "ld.global.nc.u32", "st.global.b32"),
];

/// One kernel per (type, length): vector-load a read-only buffer, store the reversed vector.
fn vec_copy_kernel(ty: Scalar, len: u32) -> Kernel {
    let mut k = KernelBuilder::new(format!("vcopy_{}x{len}", ty.name()), 128);
    let a = k.buffer("a", ty, Access::Read);
    let o = k.buffer("o", ty, Access::Write);
    let base = k.let_("base", k.global_thread_id().i64() * len as i64);
    let v = k.load_vec("v", a, base, len);
    k.store_vec(o, base, v.iter().rev().map(|v| v.e()).collect());
    k.finish().unwrap()
}

#[test]
fn vector_loads_and_stores_of_2_4_8_elements() {
    let ks: Vec<Kernel> = VECS.iter().map(|(t, n, _, _)| vec_copy_kernel(*t, *n)).collect();
    let refs: Vec<&Kernel> = ks.iter().collect();
    let c = check(&refs);
    for (ty, len, ld, st) in VECS {
        let e = c.entry(&format!("vcopy_{}x{len}", ty.name()));
        assert_insn(e, ld);
        assert_insn(e, st);
        let loads = instructions(e).filter(|l| l.starts_with("ld.global")).count();
        let stores = instructions(e).filter(|l| l.starts_with("st.global")).count();
        assert_eq!((loads, stores), (1, 1), "one access each way:\n{e}");
    }
}

#[test]
fn read_write_buffers_do_not_use_the_nc_path() {
    let mut k = KernelBuilder::new("inplace", 256);
    let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
    let h = k.buffer("h", Scalar::F16, Access::ReadWrite);
    let s = k.scalar_param("s", Scalar::F32);
    let i = k.let_("i", k.global_thread_id());
    let v = k.load_vec("v", x, i * 4u32, 4);
    k.store_vec(x, i * 4u32, v.iter().map(|v| *v * s.clone()).collect());
    let w = k.load_vec("w", h, i * 8u32, 8);
    k.store_vec(
        h,
        i * 8u32,
        w.iter()
            .map(|w| (w.f32() + s.clone()).cast(Scalar::F16))
            .collect(),
    );
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert_insn(c.ptx(), "ld.global.v4.f32");
    assert_insn(c.ptx(), "st.global.v4.f32");
    assert_insn(c.ptx(), "ld.global.v4.u32");
    assert_insn(c.ptx(), "st.global.v4.b32");
    assert_no_insn(c.ptx(), "ld.global.nc");
}

#[test]
fn shared_memory_vectors_and_barrier() {
    let mut k = KernelBuilder::new("shared_vec", 128);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let oh = k.buffer("oh", Scalar::F16, Access::Write);
    let sf = k.shared("tile", Scalar::F32, 512);
    let sh = k.shared("tile_h", Scalar::F16, 1024);
    let t = k.let_("t", k.thread_idx());
    let v = k.load_vec("v", a, t * 4u32, 4);
    k.store_vec(sf, t * 4u32, v.iter().map(|v| v.e()).collect());
    k.store_vec(sh, t * 8u32, (0..8).map(|j| v[j % 4].cast(Scalar::F16)).collect());
    k.barrier();
    let next = k.let_("next", (t + 1u32) % 128u32);
    let w = k.load_vec("w", sf, next * 4u32, 4);
    let x = k.load_vec("x", sh, next * 8u32, 8);
    k.store_vec(o, t * 4u32, w.iter().map(|w| w.e()).collect());
    k.store_vec(oh, t * 8u32, x.iter().map(|x| x.e()).collect());
    // A scalar shared load too.
    k.store(o, t + 512u32, sf.at(t * 2u32));
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let p = c.ptx();
    assert!(p.contains(".shared .align 16 .b8 shared_vec__tile[2048];"), "{p}");
    assert!(
        p.contains(".shared .align 16 .b8 shared_vec__tile_h[2048];"),
        "{p}"
    );
    assert_insn(p, "st.shared.v4.f32");
    assert_insn(p, "ld.shared.v4.f32");
    assert_insn(p, "st.shared.v4.b32");
    assert_insn(p, "ld.shared.v4.u32");
    let shared_loads = instructions(p).filter(|l| l.starts_with("ld.shared")).count();
    assert_eq!(shared_loads, 3, "{p}");
    assert_insn(p, "ld.shared.f32");
    assert_insn(p, "bar.sync \t0");
    // 32-bit shared-memory addresses (`-nvptx-short-ptr`).
    assert!(c.ir().contains("p3:32:32"), "{}", c.ir());
    assert!(
        instructions(p).any(|l| l.starts_with("ld.shared.v4.f32") && l.contains("[%r")),
        "{p}"
    );
    if let Some(r) = &c.report {
        let f = r.function("shared_vec").unwrap();
        assert_eq!(f.shared_bytes, 4096);
        assert_eq!(f.barriers, 1);
    }
}

#[test]
fn every_index_type() {
    let mut k = KernelBuilder::new("index_types", 64);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let t = k.let_("t", k.thread_idx());
    let i32i = k.let_("i32i", t.i32() - 1);
    let u32i = k.let_("u32i", t * 3u32);
    let i64i = k.let_("i64i", t.i64() + 100);
    let u64i = k.let_("u64i", t.cast(Scalar::U64) * 7u64);
    let s = a.at(i32i) + a.at(u32i) + a.at(i64i) + a.at(u64i);
    k.store(o, t, s);
    k.store(o, i32i + 64, a.at(t));
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let ir = c.ir_unoptimized();
    assert!(
        ir.contains("sext i32"),
        "signed 32-bit index is sign-extended:\n{ir}"
    );
    assert!(
        ir.contains("zext i32"),
        "unsigned 32-bit index is zero-extended:\n{ir}"
    );
    assert!(
        ir.contains("getelementptr inbounds float, ptr addrspace(1)"),
        "{ir}"
    );
}

#[test]
fn single_assignment_registers_are_ssa_values_when_lowered() {
    let mut k = KernelBuilder::new("lets", 32);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    // Assigned once, read after: an SSA value from the start.
    let x = k.let_("x", a.at(k.thread_idx()) * 2.0f32);
    // Assigned twice: an alloca until SROA.
    let acc = k.let_("acc", x);
    k.if_(x.gt(1.0f32), |k| {
        // Defined in the branch and read only there: SSA.
        let y = k.let_("y", x + 1.0f32);
        k.assign(acc, acc * y);
    });
    k.store(o, k.thread_idx(), acc);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let ir = c.ir_unoptimized();
    assert!(ir.contains("%acc = alloca float"), "{ir}");
    assert!(!ir.contains("%x = alloca"), "{ir}");
    assert!(!ir.contains("%y = alloca"), "{ir}");
    assert!(!c.ir().contains("alloca"), "{}", c.ir());
}

#[test]
fn registers_become_ssa() {
    let mut k = KernelBuilder::new("ssa", 32);
    let a = k.buffer("a", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let acc = k.let_("acc", 0.0f32);
    k.for_("j", 0u32, 16u32, 1u32, |k, j| {
        let x = a.at(j.clone());
        k.assign(acc, acc + x);
    });
    k.store(o, k.thread_idx(), acc);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert!(c.ir_unoptimized().contains("alloca"));
    assert!(!c.ir().contains("alloca"), "{}", c.ir());
    assert!(!c.ptx().contains(".local"), "{}", c.ptx());
}

/// Async copies global → shared of 4, 8 and 16 bytes: one `cp.async.ca` each (through L1, see
/// `nvptx_compat::copy_async`), a commit and a wait with its immediate, and no register load
/// of the copied bytes from global memory.
#[test]
fn async_copies_to_shared_memory() {
    let mut k = KernelBuilder::new("copy_async", 128);
    let a = k.buffer("a", Scalar::F16, Access::Read);
    let w = k.buffer("w", Scalar::F32, Access::Read);
    let o = k.buffer("o", Scalar::F32, Access::Write);
    let s16 = k.shared("s16", Scalar::F16, 128 * 8);
    let s8 = k.shared("s8", Scalar::F32, 128 * 2);
    let s4 = k.shared("s4", Scalar::F32, 128);
    let tid = k.let_("tid", k.thread_idx());
    let g = k.let_("g", k.global_thread_id().i64());
    k.copy_async(s16, tid * 8u32, a, g * 8i64, 8);
    k.copy_async(s8, tid * 2u32, w, g * 2i64, 2);
    k.copy_async_commit();
    k.copy_async(s4, tid, w, g, 1);
    k.copy_async_commit();
    k.copy_async_wait(1);
    let h = k.load_vec("h", s16, tid * 8u32, 8);
    let x = k.load_vec("x", s8, tid * 2u32, 2);
    k.copy_async_wait(0);
    let y = k.let_("y", s4.at(tid));
    let sum = h.iter().fold(x[0] + x[1] + y, |acc, v| acc + v.f32());
    k.store(o, g, sum);
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    let e = c.entry("copy_async");
    assert_insn(e, "cp.async.ca.shared.global");
    assert_no_insn(e, "cp.async.cg");
    assert_insn(e, "cp.async.commit_group");
    assert_insn(e, "cp.async.wait_group 1");
    assert_insn(e, "cp.async.wait_group 0");
    let copies = instructions(e)
        .filter(|l| l.starts_with("cp.async.ca.") || l.starts_with("cp.async.cg."))
        .count();
    assert_eq!(copies, 3, "one cp.async per copy:\n{e}");
    assert_no_insn(e, "ld.global");
}
