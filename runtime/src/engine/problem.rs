//! What a decoder is created for, and the errors of the engine API.

use entkv_abi::{BatchError, DType, DecodeSpec, KernelFamily, PagedSpec, Selector, SpecError};
use entkv_bundle::BundleError;
use thiserror::Error;

use crate::RuntimeError;

/// Which decode a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Entmax over every page.
    Dense,
    /// Entmax over the `budget_pages` pages with the largest box bounds, plus the last page.
    TopK {
        /// Pages to keep besides the last one.
        budget_pages: u32,
    },
    /// Entmax over the pages the Gaussian-aware rule keeps.
    Gaussian,
    /// Entmax over a sketch-certified superset of the support: equal to [`Method::Dense`].
    Certified,
    /// [`Method::Certified`] after page pruning: pages whose rigorous box bound lies below a
    /// certified lower bound on the threshold are not read at all (`page_bounds`, then
    /// `prune_mark` and friends). Equal to [`Method::Dense`] too. Pays a pass over the page bounds first,
    /// so it wins where pages cluster (most pages prunable) and loses where they do not.
    CertifiedPruned,
    /// The faster of the two exact methods (dense, certified) at each step's context length,
    /// by the bundle's tuned timings; dense where the bundle has none.
    Auto,
}

impl Method {
    /// `dense`, `topk`, `gaussian`, `certified`, `certified-pruned`, `auto`.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Dense => "dense",
            Method::TopK { .. } => "topk",
            Method::Gaussian => "gaussian",
            Method::Certified => "certified",
            Method::CertifiedPruned => "certified-pruned",
            Method::Auto => "auto",
        }
    }

    /// The kernel families a step of this method launches (`Auto`: those of both exact methods).
    pub fn families(&self) -> &'static [KernelFamily] {
        use KernelFamily as F;
        match self {
            Method::Dense => &[F::DecodeDense],
            Method::TopK { .. } => &[F::PageMeta, F::PageScoreBox, F::SelectTopk, F::DecodeSparse],
            Method::Gaussian => &[
                F::PageMeta,
                F::PageScoreMoments,
                F::SelectGaussian,
                F::DecodeSparse,
            ],
            Method::Certified => &[F::PageMeta, F::DecodeCertified],
            Method::CertifiedPruned => &[F::PageMeta, F::PageScoreBox, F::SelectTopk, F::DecodeCertified],
            Method::Auto => &[F::PageMeta, F::DecodeDense, F::DecodeCertified],
        }
    }

    /// The selector whose selections the method's decode reads (its bundle rows are picked for
    /// it, [`KernelFamily::selectors`]); `None` for the methods that decode every page.
    pub fn selector(&self) -> Option<Selector> {
        match self {
            Method::TopK { .. } => Some(Selector::Topk),
            Method::Gaussian => Some(Selector::Gaussian),
            Method::CertifiedPruned => Some(Selector::Pruned),
            _ => None,
        }
    }

    /// The selector whose bundle rows serve `family` in this method's steps (`None` when the
    /// family reads no selection).
    pub fn selector_for(&self, family: KernelFamily) -> Option<Selector> {
        self.selector().filter(|s| family.selectors().contains(s))
    }

    /// Whether steps read page metadata (so `append` must keep it current).
    pub fn uses_metadata(&self) -> bool {
        !matches!(self, Method::Dense)
    }
}

/// A decode problem: the specialization (α, head dim, page size, heads, dtypes), the method and
/// the capacity of the paged cache the decoder serves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Problem {
    /// Entmax α (finite, > 1).
    pub alpha: f64,
    /// Head dimension (32, 64 or 128).
    pub head_dim: u32,
    /// Tokens per page (16, 32 or 64).
    pub page_size: u32,
    /// Query heads; a multiple of `kv_heads` with a supported GQA group (1, 2, 3, 4, 8).
    pub q_heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Storage type of K, V and q (f16 or bf16; f32 for tests). The output is f32.
    pub kv_dtype: DType,
    /// Whether steps take per-query-head ALiBi slopes.
    pub alibi: bool,
    /// Bits per dimension of the key sketch of the certified path (4 or 8).
    pub sketch_bits: u32,
    /// The decode to run.
    pub method: Method,
    /// Most sequences in one step.
    pub max_batch: u32,
    /// Pages in the K/V pools.
    pub num_pages: u32,
    /// Columns of the block table (most pages per sequence).
    pub max_pages: u32,
    /// Check the device's lengths and page ids in every step (`entkv_abi::guard`): a step
    /// starts with `guard_ids`, which copies them into the workspace clamped into range, and
    /// every launch reads the copies. A bad value then gives a wrong output, never an
    /// out-of-bounds read, and [`crate::engine::Decoder::device_id_faults`] names it. Costs one
    /// small launch a step (two with `append`); needs a bundle of schema 15 or newer.
    pub check_device_ids: bool,
}

impl Problem {
    /// A problem with the defaults: the default sketch width (`entkv_abi::DEFAULT_SKETCH_BITS`), no
    /// ALiBi, f16.
    pub fn new(alpha: f64, head_dim: u32, page_size: u32, method: Method) -> Problem {
        Problem {
            alpha,
            head_dim,
            page_size,
            q_heads: 1,
            kv_heads: 1,
            kv_dtype: DType::F16,
            alibi: false,
            sketch_bits: entkv_abi::DEFAULT_SKETCH_BITS,
            method,
            max_batch: 1,
            num_pages: 1,
            max_pages: 1,
            check_device_ids: false,
        }
    }

    /// The kernel specialization, after checking every field.
    pub fn spec(&self) -> Result<PagedSpec, EngineError> {
        if self.kv_heads == 0 || self.q_heads == 0 {
            return Err(EngineError::Heads {
                q_heads: self.q_heads,
                kv_heads: self.kv_heads,
            });
        }
        if self.q_heads % self.kv_heads != 0 {
            return Err(EngineError::Heads {
                q_heads: self.q_heads,
                kv_heads: self.kv_heads,
            });
        }
        for (what, v) in [
            ("max_batch", self.max_batch),
            ("num_pages", self.num_pages),
            ("max_pages", self.max_pages),
        ] {
            if v == 0 {
                return Err(EngineError::Capacity(format!("{what} must be ≥ 1")));
            }
        }
        if self.max_batch > 65_535 || self.kv_heads > 65_535 {
            return Err(EngineError::Capacity(format!(
                "max_batch {} and kv_heads {} must be ≤ 65535 (grid limits)",
                self.max_batch, self.kv_heads
            )));
        }
        // Kernels index query heads of the batch (b·q_heads + h) in 32 bits.
        if self.max_batch as u64 * self.q_heads as u64 > i32::MAX as u64 {
            return Err(EngineError::Capacity(format!(
                "max_batch {} × q_heads {} must be ≤ 2³¹ − 1 query heads",
                self.max_batch, self.q_heads
            )));
        }
        if self.num_pages > i32::MAX as u32 || self.max_pages > i32::MAX as u32 / 2 {
            return Err(EngineError::Capacity(format!(
                "num_pages {} / max_pages {} exceed the i32 page ids of the block table",
                self.num_pages, self.max_pages
            )));
        }
        let longest = self.max_pages as u64 * self.page_size as u64;
        if longest > entkv_abi::MAX_SEQUENCE_TOKENS {
            return Err(EngineError::Capacity(format!(
                "max_pages {} × page_size {} = {longest} tokens a sequence, more than the {} \
                 the kernels' i32 token indices allow",
                self.max_pages,
                self.page_size,
                entkv_abi::MAX_SEQUENCE_TOKENS
            )));
        }
        let mut decode = DecodeSpec::new(
            self.alpha,
            self.head_dim,
            self.q_heads / self.kv_heads,
            self.kv_dtype,
        )?;
        decode.q_dtype = self.kv_dtype;
        Ok(PagedSpec::new(
            decode,
            self.page_size,
            self.alibi,
            self.sketch_bits,
        )?)
    }
}

/// Errors of the engine API. Every variant names the problem; nothing reaches the GPU after one.
#[derive(Debug, Error)]
pub enum EngineError {
    /// α, head dim, page size, group, dtype or sketch width not supported.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The heads do not form a GQA layout.
    #[error("q_heads {q_heads} must be a positive multiple of kv_heads {kv_heads}")]
    Heads {
        /// Query heads given.
        q_heads: u32,
        /// KV heads given.
        kv_heads: u32,
    },
    /// A capacity of the problem is zero or too large.
    #[error("bad capacity: {0}")]
    Capacity(String),
    /// The budget of a top-k method is unusable.
    #[error("top-k budget must be 1..=2147483647 pages, got {0}")]
    Budget(u32),
    /// The bundle could not be read, or has no kernel for the problem.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A driver or launch error.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The bundle's PTX cannot run on this device.
    #[error("device `{device}` is sm_{device_sm}, the bundle targets sm_{bundle_sm} (needs sm_{bundle_sm} or newer)")]
    DeviceMismatch {
        /// Device name.
        device: String,
        /// The device's compute capability as `major·10 + minor`.
        device_sm: u32,
        /// The bundle's target.
        bundle_sm: u32,
    },
    /// Sequence lengths or block table do not fit the cache.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// An empty batch.
    #[error("a step needs at least one sequence")]
    EmptyBatch,
    /// More sequences than the decoder was created for.
    #[error("batch {batch} exceeds the decoder's max_batch {max_batch}")]
    BatchTooLarge {
        /// Sequences in the step.
        batch: usize,
        /// The decoder's capacity.
        max_batch: u32,
    },
    /// A device tensor has the wrong dtype, shape, strides, alignment or a null pointer.
    #[error("tensor `{name}`: {problem}")]
    BadTensor {
        /// Which tensor.
        name: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A tensor the step needs was not given.
    #[error("tensor `{0}` is required by this decoder but was not given")]
    MissingTensor(&'static str),
    /// A plan made by another decoder.
    #[error("the plan was made by another decoder")]
    WrongPlan,
    /// `check_device_ids` with a bundle whose decode module has no `guard_ids`.
    #[error("bundle module `{module}` has no `guard_ids` (bundles before schema 15): recreate the bundle to check device ids")]
    NoDeviceIdCheck {
        /// The decode module.
        module: String,
    },
    /// Device id faults asked of a decoder that does not check them.
    #[error("the decoder was made without check_device_ids, so its steps record no id faults")]
    DeviceIdCheckOff,
    /// A plan or bundle row contradicts the workspace bounds: a bug, reported instead of
    /// launching out of bounds.
    #[error("internal inconsistency: {0}")]
    Internal(String),
}
