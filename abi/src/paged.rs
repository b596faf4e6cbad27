//! The paged KV cache, its page metadata, and the selection format every sparse kernel shares.
//!
//! ## Pools (vLLM/FlashInfer style)
//! - `k_pool`, `v_pool`: `[num_pages, kv_heads, page_size, head_dim]` in the K/V dtype ("HND"
//!   within a page). Row `(page, head, slot)` starts at element
//!   `((page·kv_heads + head)·page_size + slot)·head_dim`; a (page, head) block is
//!   `page_size·head_dim` contiguous elements (1 KiB for P = 16, d = 32, f16), so a page of one
//!   head is read with fully coalesced 16-byte loads and rows are 16-byte aligned for every
//!   supported head dim.
//! - `block_table`: `[batch, max_pages]` i32, the physical page of logical page `j` of sequence
//!   `b` (pages anywhere in the pool, in any order). Entries past a sequence's last page are
//!   never read.
//! - `seq_lens`: `[batch]` i32, tokens in sequence `b` (≥ 1, may differ per entry). Logical page
//!   `j` holds tokens `[j·P, (j+1)·P)`; the last page, `ceil(len/P) − 1`, may be partial. The
//!   query sits at position `len − 1` (the newest token, already appended).
//!
//! ## Page metadata (per physical page and KV head), kept by `page_meta`
//! - `meta_bounds`: `[num_pages, kv_heads, 2, head_dim]` in the K dtype: per-dimension min (row
//!   0) and max (row 1) of the page's keys. Exact key values, so box bounds built from them are
//!   rigorous. For d = 32, f16 this is one 128-byte line per (page, head).
//! - `meta_moments`: `[num_pages, kv_heads, 2, head_dim]` in the K dtype: per-dimension mean
//!   (row 0) and population standard deviation clamped to ≥ 1e-6 (row 1) — the Gaussian model
//!   (spec §2.3, §5.1).
//! - `sketch`: u32, one block per (page, KV head): each key quantized to `bits` ∈ {4, 8} per
//!   dimension on an affine grid, `code_i = round((k_i − lo_i)/step_i)`, `step_i = (hi_i −
//!   lo_i)/(2^bits − 1)` (code 0 when `hi_i = lo_i`), so `|k_i − (lo_i + code_i·step_i)| ≤
//!   step_i/2` up to f32 rounding (`crate::meta` defines `step_i` exactly and the bound
//!   guaranteed). Dimension `i` is bits `(i·bits) mod 32 ..` of word `i·bits/32` of the token's
//!   code row (low bits first).
//!   - 8 bits: `[num_pages, kv_heads, page_size, head_dim/4]`; `lo_i`, `hi_i` are the page's
//!     `meta_bounds` (per page and dimension).
//!   - 4 bits: per block the `page_size` code rows (`head_dim/8` words each), then `page_size`
//!     *range words*, the token's own min and max over its dimensions rounded outward to bf16
//!     (`crate::meta::pack_sketch_range`): `lo_i`, `hi_i` are those for every dimension, so a
//!     consumer needs no per-page terms. `PagedSpec::sketch_code_at` / `sketch_range_at`
//!     address them. For head dims ≥ [`SKETCH_NORM_MIN_DIM`] and f16 or bf16 keys
//!     (`PagedSpec::sketch_norm`) then
//!     come `page_size` *norm words*: an f32 `r ≥ ‖k − k̂‖₂` over the token's dimensions
//!     (`k̂_i = lo + code_i·step`, rounded up with margin for every f32 rounding of its
//!     computation, +∞ where it cannot be bounded so), so that `|q·(k − k̂)| ≤ ‖q‖₂·r` can
//!     replace `Σ|q_i|·step/2` where smaller (`sketch_norm_at`).
//! - `meta_box`: u32, one 64-byte-aligned block per (page, KV head), the *page box sketch*:
//!   `meta_bounds`' min and max rows as 4-bit codes rounded outward on each row's own grid
//!   (`crate::meta` defines it). Words `2j`, `2j + 1` hold the min and the max codes of
//!   dimensions `8j .. 8j + 8` (so one 8-byte load gives a lane both rows of its dimensions),
//!   then come the two rows' range words, padded to a multiple of 16 words: at d = 32, 40 bytes
//!   of data in one 64-byte block (two DRAM sectors) against `meta_bounds`' 128. The rigorous
//!   page bounds of certified pruning (`page_bounds`) read it. `PagedSpec::box_*` address it.
//!
//! Metadata is defined for *full* pages. The last page of a sequence is never scored: every
//! selector attends it in full, so its (possibly partial, possibly stale) metadata is never read.
//!
//! ## Selections (what a selector writes, what `decode_sparse` reads)
//! - `sel_pages`: `[batch, kv_heads, max_pages]` i32 logical page ids, ascending, the last page
//!   last; entries past the count are unspecified.
//! - `sel_count`: `[batch, kv_heads]` i32, ≥ 1 (the last page is always selected).
//! - The certified decode's page pruning writes the list only of the rows its selected walk
//!   takes (`pipeline::SELECTED_WALK_SHARE`); the others are walked in full, and their list
//!   holds nothing but the last page, at `sel_count − 1`.
//!
//! A selection is per KV head, shared by the query heads of its GQA group: a page is kept when
//! any head of the group keeps it (the union), so a head never loses a page it needs; top-k ranks
//! pages by the largest of the group's bounds.
//!
//! ## ALiBi
//! Optional per-query-head slopes `[q_heads]` f32 (≥ 0): the score of token `j` gains
//! `slope_h·(j − (len − 1))` (≤ 0), in score units before the `(α−1)` factor (spec §1.1).

use crate::spec::{check_page_size, DecodeSpec, SpecError};
use serde::{Deserialize, Serialize};

/// Sketch widths.
pub const SUPPORTED_SKETCH_BITS: [u32; 2] = [4, 8];

/// The key-sketch width a specialization gets unless told otherwise: 4 bits, a per-token grid.
/// Its certified pass reads 20 B a token at d = 32 against 8-bit's 24 B plus the page terms,
/// and measured 1.24 against 2.49 ms a step at `paper` 1M (results/2026-12-01-warp-stream).
pub const DEFAULT_SKETCH_BITS: u32 = 4;

/// Most tokens one sequence may hold. The kernels index a sequence's tokens in i32 and let a
/// split's last chunk run up to a chunk past its end (masked), so a cap well below 2^31 keeps
/// every such index in range; 2^30 is a thousand times the longest context benchmarked.
pub const MAX_SEQUENCE_TOKENS: u64 = 1 << 30;

/// A decode specialization over the paged cache.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PagedSpec {
    pub decode: DecodeSpec,
    pub page_size: u32,
    /// Whether kernels take per-query-head ALiBi slopes.
    pub alibi: bool,
    /// Bits per dimension of the key sketch (4 or 8).
    pub sketch_bits: u32,
}

impl PagedSpec {
    /// [`PagedSpec::new`] with `entkv bundle create`'s defaults: no ALiBi,
    /// [`DEFAULT_SKETCH_BITS`].
    pub fn with_defaults(decode: DecodeSpec, page_size: u32) -> Result<Self, SpecError> {
        PagedSpec::new(decode, page_size, false, DEFAULT_SKETCH_BITS)
    }

    pub fn new(decode: DecodeSpec, page_size: u32, alibi: bool, sketch_bits: u32) -> Result<Self, SpecError> {
        check_page_size(page_size)?;
        if !SUPPORTED_SKETCH_BITS.contains(&sketch_bits) {
            return Err(SpecError::BadSketchBits(sketch_bits));
        }
        Ok(PagedSpec {
            decode,
            page_size,
            alibi,
            sketch_bits,
        })
    }
    /// `<decode tag>_p16_nb` / `_p16_alibi`, plus `_s4` / `_s8` where the sketch matters.
    pub fn tag(&self) -> String {
        format!(
            "{}_p{}_{}",
            self.decode.tag(),
            self.page_size,
            if self.alibi { "alibi" } else { "nb" }
        )
    }
    pub fn sketch_tag(&self) -> String {
        format!("{}_s{}", self.tag(), self.sketch_bits)
    }
    /// u32 words of one token's sketch codes.
    pub fn sketch_words(&self) -> u32 {
        self.decode.head_dim * self.sketch_bits / 32
    }
    /// Whether the sketch's affine grid is per token (4-bit sketches: one range word a token,
    /// `crate::meta`) rather than per page and dimension (8-bit: the page's `meta_bounds`).
    pub fn sketch_token_grid(&self) -> bool {
        self.sketch_bits == 4
    }
    /// Whether a per-token grid also stores each token's residual norm (`head_dim ≥`
    /// [`SKETCH_NORM_MIN_DIM`], f16 or bf16 keys): its bound rules out about 2.6× fewer tokens'
    /// rows at d = 128, for 4 B a token more (results/2026-12-07-im/6-l2-model); at d = 32 it
    /// would save less than it reads. f32 keys keep the 8-bit layout's lanes at d = 128 (eight
    /// a token, eight tokens a lane group), whose pass spills 4–52 B with a norm word a token
    /// (local ptxas 13).
    pub fn sketch_norm(&self) -> bool {
        self.sketch_token_grid()
            && self.decode.head_dim >= SKETCH_NORM_MIN_DIM
            && self.decode.kv_dtype != crate::spec::DType::F32
    }
    /// u32 words of one (page, KV head) block of `sketch`: the `page_size` code rows, then, on
    /// a per-token grid, the `page_size` range words, and the `page_size` norm words where
    /// [`PagedSpec::sketch_norm`].
    pub fn sketch_block_words(&self) -> u32 {
        self.page_size
            * (self.sketch_words() + u32::from(self.sketch_token_grid()) + u32::from(self.sketch_norm()))
    }
    /// u32 words of the codes of one (page, KV head) block of `meta_box`: both rows,
    /// interleaved a word each (`head_dim/8` words a row).
    pub fn box_code_words(&self) -> u32 {
        2 * self.decode.head_dim * crate::meta::BOX_BITS / 32
    }
    /// u32 words of one (page, KV head) block of `meta_box`: the codes, the min row's and the
    /// max row's range words (at [`PagedSpec::box_code_words`]), padded to 64 bytes.
    pub fn box_block_words(&self) -> u32 {
        (self.box_code_words() + 2).next_multiple_of(16)
    }
    /// Bytes of `meta_box` a (page, KV head) costs a reader: its block's data rounded up to
    /// 32-byte DRAM sectors (blocks are 64-byte aligned), 64 at d = 32.
    pub fn box_read_bytes(&self) -> u32 {
        (4 * (self.box_code_words() + 2)).next_multiple_of(32)
    }
    /// Bytes of sketch a token: its codes, and its range word on a per-token grid.
    pub fn sketch_bytes_per_token(&self) -> u32 {
        4 * self.sketch_block_words() / self.page_size
    }
    /// Word index of the first code word of sketch row `row` (a token's K row index / d, i.e.
    /// `(page·kv_heads + head)·P + slot`): 16-byte aligned.
    pub fn sketch_code_at(&self, row: u64) -> u64 {
        let p = self.page_size as u64;
        row / p * self.sketch_block_words() as u64 + row % p * self.sketch_words() as u64
    }
    /// Word index of sketch row `row`'s range word (per-token grid only).
    pub fn sketch_range_at(&self, row: u64) -> u64 {
        let p = self.page_size as u64;
        row / p * self.sketch_block_words() as u64 + p * self.sketch_words() as u64 + row % p
    }
    /// Word index of sketch row `row`'s norm word ([`PagedSpec::sketch_norm`] only).
    pub fn sketch_norm_at(&self, row: u64) -> u64 {
        self.sketch_range_at(row) + self.page_size as u64
    }
}

/// Smallest head dim whose 4-bit sketch stores norm words ([`PagedSpec::sketch_norm`]).
pub const SKETCH_NORM_MIN_DIM: u32 = 128;

/// Sizes of a paged cache and of a batch using it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagedShape {
    pub batch: u32,
    pub kv_heads: u32,
    /// Pages in the pool.
    pub num_pages: u32,
    /// Columns of the block table (pages a sequence may have).
    pub max_pages: u32,
}

impl PagedShape {
    pub fn q_heads(&self, spec: &PagedSpec) -> u32 {
        self.kv_heads * spec.decode.group
    }
    /// Elements of `k_pool` (and `v_pool`).
    pub fn pool_elems(&self, spec: &PagedSpec) -> u64 {
        self.num_pages as u64 * self.kv_heads as u64 * spec.page_size as u64 * spec.decode.head_dim as u64
    }
    /// Elements of `meta_bounds` (and `meta_moments`).
    pub fn meta_elems(&self, spec: &PagedSpec) -> u64 {
        self.num_pages as u64 * self.kv_heads as u64 * 2 * spec.decode.head_dim as u64
    }
    /// u32 words of `meta_box` (a block a (page, KV head)).
    pub fn box_words(&self, spec: &PagedSpec) -> u64 {
        self.num_pages as u64 * self.kv_heads as u64 * spec.box_block_words() as u64
    }
    /// u32 words of `sketch`.
    pub fn sketch_words(&self, spec: &PagedSpec) -> u64 {
        self.num_pages as u64 * self.kv_heads as u64 * spec.sketch_block_words() as u64
    }
    /// Elements of `sel_pages`.
    pub fn selection_elems(&self) -> u64 {
        self.batch as u64 * self.kv_heads as u64 * self.max_pages as u64
    }
    /// Element offset in `k_pool`/`v_pool` of the row of token `t` of KV head `kvh` of sequence
    /// `b`, through `block_table` (`[batch, max_pages]`; the page must be in it).
    pub fn row_offset(&self, spec: &PagedSpec, block_table: &[i32], b: usize, kvh: usize, t: usize) -> u64 {
        let (p, d) = (spec.page_size as u64, spec.decode.head_dim as u64);
        let page = block_table[b * self.max_pages as usize + t / p as usize] as u64;
        ((page * self.kv_heads as u64 + kvh as u64) * p + t as u64 % p) * d
    }
}

/// A batch that does not fit its paged cache. Every variant names the offending entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("seq_lens has {got} entries for batch {batch}")]
    SeqLensCount { got: usize, batch: u32 },
    #[error("block_table has {got} entries, expected batch {batch} × max_pages {max_pages}")]
    BlockTableCount { got: usize, batch: u32, max_pages: u32 },
    #[error("seq_lens[{seq}] = {len} (must be ≥ 1)")]
    EmptySequence { seq: usize, len: i32 },
    #[error("seq_lens[{seq}] = {len} needs {pages} pages, the block table has {max_pages}")]
    SequenceTooLong {
        seq: usize,
        len: i32,
        pages: i64,
        max_pages: u32,
    },
    #[error("block_table[{seq}][{logical}] = {page} is outside the pool of {num_pages} pages")]
    PageOutOfPool {
        seq: usize,
        logical: usize,
        page: i32,
        num_pages: u32,
    },
    /// Found on the device only (`crate::guard`): a length above the one the step was planned
    /// for.
    #[error("seq_lens[{seq}] = {len} on the device exceeds the {longest} tokens the step was planned for")]
    LongerThanPlanned { seq: usize, len: i32, longest: u32 },
}

/// A selection row (`sel_pages[b][h][..sel_count]`) that breaks the format of the module docs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("selection {shown} is not strictly ascending inside 0..{seq_pages} with the last page last")]
pub struct MalformedSelection {
    /// The row, its first pages and its last one when long.
    pub shown: String,
    /// Pages of the sequence.
    pub seq_pages: usize,
}

/// Check one selection row of a sequence of `seq_pages` pages: logical ids strictly ascending
/// from ≥ 0, the last page last (so non-empty, and every id inside the sequence).
pub fn check_selection_row(row: &[i64], seq_pages: usize) -> Result<(), MalformedSelection> {
    let well_formed = row.first().is_some_and(|&j| j >= 0)
        && row.windows(2).all(|w| w[0] < w[1])
        && row.last() == Some(&(seq_pages as i64 - 1));
    if well_formed {
        return Ok(());
    }
    let shown = if row.len() <= 9 {
        format!("{row:?}")
    } else {
        format!("{:?} … {} ({} pages)", &row[..8], row[row.len() - 1], row.len())
    };
    Err(MalformedSelection { shown, seq_pages })
}

/// Host-side validation of a batch before any launch: every sequence fits its block-table row
/// and every referenced page exists. Returns the longest sequence.
pub fn check_batch(
    spec: &PagedSpec,
    shape: &PagedShape,
    seq_lens: &[i32],
    block_table: &[i32],
) -> Result<u32, BatchError> {
    let p = spec.page_size as i64;
    if seq_lens.len() != shape.batch as usize {
        return Err(BatchError::SeqLensCount {
            got: seq_lens.len(),
            batch: shape.batch,
        });
    }
    if block_table.len() as u64 != shape.batch as u64 * shape.max_pages as u64 {
        return Err(BatchError::BlockTableCount {
            got: block_table.len(),
            batch: shape.batch,
            max_pages: shape.max_pages,
        });
    }
    let mut longest = 0;
    for (seq, &len) in seq_lens.iter().enumerate() {
        if len < 1 {
            return Err(BatchError::EmptySequence { seq, len });
        }
        let pages = (len as i64 + p - 1) / p;
        if pages > shape.max_pages as i64 {
            return Err(BatchError::SequenceTooLong {
                seq,
                len,
                pages,
                max_pages: shape.max_pages,
            });
        }
        for logical in 0..pages as usize {
            let page = block_table[seq * shape.max_pages as usize + logical];
            if page < 0 || page as u32 >= shape.num_pages {
                return Err(BatchError::PageOutOfPool {
                    seq,
                    logical,
                    page,
                    num_pages: shape.num_pages,
                });
            }
        }
        longest = longest.max(len as u32);
    }
    Ok(longest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DType;

    fn spec() -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap()
    }

    #[test]
    fn selection_rows_must_ascend_to_the_last_page() {
        for ok in [&[4][..], &[0, 4], &[0, 1, 2, 3, 4], &[2, 3, 4]] {
            assert_eq!(check_selection_row(ok, 5), Ok(()), "{ok:?}");
        }
        for bad in [
            &[][..],    // empty: the last page is always selected
            &[3],       // the last page missing
            &[0, 5],    // past the sequence
            &[-1, 4],   // negative
            &[2, 1, 4], // descending
            &[1, 1, 4], // repeated
            &[0, 4, 4], // the last page twice
            &[4, 0],    // the last page not last
        ] {
            let e = check_selection_row(bad, 5).unwrap_err();
            assert!(e.to_string().contains("0..5"), "{e}");
        }
        let long: Vec<i64> = (0..20).rev().collect();
        let e = check_selection_row(&long, 20).unwrap_err();
        assert!(e.shown.contains("(20 pages)"), "{e}");
    }

    #[test]
    fn sizes() {
        let s = spec();
        let shape = PagedShape {
            batch: 2,
            kv_heads: 3,
            num_pages: 10,
            max_pages: 4,
        };
        assert_eq!(s.sketch_words(), 4);
        assert_eq!(shape.pool_elems(&s), 10 * 3 * 16 * 32);
        assert_eq!(shape.meta_elems(&s), 10 * 3 * 2 * 32);
        assert_eq!(shape.sketch_words(&s), 10 * 3 * 16 * (4 + 1));
        // Block (page 1, head 2) = block 5: codes of slot 3 after five blocks of 80 words.
        assert_eq!(s.sketch_code_at(5 * 16 + 3), 5 * 80 + 3 * 4);
        assert_eq!(s.sketch_range_at(5 * 16 + 3), 5 * 80 + 64 + 3);
        let s8 = PagedSpec::new(s.decode, 16, false, 8).unwrap();
        assert_eq!(shape.sketch_words(&s8), 10 * 3 * 16 * 8);
        assert_eq!(s8.sketch_code_at(83), 83 * 8);
        // 16 B of codes and a range word a token at 4 bits; 32 B of codes at 8.
        assert_eq!(
            (s.sketch_bytes_per_token(), s8.sketch_bytes_per_token()),
            (20, 32)
        );
        assert!(PagedSpec::new(s.decode, 24, false, 4).is_err());
        assert!(PagedSpec::new(s.decode, 16, false, 3).is_err());
        // d = 128 at 4 bits: 16 code words, a range word and a norm word a token.
        let wide = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
        assert!(wide.sketch_norm() && !s.sketch_norm() && !s8.sketch_norm());
        assert_eq!(wide.sketch_block_words(), 32 * (16 + 2));
        assert_eq!(wide.sketch_bytes_per_token(), 72);
        // Block 5, slot 3: codes after five blocks of 576 words, then 512 code words and 32
        // range words before the norm words.
        assert_eq!(wide.sketch_code_at(5 * 32 + 3), 5 * 576 + 3 * 16);
        assert_eq!(wide.sketch_range_at(5 * 32 + 3), 5 * 576 + 512 + 3);
        assert_eq!(wide.sketch_norm_at(5 * 32 + 3), 5 * 576 + 544 + 3);
    }

    #[test]
    fn batch_checks_name_the_problem() {
        let s = spec();
        let shape = PagedShape {
            batch: 2,
            kv_heads: 1,
            num_pages: 4,
            max_pages: 2,
        };
        assert_eq!(check_batch(&s, &shape, &[17, 3], &[0, 1, 2, -1]).unwrap(), 17);
        let e = |lens: &[i32], bt: &[i32]| check_batch(&s, &shape, lens, bt).unwrap_err().to_string();
        assert!(e(&[0, 3], &[0, 1, 2, 3]).contains("seq_lens[0] = 0"));
        assert!(e(&[33, 3], &[0, 1, 2, 3]).contains("needs 3 pages"));
        assert!(e(&[17, 3], &[0, 4, 2, 3]).contains("block_table[0][1] = 4"));
        assert!(e(&[17], &[0, 1, 2, 3]).contains("seq_lens has 1 entries"));
        assert!(e(&[17, 3], &[0, 1, 2]).contains("block_table has 3 entries"));
    }
}
