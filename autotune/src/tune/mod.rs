//! The tile-config search: candidates per kernel family, strategies, the record log and cache,
//! ranking, and the measurement backend that compiles, checks and times a candidate.
//!
//! The search (everything but [`MeasureBackend`] implementations) runs without a GPU, so it is
//! tested in CI with a fake backend; the GPU backend lives in [`gpu`].

use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};
use serde::{Deserialize, Serialize};

pub mod args;
pub mod command;
pub mod gpu;
pub mod log;
pub mod output;
pub mod rank;
pub mod report;
pub mod search;
pub mod space;
pub mod strategy;

pub use output::bundle_from_choices;
pub use search::{run_search, SearchOpts, SearchOutcome};

/// What the tuned kernels are measured on: one context bucket's representative shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Workload {
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    /// Tokens per sequence (every sequence of the batch has this length).
    pub context: u64,
    /// Keys like BENCH.md's `paper` (iid normal) or `peaked`.
    pub data: DataKind,
    /// For a family that reads a selection: the selector whose step it is verified and timed
    /// in ([`KernelFamily::selectors`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Selector>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataKind {
    Normal,
    Peaked,
}

/// One point of the search: a family's tile at a specialization.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub family: KernelFamily,
    pub spec: PagedSpec,
    pub tile: TileConfig,
}

/// What the GPU (or a fake) reports about a compiled and loaded candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// Most registers per thread over the family's entries.
    pub registers: u32,
    /// Local memory (spill) bytes per thread over the entries; > 0 rejects the candidate.
    pub local_bytes: u64,
    /// LLVM → PTX time, ms.
    pub codegen_ms: f64,
    /// Driver JIT load time, ms.
    pub load_ms: f64,
}

/// Why a candidate left the race.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum EvalError {
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("compile error: {0}")]
    CompileError(String),
    #[error("spills: {0}")]
    Spills(String),
    #[error("launch error: {0}")]
    LaunchError(String),
    #[error("wrong result: {0}")]
    WrongResult(String),
}

/// The machine a record was measured on (the cache key's device part).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceKey {
    pub gpu: String,
    pub sm: u32,
    pub driver: String,
    pub cuda: String,
}

/// Compiles, loads, checks and times candidates. Implemented for the GPU ([`gpu::GpuBackend`])
/// and, in tests, by a fake with scripted results.
pub trait MeasureBackend {
    /// The device (cache key, bundle `tuned_on`).
    fn device(&self) -> DeviceKey;
    /// A hint: `cs` are about to be prepared, so a backend may generate them all at once (in
    /// parallel). Errors are left for `prepare` to report.
    fn prefetch(&mut self, _cs: &[Candidate]) {}
    /// Generate the candidate's PTX, load it, read registers and local memory.
    fn prepare(&mut self, c: &Candidate) -> Result<Prepared, EvalError>;
    /// Run the candidate (inside its method's decode step, other families at their defaults)
    /// on seeded inputs of `w`'s shape and each data kind, and compare with the reference.
    fn verify(&mut self, c: &Candidate, w: &Workload) -> Result<(), EvalError>;
    /// Time the candidates' family kernels at `w`, interleaved (run 0 of each, run 1 of each,
    /// …) after warm-up, `reps` runs each: microseconds, `result[i][r]` for candidate `i`.
    fn time(&mut self, cs: &[Candidate], w: &Workload, reps: u32) -> Result<Vec<Vec<f64>>, EvalError>;
}
