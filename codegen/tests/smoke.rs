mod common;
use common::*;
use entkv_dsl::*;

#[test]
fn scale_kernel() {
    let mut k = KernelBuilder::new("scale", 128);
    let x = k.buffer("x", Scalar::F32, Access::Read);
    let y = k.buffer("y", Scalar::F32, Access::Write);
    let n = k.scalar_param("n", Scalar::I64);
    let s = k.scalar_param("s", Scalar::F32);
    let i = k.let_("i", k.global_thread_id().i64());
    k.if_(i.lt(n), |k| k.store(y, i, x.at(i) * s.clone()));
    let kernel = k.finish().unwrap();
    let c = check(&[&kernel]);
    assert_insn(c.ptx(), "ld.global.nc.f32");
    assert_insn(c.ptx(), "st.global.f32");
}
