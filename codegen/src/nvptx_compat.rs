//! Every spelling that depends on the linked LLVM version (today: LLVM 19.1, through inkwell's
//! `llvm19-1` feature) lives in this file, so that moving to a newer LLVM (the next one we can
//! install is 22) is a one-file change.
//!
//! What is here, and why it is version-sensitive:
//!
//! | What                         | LLVM 19 spelling (used here)                         | LLVM 21+ |
//! |------------------------------|------------------------------------------------------|----------|
//! | target triple / cpu / feats  | `nvptx64-nvidia-cuda`, `sm_NN`, `+ptxNN`             | same; newer `ptxNN`/`sm_NNa` accepted |
//! | kernel marking               | `ptx_kernel` calling convention (id 71)              | same (metadata `"kernel"` is auto-upgraded only when IR is *parsed*) |
//! | launch bounds                | `nvvm.annotations` `maxntidx` / `minctasm`           | function attributes `"nvvm.maxntid"="N"` / `"nvvm.minctasm"="N"` |
//! | block barrier                | `llvm.nvvm.barrier0`                                 | `llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)` |
//! | warp shuffle                 | `llvm.nvvm.shfl.sync.{bfly,down,up,idx}.{i32,f32}`   | same so far |
//! | warp ballot                  | `llvm.nvvm.vote.ballot.sync`                         | same so far |
//! | fast exp2 / log2             | `llvm.nvvm.ex2.approx.f`, `llvm.nvvm.lg2.approx.f`   | `ex2` became overloaded (`llvm.nvvm.ex2.approx.f32`); re-check both |
//! | special registers            | `llvm.nvvm.read.ptx.sreg.{tid.x,ctaid.*,nctaid.*}`   | same |
//! | 32-bit shared pointers       | `-nvptx-short-ptr` (process-wide option)             | same option, re-check |
//! | 16-bit vector loads          | loaded as 32-bit words (v4bf16 load is split in 19)  | re-check |
//! | byte dot product `dp4a`      | inline PTX (LLVM 19 has no `llvm.nvvm.idp4a.*`)      | `llvm.nvvm.idp4a.{s,u}.{s,u}` (LLVM 20+) |
//! | byte permute `prmt`          | `llvm.nvvm.prmt` (selector as an i32 operand)        | same so far |
//! | tensor-core `mma` m16n8k16   | `llvm.nvvm.mma.m16n8k16.row.col.{f32.f32,bf16}`; f16 operands `<2 x half>`, bf16 `i32` | re-check |
//! | integer `mma` m16n8k32       | `llvm.nvvm.mma.m16n8k32.row.col.{s8,u8}[.{s8,u8}]` (A's type, then B's when it differs); `i32` words | re-check |
//! | async copy to shared         | inline PTX `cp.async.ca` (the intrinsics' patterns need one pointer width); `llvm.nvvm.cp.async.{commit,wait}.group` | re-check the intrinsics with short pointers |
//! | optimisation pipeline        | [`lean_o3_pipeline`]: pass names and parameters of 19 | re-derive (see its doc) |
//! | memdep scan limit            | `-memdep-block-scan-limit=20`                        | same option, re-check |
//!
//! Intrinsics are looked up by name with `Intrinsic::find`, so a rename in a future LLVM fails
//! loudly (`CodegenError::MissingIntrinsic`, and the `every_intrinsic_exists` unit test) instead
//! of silently declaring an external function that ptxas would reject.

use crate::CodegenError;
use entkv_dsl::ir::{Axis, ShuffleMode};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::FunctionValue;

// ----- target ---------------------------------------------------------------------------------

/// The 64-bit CUDA triple. Stable across LLVM versions.
pub const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// The `-mcpu` string: `sm_90` for H200. (`sm_90a` only once we use wgmma/TMA-class
/// instructions, which want LLVM 21+.)
pub fn cpu(sm: u32) -> String {
    format!("sm_{sm}")
}

/// The feature string selecting the PTX ISA version written in `.version` (`+ptx80` →
/// `.version 8.0`). LLVM 19 knows PTX up to 8.5; LLVM 22 knows newer ISAs, the spelling is the
/// same.
pub fn features(ptx_version: u32) -> String {
    format!("+ptx{ptx_version}")
}

/// Shuffles need `shfl.sync` (sm_70+); LLVM fails instruction selection below that (llvm #90421).
pub const MIN_SM: u32 = 70;

/// Process-wide LLVM options, parsed once before the first target machine is created.
///
/// `-nvptx-short-ptr`: 32-bit pointers for shared (and const/local) memory, as nvcc emits, so
/// shared addresses live in one 32-bit register (`st.shared.f32 [%r4]`) instead of a 64-bit
/// pair; the target machine's data layout then gains `p3:32:32`. The option exists in LLVM 19
/// and 22; if it is ever renamed, LLVM prints an "Unknown command line argument" error and
/// exits, which the `shared_memory_vectors_and_barrier` test catches first.
///
/// `-memdep-block-scan-limit=20` (LLVM's default is 100): how many instructions
/// MemoryDependenceAnalysis walks back from a load, within its block, looking for an earlier
/// access to the same address. GVN uses it for every load, and GVN runs three times per module
/// (once in the pipeline, twice more in the NVPTX backend at `-O3`); on the unrolled decode
/// kernels each step of the walk is an alias query against an earlier load of the same buffer,
/// and these walks were a quarter of the whole compile time. EarlyCSE has already forwarded
/// every redundant load by then: the PTX of every module in the check matrix (see
/// [`lean_o3_pipeline`]) is byte-identical with the default and with any limit down to 1.
/// Compile time only; re-check the name when moving LLVM.
pub const LLVM_OPTIONS: &[&str] = &["-nvptx-short-ptr", "-memdep-block-scan-limit=20"];

/// Parse [`LLVM_OPTIONS`]; call exactly once per process, before creating a target machine.
pub fn parse_llvm_options() {
    use std::ffi::CString;
    let args: Vec<CString> = std::iter::once("entkv-codegen")
        .chain(LLVM_OPTIONS.iter().copied())
        .map(|a| CString::new(a).expect("no NUL in LLVM options"))
        .collect();
    let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    let overview = CString::new("").expect("empty");
    // SAFETY: argv holds `args.len()` valid NUL-terminated strings that outlive the call.
    unsafe {
        inkwell::llvm_sys::support::LLVMParseCommandLineOptions(
            argv.len() as std::ffi::c_int,
            argv.as_ptr(),
            overview.as_ptr(),
        );
    }
}

// ----- optimisation pipeline -----------------------------------------------------------------

/// `instcombine` as LLVM 19's `default<O3>` runs it.
const INSTCOMBINE: &str = "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>";
/// The `simplifycfg` variants of LLVM 19's `default<O3>`, named by where O3 uses them.
const SIMPLIFYCFG_EARLY: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
    no-switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;\
    no-sink-common-insts;speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
const SIMPLIFYCFG: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
    switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;\
    no-sink-common-insts;speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
const SIMPLIFYCFG_HOIST_SINK: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
    switch-range-to-icmp;no-switch-to-lookup;keep-loops;hoist-common-insts;sink-common-insts;\
    speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
const SIMPLIFYCFG_LATE: &str = "simplifycfg<bonus-inst-threshold=1;forward-switch-cond;\
    switch-range-to-icmp;switch-to-lookup;no-keep-loops;hoist-common-insts;sink-common-insts;\
    speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
const SIMPLIFYCFG_FINAL: &str = "simplifycfg<bonus-inst-threshold=1;no-forward-switch-cond;\
    switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;\
    no-sink-common-insts;speculate-blocks;simplify-cond-branch;speculate-unpredictables>";

/// The optimisation pipeline [`crate::compile_module`] runs by default: LLVM 19's
/// `default<O3>` (as `opt -passes='default<O3>' -print-pipeline-passes` prints it for
/// `nvptx64-nvidia-cuda`) with every pass removed that does not change the PTX of entkv's
/// kernels, the rest in O3's order. It makes exactly the same PTX as `default<O3>`, byte for
/// byte, for every module of the check matrix (`cargo run --release -p entkv-autotune --example
/// pipeline_check`: every module of 7 specializations and every tile of the autotuner's search
/// space, 250 modules), in a third less optimisation time on the decode modules and a tenth of
/// it on `page_meta` (measured in instructions executed, callgrind).
///
/// What is gone, and why it does nothing here: the inliner and the other call-graph passes
/// (a module is kernels without calls), the SLP and loop vectorizers and the loop idiom, load
/// elimination and distribution passes (they find nothing to vectorize in these kernels: the
/// vector memory accesses come from the lowering and the backend's load/store vectorizer; the
/// SLP vectorizer alone was 80% of `page_meta`'s optimisation time), the coroutine, OpenMP,
/// instrumentation and LTO bookkeeping passes, the early full
/// unroll (the DSL unrolls in Rust; the late `loop-unroll` honours the `llvm.loop.unroll`
/// metadata), and passes whose input is already their fixpoint here: the repeated runs of
/// SROA, InstCombine, SimplifyCFG and LICM, jump threading, DSE, ADCE, BDCE, MemCpyOpt. SCCP and
/// the InstCombine after it stay: `select_topk`'s sweeps over gathered keys come out in
/// another order without them.
///
/// Re-derive it when moving LLVM (pass names and parameters change): print the new
/// `default<O3>`, drop passes one at a time while `pipeline_check` reports identical PTX, and
/// keep [`crate::Pipeline::O3`] as the reference.
pub fn lean_o3_pipeline() -> String {
    [
        "function(nvvm-intr-range)".to_string(),
        format!("function<eager-inv>({SIMPLIFYCFG_EARLY},sroa<modify-cfg>,early-cse<>)"),
        "ipsccp".to_string(),
        format!("function<eager-inv>({INSTCOMBINE},{SIMPLIFYCFG})"),
        format!(
            "function<eager-inv>(early-cse<memssa>,speculative-execution<only-if-divergent-target>,\
             correlated-propagation,{INSTCOMBINE},reassociate,\
             loop-mssa(licm<no-allowspeculation>,loop-rotate<header-duplication;no-prepare-for-lto>,\
             licm<allowspeculation>),{SIMPLIFYCFG},{INSTCOMBINE},loop(indvars,loop-deletion),gvn<>,\
             sccp,{INSTCOMBINE},correlated-propagation,{SIMPLIFYCFG_HOIST_SINK})"
        ),
        "globalopt".to_string(),
        format!(
            "function<eager-inv>({INSTCOMBINE},{SIMPLIFYCFG_LATE},vector-combine,loop-unroll<O3>,\
             infer-alignment,{INSTCOMBINE},loop-mssa(licm<allowspeculation>),div-rem-pairs,\
             {SIMPLIFYCFG_FINAL})"
        ),
    ]
    .join(",")
}

/// Load vectors of 16-bit elements (`f16`/`bf16`) as 32-bit words and split them.
///
/// LLVM 19's NVPTX backend has no load pattern for `<4 x bfloat>` and splits it into two
/// 32-bit loads (`<4 x half>` becomes `ld.v4.u16`, `<8 x half/bfloat>` is fine); loading
/// `i32`/`<2 x i32>`/`<4 x i32>` gives one `ld.u32`/`ld.v2.u32`/`ld.v4.u32` for both types at
/// every length. Re-check on a newer LLVM (the `vector_loads_and_stores_of_2_4_8_elements` test
/// counts the loads) and drop this if `<4 x bfloat>` loads stay whole.
pub const LOAD_16BIT_VECTORS_AS_WORDS: bool = true;

// ----- kernel marking and launch bounds -------------------------------------------------------

/// `CallingConv::PTX_Kernel`. LLVM 19's `isKernelFunction` accepts either the
/// `nvvm.annotations` "kernel" entry or this calling convention; from the LLVM 20 cycle on the
/// calling convention is the canonical form (clang/MLIR emit it, PR #120806) and LLVM 21 upgrades
/// the metadata form into it when parsing (PR #119261). `PTX_Device` would be 72. Never emit a
/// call *to* a `ptx_kernel` function: newer LLVM rejects it (PR #190434).
pub const PTX_KERNEL_CALL_CONV: u32 = 71;

/// Mark `f` as a kernel entry (`.entry` in PTX).
pub fn mark_kernel(f: FunctionValue<'_>) {
    f.set_call_conventions(PTX_KERNEL_CALL_CONV);
}

/// Launch bounds: `.maxntid N, 1, 1` and, when given, `.minnctapersm M`.
///
/// LLVM 19 reads them only from `nvvm.annotations` entries `!{ptr @f, !"maxntidx", i32 N}` and
/// `!{ptr @f, !"minctasm", i32 M}`. LLVM 21 moved them to function attributes
/// (`"nvvm.maxntid"="N"` PR #127736, `"nvvm.minctasm"="M"` PR #125908) and only auto-upgrades the
/// metadata when IR is *parsed*, which a module built in memory never is, so on 21+ this
/// function must emit the attributes instead.
pub fn set_launch_bounds<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    f: FunctionValue<'ctx>,
    max_threads: u32,
    min_blocks_per_sm: Option<u32>,
) -> Result<(), CodegenError> {
    let i32t = ctx.i32_type();
    let add = |key: &str, v: u32| -> Result<(), CodegenError> {
        let md = ctx.metadata_node(&[
            f.as_global_value().as_pointer_value().into(),
            ctx.metadata_string(key).into(),
            i32t.const_int(v as u64, false).into(),
        ]);
        module
            .add_global_metadata("nvvm.annotations", &md)
            .map_err(|e| CodegenError::Builder(format!("nvvm.annotations: {e}")))
    };
    // The unspecified y/z bounds default to 1 (`.maxntid N, 1, 1`).
    add("maxntidx", max_threads)?;
    if let Some(m) = min_blocks_per_sm {
        add("minctasm", m)?;
    }
    Ok(())
}

// ----- intrinsics -----------------------------------------------------------------------------

/// `__syncthreads()`. LLVM 21 renamed the canonical form to
/// `llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)` (PR #140615/#141143); the old name is only
/// upgraded when parsing IR text/bitcode.
pub const BARRIER: &str = "llvm.nvvm.barrier0";

/// Full-warp ballot `vote.sync.ballot.b32`: `i32 (i32 mask, i1 pred)`.
pub const BALLOT: &str = "llvm.nvvm.vote.ballot.sync";

/// `__syncwarp(mask)`, `bar.warp.sync`: `void (i32 mask)`.
pub const WARP_SYNC: &str = "llvm.nvvm.bar.warp.sync";

/// `ex2.approx.f32` (non-ftz): `float (float)`. Newer LLVM made the family overloaded
/// (`llvm.nvvm.ex2.approx.f32`, `.f16`, ...): re-check the name when moving.
pub const EX2_APPROX: &str = "llvm.nvvm.ex2.approx.f";
/// `lg2.approx.f32` (non-ftz): `float (float)`.
pub const LG2_APPROX: &str = "llvm.nvvm.lg2.approx.f";

/// Byte permute `prmt.b32` in its default mode: `i32 (i32 a, i32 b, i32 selector)`.
pub const PRMT: &str = "llvm.nvvm.prmt";

/// Every participating lane: the DSL's shuffles and ballots are always full-warp.
pub const FULL_WARP_MASK: u64 = 0xffff_ffff;

/// Special-register readers: `i32 ()`.
pub const SREG_TID_X: &str = "llvm.nvvm.read.ptx.sreg.tid.x";
pub fn sreg_ctaid(axis: Axis) -> &'static str {
    match axis {
        Axis::X => "llvm.nvvm.read.ptx.sreg.ctaid.x",
        Axis::Y => "llvm.nvvm.read.ptx.sreg.ctaid.y",
        Axis::Z => "llvm.nvvm.read.ptx.sreg.ctaid.z",
    }
}
pub fn sreg_nctaid(axis: Axis) -> &'static str {
    match axis {
        Axis::X => "llvm.nvvm.read.ptx.sreg.nctaid.x",
        Axis::Y => "llvm.nvvm.read.ptx.sreg.nctaid.y",
        Axis::Z => "llvm.nvvm.read.ptx.sreg.nctaid.z",
    }
}

/// `shfl.sync` intrinsic: `T (i32 mask, T value, i32 lane_or_offset, i32 clamp)`, `T` = i32 or
/// float. The `.sync` forms need sm_70+; the non-sync forms are deprecated in PTX.
pub fn shuffle_intrinsic(mode: ShuffleMode, float: bool) -> &'static str {
    match (mode, float) {
        (ShuffleMode::Xor, false) => "llvm.nvvm.shfl.sync.bfly.i32",
        (ShuffleMode::Xor, true) => "llvm.nvvm.shfl.sync.bfly.f32",
        (ShuffleMode::Down, false) => "llvm.nvvm.shfl.sync.down.i32",
        (ShuffleMode::Down, true) => "llvm.nvvm.shfl.sync.down.f32",
        (ShuffleMode::Up, false) => "llvm.nvvm.shfl.sync.up.i32",
        (ShuffleMode::Up, true) => "llvm.nvvm.shfl.sync.up.f32",
        (ShuffleMode::Idx, false) => "llvm.nvvm.shfl.sync.idx.i32",
        (ShuffleMode::Idx, true) => "llvm.nvvm.shfl.sync.idx.f32",
    }
}

/// The `c` operand of `shfl.sync` for a full 32-lane segment: `0x1f` (max lane) for
/// bfly/down/idx, `0` (min lane) for up. With these, `down` lanes past 31 and `up` lanes below
/// 0 keep their own value, as the IR specifies.
pub fn shuffle_clamp(mode: ShuffleMode) -> u64 {
    match mode {
        ShuffleMode::Up => 0,
        ShuffleMode::Xor | ShuffleMode::Down | ShuffleMode::Idx => 0x1f,
    }
}

/// Tensor-core `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32` (sm_80+):
/// `{float, float, float, float} (A: 4 registers, B: 2, C: 4 floats)`. In LLVM 19 the f16 form
/// takes its registers as `<2 x half>` and the bf16 form as `i32` ([`mma_words`]).
pub fn mma_intrinsic(bf16: bool) -> &'static str {
    if bf16 {
        "llvm.nvvm.mma.m16n8k16.row.col.bf16"
    } else {
        "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
    }
}

/// Integer tensor-core `mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32` (sm_80+, no
/// `.satfinite`; callers keep the sum inside i32): `{i32, i32, i32, i32} (A: 4 i32 words of bytes, B: 2, C: 4
/// i32)`. LLVM names it by A's and B's types, once when they agree (`…row.col.s8.u8`,
/// `…row.col.s8`); checked with LLVM 19's `llc -mcpu=sm_90`.
pub fn imma_intrinsic(a_signed: bool, b_signed: bool) -> String {
    let ty = |signed: bool| if signed { "s8" } else { "u8" };
    let (a, b) = (ty(a_signed), ty(b_signed));
    if a == b {
        format!("llvm.nvvm.mma.m16n8k32.row.col.{a}")
    } else {
        format!("llvm.nvvm.mma.m16n8k32.row.col.{a}.{b}")
    }
}

/// Whether [`mma_intrinsic`]'s A and B registers are `i32` words (else `<2 x T>` pairs).
pub fn mma_words(bf16: bool) -> bool {
    bf16
}

/// `cp.async.ca.shared.global [dst], [src], bytes` (sm_80+) as inline PTX: LLVM 19's
/// `llvm.nvvm.cp.async.*.shared.global.*` patterns want both pointers of one width, and with
/// 32-bit shared pointers (`-nvptx-short-ptr`) instruction selection fails ("Cannot select").
/// `dst` is the 32-bit shared address, `src` the 64-bit global one. The copy goes through L1
/// (`.ca`) at every size: with `.cg` (L2 only), a warp whose lanes each copy 16 bytes of a
/// 64-byte run per instruction fetched every 32-byte sector from L2 twice, and `wide`'s dense
/// pass ran 1.5–1.7× slower than with `.ca` (results/2026-12-06-k-prefetch, calls 3 and 4).
/// It has side effects and clobbers memory, so LLVM neither drops nor moves it.
pub fn copy_async<'ctx>(
    ctx: &'ctx Context,
    builder: &Builder<'ctx>,
    bytes: u32,
    dst: inkwell::values::IntValue<'ctx>,
    src: inkwell::values::IntValue<'ctx>,
) -> Result<(), CodegenError> {
    if !matches!(bytes, 4 | 8 | 16) {
        return Err(CodegenError::Builder(format!("cp.async of {bytes} bytes")));
    }
    let fn_ty = ctx
        .void_type()
        .fn_type(&[ctx.i32_type().into(), ctx.i64_type().into()], false);
    let asm = ctx.create_inline_asm(
        fn_ty,
        format!("cp.async.ca.shared.global [$0], [$1], {bytes};"),
        "r,l,~{memory}".to_string(),
        true,
        false,
        None,
        false,
    );
    builder.build_indirect_call(fn_ty, asm, &[dst.into(), src.into()], "")?;
    Ok(())
}

/// `cp.async.commit_group`.
pub const COPY_ASYNC_COMMIT: &str = "llvm.nvvm.cp.async.commit.group";
/// `cp.async.wait_group N` (`N` an immediate).
pub const COPY_ASYNC_WAIT: &str = "llvm.nvvm.cp.async.wait.group";

/// Oldest target with `mma.sync.m16n8k16` on f16 and bf16.
pub const MMA_MIN_SM: u32 = 80;

/// Every non-overloaded NVVM intrinsic this crate uses (checked by a unit test).
pub fn all_intrinsic_names() -> Vec<&'static str> {
    let mut v = vec![
        BARRIER,
        BALLOT,
        WARP_SYNC,
        EX2_APPROX,
        LG2_APPROX,
        PRMT,
        SREG_TID_X,
        mma_intrinsic(false),
        mma_intrinsic(true),
        COPY_ASYNC_COMMIT,
        COPY_ASYNC_WAIT,
    ];
    for a in [Axis::X, Axis::Y, Axis::Z] {
        v.push(sreg_ctaid(a));
        v.push(sreg_nctaid(a));
    }
    for m in [
        ShuffleMode::Xor,
        ShuffleMode::Down,
        ShuffleMode::Up,
        ShuffleMode::Idx,
    ] {
        v.push(shuffle_intrinsic(m, false));
        v.push(shuffle_intrinsic(m, true));
    }
    v
}

/// Declare an intrinsic in `module` (overloaded ones need `overloads`), failing loudly when the
/// linked LLVM does not know the name.
pub fn declare<'ctx>(
    module: &Module<'ctx>,
    name: &str,
    overloads: &[BasicTypeEnum<'ctx>],
) -> Result<FunctionValue<'ctx>, CodegenError> {
    Intrinsic::find(name)
        .and_then(|i| i.get_declaration(module, overloads))
        .ok_or_else(|| CodegenError::MissingIntrinsic(name.to_string()))
}

/// `c + Σ_k a[k]·b[k]` over the bytes of `a` and `b` (PTX `dp4a.{s,u}32.{s,u}32`), as inline PTX:
/// LLVM 19 has no intrinsic for it. Pure (no side effects), so LLVM may move or drop it.
pub fn dp4a<'ctx>(
    ctx: &'ctx Context,
    builder: &Builder<'ctx>,
    a_signed: bool,
    b_signed: bool,
    args: [inkwell::values::BasicValueEnum<'ctx>; 3],
) -> Result<inkwell::values::BasicValueEnum<'ctx>, CodegenError> {
    let i32t = ctx.i32_type();
    let fn_ty = i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false);
    let sign = |s: bool| if s { "s32" } else { "u32" };
    let asm = ctx.create_inline_asm(
        fn_ty,
        format!("dp4a.{}.{} $0, $1, $2, $3;", sign(a_signed), sign(b_signed)),
        "=r,r,r,r".to_string(),
        false,
        false,
        None,
        false,
    );
    let args: Vec<inkwell::values::BasicMetadataValueEnum> = args.iter().map(|&v| v.into()).collect();
    let call = builder.build_indirect_call(fn_ty, asm, &args, "dp4a")?;
    call.try_as_basic_value()
        .basic()
        .ok_or_else(|| CodegenError::Builder("dp4a returned void".into()))
}

/// Emit `__syncthreads()`.
pub fn build_barrier<'ctx>(builder: &Builder<'ctx>, module: &Module<'ctx>) -> Result<(), CodegenError> {
    let f = declare(module, BARRIER, &[])?;
    builder.build_call(f, &[], "")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_intrinsic_exists() {
        for n in all_intrinsic_names() {
            let i = Intrinsic::find(n).unwrap_or_else(|| panic!("LLVM does not know {n}"));
            assert!(!i.is_overloaded(), "{n} became overloaded");
        }
        for n in [
            "llvm.fptosi.sat",
            "llvm.fptoui.sat",
            "llvm.sqrt",
            "llvm.fma",
            "llvm.minnum",
        ] {
            assert!(Intrinsic::find(n).is_some(), "{n}");
        }
    }
}
