//! The warp-level matrix multiply-accumulate [`crate::ir::Stmt::Mma`] (PTX `mma.sync.aligned
//! .m16n8k16.row.col.f32.{f16,bf16}`): shapes and the fragment layouts, in one place for the
//! interpreter, the kernels that arrange their operands and the tests.
//!
//! Lane `l` of the warp is `(g, t) = (l / 4, l % 4)`: its *group* and its place in the group.

/// Rows of A, C and D.
pub const M: u32 = 16;
/// Columns of B, C and D.
pub const N: u32 = 8;
/// Columns of A, rows of B.
pub const K: u32 = 16;
/// Elements of A, B and C a lane holds.
pub const A_ELEMS: usize = 8;
pub const B_ELEMS: usize = 4;
pub const C_ELEMS: usize = 4;

/// `(row, col)` of A held by lane `lane` as its element `i` (< 8).
pub fn a_coord(lane: u32, i: usize) -> (u32, u32) {
    let (g, t, i) = (lane / 4, lane % 4, i as u32);
    (g + 8 * ((i / 2) % 2), 2 * t + i % 2 + 8 * (i / 4))
}

/// `(row, col)` of B held by lane `lane` as its element `i` (< 4).
pub fn b_coord(lane: u32, i: usize) -> (u32, u32) {
    let (g, t, i) = (lane / 4, lane % 4, i as u32);
    (2 * t + i % 2 + 8 * (i / 2), g)
}

/// `(row, col)` of C and D held by lane `lane` as its element `i` (< 4).
pub fn c_coord(lane: u32, i: usize) -> (u32, u32) {
    let (g, t, i) = (lane / 4, lane % 4, i as u32);
    (g + 8 * (i / 2), 2 * t + i % 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of each matrix is held by exactly one (lane, element).
    #[test]
    fn fragments_cover_each_matrix_once() {
        let cover = |rows: u32, cols: u32, per_lane: usize, f: fn(u32, usize) -> (u32, u32)| {
            let mut seen = vec![0u32; (rows * cols) as usize];
            for lane in 0..32 {
                for i in 0..per_lane {
                    let (r, c) = f(lane, i);
                    assert!(r < rows && c < cols, "({r}, {c}) outside {rows}×{cols}");
                    seen[(r * cols + c) as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1));
        };
        cover(M, K, A_ELEMS, a_coord);
        cover(K, N, B_ELEMS, b_coord);
        cover(M, N, C_ELEMS, c_coord);
    }
}
