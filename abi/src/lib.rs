//! # entkv-abi
//!
//! Boundary: the contract between generated kernels and whoever launches them — specialization
//! types (α, head dim, GQA group, dtypes), tile configurations, kernel signatures (parameter
//! order), entry names, launch geometry and workspace sizes. Pure data and arithmetic: no LLVM,
//! no DSL, no CUDA, so the runtime can depend on it and stay light.

pub mod dense;
pub mod family;
pub mod gaussian;
pub mod geometry;
pub mod guard;
pub mod meta;
pub mod paged;
pub mod pipeline;
pub mod seed;
pub mod signature;
pub mod spec;
pub mod topk;

pub use dense::*;
pub use family::{KernelFamily, Selector, TileConfig};
pub use geometry::{ceil_div, LaunchGeometry};
pub use guard::*;
pub use meta::*;
pub use paged::{
    check_batch, check_selection_row, BatchError, MalformedSelection, PagedShape, PagedSpec,
    DEFAULT_SKETCH_BITS, MAX_SEQUENCE_TOKENS, SUPPORTED_SKETCH_BITS,
};
pub use pipeline::{ArgRef, BufferSpec, CallPlan, DecodeKind, PipelinePlan};
pub use signature::{ArgKind, ArgSpec, Elem};
pub use spec::{
    check_group, check_head_dim, check_page_size, Alpha, DType, DecodeSpec, SpecError, SUPPORTED_GROUPS,
    SUPPORTED_HEAD_DIMS, SUPPORTED_PAGE_SIZES,
};
pub use topk::*;
