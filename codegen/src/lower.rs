//! Lowering of one validated [`Kernel`] into an LLVM function of the module.
//!
//! Conventions (the contract with the runtime and with the interpreter in `entkv-dsl`):
//!
//! - **Parameters**, in IR order. `Buffer` → `ptr addrspace(1)` with `noalias` (buffers never
//!   alias each other: a launch-time promise of the ABI), plus `readonly` for [`Access::Read`]
//!   (so their loads become `ld.global.nc`) and `writeonly` for [`Access::Write`]. `Scalar` →
//!   by value: `i32`/`i64` for signed and unsigned integers, `half`, `bfloat`, `float`, and
//!   `Bool` as an `i8` (C++ `bool`), where any non-zero byte is true.
//! - **Registers** assigned by exactly one statement and read only after it (in its block or
//!   in statements nested there, so the definition dominates every read) are SSA values
//!   directly; the others are allocas in the entry block, which the optimisation pipeline (SROA)
//!   turns into SSA values. Registers of type `Bool` are `i1`.
//! - **Shared arrays** are internal `addrspace(3)` globals `[len x T]`, undef-initialised,
//!   16-byte aligned, named `<kernel>__<array>`.
//! - **Memory accesses**: an in-bounds GEP with a 64-bit index (32-bit indices are sign- or
//!   zero-extended by their signedness), aligned to the element size; vector accesses are one
//!   `<N x T>` load/store aligned to the whole vector, except that vector *loads* of 16-bit
//!   elements load 32-bit words (`i32`, `<2 x i32>`, `<4 x i32>`) and split them (see
//!   `load_vec_16bit`). Shared-memory pointers are 32-bit (`nvptx_compat::LLVM_OPTIONS`).
//! - **Special registers**: `threadIdx.x` carries `!range [0, block_threads)`.
//! - **Integer arithmetic wraps** (two's complement), except the `For` increment, which is
//!   `nsw`/`nuw` (a loop variable that overflows past `end` is undefined, as in CUDA C++).
//!   Shift amounts are taken modulo the bit width (`x << (n & (bits-1))`), so no shift is
//!   poison. Integer division by zero (and `MIN / -1`) is undefined on the GPU; the interpreter
//!   reports it as an error.
//! - **Floats**: IEEE, no fast-math flags, no flush-to-zero; `Sqrt` is `sqrt.rn`, `Rcp` is a
//!   correctly rounded `1/x`; `Exp2`/`Log2` are the `approx` instructions; `Min`/`Max` are
//!   `minnum`/`maxnum` (`min.f32`/`max.f32`: the non-NaN operand wins); comparisons are ordered
//!   except `Ne` (unordered, the negation of `Eq`); float→int casts saturate with NaN → 0.

use crate::nvptx_compat as compat;
use crate::CodegenError;
use entkv_dsl::ir::*;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum, VectorType};
use inkwell::values::{
    AsValueRef, BasicValue, BasicValueEnum, FloatValue, FunctionValue, InstructionValue, IntValue,
    PointerValue,
};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use std::cell::RefCell;

type R<T> = Result<T, CodegenError>;

const GLOBAL: u16 = 1;
const SHARED: u16 = 3;

/// Lower `k` (already validated) into a new kernel function of `module`.
pub fn lower_kernel<'ctx>(ctx: &'ctx Context, module: &Module<'ctx>, k: &Kernel) -> R<FunctionValue<'ctx>> {
    let mut l = Lower::new(ctx, module, k)?;
    l.block(&k.body)?;
    l.b.build_return(None)?;
    Ok(l.f)
}

struct Lower<'a, 'ctx> {
    ctx: &'ctx Context,
    module: &'a Module<'ctx>,
    b: Builder<'ctx>,
    k: &'a Kernel,
    f: FunctionValue<'ctx>,
    /// The alloca of each register that is not an SSA value (see [`ssa_registers`]).
    vars: Vec<Option<PointerValue<'ctx>>>,
    /// The current value of each SSA register, once its statement has been lowered.
    ssa: RefCell<Vec<Option<BasicValueEnum<'ctx>>>>,
    shared: Vec<PointerValue<'ctx>>,
}

/// Register (SSA) type of a scalar.
fn reg_ty(ctx: &Context, s: Scalar) -> BasicTypeEnum<'_> {
    match s {
        Scalar::Bool => ctx.bool_type().into(),
        Scalar::I32 | Scalar::U32 => ctx.i32_type().into(),
        Scalar::I64 | Scalar::U64 => ctx.i64_type().into(),
        Scalar::F16 => ctx.f16_type().into(),
        Scalar::BF16 => ctx.bf16_type().into(),
        Scalar::F32 => ctx.f32_type().into(),
    }
}

/// ABI type of a by-value scalar parameter (`Bool` travels as a byte).
fn param_ty(ctx: &Context, s: Scalar) -> BasicTypeEnum<'_> {
    match s {
        Scalar::Bool => ctx.i8_type().into(),
        s => reg_ty(ctx, s),
    }
}

fn vec_ty<'ctx>(t: BasicTypeEnum<'ctx>, n: u32) -> VectorType<'ctx> {
    match t {
        BasicTypeEnum::IntType(t) => t.vec_type(n),
        BasicTypeEnum::FloatType(t) => t.vec_type(n),
        other => unreachable!("vector of {other:?}"),
    }
}

fn bits(s: Scalar) -> u64 {
    match s {
        Scalar::Bool => 1,
        s => s.size_bytes() as u64 * 8,
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn attr(ctx: &Context, name: &str) -> Attribute {
    ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(name), 0)
}

impl<'a, 'ctx> Lower<'a, 'ctx> {
    fn new(ctx: &'ctx Context, module: &'a Module<'ctx>, k: &'a Kernel) -> R<Self> {
        let gptr = ctx.ptr_type(AddressSpace::from(GLOBAL));
        let params: Vec<_> = k
            .params
            .iter()
            .map(|p| match &p.kind {
                ParamKind::Buffer { .. } => gptr.into(),
                ParamKind::Scalar(s) => param_ty(ctx, *s).into(),
            })
            .collect();
        let fn_ty = ctx.void_type().fn_type(&params, false);
        let f = module.add_function(&k.name, fn_ty, Some(Linkage::External));
        if f.get_name().to_bytes() != k.name.as_bytes() {
            // LLVM renamed it: another kernel or a shared array already uses the name.
            return Err(CodegenError::InvalidModule {
                module: module.get_name().to_string_lossy().into_owned(),
                message: format!("kernel name `{}` collides with another symbol", k.name),
            });
        }
        compat::mark_kernel(f);
        compat::set_launch_bounds(ctx, module, f, k.block_threads, k.min_blocks_per_sm)?;
        f.add_attribute(AttributeLoc::Function, attr(ctx, "nounwind"));
        for (i, p) in k.params.iter().enumerate() {
            let v = f.get_nth_param(i as u32).expect("param count");
            v.set_name(&sanitize(&p.name));
            if let ParamKind::Buffer { access, .. } = p.kind {
                let loc = AttributeLoc::Param(i as u32);
                f.add_attribute(loc, attr(ctx, "noalias"));
                match access {
                    Access::Read => f.add_attribute(loc, attr(ctx, "readonly")),
                    Access::Write => f.add_attribute(loc, attr(ctx, "writeonly")),
                    Access::ReadWrite => {}
                }
            }
        }

        let shared = k
            .shared
            .iter()
            .map(|a| {
                let ty = reg_ty(ctx, a.elem).array_type(a.len);
                let g = module.add_global(
                    ty,
                    Some(AddressSpace::from(SHARED)),
                    &format!("{}__{}", k.name, sanitize(&a.name)),
                );
                g.set_linkage(Linkage::Internal);
                g.set_initializer(&ty.get_undef());
                g.set_alignment(16);
                g.as_pointer_value()
            })
            .collect();

        let b = ctx.create_builder();
        let entry = ctx.append_basic_block(f, "entry");
        b.position_at_end(entry);
        // The allocas are created last register first. SROA then places the PHIs of the
        // remaining (reassigned) registers in the order it used when every register was an
        // alloca, so the PTX differs from that lowering only in register numbering, and ptxas
        // allocates the same number of registers and emits as many instructions for every kernel;
        // in register order, a few kernels gain or lose two registers.
        let ssa = ssa_registers(k);
        let mut vars = vec![None; k.vars.len()];
        for (i, v) in k.vars.iter().enumerate().rev() {
            if !ssa[i] {
                vars[i] = Some(b.build_alloca(reg_ty(ctx, v.ty), &sanitize(&v.name))?);
            }
        }
        Ok(Lower {
            ctx,
            module,
            b,
            k,
            f,
            vars,
            ssa: RefCell::new(vec![None; k.vars.len()]),
            shared,
        })
    }

    fn ty(&self, s: Scalar) -> BasicTypeEnum<'ctx> {
        reg_ty(self.ctx, s)
    }

    fn new_block(&self, name: &str) -> BasicBlock<'ctx> {
        self.ctx.append_basic_block(self.f, name)
    }

    fn intrinsic(&self, name: &str, overloads: &[BasicTypeEnum<'ctx>]) -> R<FunctionValue<'ctx>> {
        compat::declare(self.module, name, overloads)
    }

    fn call(&self, f: FunctionValue<'ctx>, args: &[BasicValueEnum<'ctx>]) -> R<BasicValueEnum<'ctx>> {
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        self.b
            .build_call(f, &args, "")?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| CodegenError::Builder("intrinsic returned void".into()))
    }

    fn i32c(&self, v: u64) -> IntValue<'ctx> {
        self.ctx.i32_type().const_int(v, false)
    }

    // ----- statements --------------------------------------------------------------------

    fn block(&mut self, b: &Block) -> R<()> {
        for s in b {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn store_var(&self, v: VarId, value: BasicValueEnum<'ctx>) -> R<()> {
        match self.vars[v.0 as usize] {
            Some(slot) => {
                self.b.build_store(slot, value)?;
            }
            None => self.ssa.borrow_mut()[v.0 as usize] = Some(value),
        }
        Ok(())
    }

    fn load_var(&self, v: VarId) -> R<BasicValueEnum<'ctx>> {
        match self.vars[v.0 as usize] {
            Some(slot) => Ok(self.b.build_load(self.ty(self.k.var(v).ty), slot, "")?),
            None => self.ssa.borrow()[v.0 as usize].ok_or_else(|| {
                CodegenError::Builder(format!(
                    "register {} read before its definition",
                    self.k.var(v).name
                ))
            }),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Assign { var, value } => {
                let v = self.expr(value)?;
                self.store_var(*var, v)
            }
            Stmt::Store { mem, index, value } => {
                let elem = self.mem_elem(*mem);
                let ptr = self.elem_ptr(*mem, index)?;
                let v = self.expr(value)?;
                let st = self.b.build_store(ptr, v)?;
                set_align(st, elem.size_bytes())
            }
            Stmt::LoadVec { vars, mem, index } => {
                let elem = self.mem_elem(*mem);
                let ptr = self.elem_ptr(*mem, index)?;
                let n = vars.len() as u32;
                if n == 1 {
                    let v = self.b.build_load(self.ty(elem), ptr, "ld")?;
                    set_align(as_inst(v)?, elem.size_bytes())?;
                    return self.store_var(vars[0], v);
                }
                if elem.size_bytes() == 2 && compat::LOAD_16BIT_VECTORS_AS_WORDS {
                    return self.load_vec_16bit(vars, elem, ptr);
                }
                let vty = vec_ty(self.ty(elem), n);
                let v = self.b.build_load(vty, ptr, "ldv")?;
                set_align(as_inst(v)?, elem.size_bytes() * n)?;
                let v = v.into_vector_value();
                for (i, var) in vars.iter().enumerate() {
                    let x = self.b.build_extract_element(v, self.i32c(i as u64), "")?;
                    self.store_var(*var, x)?;
                }
                Ok(())
            }
            Stmt::StoreVec { mem, index, values } => {
                let elem = self.mem_elem(*mem);
                let ptr = self.elem_ptr(*mem, index)?;
                let n = values.len() as u32;
                if n == 1 {
                    let v = self.expr(&values[0])?;
                    let st = self.b.build_store(ptr, v)?;
                    return set_align(st, elem.size_bytes());
                }
                let vty = vec_ty(self.ty(elem), n);
                let mut acc = vty.get_undef();
                for (i, e) in values.iter().enumerate() {
                    let x = self.expr(e)?;
                    acc = self.b.build_insert_element(acc, x, self.i32c(i as u64), "")?;
                }
                let st = self.b.build_store(ptr, acc)?;
                set_align(st, elem.size_bytes() * n)
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                value,
                result,
            } => {
                let elem = self.mem_elem(*mem);
                let ptr = self.elem_ptr(*mem, index)?;
                let v = self.expr(value)?;
                let old = self.atomic(*op, elem, ptr, v)?;
                if let Some(r) = result {
                    self.store_var(*r, old)?;
                }
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.expr(cond)?.into_int_value();
                let then_bb = self.new_block("then");
                let merge = self.new_block("endif");
                let else_bb = if else_body.is_empty() {
                    merge
                } else {
                    self.new_block("else")
                };
                self.b.build_conditional_branch(c, then_bb, else_bb)?;
                self.b.position_at_end(then_bb);
                self.block(then_body)?;
                self.b.build_unconditional_branch(merge)?;
                if !else_body.is_empty() {
                    self.b.position_at_end(else_bb);
                    self.block(else_body)?;
                    self.b.build_unconditional_branch(merge)?;
                }
                // Keep the merge block last so blocks stay in source order.
                if let Some(last) = self.f.get_last_basic_block() {
                    merge.move_after(last).ok();
                }
                self.b.position_at_end(merge);
                Ok(())
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                unroll,
            } => {
                let ty = self.k.var(*var).ty;
                let slot = self.vars[var.0 as usize].expect("loop variables are allocas");
                let init = self.expr(start)?;
                self.b.build_store(slot, init)?;
                let header = self.new_block("for.cond");
                let body_bb = self.new_block("for.body");
                let latch = self.new_block("for.inc");
                let exit = self.new_block("for.end");
                self.b.build_unconditional_branch(header)?;

                self.b.position_at_end(header);
                let i = self.b.build_load(self.ty(ty), slot, "i")?.into_int_value();
                let e = self.expr(end)?.into_int_value();
                let pred = if ty.is_signed_int() {
                    IntPredicate::SLT
                } else {
                    IntPredicate::ULT
                };
                let c = self.b.build_int_compare(pred, i, e, "for.cmp")?;
                self.b.build_conditional_branch(c, body_bb, exit)?;

                self.b.position_at_end(body_bb);
                self.block(body)?;
                self.b.build_unconditional_branch(latch)?;
                latch
                    .move_after(self.b.get_insert_block().expect("positioned"))
                    .ok();

                self.b.position_at_end(latch);
                let s = self.expr(step)?.into_int_value();
                let i = self.b.build_load(self.ty(ty), slot, "i")?.into_int_value();
                let next = if ty.is_signed_int() {
                    self.b.build_int_nsw_add(i, s, "i.next")?
                } else {
                    self.b.build_int_nuw_add(i, s, "i.next")?
                };
                self.b.build_store(slot, next)?;
                let back = self.b.build_unconditional_branch(header)?;
                if let Some(n) = unroll {
                    self.set_unroll(back, *n)?;
                }
                exit.move_after(latch).ok();
                self.b.position_at_end(exit);
                Ok(())
            }
            Stmt::While { cond, body } => {
                let header = self.new_block("while.cond");
                let body_bb = self.new_block("while.body");
                let exit = self.new_block("while.end");
                self.b.build_unconditional_branch(header)?;
                self.b.position_at_end(header);
                let c = self.expr(cond)?.into_int_value();
                self.b.build_conditional_branch(c, body_bb, exit)?;
                self.b.position_at_end(body_bb);
                self.block(body)?;
                self.b.build_unconditional_branch(header)?;
                exit.move_after(self.b.get_insert_block().expect("positioned"))
                    .ok();
                self.b.position_at_end(exit);
                Ok(())
            }
            Stmt::Barrier => compat::build_barrier(&self.b, self.module),
            Stmt::Shuffle {
                dst,
                value,
                mode,
                arg,
            } => {
                let float = value.ty() == Scalar::F32;
                let f = self.intrinsic(compat::shuffle_intrinsic(*mode, float), &[])?;
                let v = self.expr(value)?;
                let a = self.expr(arg)?;
                let mask = self.i32c(compat::FULL_WARP_MASK);
                let clamp = self.i32c(compat::shuffle_clamp(*mode));
                let r = self.call(f, &[mask.into(), v, a, clamp.into()])?;
                self.store_var(*dst, r)
            }
            Stmt::Mma { kind, dst, a, b, c } => {
                let mut args = Vec::with_capacity(10);
                let f = match *kind {
                    MmaKind::Float => {
                        let bf16 = a[0].ty() == Scalar::BF16;
                        for pair in a.chunks(2).chain(b.chunks(2)) {
                            args.push(self.half_pair(&pair[0], &pair[1], compat::mma_words(bf16))?);
                        }
                        self.intrinsic(compat::mma_intrinsic(bf16), &[])?
                    }
                    MmaKind::Int8 { a_signed, b_signed } => {
                        // The packed byte words go in as the i32 registers they are.
                        for x in a.iter().chain(b) {
                            args.push(self.expr(x)?);
                        }
                        self.intrinsic(&compat::imma_intrinsic(a_signed, b_signed), &[])?
                    }
                };
                for x in c {
                    args.push(self.expr(x)?);
                }
                let r = self.call(f, &args)?.into_struct_value();
                for (i, v) in dst.iter().enumerate() {
                    let x = self.b.build_extract_value(r, i as u32, "mma_d")?;
                    self.store_var(*v, x)?;
                }
                Ok(())
            }
            Stmt::CopyAsync {
                dst,
                dst_index,
                src,
                src_index,
                len,
            } => {
                let bytes = *len * self.mem_elem(Mem::Shared(*dst)).size_bytes();
                let to = self.elem_ptr(Mem::Shared(*dst), dst_index)?;
                let from = self.elem_ptr(Mem::Global(*src), src_index)?;
                let to = self.b.build_ptr_to_int(to, self.ctx.i32_type(), "cp_dst")?;
                let from = self.b.build_ptr_to_int(from, self.ctx.i64_type(), "cp_src")?;
                compat::copy_async(self.ctx, &self.b, bytes, to, from)
            }
            Stmt::CopyAsyncCommit => {
                let f = self.intrinsic(compat::COPY_ASYNC_COMMIT, &[])?;
                self.b.build_call(f, &[], "")?;
                Ok(())
            }
            Stmt::CopyAsyncWait { pending } => {
                let f = self.intrinsic(compat::COPY_ASYNC_WAIT, &[])?;
                self.b.build_call(f, &[self.i32c(*pending as u64).into()], "")?;
                Ok(())
            }
            Stmt::WarpSync => {
                let f = self.intrinsic(compat::WARP_SYNC, &[])?;
                let mask = self.i32c(compat::FULL_WARP_MASK);
                self.b.build_call(f, &[mask.into()], "")?;
                Ok(())
            }
            Stmt::Ballot { dst, pred } => {
                let f = self.intrinsic(compat::BALLOT, &[])?;
                let p = self.expr(pred)?;
                let mask = self.i32c(compat::FULL_WARP_MASK);
                let r = self.call(f, &[mask.into(), p])?;
                self.store_var(*dst, r)
            }
        }
    }

    /// Two 16-bit floats as one register: `<2 x T>` (`lo` first), or its bits as an `i32` word.
    fn half_pair(&mut self, lo: &Expr, hi: &Expr, word: bool) -> R<BasicValueEnum<'ctx>> {
        let pair_ty = vec_ty(self.ty(lo.ty()), 2);
        let (x, y) = (self.expr(lo)?, self.expr(hi)?);
        let v = pair_ty.get_undef();
        let v = self.b.build_insert_element(v, x, self.i32c(0), "")?;
        let v = self.b.build_insert_element(v, y, self.i32c(1), "")?;
        Ok(if word {
            self.b.build_bit_cast(v, self.ctx.i32_type(), "")?
        } else {
            v.into()
        })
    }

    /// Vector load of 2, 4 or 8 16-bit elements as 32-bit words (`i32`, `<2 x i32>`,
    /// `<4 x i32>`), each word split into a `<2 x T>` pair (see
    /// [`compat::LOAD_16BIT_VECTORS_AS_WORDS`] for why).
    fn load_vec_16bit(&self, vars: &[VarId], elem: Scalar, ptr: PointerValue<'ctx>) -> R<()> {
        let n = vars.len() as u32;
        let words = n / 2;
        let i32t = self.ctx.i32_type();
        let pair_ty = vec_ty(self.ty(elem), 2);
        let raw = if words == 1 {
            self.b.build_load(i32t, ptr, "ldw")?
        } else {
            self.b.build_load(i32t.vec_type(words), ptr, "ldw")?
        };
        set_align(as_inst(raw)?, 2 * n)?;
        for w in 0..words {
            let word = if words == 1 {
                raw
            } else {
                self.b
                    .build_extract_element(raw.into_vector_value(), self.i32c(w as u64), "")?
            };
            let pair = self.b.build_bit_cast(word, pair_ty, "")?.into_vector_value();
            for h in 0..2 {
                let x = self.b.build_extract_element(pair, self.i32c(h), "")?;
                self.store_var(vars[(2 * w + h as u32) as usize], x)?;
            }
        }
        Ok(())
    }

    /// Attach `llvm.loop !{self, !{"llvm.loop.unroll.count", i32 n}}` to a loop's back edge
    /// (`n` ≤ 1 disables unrolling). The loop ID must refer to itself, which the inkwell API
    /// cannot express, so this goes through the C API: a temporary node, replaced by the final
    /// one.
    fn set_unroll(&self, backedge: InstructionValue<'ctx>, n: u32) -> R<()> {
        use inkwell::llvm_sys::core::{
            LLVMMDNodeInContext2, LLVMMDStringInContext2, LLVMMetadataAsValue, LLVMSetMetadata,
            LLVMValueAsMetadata,
        };
        use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
        let kind = self.ctx.get_kind_id("llvm.loop");
        let c = self.ctx.raw();
        // SAFETY: every ref comes from this live context; the temporary node is consumed by
        // LLVMMetadataReplaceAllUsesWith, which also deletes it.
        unsafe {
            let option = if n <= 1 {
                let s = "llvm.loop.unroll.disable";
                let mut ops = [LLVMMDStringInContext2(c, s.as_ptr().cast(), s.len())];
                LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len())
            } else {
                let s = "llvm.loop.unroll.count";
                let count = LLVMValueAsMetadata(self.i32c(n as u64).as_value_ref());
                let mut ops = [LLVMMDStringInContext2(c, s.as_ptr().cast(), s.len()), count];
                LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len())
            };
            let tmp = LLVMTemporaryMDNode(c, std::ptr::null_mut(), 0);
            let mut ops = [tmp, option];
            let id = LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(tmp, id);
            LLVMSetMetadata(backedge.as_value_ref(), kind, LLVMMetadataAsValue(c, id));
        }
        Ok(())
    }

    fn atomic(
        &self,
        op: AtomicOp,
        elem: Scalar,
        ptr: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> R<BasicValueEnum<'ctx>> {
        use inkwell::llvm_sys::core::LLVMBuildAtomicRMW;
        use inkwell::llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic;
        use inkwell::llvm_sys::LLVMAtomicRMWBinOp as Op;
        let signed = elem.is_signed_int();
        let rmw = match (op, elem.is_float()) {
            (AtomicOp::Add, true) => Op::LLVMAtomicRMWBinOpFAdd,
            (AtomicOp::Add, false) => Op::LLVMAtomicRMWBinOpAdd,
            (AtomicOp::Min, false) if signed => Op::LLVMAtomicRMWBinOpMin,
            (AtomicOp::Min, false) => Op::LLVMAtomicRMWBinOpUMin,
            (AtomicOp::Max, false) if signed => Op::LLVMAtomicRMWBinOpMax,
            (AtomicOp::Max, false) => Op::LLVMAtomicRMWBinOpUMax,
            (AtomicOp::Exch, _) => Op::LLVMAtomicRMWBinOpXchg,
            (op, _) => {
                return Err(CodegenError::Builder(format!("atomic {op:?} on {elem}")));
            }
        };
        // SAFETY: the builder is positioned in a block of this context; `ptr` and `v` are live
        // values of the same context with matching types (checked by validation).
        unsafe {
            let r = LLVMBuildAtomicRMW(
                self.b.as_mut_ptr(),
                rmw,
                ptr.as_value_ref(),
                v.as_value_ref(),
                LLVMAtomicOrderingMonotonic,
                0,
            );
            Ok(BasicValueEnum::new(r))
        }
    }

    // ----- memory ------------------------------------------------------------------------

    fn mem_elem(&self, mem: Mem) -> Scalar {
        self.k.mem_elem(mem).expect("validated memory reference")
    }

    fn base_ptr(&self, mem: Mem) -> PointerValue<'ctx> {
        match mem {
            Mem::Global(p) => self
                .f
                .get_nth_param(p.0)
                .expect("validated parameter")
                .into_pointer_value(),
            Mem::Shared(s) => self.shared[s.0 as usize],
        }
    }

    /// Address of element `index` of `mem` (64-bit in-bounds GEP).
    fn elem_ptr(&mut self, mem: Mem, index: &Expr) -> R<PointerValue<'ctx>> {
        let elem = self.mem_elem(mem);
        let idx = self.expr(index)?.into_int_value();
        let i64t = self.ctx.i64_type();
        let idx = match index.ty() {
            Scalar::I32 => self.b.build_int_s_extend(idx, i64t, "idx")?,
            Scalar::U32 => self.b.build_int_z_extend(idx, i64t, "idx")?,
            _ => idx,
        };
        // SAFETY: in-bounds by the IR's contract (out-of-bounds accesses are errors).
        Ok(unsafe {
            self.b
                .build_in_bounds_gep(self.ty(elem), self.base_ptr(mem), &[idx], "p")?
        })
    }

    // ----- expressions -------------------------------------------------------------------

    fn expr(&mut self, e: &Expr) -> R<BasicValueEnum<'ctx>> {
        let ty = e.ty();
        Ok(match e.kind() {
            ExprKind::Lit(l) => self.lit(*l, ty),
            ExprKind::Var(v) => self.load_var(*v)?,
            ExprKind::Param(p) => {
                let v = self.f.get_nth_param(p.0).expect("validated parameter");
                if ty == Scalar::Bool {
                    let byte = v.into_int_value();
                    let zero = self.ctx.i8_type().const_zero();
                    self.b.build_int_compare(IntPredicate::NE, byte, zero, "")?.into()
                } else {
                    v
                }
            }
            ExprKind::Builtin(b) => self.builtin(*b)?,
            ExprKind::Unary(op, a) => {
                let a = self.expr(a)?;
                self.unary(*op, ty, a)?
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                self.binary(*op, ty, a, b)?
            }
            ExprKind::Cmp(op, a, b) => {
                let t = a.ty();
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                self.compare(*op, t, a, b)?
            }
            ExprKind::Fma(a, b, c) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                let c = self.expr(c)?;
                let f = self.intrinsic("llvm.fma", &[self.ty(ty)])?;
                self.call(f, &[a, b, c])?
            }
            ExprKind::Dp4a {
                a_signed,
                b_signed,
                a,
                b,
                c,
            } => {
                let args = [self.expr(a)?, self.expr(b)?, self.expr(c)?];
                compat::dp4a(self.ctx, &self.b, *a_signed, *b_signed, args)?
            }
            ExprKind::Prmt { a, b, selector } => {
                let sel = self.ctx.i32_type().const_int(u64::from(*selector), false).into();
                let args = [self.expr(a)?, self.expr(b)?, sel];
                self.call(self.intrinsic(compat::PRMT, &[])?, &args)?
            }
            ExprKind::Select(c, a, b) => {
                let c = self.expr(c)?.into_int_value();
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                self.b.build_select(c, a, b, "")?
            }
            ExprKind::Cast(to, a) => {
                let from = a.ty();
                let v = self.expr(a)?;
                self.cast(from, *to, v)?
            }
            ExprKind::Bitcast(to, a) => {
                let v = self.expr(a)?;
                self.b.build_bit_cast(v, self.ty(*to), "")?
            }
            ExprKind::Load(mem, index) => {
                let ptr = self.elem_ptr(*mem, index)?;
                let v = self.b.build_load(self.ty(ty), ptr, "ld")?;
                set_align(as_inst(v)?, ty.size_bytes())?;
                v
            }
        })
    }

    fn lit(&self, l: Lit, ty: Scalar) -> BasicValueEnum<'ctx> {
        match (l, self.ty(ty)) {
            (Lit::Bool(b), t) => t.into_int_type().const_int(b as u64, false).into(),
            (Lit::Int(v), BasicTypeEnum::IntType(t)) => t.const_int(v as u64, true).into(),
            (Lit::Float(v), BasicTypeEnum::FloatType(t)) => t.const_float(v).into(),
            // Validation rejects literals whose kind differs from their type.
            (Lit::Int(v), t) => t.into_float_type().const_float(v as f64).into(),
            (Lit::Float(v), t) => t.into_int_type().const_int(v as i64 as u64, true).into(),
        }
    }

    fn builtin(&self, b: Builtin) -> R<BasicValueEnum<'ctx>> {
        let (name, range) = match b {
            Builtin::ThreadIdx => (compat::SREG_TID_X, Some(self.k.block_threads as u64)),
            Builtin::BlockIdx(a) => (compat::sreg_ctaid(a), None),
            Builtin::GridDim(a) => (compat::sreg_nctaid(a), None),
        };
        let f = self.intrinsic(name, &[])?;
        let v = self
            .b
            .build_call(f, &[], "")?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| CodegenError::Builder("special register returned void".into()))?;
        if let Some(hi) = range {
            // threadIdx.x < block_threads: lets LLVM fold `tid < N` checks and narrow indices.
            let md = self
                .ctx
                .metadata_node(&[self.i32c(0).into(), self.i32c(hi).into()]);
            as_inst(v)?
                .set_metadata(md, self.ctx.get_kind_id("range"))
                .map_err(|e| CodegenError::Builder(e.to_string()))?;
        }
        Ok(v)
    }

    fn unary(&self, op: UnOp, ty: Scalar, a: BasicValueEnum<'ctx>) -> R<BasicValueEnum<'ctx>> {
        let b = &self.b;
        Ok(match op {
            UnOp::Neg if ty.is_float() => b.build_float_neg(a.into_float_value(), "")?.into(),
            UnOp::Neg => b.build_int_neg(a.into_int_value(), "")?.into(),
            UnOp::Not => b.build_not(a.into_int_value(), "")?.into(),
            UnOp::Abs if ty.is_float() => {
                let f = self.intrinsic("llvm.fabs", &[self.ty(ty)])?;
                self.call(f, &[a])?
            }
            UnOp::Abs => {
                let x = a.into_int_value();
                let zero = x.get_type().const_zero();
                let neg = b.build_int_compare(IntPredicate::SLT, x, zero, "")?;
                let minus = b.build_int_neg(x, "")?;
                b.build_select(neg, minus, x, "")?
            }
            UnOp::Sqrt => self.call(self.intrinsic("llvm.sqrt", &[self.ty(ty)])?, &[a])?,
            UnOp::Rcp => {
                let x = a.into_float_value();
                let one = x.get_type().const_float(1.0);
                b.build_float_div(one, x, "")?.into()
            }
            UnOp::Exp2 => self.call(self.intrinsic(compat::EX2_APPROX, &[])?, &[a])?,
            UnOp::Log2 => self.call(self.intrinsic(compat::LG2_APPROX, &[])?, &[a])?,
            UnOp::Floor => self.call(self.intrinsic("llvm.floor", &[self.ty(ty)])?, &[a])?,
            UnOp::Ceil => self.call(self.intrinsic("llvm.ceil", &[self.ty(ty)])?, &[a])?,
            UnOp::Popc => self.call(self.intrinsic("llvm.ctpop", &[self.ty(ty)])?, &[a])?,
        })
    }

    fn binary(
        &self,
        op: BinOp,
        ty: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> R<BasicValueEnum<'ctx>> {
        let bd = &self.b;
        if ty.is_float() {
            let (x, y): (FloatValue, FloatValue) = (a.into_float_value(), b.into_float_value());
            return Ok(match op {
                BinOp::Add => bd.build_float_add(x, y, "")?.into(),
                BinOp::Sub => bd.build_float_sub(x, y, "")?.into(),
                BinOp::Mul => bd.build_float_mul(x, y, "")?.into(),
                BinOp::Div => bd.build_float_div(x, y, "")?.into(),
                BinOp::Min => self.call(self.intrinsic("llvm.minnum", &[self.ty(ty)])?, &[a, b])?,
                BinOp::Max => self.call(self.intrinsic("llvm.maxnum", &[self.ty(ty)])?, &[a, b])?,
                op => return Err(CodegenError::Builder(format!("{op:?} on {ty}"))),
            });
        }
        let (x, y) = (a.into_int_value(), b.into_int_value());
        let signed = ty.is_signed_int();
        Ok(match op {
            BinOp::Add => bd.build_int_add(x, y, "")?.into(),
            BinOp::Sub => bd.build_int_sub(x, y, "")?.into(),
            BinOp::Mul => bd.build_int_mul(x, y, "")?.into(),
            BinOp::Div if signed => bd.build_int_signed_div(x, y, "")?.into(),
            BinOp::Div => bd.build_int_unsigned_div(x, y, "")?.into(),
            BinOp::Rem if signed => bd.build_int_signed_rem(x, y, "")?.into(),
            BinOp::Rem => bd.build_int_unsigned_rem(x, y, "")?.into(),
            BinOp::Min | BinOp::Max => {
                let name = match (op, signed) {
                    (BinOp::Min, true) => "llvm.smin",
                    (BinOp::Min, false) => "llvm.umin",
                    (_, true) => "llvm.smax",
                    (_, false) => "llvm.umax",
                };
                self.call(self.intrinsic(name, &[self.ty(ty)])?, &[a, b])?
            }
            BinOp::And => bd.build_and(x, y, "")?.into(),
            BinOp::Or => bd.build_or(x, y, "")?.into(),
            BinOp::Xor => bd.build_xor(x, y, "")?.into(),
            BinOp::Shl | BinOp::Shr => {
                let amt = bd.build_and(y, x.get_type().const_int(bits(ty) - 1, false), "")?;
                match op {
                    BinOp::Shl => bd.build_left_shift(x, amt, "")?.into(),
                    _ => bd.build_right_shift(x, amt, signed, "")?.into(),
                }
            }
        })
    }

    fn compare(
        &self,
        op: CmpOp,
        t: Scalar,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> R<BasicValueEnum<'ctx>> {
        if t.is_float() {
            let p = match op {
                CmpOp::Eq => FloatPredicate::OEQ,
                CmpOp::Ne => FloatPredicate::UNE,
                CmpOp::Lt => FloatPredicate::OLT,
                CmpOp::Le => FloatPredicate::OLE,
                CmpOp::Gt => FloatPredicate::OGT,
                CmpOp::Ge => FloatPredicate::OGE,
            };
            let r = self
                .b
                .build_float_compare(p, a.into_float_value(), b.into_float_value(), "")?;
            return Ok(r.into());
        }
        let s = t.is_signed_int();
        let p = match (op, s) {
            (CmpOp::Eq, _) => IntPredicate::EQ,
            (CmpOp::Ne, _) => IntPredicate::NE,
            (CmpOp::Lt, true) => IntPredicate::SLT,
            (CmpOp::Lt, false) => IntPredicate::ULT,
            (CmpOp::Le, true) => IntPredicate::SLE,
            (CmpOp::Le, false) => IntPredicate::ULE,
            (CmpOp::Gt, true) => IntPredicate::SGT,
            (CmpOp::Gt, false) => IntPredicate::UGT,
            (CmpOp::Ge, true) => IntPredicate::SGE,
            (CmpOp::Ge, false) => IntPredicate::UGE,
        };
        let r = self
            .b
            .build_int_compare(p, a.into_int_value(), b.into_int_value(), "")?;
        Ok(r.into())
    }

    fn cast(&self, from: Scalar, to: Scalar, v: BasicValueEnum<'ctx>) -> R<BasicValueEnum<'ctx>> {
        if from == to {
            return Ok(v);
        }
        let b = &self.b;
        let to_ty = self.ty(to);
        Ok(match (from.is_float(), to.is_float()) {
            // int/bool -> int
            (false, false) => {
                let x = v.into_int_value();
                let t = to_ty.into_int_type();
                let (fb, tb) = (bits(from), bits(to));
                if fb == tb {
                    x.into()
                } else if fb > tb {
                    b.build_int_truncate(x, t, "")?.into()
                } else if from.is_signed_int() {
                    b.build_int_s_extend(x, t, "")?.into()
                } else {
                    b.build_int_z_extend(x, t, "")?.into()
                }
            }
            // int/bool -> float
            (false, true) => {
                let x = v.into_int_value();
                let t = to_ty.into_float_type();
                if from.is_signed_int() {
                    b.build_signed_int_to_float(x, t, "")?.into()
                } else {
                    b.build_unsigned_int_to_float(x, t, "")?.into()
                }
            }
            // float -> int: truncate toward zero, saturate, NaN -> 0
            (true, false) => {
                let name = if to.is_signed_int() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                let f = self.intrinsic(name, &[to_ty, self.ty(from)])?;
                self.call(f, &[v])?
            }
            // float -> float
            (true, true) => {
                let x = v.into_float_value();
                match (from, to) {
                    (Scalar::F32, _) => b.build_float_trunc(x, to_ty.into_float_type(), "")?.into(),
                    (_, Scalar::F32) => b.build_float_ext(x, to_ty.into_float_type(), "")?.into(),
                    // f16 <-> bf16: exact widening to f32, then one rounding.
                    _ => {
                        let wide = b.build_float_ext(x, self.ctx.f32_type(), "")?;
                        b.build_float_trunc(wide, to_ty.into_float_type(), "")?.into()
                    }
                }
            }
        })
    }
}

/// Which registers can be SSA values rather than allocas: those assigned by exactly one
/// statement (a `For` variable is assigned twice: start and increment) and read only after that
/// statement, in the same block or in statements nested in it. Statement order is lowering
/// order, and every read of such a register is then dominated by its definition. A read in the
/// statement's own operands, in an enclosing loop's condition, bounds or step, or after the
/// enclosing block has ended keeps the register an alloca.
fn ssa_registers(k: &Kernel) -> Vec<bool> {
    struct Scan {
        assignments: Vec<u32>,
        defined: Vec<bool>,
        read_early: Vec<bool>,
    }
    impl Scan {
        fn read(&mut self, e: &Expr) {
            match e.kind() {
                ExprKind::Var(v) => {
                    if !self.defined[v.0 as usize] {
                        self.read_early[v.0 as usize] = true;
                    }
                }
                ExprKind::Lit(_) | ExprKind::Param(_) | ExprKind::Builtin(_) => {}
                ExprKind::Unary(_, a)
                | ExprKind::Cast(_, a)
                | ExprKind::Bitcast(_, a)
                | ExprKind::Load(_, a) => self.read(a),
                ExprKind::Binary(_, a, b) | ExprKind::Cmp(_, a, b) | ExprKind::Prmt { a, b, .. } => {
                    self.read(a);
                    self.read(b);
                }
                ExprKind::Fma(a, b, c) | ExprKind::Select(a, b, c) | ExprKind::Dp4a { a, b, c, .. } => {
                    self.read(a);
                    self.read(b);
                    self.read(c);
                }
            }
        }
        fn assign(&mut self, v: VarId, here: &mut Vec<usize>) {
            self.assignments[v.0 as usize] += 1;
            self.defined[v.0 as usize] = true;
            here.push(v.0 as usize);
        }
        fn block(&mut self, b: &Block) {
            let mut here = Vec::new();
            for s in b {
                self.stmt(s, &mut here);
            }
            for v in here {
                self.defined[v] = false;
            }
        }
        fn stmt(&mut self, s: &Stmt, here: &mut Vec<usize>) {
            match s {
                Stmt::Assign { var, value } => {
                    self.read(value);
                    self.assign(*var, here);
                }
                Stmt::Store { index, value, .. } => {
                    self.read(index);
                    self.read(value);
                }
                Stmt::LoadVec { vars, index, .. } => {
                    self.read(index);
                    for v in vars {
                        self.assign(*v, here);
                    }
                }
                Stmt::StoreVec { index, values, .. } => {
                    self.read(index);
                    values.iter().for_each(|v| self.read(v));
                }
                Stmt::Atomic {
                    index, value, result, ..
                } => {
                    self.read(index);
                    self.read(value);
                    if let Some(r) = result {
                        self.assign(*r, here);
                    }
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    self.read(cond);
                    self.block(then_body);
                    self.block(else_body);
                }
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                    ..
                } => {
                    self.read(start);
                    self.read(end);
                    self.read(step);
                    // Assigned by the start and by the increment.
                    self.assignments[var.0 as usize] += 2;
                    self.block(body);
                }
                Stmt::While { cond, body } => {
                    self.read(cond);
                    self.block(body);
                }
                Stmt::Barrier | Stmt::WarpSync | Stmt::CopyAsyncCommit | Stmt::CopyAsyncWait { .. } => {}
                Stmt::CopyAsync {
                    dst_index, src_index, ..
                } => {
                    self.read(dst_index);
                    self.read(src_index);
                }
                Stmt::Shuffle { dst, value, arg, .. } => {
                    self.read(value);
                    self.read(arg);
                    self.assign(*dst, here);
                }
                Stmt::Ballot { dst, pred } => {
                    self.read(pred);
                    self.assign(*dst, here);
                }
                Stmt::Mma { dst, a, b, c, .. } => {
                    for x in a.iter().chain(b).chain(c) {
                        self.read(x);
                    }
                    for v in dst {
                        self.assign(*v, here);
                    }
                }
            }
        }
    }
    let n = k.vars.len();
    let mut scan = Scan {
        assignments: vec![0; n],
        defined: vec![false; n],
        read_early: vec![false; n],
    };
    scan.block(&k.body);
    (0..n)
        .map(|v| scan.assignments[v] == 1 && !scan.read_early[v])
        .collect()
}

fn as_inst(v: BasicValueEnum<'_>) -> R<InstructionValue<'_>> {
    v.as_instruction_value()
        .ok_or_else(|| CodegenError::Builder("expected an instruction".into()))
}

fn set_align(i: InstructionValue<'_>, align: u32) -> R<()> {
    i.set_alignment(align)
        .map_err(|e| CodegenError::Builder(e.to_string()))
}
