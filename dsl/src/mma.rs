//! The warp-level matrix multiply-accumulate [`crate::ir::Stmt::Mma`] (PTX `mma.sync.aligned
//! .m16n8k16.row.col.f32.{f16,bf16}`, and [`int8`]'s `m16n8k32` on bytes): shapes and the
//! fragment layouts, in one place for the interpreter, the kernels that arrange their operands
//! and the tests.
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

/// The byte form, `mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32`: A is 16×32 and B
/// 32×8 bytes packed four to a 32-bit word; C and D are 16×8 i32 at [`crate::mma::c_coord`].
pub mod int8 {
    /// Columns of A, rows of B.
    pub const K: u32 = 32;
    /// 32-bit words of A and B a lane holds.
    pub const A_WORDS: usize = 4;
    pub const B_WORDS: usize = 2;

    /// `(row, col)` of A held by lane `lane` as byte `j` (< 4) of its word `w` (< 4).
    pub fn a_coord(lane: u32, w: usize, j: usize) -> (u32, u32) {
        let (g, t, w, j) = (lane / 4, lane % 4, w as u32, j as u32);
        (g + 8 * (w % 2), 4 * t + j + 16 * (w / 2))
    }

    /// `(row, col)` of B held by lane `lane` as byte `j` (< 4) of its word `w` (< 2).
    pub fn b_coord(lane: u32, w: usize, j: usize) -> (u32, u32) {
        let (g, t, w, j) = (lane / 4, lane % 4, w as u32, j as u32);
        (4 * t + j + 16 * w, g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of each matrix is held by exactly one (lane, element).
    #[test]
    fn fragments_cover_each_matrix_once() {
        let cover = |rows: u32, cols: u32, per_lane: usize, f: &dyn Fn(u32, usize) -> (u32, u32)| {
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
        cover(M, K, A_ELEMS, &a_coord);
        cover(K, N, B_ELEMS, &b_coord);
        cover(M, N, C_ELEMS, &c_coord);
        // The byte form, element (word, byte) as one index `4·word + byte`.
        let a8 = |lane: u32, i: usize| int8::a_coord(lane, i / 4, i % 4);
        let b8 = |lane: u32, i: usize| int8::b_coord(lane, i / 4, i % 4);
        cover(M, int8::K, 4 * int8::A_WORDS, &a8);
        cover(int8::K, N, 4 * int8::B_WORDS, &b8);
    }
}
