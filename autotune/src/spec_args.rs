//! The specialization flags shared by `entkv emit` and `entkv bundle create`.

use anyhow::Result;
use clap::Args;
use entkv_abi::{DType, DecodeSpec, PagedSpec};

/// `--alpha A --head-dim D [--page-size P] [--group G,...] [--kv-dtype T] [--alibi]
/// [--sketch-bits B]`: one [`PagedSpec`] per GQA group.
#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    /// Entmax α (> 1).
    #[arg(long)]
    pub alpha: f64,
    /// Head dimension (32, 64 or 128).
    #[arg(long)]
    pub head_dim: u32,
    /// Tokens per KV-cache page (16, 32 or 64).
    #[arg(long, default_value_t = 16)]
    pub page_size: u32,
    /// Query heads per KV head; repeat or comma-separate for several.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1u32])]
    pub group: Vec<u32>,
    /// K/V storage type (f16, bf16).
    #[arg(long, default_value = "f16")]
    pub kv_dtype: String,
    /// Kernels take per-head ALiBi slopes.
    #[arg(long)]
    pub alibi: bool,
    /// Bits per dimension of the key sketch of the certified-exact path (4 or 8; 4 reads
    /// less and rescores the few tokens its bound cannot rule out, see docs/perf-notes.md).
    #[arg(long, default_value_t = entkv_abi::DEFAULT_SKETCH_BITS)]
    pub sketch_bits: u32,
}

impl SpecArgs {
    /// The specializations, one per `--group` value, in order; bad values are refused with a
    /// message naming them.
    pub fn specs(&self) -> Result<Vec<PagedSpec>> {
        let kv = DType::parse(&self.kv_dtype)?;
        Ok(self
            .group
            .iter()
            .map(|&g| {
                PagedSpec::new(
                    DecodeSpec::new(self.alpha, self.head_dim, g, kv)?,
                    self.page_size,
                    self.alibi,
                    self.sketch_bits,
                )
            })
            .collect::<Result<Vec<_>, _>>()?)
    }
}
