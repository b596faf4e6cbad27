//! Static checks run when a kernel is finished: types, declarations, memory access rules and
//! resource limits. A kernel that validates can be interpreted and compiled.

use crate::builder::WARP;
use crate::ir::*;
use thiserror::Error;

/// Static shared memory available to one block without opting in to the dynamic limit.
pub const MAX_STATIC_SHARED_BYTES: u64 = 48 * 1024;
/// Largest vector access, in bytes.
pub const MAX_VECTOR_BYTES: u32 = 16;

#[derive(Debug, Error, Clone, PartialEq)]
#[error("kernel `{kernel}`: {path}: {message}")]
pub struct DslError {
    pub kernel: String,
    /// Where in the kernel: a statement path such as `body[3].then[1]`.
    pub path: String,
    pub message: String,
}

pub fn validate(k: &Kernel) -> Result<(), DslError> {
    let v = Validator { k };
    if k.block_threads == 0 || k.block_threads > 1024 || k.block_threads % WARP != 0 {
        return Err(v.err(
            "kernel",
            format!(
                "block_threads = {} must be a multiple of {WARP} in 32..=1024",
                k.block_threads
            ),
        ));
    }
    if k.shared_bytes() > MAX_STATIC_SHARED_BYTES {
        return Err(v.err(
            "shared",
            format!(
                "{} bytes of static shared memory exceed the {} byte limit",
                k.shared_bytes(),
                MAX_STATIC_SHARED_BYTES
            ),
        ));
    }
    for a in &k.shared {
        if a.len == 0 || a.elem == Scalar::Bool {
            return Err(v.err(
                "shared",
                format!("shared array `{}` must be non-empty and not bool", a.name),
            ));
        }
    }
    let mut names = std::collections::HashSet::new();
    for p in &k.params {
        if !names.insert(p.name.as_str()) {
            return Err(v.err("params", format!("duplicate parameter name `{}`", p.name)));
        }
        if let ParamKind::Buffer {
            elem: Scalar::Bool, ..
        } = p.kind
        {
            return Err(v.err("params", format!("buffer `{}` of bool is not supported", p.name)));
        }
    }
    v.block(&k.body, "body")
}

struct Validator<'a> {
    k: &'a Kernel,
}

impl Validator<'_> {
    fn err(&self, path: &str, message: impl Into<String>) -> DslError {
        DslError {
            kernel: self.k.name.clone(),
            path: path.to_string(),
            message: message.into(),
        }
    }

    fn block(&self, b: &Block, path: &str) -> Result<(), DslError> {
        for (i, s) in b.iter().enumerate() {
            self.stmt(s, &format!("{path}[{i}]"))?;
        }
        Ok(())
    }

    fn var_ty(&self, id: VarId, path: &str) -> Result<Scalar, DslError> {
        self.k
            .vars
            .get(id.0 as usize)
            .map(|d| d.ty)
            .ok_or_else(|| self.err(path, format!("undeclared register #{}", id.0)))
    }

    fn mem_elem(&self, mem: Mem, path: &str) -> Result<Scalar, DslError> {
        self.k
            .mem_elem(mem)
            .ok_or_else(|| self.err(path, format!("{mem:?} is not a buffer or shared array")))
    }

    fn check_access(&self, mem: Mem, write: bool, path: &str) -> Result<(), DslError> {
        if let Mem::Global(p) = mem {
            if let Some(Param {
                name,
                kind: ParamKind::Buffer { access, .. },
            }) = self.k.params.get(p.0 as usize)
            {
                match (access, write) {
                    (Access::Read, true) => {
                        return Err(self.err(path, format!("store to read-only buffer `{name}`")))
                    }
                    (Access::Write, false) => {
                        return Err(self.err(path, format!("load from write-only buffer `{name}`")))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn index(&self, e: &Expr, path: &str) -> Result<(), DslError> {
        self.expr(e, path)?;
        if !e.ty().is_int() {
            return Err(self.err(path, format!("index must be an integer, found {}", e.ty())));
        }
        Ok(())
    }

    fn expect(&self, e: &Expr, ty: Scalar, what: &str, path: &str) -> Result<(), DslError> {
        self.expr(e, path)?;
        if e.ty() != ty {
            return Err(self.err(path, format!("{what} must be {ty}, found {}", e.ty())));
        }
        Ok(())
    }

    fn vector_len(&self, len: usize, elem: Scalar, path: &str) -> Result<(), DslError> {
        let bytes = len as u32 * elem.size_bytes();
        if len == 0 || !len.is_power_of_two() || bytes > MAX_VECTOR_BYTES {
            return Err(self.err(
                path,
                format!("vector of {len} x {elem} ({bytes} bytes) must have a power-of-two length and at most 16 bytes"),
            ));
        }
        Ok(())
    }

    fn stmt(&self, s: &Stmt, path: &str) -> Result<(), DslError> {
        match s {
            Stmt::Assign { var, value } => {
                let ty = self.var_ty(*var, path)?;
                self.expect(value, ty, "assigned value", path)
            }
            Stmt::Store { mem, index, value } => {
                let elem = self.mem_elem(*mem, path)?;
                self.check_access(*mem, true, path)?;
                self.index(index, path)?;
                self.expect(value, elem, "stored value", path)
            }
            Stmt::LoadVec { vars, mem, index } => {
                let elem = self.mem_elem(*mem, path)?;
                self.check_access(*mem, false, path)?;
                self.index(index, path)?;
                self.vector_len(vars.len(), elem, path)?;
                for v in vars {
                    if self.var_ty(*v, path)? != elem {
                        return Err(self.err(path, "vector load register type differs from element type"));
                    }
                }
                Ok(())
            }
            Stmt::StoreVec { mem, index, values } => {
                let elem = self.mem_elem(*mem, path)?;
                self.check_access(*mem, true, path)?;
                self.index(index, path)?;
                self.vector_len(values.len(), elem, path)?;
                for v in values {
                    self.expect(v, elem, "stored vector element", path)?;
                }
                Ok(())
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                value,
                result,
            } => {
                let elem = self.mem_elem(*mem, path)?;
                self.check_access(*mem, true, path)?;
                if let Mem::Global(p) = mem {
                    if let ParamKind::Buffer {
                        access: Access::Write,
                        ..
                    } = self.k.param(*p).kind
                    {
                        return Err(self.err(path, "atomic on a write-only buffer (it reads too)"));
                    }
                }
                self.index(index, path)?;
                self.expect(value, elem, "atomic operand", path)?;
                let ok = match op {
                    AtomicOp::Add => {
                        matches!(elem, Scalar::I32 | Scalar::U32 | Scalar::U64 | Scalar::F32)
                    }
                    AtomicOp::Min | AtomicOp::Max => {
                        matches!(elem, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
                    }
                    AtomicOp::Exch => matches!(
                        elem,
                        Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 | Scalar::F32
                    ),
                };
                if !ok {
                    return Err(self.err(path, format!("atomic {op:?} on {elem} is not supported")));
                }
                if let Some(r) = result {
                    if self.var_ty(*r, path)? != elem {
                        return Err(self.err(path, "atomic result register type differs"));
                    }
                }
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expect(cond, Scalar::Bool, "if condition", path)?;
                self.block(then_body, &format!("{path}.then"))?;
                self.block(else_body, &format!("{path}.else"))
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => {
                let ty = self.var_ty(*var, path)?;
                if !ty.is_int() {
                    return Err(self.err(path, format!("loop variable must be an integer, found {ty}")));
                }
                self.expect(start, ty, "loop start", path)?;
                self.expect(end, ty, "loop end", path)?;
                self.expect(step, ty, "loop step", path)?;
                if let ExprKind::Lit(Lit::Int(s)) = step.kind() {
                    if *s <= 0 {
                        return Err(self.err(path, "loop step must be positive"));
                    }
                }
                self.block(body, &format!("{path}.body"))
            }
            Stmt::While { cond, body } => {
                self.expect(cond, Scalar::Bool, "while condition", path)?;
                self.block(body, &format!("{path}.body"))
            }
            Stmt::Barrier | Stmt::WarpSync => Ok(()),
            Stmt::Shuffle { dst, value, arg, .. } => {
                self.expr(value, path)?;
                if !matches!(value.ty(), Scalar::I32 | Scalar::U32 | Scalar::F32) {
                    return Err(self.err(path, format!("shuffle of {} (must be 32-bit)", value.ty())));
                }
                if self.var_ty(*dst, path)? != value.ty() {
                    return Err(self.err(path, "shuffle destination type differs from value"));
                }
                self.expect(arg, Scalar::U32, "shuffle lane/offset", path)
            }
            Stmt::Mma {
                kind: MmaKind::Float,
                dst,
                a,
                b,
                c,
            } => {
                use crate::mma::{A_ELEMS, B_ELEMS, C_ELEMS};
                if a.len() != A_ELEMS || b.len() != B_ELEMS || c.len() != C_ELEMS || dst.len() != C_ELEMS {
                    return Err(self.err(path, "mma takes 8 A, 4 B, 4 C elements and 4 destinations"));
                }
                let ab = a[0].ty();
                if !matches!(ab, Scalar::F16 | Scalar::BF16) {
                    return Err(self.err(path, format!("mma of {ab} (A and B must be f16 or bf16)")));
                }
                for x in a.iter().chain(b) {
                    self.expect(x, ab, "mma A/B element", path)?;
                }
                for x in c {
                    self.expect(x, Scalar::F32, "mma accumulator", path)?;
                }
                for v in dst {
                    if self.var_ty(*v, path)? != Scalar::F32 {
                        return Err(self.err(path, "mma destination must be f32"));
                    }
                }
                Ok(())
            }
            Stmt::Mma {
                kind: MmaKind::Int8 { .. },
                dst,
                a,
                b,
                c,
            } => {
                use crate::mma::{int8, C_ELEMS};
                if a.len() != int8::A_WORDS
                    || b.len() != int8::B_WORDS
                    || c.len() != C_ELEMS
                    || dst.len() != C_ELEMS
                {
                    return Err(self.err(
                        path,
                        "integer mma takes 4 A and 2 B words, 4 C elements and 4 destinations",
                    ));
                }
                for x in a.iter().chain(b) {
                    self.expect(x, Scalar::U32, "integer mma A/B word", path)?;
                }
                for x in c {
                    self.expect(x, Scalar::I32, "integer mma accumulator", path)?;
                }
                for v in dst {
                    if self.var_ty(*v, path)? != Scalar::I32 {
                        return Err(self.err(path, "integer mma destination must be i32"));
                    }
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
                let (dmem, smem) = (Mem::Shared(*dst), Mem::Global(*src));
                let delem = self.mem_elem(dmem, path)?;
                let selem = self.mem_elem(smem, path)?;
                if delem != selem {
                    return Err(self.err(path, format!("async copy from {selem} to {delem}")));
                }
                let read_only = matches!(
                    self.k.param(*src).kind,
                    ParamKind::Buffer {
                        access: Access::Read,
                        ..
                    }
                );
                if !read_only {
                    // A buffer the launch writes could change under a copy in flight.
                    return Err(self.err(
                        path,
                        format!(
                            "async copy from `{}`, which is not a read-only buffer",
                            self.k.param(*src).name
                        ),
                    ));
                }
                self.index(dst_index, path)?;
                self.index(src_index, path)?;
                let bytes = *len * delem.size_bytes();
                if !matches!(bytes, 4 | 8 | 16) {
                    return Err(self.err(
                        path,
                        format!("async copy of {len} x {delem} ({bytes} bytes): cp.async moves 4, 8 or 16"),
                    ));
                }
                Ok(())
            }
            Stmt::CopyAsyncCommit => Ok(()),
            Stmt::CopyAsyncWait { pending } => {
                if *pending > 7 {
                    // PTX accepts any immediate, but more than a handful of groups is a bug.
                    return Err(self.err(
                        path,
                        format!("async copy wait for {pending} pending groups (at most 7)"),
                    ));
                }
                Ok(())
            }
            Stmt::Ballot { dst, pred } => {
                if self.var_ty(*dst, path)? != Scalar::U32 {
                    return Err(self.err(path, "ballot destination must be u32"));
                }
                self.expect(pred, Scalar::Bool, "ballot predicate", path)
            }
        }
    }

    fn expr(&self, e: &Expr, path: &str) -> Result<(), DslError> {
        let ty = e.ty();
        match e.kind() {
            ExprKind::Lit(l) => match (l, ty) {
                (Lit::Bool(_), Scalar::Bool) => Ok(()),
                (Lit::Int(_), t) if t.is_int() => Ok(()),
                (Lit::Float(_), t) if t.is_float() => Ok(()),
                _ => Err(self.err(path, format!("literal {l:?} cannot have type {ty}"))),
            },
            ExprKind::Var(v) => {
                if self.var_ty(*v, path)? != ty {
                    return Err(self.err(path, "register read with the wrong type"));
                }
                Ok(())
            }
            ExprKind::Param(p) => match self.k.params.get(p.0 as usize).map(|p| &p.kind) {
                Some(ParamKind::Scalar(t)) if *t == ty => Ok(()),
                _ => Err(self.err(path, format!("param #{} is not a scalar of type {ty}", p.0))),
            },
            ExprKind::Builtin(_) => {
                if ty != Scalar::U32 {
                    return Err(self.err(path, "builtins are u32"));
                }
                Ok(())
            }
            ExprKind::Unary(op, a) => {
                self.expr(a, path)?;
                if a.ty() != ty {
                    return Err(self.err(path, "unary result type differs from operand"));
                }
                let ok = match op {
                    UnOp::Neg => ty.is_float() || ty.is_signed_int(),
                    UnOp::Not => ty == Scalar::Bool || ty.is_int(),
                    UnOp::Abs => ty.is_float() || ty.is_signed_int(),
                    UnOp::Sqrt | UnOp::Rcp | UnOp::Exp2 | UnOp::Log2 | UnOp::Floor | UnOp::Ceil => {
                        ty == Scalar::F32
                    }
                    UnOp::Popc => ty == Scalar::U32,
                };
                if !ok {
                    return Err(self.err(path, format!("{op:?} is not defined on {ty}")));
                }
                Ok(())
            }
            ExprKind::Binary(op, a, b) => {
                self.expr(a, path)?;
                self.expr(b, path)?;
                if a.ty() != b.ty() || a.ty() != ty {
                    return Err(self.err(
                        path,
                        format!("{op:?} operands have different types: {} and {}", a.ty(), b.ty()),
                    ));
                }
                let ok = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => {
                        ty.is_int() || ty == Scalar::F32
                    }
                    BinOp::Rem | BinOp::Shl | BinOp::Shr => ty.is_int(),
                    BinOp::And | BinOp::Or | BinOp::Xor => ty.is_int() || ty == Scalar::Bool,
                };
                if !ok {
                    return Err(self.err(path, format!("{op:?} is not defined on {ty}")));
                }
                Ok(())
            }
            ExprKind::Cmp(_, a, b) => {
                self.expr(a, path)?;
                self.expr(b, path)?;
                if a.ty() != b.ty() || ty != Scalar::Bool {
                    return Err(self.err(
                        path,
                        format!("comparison of different types: {} and {}", a.ty(), b.ty()),
                    ));
                }
                if a.ty().is_float() && a.ty() != Scalar::F32 {
                    return Err(self.err(path, "compare f16/bf16 after converting to f32"));
                }
                Ok(())
            }
            ExprKind::Fma(a, b, c) => {
                for x in [a, b, c] {
                    self.expect(x, Scalar::F32, "fma operand", path)?;
                }
                Ok(())
            }
            ExprKind::Dp4a { a, b, c, .. } => {
                self.expect(a, Scalar::U32, "dp4a byte operand", path)?;
                self.expect(b, Scalar::U32, "dp4a byte operand", path)?;
                self.expect(c, Scalar::I32, "dp4a accumulator", path)?;
                if ty != Scalar::I32 {
                    return Err(self.err(path, "dp4a node type must be i32"));
                }
                Ok(())
            }
            ExprKind::Prmt { a, b, .. } => {
                self.expect(a, Scalar::U32, "prmt operand", path)?;
                self.expect(b, Scalar::U32, "prmt operand", path)?;
                if ty != Scalar::U32 {
                    return Err(self.err(path, "prmt node type must be u32"));
                }
                Ok(())
            }
            ExprKind::Select(c, a, b) => {
                self.expect(c, Scalar::Bool, "select condition", path)?;
                self.expr(a, path)?;
                self.expr(b, path)?;
                if a.ty() != b.ty() || a.ty() != ty {
                    return Err(self.err(path, "select arms have different types"));
                }
                Ok(())
            }
            ExprKind::Cast(t, a) => {
                self.expr(a, path)?;
                if *t != ty {
                    return Err(self.err(path, "cast node type mismatch"));
                }
                if (a.ty() == Scalar::Bool) != (ty == Scalar::Bool) && a.ty() != Scalar::Bool {
                    return Err(self.err(path, "cast to bool: compare with zero instead"));
                }
                Ok(())
            }
            ExprKind::Bitcast(t, a) => {
                self.expr(a, path)?;
                if t.size_bytes() != a.ty().size_bytes() || *t == Scalar::Bool || a.ty() == Scalar::Bool {
                    return Err(self.err(path, format!("bitcast {} -> {t} changes size", a.ty())));
                }
                Ok(())
            }
            ExprKind::Load(mem, index) => {
                let elem = self.mem_elem(*mem, path)?;
                self.check_access(*mem, false, path)?;
                self.index(index, path)?;
                if elem != ty {
                    return Err(self.err(path, "load type differs from element type"));
                }
                Ok(())
            }
        }
    }
}
