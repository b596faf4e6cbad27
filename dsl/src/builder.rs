//! The builder kernels are written with: declare parameters and shared arrays, then emit
//! statements; nested blocks (branches, loops) are closures.
//!
//! ```
//! use entkv_dsl::*;
//! let mut k = KernelBuilder::new("scale", 128);
//! let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
//! let n = k.scalar_param("n", Scalar::I64);
//! let s = k.scalar_param("s", Scalar::F32);
//! let i = k.let_("i", k.global_thread_id().i64());
//! k.if_(i.lt(n), |k| k.store(x, i, x.at(i) * s.clone()));
//! let kernel = k.finish().unwrap();
//! assert_eq!(kernel.params.len(), 3);
//! ```

use crate::expr::*;
use crate::ir::*;
use crate::validate::{validate, DslError};

/// Threads per warp. The DSL targets NVIDIA GPUs, where this is fixed.
pub const WARP: u32 = 32;

pub struct KernelBuilder {
    name: String,
    params: Vec<Param>,
    shared: Vec<SharedArray>,
    vars: Vec<VarDecl>,
    /// Open blocks: the innermost is last. `finish` requires exactly one (the body).
    blocks: Vec<Block>,
    block_threads: u32,
    min_blocks_per_sm: Option<u32>,
}

impl KernelBuilder {
    /// Start a kernel that will run with exactly `block_threads` threads per block.
    pub fn new(name: impl Into<String>, block_threads: u32) -> Self {
        KernelBuilder {
            name: name.into(),
            params: Vec::new(),
            shared: Vec::new(),
            vars: Vec::new(),
            blocks: vec![Vec::new()],
            block_threads,
            min_blocks_per_sm: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Occupancy hint for the backend (`.minnctapersm`).
    pub fn set_min_blocks_per_sm(&mut self, n: u32) {
        self.min_blocks_per_sm = Some(n);
    }

    // ----- declarations -------------------------------------------------------------------

    /// Declare the next parameter as a global buffer.
    pub fn buffer(&mut self, name: &str, elem: Scalar, access: Access) -> Buf {
        let id = ParamId(self.params.len() as u32);
        self.params.push(Param {
            name: name.to_string(),
            kind: ParamKind::Buffer { elem, access },
        });
        Buf {
            mem: Mem::Global(id),
            elem,
        }
    }

    /// Declare the next parameter as a scalar passed by value; returns an expression reading it.
    pub fn scalar_param(&mut self, name: &str, ty: Scalar) -> Expr {
        let id = ParamId(self.params.len() as u32);
        self.params.push(Param {
            name: name.to_string(),
            kind: ParamKind::Scalar(ty),
        });
        Expr::new(ExprKind::Param(id), ty)
    }

    /// Declare a statically sized shared-memory array.
    pub fn shared(&mut self, name: &str, elem: Scalar, len: u32) -> Buf {
        let id = SharedId(self.shared.len() as u32);
        self.shared.push(SharedArray {
            name: name.to_string(),
            elem,
            len,
        });
        Buf {
            mem: Mem::Shared(id),
            elem,
        }
    }

    /// Declare a register without assigning it.
    pub fn var(&mut self, name: &str, ty: Scalar) -> Var {
        let id = VarId(self.vars.len() as u32);
        self.vars.push(VarDecl {
            name: name.to_string(),
            ty,
        });
        Var { id, ty }
    }

    /// Declare a register and assign `value` to it (its type is the value's type).
    pub fn let_(&mut self, name: &str, value: impl IntoExpr) -> Var {
        let value = value.into_expr(None);
        let v = self.var(name, value.ty());
        self.push(Stmt::Assign { var: v.id, value });
        v
    }

    /// Declare a register of an explicit type, initialised with `value` (a literal adopts `ty`).
    pub fn let_typed(&mut self, name: &str, ty: Scalar, value: impl IntoExpr) -> Var {
        let value = value.into_expr(Some(ty));
        let v = self.var(name, ty);
        self.push(Stmt::Assign { var: v.id, value });
        v
    }

    // ----- builtins ----------------------------------------------------------------------

    pub fn thread_idx(&self) -> Expr {
        Expr::new(ExprKind::Builtin(Builtin::ThreadIdx), Scalar::U32)
    }
    pub fn block_idx(&self, axis: Axis) -> Expr {
        Expr::new(ExprKind::Builtin(Builtin::BlockIdx(axis)), Scalar::U32)
    }
    pub fn grid_dim(&self, axis: Axis) -> Expr {
        Expr::new(ExprKind::Builtin(Builtin::GridDim(axis)), Scalar::U32)
    }
    /// Threads per block, a compile-time constant of this kernel.
    pub fn block_threads(&self) -> u32 {
        self.block_threads
    }
    pub fn warps_per_block(&self) -> u32 {
        self.block_threads / WARP
    }
    /// Lane within the warp (`threadIdx.x % 32`).
    pub fn lane(&self) -> Expr {
        self.thread_idx() & (WARP - 1)
    }
    /// Warp within the block (`threadIdx.x / 32`).
    pub fn warp(&self) -> Expr {
        self.thread_idx() >> 5u32
    }
    /// `blockIdx.x * blockDim.x + threadIdx.x` as `u32`.
    pub fn global_thread_id(&self) -> Expr {
        self.block_idx(Axis::X) * self.block_threads + self.thread_idx()
    }

    // ----- statements --------------------------------------------------------------------

    fn push(&mut self, s: Stmt) {
        self.blocks
            .last_mut()
            .expect("builder always has an open block")
            .push(s);
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self)) -> Block {
        self.blocks.push(Vec::new());
        f(self);
        self.blocks.pop().expect("nested block")
    }

    pub fn assign(&mut self, var: Var, value: impl IntoExpr) {
        let value = value.into_expr(Some(var.ty));
        self.push(Stmt::Assign { var: var.id, value });
    }

    pub fn store(&mut self, buf: Buf, index: impl IntoExpr, value: impl IntoExpr) {
        let index = index.into_expr(None);
        let value = value.into_expr(Some(buf.elem));
        self.push(Stmt::Store {
            mem: buf.mem,
            index,
            value,
        });
    }

    /// Load `len` consecutive elements starting at `index` (a multiple of `len`) into fresh
    /// registers, as one vector access of at most 16 bytes.
    pub fn load_vec(&mut self, name: &str, buf: Buf, index: impl IntoExpr, len: u32) -> Vec<Var> {
        let vars: Vec<Var> = (0..len)
            .map(|i| self.var(&format!("{name}{i}"), buf.elem))
            .collect();
        self.push(Stmt::LoadVec {
            vars: vars.iter().map(|v| v.id).collect(),
            mem: buf.mem,
            index: index.into_expr(None),
        });
        vars
    }

    pub fn store_vec(&mut self, buf: Buf, index: impl IntoExpr, values: Vec<Expr>) {
        let values = values.into_iter().map(|v| v.into_expr(Some(buf.elem))).collect();
        self.push(Stmt::StoreVec {
            mem: buf.mem,
            index: index.into_expr(None),
            values,
        });
    }

    /// Start an asynchronous copy of `len` elements from `src[src_index..]` (a global buffer)
    /// to `dst[dst_index..]` (a shared array): see [`Stmt::CopyAsync`].
    pub fn copy_async(
        &mut self,
        dst: Buf,
        dst_index: impl IntoExpr,
        src: Buf,
        src_index: impl IntoExpr,
        len: u32,
    ) {
        let (Mem::Shared(d), Mem::Global(g)) = (dst.mem, src.mem) else {
            panic!("copy_async copies from a global buffer to a shared array");
        };
        self.push(Stmt::CopyAsync {
            dst: d,
            dst_index: dst_index.into_expr(None),
            src: g,
            src_index: src_index.into_expr(None),
            len,
        });
    }

    /// Close this thread's group of async copies (`cp.async.commit_group`).
    pub fn copy_async_commit(&mut self) {
        self.push(Stmt::CopyAsyncCommit);
    }

    /// Wait until at most `pending` of this thread's committed copy groups are in flight.
    pub fn copy_async_wait(&mut self, pending: u32) {
        self.push(Stmt::CopyAsyncWait { pending });
    }

    /// Atomic read-modify-write returning the old value.
    pub fn atomic(&mut self, op: AtomicOp, buf: Buf, index: impl IntoExpr, value: impl IntoExpr) -> Var {
        let old = self.var("atomic_old", buf.elem);
        self.push(Stmt::Atomic {
            op,
            mem: buf.mem,
            index: index.into_expr(None),
            value: value.into_expr(Some(buf.elem)),
            result: Some(old.id),
        });
        old
    }

    /// Atomic read-modify-write whose old value is not needed.
    pub fn atomic_no_ret(&mut self, op: AtomicOp, buf: Buf, index: impl IntoExpr, value: impl IntoExpr) {
        self.push(Stmt::Atomic {
            op,
            mem: buf.mem,
            index: index.into_expr(None),
            value: value.into_expr(Some(buf.elem)),
            result: None,
        });
    }

    pub fn if_(&mut self, cond: impl IntoExpr, then_body: impl FnOnce(&mut Self)) {
        let cond = cond.into_expr(Some(Scalar::Bool));
        let then_body = self.nested(then_body);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body: Vec::new(),
        });
    }

    pub fn if_else(
        &mut self,
        cond: impl IntoExpr,
        then_body: impl FnOnce(&mut Self),
        else_body: impl FnOnce(&mut Self),
    ) {
        let cond = cond.into_expr(Some(Scalar::Bool));
        let then_body = self.nested(then_body);
        let else_body = self.nested(else_body);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
    }

    /// A dynamic loop `for (i = start; i < end; i += step)`. The induction variable takes the
    /// type of `start` (literals adopt `end`'s type when `start` is a literal).
    pub fn for_(
        &mut self,
        name: &str,
        start: impl IntoExpr,
        end: impl IntoExpr,
        step: impl IntoExpr,
        body: impl FnOnce(&mut Self, Expr),
    ) {
        self.for_impl(name, start, end, step, None, body)
    }

    /// Like [`Self::for_`], with an unroll hint for the backend.
    pub fn for_unrolled(
        &mut self,
        name: &str,
        start: impl IntoExpr,
        end: impl IntoExpr,
        step: impl IntoExpr,
        unroll: u32,
        body: impl FnOnce(&mut Self, Expr),
    ) {
        self.for_impl(name, start, end, step, Some(unroll), body)
    }

    fn for_impl(
        &mut self,
        name: &str,
        start: impl IntoExpr,
        end: impl IntoExpr,
        step: impl IntoExpr,
        unroll: Option<u32>,
        body: impl FnOnce(&mut Self, Expr),
    ) {
        let end = end.into_expr(None);
        let start = start.into_expr(Some(end.ty()));
        let ty = start.ty();
        let end = if matches!(end.kind(), ExprKind::Lit(_)) {
            retype(end, ty)
        } else {
            end
        };
        let step = step.into_expr(Some(ty));
        let var = self.var(name, ty);
        let body = self.nested(|k| body(k, var.e()));
        self.push(Stmt::For {
            var: var.id,
            start,
            end,
            step,
            body,
            unroll,
        });
    }

    /// `while (cond) body`; `cond` is re-evaluated before each iteration, so it sees updates
    /// the body makes to registers.
    pub fn while_(&mut self, cond: impl IntoExpr, body: impl FnOnce(&mut Self)) {
        let cond = cond.into_expr(Some(Scalar::Bool));
        let body = self.nested(body);
        self.push(Stmt::While { cond, body });
    }

    /// `__syncthreads()`.
    pub fn barrier(&mut self) {
        self.push(Stmt::Barrier);
    }

    /// Full-warp shuffle of a 32-bit value; returns the received value in a fresh register.
    pub fn shuffle(&mut self, mode: ShuffleMode, value: impl IntoExpr, arg: impl IntoExpr) -> Var {
        let value = value.into_expr(None);
        let dst = self.var("shfl", value.ty());
        self.push(Stmt::Shuffle {
            dst: dst.id,
            value,
            mode,
            arg: arg.into_expr(Some(Scalar::U32)),
        });
        dst
    }

    /// `__syncwarp()`: orders one lane's shared or global accesses before another lane's of the
    /// same warp (e.g. a lane reading what another lane stored).
    pub fn warp_sync(&mut self) {
        self.push(Stmt::WarpSync);
    }

    /// Warp-level `D = A·B + C` on 16×16 f16/bf16 A, 16×8 B and f32 C, D (tensor cores; see
    /// [`Stmt::Mma`] and [`crate::mma`] for which elements a lane holds). Returns D's four
    /// elements of this lane in fresh registers.
    pub fn mma(&mut self, a: &[Expr], b: &[Expr], c: &[Expr]) -> [Var; 4] {
        let dst = [0, 1, 2, 3].map(|_| self.var("mma", Scalar::F32));
        self.push(Stmt::Mma {
            kind: MmaKind::Float,
            dst: dst.iter().map(|v| v.id).collect(),
            a: a.to_vec(),
            b: b.to_vec(),
            c: c.iter().map(|x| x.clone().into_expr(Some(Scalar::F32))).collect(),
        });
        dst
    }

    /// Warp-level `D = A·B + C` on 16×32 A and 32×8 B bytes (four to a U32 word; each signed
    /// or not) and i32 C, D (integer tensor cores, exact; see [`Stmt::Mma`] and
    /// [`crate::mma::int8`]). Returns D's four elements of this lane in fresh registers.
    pub fn mma_i8(&mut self, a: &[Expr], a_signed: bool, b: &[Expr], b_signed: bool, c: &[Expr]) -> [Var; 4] {
        let dst = [0, 1, 2, 3].map(|_| self.var("imma", Scalar::I32));
        self.push(Stmt::Mma {
            kind: MmaKind::Int8 { a_signed, b_signed },
            dst: dst.iter().map(|v| v.id).collect(),
            a: a.iter().map(|x| x.clone().into_expr(Some(Scalar::U32))).collect(),
            b: b.iter().map(|x| x.clone().into_expr(Some(Scalar::U32))).collect(),
            c: c.iter().map(|x| x.clone().into_expr(Some(Scalar::I32))).collect(),
        });
        dst
    }

    /// Full-warp ballot: bit `i` is lane `i`'s predicate.
    pub fn ballot(&mut self, pred: impl IntoExpr) -> Var {
        let dst = self.var("ballot", Scalar::U32);
        self.push(Stmt::Ballot {
            dst: dst.id,
            pred: pred.into_expr(Some(Scalar::Bool)),
        });
        dst
    }

    /// Finish the kernel and check it (types, declarations, resources).
    pub fn finish(mut self) -> Result<Kernel, DslError> {
        assert_eq!(self.blocks.len(), 1, "unbalanced nested blocks in kernel builder");
        let body = self.blocks.pop().unwrap_or_default();
        let kernel = Kernel {
            name: self.name,
            params: self.params,
            shared: self.shared,
            vars: self.vars,
            body,
            block_threads: self.block_threads,
            min_blocks_per_sm: self.min_blocks_per_sm,
        };
        validate(&kernel)?;
        Ok(kernel)
    }
}

fn retype(e: Expr, ty: Scalar) -> Expr {
    match e.kind() {
        ExprKind::Lit(Lit::Int(v)) if ty.is_int() => Expr::new(ExprKind::Lit(Lit::Int(*v)), ty),
        _ => e,
    }
}
