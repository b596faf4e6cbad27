//! # The decode engine
//!
//! What an inference engine embeds: a [`Decoder`] made for one [`Problem`] (α, head dim, page
//! size, heads, dtypes, method, cache capacity) from a kernel bundle.
//!
//! - [`Decoder::workspace_size`] / [`Decoder::metadata_size`]: bytes the caller allocates once.
//! - [`Decoder::plan`]: host-only work per batch shape — checks lengths and block table, picks
//!   the bundle rows (tier: exact bucket, nearest bucket, default), binds every launch.
//! - [`Decoder::run`]: the step, on the caller's stream with the caller's pointers; no
//!   allocation, no host synchronisation, so it can be captured in a CUDA graph and replayed.
//! - [`Decoder::append`]: metadata update after each sequence gained a token;
//!   [`Decoder::build_metadata`]: metadata of every full page after prefill.
//!
//! [`DecodePlanner`] is the host half alone (no GPU): plans and layouts, for tests and tools.

mod decoder;
mod layout;
mod plan;
mod problem;
mod tensor;

pub use decoder::{Decoder, DeviceMatch, ModuleCache, Step};
pub use entkv_abi::IdFault;
pub use layout::{RegionLayout, Slot, REGION_ALIGN};
pub use plan::{BoundArg, BoundCall, ChosenKernel, DecodePlanner, Region, StepPlan, TensorRole, META_PAGES};
pub use problem::{EngineError, Method, Problem};
pub use tensor::{DecodeBuffers, DeviceRegion, DeviceTensor, MAX_RANK, TENSOR_ALIGN};

#[cfg(test)]
mod tests;
