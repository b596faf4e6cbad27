//! Launch geometry: the one place grids and blocks are described.

use serde::{Deserialize, Serialize};

/// Grid (x, y, z), threads per block (1-D blocks) and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaunchGeometry {
    pub grid: [u32; 3],
    pub block: u32,
    pub shared_bytes: u32,
}

impl LaunchGeometry {
    /// A 1-D grid of `grid_x` blocks of `block` threads, no dynamic shared memory.
    pub fn linear(grid_x: u32, block: u32) -> Self {
        LaunchGeometry {
            grid: [grid_x, 1, 1],
            block,
            shared_bytes: 0,
        }
    }

    /// Enough blocks of `block` threads to cover `n` threads (at least one block).
    pub fn cover(n: u32, block: u32) -> Self {
        let blocks = if block == 0 { 1 } else { n.div_ceil(block).max(1) };
        Self::linear(blocks, block)
    }

    /// The same geometry with `bytes` of dynamic shared memory.
    pub fn with_shared_bytes(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// Total number of blocks.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g as u64).product()
    }
}

pub fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}
