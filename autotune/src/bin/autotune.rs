//! `autotune --alpha 1.5 --head-dim 32`: tile-config search on the GPU (issue #5).

use anyhow::Result;
use clap::Parser;
use entkv_abi::{check_head_dim, Alpha};

#[derive(Parser)]
#[command(
    name = "autotune",
    version,
    about = "Tune entkv's kernels for this GPU and write a kernel bundle"
)]
struct Cli {
    /// Entmax α (> 1).
    #[arg(long)]
    alpha: f64,
    /// Head dimension (32, 64 or 128).
    #[arg(long)]
    head_dim: u32,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    Alpha::new(cli.alpha)?;
    check_head_dim(cli.head_dim)?;
    anyhow::bail!(
        "tile-config search is not implemented yet (issue #5); `entkv emit` writes the kernels with their default tile configs"
    )
}
