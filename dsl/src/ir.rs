//! The typed kernel IR: what a kernel *is*, independent of how it is run.
//!
//! A [`Kernel`] is a structured program (no goto, no SSA): mutable registers ([`VarId`]),
//! expression trees ([`Expr`]) and statements ([`Stmt`]) with nested blocks for branches and
//! loops. Structured control flow is what lets the interpreter run a whole thread block in
//! lockstep (and so check barriers and warp shuffles) and lets codegen emit straightforward
//! LLVM basic blocks.
//!
//! Everything a specialization decides (α, head dim, page size, dtypes, tile sizes) is already
//! folded into the IR as literals by the Rust code that built it, so the IR has no notion of
//! "specialization parameter": there is nothing left to branch on.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::rc::Rc;

/// Scalar element types. `F16`/`BF16` are storage types: arithmetic on them is allowed by the
/// IR, but kernels convert to `F32` for math (the interpreter and codegen agree either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scalar {
    Bool,
    I32,
    U32,
    I64,
    U64,
    F16,
    BF16,
    F32,
}

impl Scalar {
    /// Size in bytes when stored in memory (`Bool` is stored as one byte).
    pub fn size_bytes(self) -> u32 {
        match self {
            Scalar::Bool => 1,
            Scalar::F16 | Scalar::BF16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 => 8,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::BF16 | Scalar::F32)
    }
    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64)
    }
    pub fn is_signed_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::BF16 => "bf16",
            Scalar::F32 => "f32",
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Index of a kernel parameter (in ABI order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamId(pub u32);
/// Index of a register variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VarId(pub u32);
/// Index of a statically sized shared-memory array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SharedId(pub u32);

/// How a kernel uses a global buffer. `Read` buffers are promised not to be written by anyone
/// during the launch and not to alias any other buffer, which lets codegen use the read-only
/// (non-coherent) cache path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamKind {
    /// A pointer to global memory holding elements of the given type.
    Buffer { elem: Scalar, access: Access },
    /// A scalar passed by value.
    Scalar(Scalar),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedArray {
    pub name: String,
    pub elem: Scalar,
    pub len: u32,
}

impl SharedArray {
    pub fn bytes(&self) -> u64 {
        self.elem.size_bytes() as u64 * self.len as u64
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VarDecl {
    pub name: String,
    pub ty: Scalar,
}

/// A memory location family: a global buffer parameter or a shared-memory array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mem {
    Global(ParamId),
    Shared(SharedId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Axis {
    X,
    Y,
    Z,
}

/// Hardware indices. All are `u32`. The block is one-dimensional (`threadIdx.x` only); the
/// grid is three-dimensional. The block size itself is a compile-time constant of the kernel
/// ([`Kernel::block_threads`]), so it has no builtin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Builtin {
    ThreadIdx,
    BlockIdx(Axis),
    GridDim(Axis),
}

/// A literal value. Floats are kept as `f64` and rounded to the expression type when used.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Lit {
    Bool(bool),
    Int(i64),
    Float(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    /// Logical not for `Bool`, bitwise not for integers.
    Not,
    Abs,
    /// Correctly rounded square root.
    Sqrt,
    /// Correctly rounded reciprocal (`1/x`).
    Rcp,
    /// Fast base-2 exponential (`ex2.approx`, about 2 ulp).
    Exp2,
    /// Fast base-2 logarithm (`lg2.approx`, about 2 ulp).
    Log2,
    Floor,
    Ceil,
    /// Population count of a `u32` (PTX `popc.b32`).
    Popc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Integer division truncates toward zero; dividing by zero is an error in the interpreter.
    Div,
    Rem,
    /// Float min/max return the non-NaN operand when exactly one is NaN (PTX `min.f32`).
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    /// Arithmetic shift for signed integers, logical for unsigned.
    Shr,
}

/// Comparisons. Float comparisons are ordered (false when either side is NaN), except `Ne`,
/// which is the negation of `Eq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Warp shuffle modes. Like PTX `shfl.sync`, only the low 5 bits of `arg` are used
/// (`arg % 32`) in every mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ShuffleMode {
    /// Read from lane `lane ^ arg`.
    Xor,
    /// Read from lane `lane + arg`; lanes past the end keep their own value.
    Down,
    /// Read from lane `lane - arg`; lanes before the start keep their own value.
    Up,
    /// Read from lane `arg`.
    Idx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AtomicOp {
    Add,
    Min,
    Max,
    Exch,
}

/// An expression tree node. Types are computed when the node is built and checked by
/// [`crate::validate`]; building never fails.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    Lit(Lit),
    Var(VarId),
    /// A scalar kernel parameter.
    Param(ParamId),
    Builtin(Builtin),
    Unary(UnOp, Expr),
    Binary(BinOp, Expr, Expr),
    Cmp(CmpOp, Expr, Expr),
    /// `a * b + c` with a single rounding.
    Fma(Expr, Expr, Expr),
    /// Four-way byte dot product with accumulate (PTX `dp4a`): `c + Σ_k a[k]·b[k]` over the
    /// four bytes of `a` and `b` (u32), each byte signed when its flag says so; `c` and the
    /// result are i32 (wrapping).
    Dp4a {
        a_signed: bool,
        b_signed: bool,
        a: Expr,
        b: Expr,
        c: Expr,
    },
    /// Byte permute (PTX `prmt.b32`, default mode): byte `i` of the result is byte `n & 7` of
    /// the eight bytes `b:a` (`a` low), `n` the selector's nibble `i`; when `n & 8` the byte is
    /// instead filled with the sign (top bit) of that byte. `a`, `b` and the result are u32.
    Prmt {
        a: Expr,
        b: Expr,
        selector: u16,
    },
    Select(Expr, Expr, Expr),
    /// Value conversion: float→int truncates toward zero and saturates (NaN → 0); float
    /// narrowing rounds to nearest even; int→int wraps or extends by the source's signedness.
    Cast(Scalar, Expr),
    /// Reinterpret the bits as another type of the same size.
    Bitcast(Scalar, Expr),
    /// Scalar load of element `index` (an integer, in elements, not bytes).
    Load(Mem, Expr),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExprNode {
    pub kind: ExprKind,
    pub ty: Scalar,
}

/// A shared, immutable expression tree. Cloning is cheap; reusing an `Expr` in two places
/// evaluates it twice (bind it to a register with `let_` to compute it once).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr(pub Rc<ExprNode>);

impl Expr {
    pub fn new(kind: ExprKind, ty: Scalar) -> Expr {
        Expr(Rc::new(ExprNode { kind, ty }))
    }
    pub fn ty(&self) -> Scalar {
        self.0.ty
    }
    pub fn kind(&self) -> &ExprKind {
        &self.0.kind
    }
}

pub type Block = Vec<Stmt>;

/// The operand types of a [`Stmt::Mma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MmaKind {
    /// m16n8k16 on f16 or bf16 A and B (their type), f32 C and D.
    Float,
    /// m16n8k32 on bytes, A and B each signed or unsigned, i32 C and D.
    Int8 { a_signed: bool, b_signed: bool },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    Assign {
        var: VarId,
        value: Expr,
    },
    Store {
        mem: Mem,
        index: Expr,
        value: Expr,
    },
    /// Vector load of `vars.len()` consecutive elements starting at `index`, which must be a
    /// multiple of the vector length (natural alignment). At most 16 bytes, power-of-two length.
    LoadVec {
        vars: Vec<VarId>,
        mem: Mem,
        index: Expr,
    },
    /// Vector store; same rules as [`Stmt::LoadVec`].
    StoreVec {
        mem: Mem,
        index: Expr,
        values: Vec<Expr>,
    },
    /// Atomic read-modify-write; `result` receives the old value.
    Atomic {
        op: AtomicOp,
        mem: Mem,
        index: Expr,
        value: Expr,
        result: Option<VarId>,
    },
    If {
        cond: Expr,
        then_body: Block,
        else_body: Block,
    },
    /// `for (var = start; var < end; var += step)`, with `step > 0`. `var`, `start`, `end` and
    /// `step` share one integer type. `unroll` is a hint for codegen.
    For {
        var: VarId,
        start: Expr,
        end: Expr,
        step: Expr,
        body: Block,
        unroll: Option<u32>,
    },
    /// `while (cond) body`, `cond` re-evaluated before every iteration.
    While {
        cond: Expr,
        body: Block,
    },
    /// `__syncthreads()`: every thread of the block must reach the same barrier.
    Barrier,
    /// Warp shuffle over the full warp (`shfl.sync` with mask 0xffffffff). `value` and `dst`
    /// are 32-bit (`I32`, `U32` or `F32`); `arg` is a `U32` lane or offset. All 32 lanes of the
    /// warp must execute it together.
    Shuffle {
        dst: VarId,
        value: Expr,
        mode: ShuffleMode,
        arg: Expr,
    },
    /// `vote.sync.ballot` over the full warp: bit `i` of `dst` (a `U32`) is lane `i`'s `pred`.
    Ballot {
        dst: VarId,
        pred: Expr,
    },
    /// Warp-level matrix multiply-accumulate `D = A·B + C` on the tensor cores, each operand
    /// spread over the 32 lanes as PTX's fragments (lane `l`, `g = l / 4`, `t = l % 4`).
    ///
    /// [`MmaKind::Float`] (PTX `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}
    /// .f32`): A is 16×16, B 16×8, C and D 16×8 f32:
    /// - `a[i]` (8, F16 or BF16) is A[g + 8·((i / 2) % 2)][2t + i % 2 + 8·(i / 4)];
    /// - `b[i]` (4, the type of `a`) is B[2t + i % 2 + 8·(i / 2)]\[g\];
    /// - `c[i]` and `dst[i]` (4, F32) are C/D[g + 8·(i / 2)][2t + i % 2].
    ///
    /// Products are exact; the sum's rounding is the hardware's (the interpreter rounds the exact
    /// sum once).
    ///
    /// [`MmaKind::Int8`] (PTX `mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32`): A is
    /// 16×32 and B 32×8 bytes (signed or not, each), packed four to a U32 word, C and D 16×8
    /// I32 (see [`crate::mma::int8`]):
    /// - byte `j` of `a[w]` (4 words) is A[g + 8·(w % 2)][4t + j + 16·(w / 2)];
    /// - byte `j` of `b[w]` (2 words) is B[4t + j + 16·w]\[g\];
    /// - `c[i]` and `dst[i]` (4, I32) as above.
    ///
    /// Exact while the sum fits i32, which callers must ensure: the PTX has no `.satfinite`,
    /// the interpreter wraps modulo 2³², and no check has run the hardware past that range.
    ///
    /// All 32 lanes of the warp must execute it together.
    Mma {
        kind: MmaKind,
        dst: Vec<VarId>,
        a: Vec<Expr>,
        b: Vec<Expr>,
        c: Vec<Expr>,
    },
    /// Asynchronous copy of `len` elements (4, 8 or 16 bytes) from the global `Read` buffer
    /// `src` at element `src_index` to the shared array `dst` at element `dst_index` (PTX
    /// `cp.async`; both arrays of one element type, both indices multiples of `len`). It moves
    /// bytes without a register: the copy is in flight until a [`Stmt::CopyAsyncWait`] of the
    /// same thread retires its group, and until then no thread may touch those shared
    /// elements. After the wait the issuing thread sees them; other threads need a barrier.
    CopyAsync {
        dst: SharedId,
        dst_index: Expr,
        src: ParamId,
        src_index: Expr,
        len: u32,
    },
    /// `cp.async.commit_group`: this thread's async copies issued since its last commit form
    /// one group.
    CopyAsyncCommit,
    /// `cp.async.wait_group pending`: wait until at most `pending` of this thread's committed
    /// groups are still in flight (the oldest land first). Uncommitted copies are not waited on.
    CopyAsyncWait {
        pending: u32,
    },
    /// `__syncwarp()` (`bar.warp.sync` with a full mask): the lanes of the warp meet, and memory
    /// accesses of each lane before it are ordered before the others' after it. All 32 lanes
    /// must execute it together. (The interpreter runs warps in lockstep and tracks races per
    /// warp, so it only checks that the warp is whole.)
    WarpSync,
}

/// A complete kernel: its ABI (parameters in order), its resources and its body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub shared: Vec<SharedArray>,
    pub vars: Vec<VarDecl>,
    pub body: Block,
    /// The exact number of threads per block this kernel must be launched with. Emitted as the
    /// kernel's launch bound (`.maxntid`).
    pub block_threads: u32,
    /// Optional occupancy hint (`.minnctapersm`).
    pub min_blocks_per_sm: Option<u32>,
}

impl Kernel {
    pub fn shared_bytes(&self) -> u64 {
        self.shared.iter().map(SharedArray::bytes).sum()
    }
    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id.0 as usize]
    }
    pub fn var(&self, id: VarId) -> &VarDecl {
        &self.vars[id.0 as usize]
    }
    pub fn shared_array(&self, id: SharedId) -> &SharedArray {
        &self.shared[id.0 as usize]
    }
    /// Element type of a memory family.
    pub fn mem_elem(&self, mem: Mem) -> Option<Scalar> {
        match mem {
            Mem::Global(p) => match &self.params.get(p.0 as usize)?.kind {
                ParamKind::Buffer { elem, .. } => Some(*elem),
                ParamKind::Scalar(_) => None,
            },
            Mem::Shared(s) => self.shared.get(s.0 as usize).map(|a| a.elem),
        }
    }
    /// Human-readable name of a memory family, for error messages.
    pub fn mem_name(&self, mem: Mem) -> String {
        match mem {
            Mem::Global(p) => self
                .params
                .get(p.0 as usize)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| format!("param#{}", p.0)),
            Mem::Shared(s) => self
                .shared
                .get(s.0 as usize)
                .map(|a| format!("shared {}", a.name))
                .unwrap_or_else(|| format!("shared#{}", s.0)),
        }
    }
}
