//! Typed interpreter errors. Every runtime error carries a [`Location`]: kernel, block,
//! thread and the statement path (same format as [`crate::validate`]).

use crate::ir::Scalar;
use crate::validate::DslError;
use std::fmt;

/// Where a runtime error happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub kernel: String,
    /// `blockIdx` as `(x, y, z)`.
    pub block: [u32; 3],
    /// `threadIdx.x` of the offending thread (for whole-block errors: the first thread
    /// concerned, see each variant).
    pub thread: u32,
    /// Statement path such as `body[3].then[0]`.
    pub path: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}`, block ({}, {}, {}), thread {}, at {}",
            self.kernel, self.block[0], self.block[1], self.block[2], self.thread, self.path
        )
    }
}

/// The kind of memory access an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemAccess {
    Load,
    Store,
    VectorLoad,
    VectorStore,
    Atomic,
}

impl fmt::Display for MemAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemAccess::Load => "load",
            MemAccess::Store => "store",
            MemAccess::VectorLoad => "vector load",
            MemAccess::VectorStore => "vector store",
            MemAccess::Atomic => "atomic",
        })
    }
}

/// The kind of shared-memory access involved in a race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaceAccess {
    Read,
    Write,
    Atomic,
}

impl fmt::Display for RaceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceAccess::Read => "read",
            RaceAccess::Write => "write",
            RaceAccess::Atomic => "atomic",
        })
    }
}

/// Everything that can go wrong when running a kernel on the interpreter.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum InterpError {
    /// The arguments or launch dimensions do not match the kernel.
    #[error("kernel `{kernel}`: bad argument `{param}`: {message}")]
    BadArgs {
        kernel: String,
        /// Parameter name (or `block` / `grid` for launch dimensions, `#i` for extra args).
        param: String,
        message: String,
    },
    /// The kernel does not validate.
    #[error("{0}")]
    Invalid(#[from] DslError),
    #[error("{loc}: out-of-bounds {access} of `{buffer}`: index {index}, length {len}")]
    OutOfBounds {
        loc: Box<Location>,
        buffer: String,
        access: MemAccess,
        index: i128,
        len: u64,
    },
    #[error(
        "{loc}: misaligned {access} of {vec_len} elements of `{buffer}` at index {index} \
         (must be a multiple of {vec_len})"
    )]
    Misaligned {
        loc: Box<Location>,
        buffer: String,
        access: MemAccess,
        index: i128,
        vec_len: u32,
    },
    /// A barrier reached with some threads of the block inactive. `loc.thread` is the first
    /// thread that did not reach it.
    #[error("{loc}: barrier reached by {active} of {total} threads (thread {} is not there)", loc.thread)]
    BarrierDivergence {
        loc: Box<Location>,
        active: u32,
        total: u32,
    },
    /// A shuffle or ballot executed by only part of a warp. `loc.thread` is the first inactive
    /// lane of that warp.
    #[error("{loc}: {op} in warp {warp} with active lanes {mask:#010x} (all 32 lanes must take part)")]
    PartialWarp {
        loc: Box<Location>,
        op: &'static str,
        warp: u32,
        mask: u32,
    },
    #[error("{loc}: read of uninitialised register `{var}`")]
    UninitRegister { loc: Box<Location>, var: String },
    #[error("{loc}: {access} of uninitialised shared memory `{array}`[{index}]")]
    UninitShared {
        loc: Box<Location>,
        array: String,
        access: MemAccess,
        index: u64,
    },
    #[error(
        "{loc}: {access} of shared memory `{array}`[{index}] while an async copy into it is in \
         flight (no `copy_async_wait` of the issuing thread has retired it)"
    )]
    AsyncCopyInFlight {
        loc: Box<Location>,
        array: String,
        access: MemAccess,
        index: u64,
    },
    #[error("{loc}: the thread ends with {copies} async copies never waited for")]
    AsyncCopyNotWaited { loc: Box<Location>, copies: u64 },
    #[error(
        "{loc}: global-memory race on `{buffer}`[{index}] within one block: {access} by warp {warp} \
         after a {other_access} by warp {other_warp} with no barrier in between"
    )]
    GlobalRace {
        loc: Box<Location>,
        buffer: String,
        index: u64,
        access: RaceAccess,
        warp: u32,
        other_access: RaceAccess,
        other_warp: u32,
    },
    #[error(
        "{loc}: shared-memory race on `{array}`[{index}]: {access} by warp {warp} after a {other_access} \
         by warp {other_warp} with no barrier in between"
    )]
    SharedRace {
        loc: Box<Location>,
        array: String,
        index: u64,
        access: RaceAccess,
        warp: u32,
        other_access: RaceAccess,
        other_warp: u32,
    },
    #[error("{loc}: integer division by zero ({ty})")]
    DivByZero { loc: Box<Location>, ty: Scalar },
    /// `MIN / -1` or `MIN % -1` on a signed type (undefined behaviour in LLVM).
    #[error("{loc}: signed division overflow ({ty}::MIN / -1)")]
    DivOverflow { loc: Box<Location>, ty: Scalar },
    #[error("{loc}: shift by {amount} on {ty} (must be in 0..{})", ty.size_bytes() * 8)]
    ShiftOverflow {
        loc: Box<Location>,
        ty: Scalar,
        amount: i128,
    },
    #[error("{loc}: loop `{var}` has non-positive step {step}")]
    BadLoopStep {
        loc: Box<Location>,
        var: String,
        step: i128,
    },
    #[error("{loc}: step budget of {max_steps} thread-statements exhausted (infinite loop?)")]
    Timeout { loc: Box<Location>, max_steps: u64 },
    /// Something a validated kernel cannot do (an interpreter bug if it ever shows up).
    #[error("{loc}: internal interpreter error: {message}")]
    Internal { loc: Box<Location>, message: String },
}

impl InterpError {
    /// The location of a runtime error (`None` for argument and validation errors).
    pub fn location(&self) -> Option<&Location> {
        match self {
            InterpError::BadArgs { .. } | InterpError::Invalid(_) => None,
            InterpError::OutOfBounds { loc, .. }
            | InterpError::Misaligned { loc, .. }
            | InterpError::BarrierDivergence { loc, .. }
            | InterpError::PartialWarp { loc, .. }
            | InterpError::UninitRegister { loc, .. }
            | InterpError::UninitShared { loc, .. }
            | InterpError::AsyncCopyInFlight { loc, .. }
            | InterpError::AsyncCopyNotWaited { loc, .. }
            | InterpError::SharedRace { loc, .. }
            | InterpError::GlobalRace { loc, .. }
            | InterpError::DivByZero { loc, .. }
            | InterpError::DivOverflow { loc, .. }
            | InterpError::ShiftOverflow { loc, .. }
            | InterpError::BadLoopStep { loc, .. }
            | InterpError::Timeout { loc, .. }
            | InterpError::Internal { loc, .. } => Some(&**loc),
        }
    }

    pub(crate) fn location_mut(&mut self) -> Option<&mut Location> {
        match self {
            InterpError::BadArgs { .. } | InterpError::Invalid(_) => None,
            InterpError::OutOfBounds { loc, .. }
            | InterpError::Misaligned { loc, .. }
            | InterpError::BarrierDivergence { loc, .. }
            | InterpError::PartialWarp { loc, .. }
            | InterpError::UninitRegister { loc, .. }
            | InterpError::UninitShared { loc, .. }
            | InterpError::AsyncCopyInFlight { loc, .. }
            | InterpError::AsyncCopyNotWaited { loc, .. }
            | InterpError::SharedRace { loc, .. }
            | InterpError::GlobalRace { loc, .. }
            | InterpError::DivByZero { loc, .. }
            | InterpError::DivOverflow { loc, .. }
            | InterpError::ShiftOverflow { loc, .. }
            | InterpError::BadLoopStep { loc, .. }
            | InterpError::Timeout { loc, .. }
            | InterpError::Internal { loc, .. } => Some(&mut **loc),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        InterpError::Internal {
            loc: Box::default(),
            message: message.into(),
        }
    }
}

/// One step of a statement path, innermost first while an error unwinds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seg {
    Index(usize),
    Then,
    Else,
    Body,
}

/// An error on its way up: the error (location not yet filled in), the thread, and the
/// statement path collected innermost first.
#[derive(Debug)]
pub(crate) struct Fault {
    pub err: InterpError,
    pub thread: u32,
    pub path: Vec<Seg>,
}

pub(crate) type FResult<T> = Result<T, Box<Fault>>;

pub(crate) fn fault(err: InterpError, thread: u32) -> Box<Fault> {
    Box::new(Fault {
        err,
        thread,
        path: Vec::new(),
    })
}

pub(crate) fn render_path(segs: &[Seg]) -> String {
    let mut s = String::from("body");
    for seg in segs.iter().rev() {
        match seg {
            Seg::Index(i) => {
                s.push('[');
                s.push_str(&i.to_string());
                s.push(']');
            }
            Seg::Then => s.push_str(".then"),
            Seg::Else => s.push_str(".else"),
            Seg::Body => s.push_str(".body"),
        }
    }
    s
}
