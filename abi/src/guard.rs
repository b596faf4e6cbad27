//! The device-side check of a step's lengths and page ids (opt in: the runtime's
//! `Problem::check_device_ids`).
//!
//! The planner checks the host copies of the lengths and the block table, but a step reads the
//! device's, which a caller may change between a plan and its launches (a graph replay). With
//! the check on, a step starts with `guard_ids`, which copies each sequence's length and the
//! block-table columns the plan can reach (those of `longest` tokens) into the workspace, every
//! value clamped into range: lengths into `1..=longest`, the ids of the pages a clamped length
//! covers into the pool (a bad one, and any column past the clamped length, becoming page 0).
//! Every later launch of the step reads the copies, so out-of-range values cannot make a kernel
//! read outside its buffers: the step computes something (wrong where an input was bad) instead
//! of faulting, and the fault records say which input was bad ([`IdFault`]).
//!
//! One CTA copies [`GUARD_COLUMNS`] columns of one sequence (grid: column chunks × batch), so a
//! 1M-token batch of 8 is 512 CTAs with four independent loads a thread, not one long loop a
//! sequence. Each CTA writes its own fault record; [`IdFault::decode`] merges a sequence's.

use crate::pipeline::{ArgRef, BufferSpec, CallPlan, PipelinePlan};
use crate::signature::Elem;
use crate::{ceil_div, BatchError, LaunchGeometry, PagedShape, PagedSpec, SpecError};

/// Threads of a `guard_ids` CTA.
pub const GUARD_THREADS: u32 = 256;
/// Block-table columns a `guard_ids` CTA copies (four a thread).
pub const GUARD_COLUMNS: u32 = 4 * GUARD_THREADS;
/// i32 words of a CTA's fault record: bad inputs it found, where (−1 the length, which the
/// first chunk checks, else the first bad logical page), the bad value.
pub const GUARD_FAULT_WORDS: u64 = 3;
/// The workspace copies a guarded step reads in place of each caller tensor.
pub const GUARDED_INPUTS: [(&str, &str); 2] =
    [("block_table", "ids_block_table"), ("seq_lens", "ids_seq_lens")];
/// The workspace slot of the fault records (`[batch × chunks × GUARD_FAULT_WORDS]` i32).
pub const GUARD_FAULTS: &str = "ids_faults";

/// `guard_ids__<spec>`: the entry every decode family's module carries from bundle schema 15.
pub fn guard_ids_entry(spec: &PagedSpec) -> String {
    format!("guard_ids__{}", spec.sketch_tag())
}

/// Column chunks of a step planned for `longest` tokens (one CTA each per sequence).
pub fn guard_chunks(spec: &PagedSpec, longest: u32) -> u32 {
    ceil_div(guard_columns(spec, longest), GUARD_COLUMNS as u64) as u32
}

/// Block-table columns a step planned for `longest` tokens can reach.
pub fn guard_columns(spec: &PagedSpec, longest: u32) -> u64 {
    ceil_div(longest.max(1) as u64, spec.page_size as u64)
}

/// Grid (column chunks, batch) of `guard_ids`.
pub fn guard_ids_geometry(
    spec: &PagedSpec,
    shape: &PagedShape,
    longest: u32,
) -> Result<LaunchGeometry, SpecError> {
    if shape.batch == 0 || shape.batch > 65_535 {
        return Err(SpecError::BadShape(format!(
            "batch = {} must be in 1..=65535 (grid y)",
            shape.batch
        )));
    }
    Ok(LaunchGeometry {
        grid: [guard_chunks(spec, longest), shape.batch, 1],
        block: GUARD_THREADS,
        shared_bytes: 0,
    })
}

/// The buffers `guard_ids` writes for `shape`, at their largest (sequences of `max_pages`
/// pages).
pub fn guard_ids_buffers(spec: &PagedSpec, shape: &PagedShape) -> Vec<BufferSpec> {
    let batch = shape.batch as u64;
    let longest = (shape.max_pages as u64 * spec.page_size as u64).min(u32::MAX as u64) as u32;
    vec![
        BufferSpec {
            name: GUARDED_INPUTS[0].1.to_string(),
            elem: Elem::I32,
            len: batch * shape.max_pages as u64,
        },
        BufferSpec {
            name: GUARDED_INPUTS[1].1.to_string(),
            elem: Elem::I32,
            len: batch,
        },
        BufferSpec {
            name: GUARD_FAULTS.to_string(),
            elem: Elem::I32,
            len: batch * guard_chunks(spec, longest) as u64 * GUARD_FAULT_WORDS,
        },
    ]
}

/// `guard_ids(block_table, seq_lens, ids_block_table, ids_seq_lens, ids_faults, max_pages,
/// longest, num_pages)` for a step whose plan covers sequences of up to `longest` tokens.
pub fn guard_ids_calls(
    spec: &PagedSpec,
    shape: &PagedShape,
    longest: u32,
) -> Result<PipelinePlan, SpecError> {
    if longest == 0 || longest as u64 > shape.max_pages as u64 * spec.page_size as u64 {
        return Err(SpecError::BadShape(format!(
            "longest = {longest} must be in 1..={} (max_pages × page size)",
            shape.max_pages as u64 * spec.page_size as u64
        )));
    }
    Ok(PipelinePlan {
        calls: vec![CallPlan {
            entry: guard_ids_entry(spec),
            geometry: guard_ids_geometry(spec, shape, longest)?,
            args: vec![
                ArgRef::buf(GUARDED_INPUTS[0].0),
                ArgRef::buf(GUARDED_INPUTS[1].0),
                ArgRef::buf(GUARDED_INPUTS[0].1),
                ArgRef::buf(GUARDED_INPUTS[1].1),
                ArgRef::buf(GUARD_FAULTS),
                ArgRef::I32(shape.max_pages as i32),
                ArgRef::I32(longest as i32),
                ArgRef::I32(shape.num_pages as i32),
            ],
        }],
        buffers: guard_ids_buffers(spec, shape),
    })
}

/// What `guard_ids` writes for one batch, computed on the host: the clamped copies and the
/// fault records (the kernel's reference, and the layout [`IdFault::decode`] reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardedIds {
    /// `[batch × columns]`: the columns of `longest` tokens of each row (the copy's row stride
    /// is `max_pages`; later columns are not written).
    pub block_table: Vec<i32>,
    /// Columns copied a row.
    pub columns: usize,
    pub seq_lens: Vec<i32>,
    /// `[batch × chunks × GUARD_FAULT_WORDS]`.
    pub faults: Vec<i32>,
}

/// The host mirror of `guard_ids` (`block_table` is `[seq_lens.len() × max_pages]`).
pub fn guard_ids_reference(
    spec: &PagedSpec,
    shape: &PagedShape,
    longest: u32,
    seq_lens: &[i32],
    block_table: &[i32],
) -> GuardedIds {
    let (mp, p) = (shape.max_pages as usize, spec.page_size as i64);
    let columns = guard_columns(spec, longest) as usize;
    let chunk = GUARD_COLUMNS as usize;
    let chunks = guard_chunks(spec, longest) as usize;
    let mut out = GuardedIds {
        block_table: vec![0; seq_lens.len() * columns],
        columns,
        seq_lens: Vec::with_capacity(seq_lens.len()),
        faults: Vec::with_capacity(seq_lens.len() * chunks * GUARD_FAULT_WORDS as usize),
    };
    for (b, &len) in seq_lens.iter().enumerate() {
        let bad_len = len < 1 || len as i64 > longest as i64;
        let clamped = (len as i64).clamp(1, longest as i64);
        let pages = ((clamped + p - 1) / p) as usize;
        out.seq_lens.push(clamped as i32);
        for c in 0..chunks {
            let (mut count, mut first) = ((c == 0 && bad_len) as i32, None);
            for j in c * chunk..((c + 1) * chunk).min(pages) {
                let id = block_table[b * mp + j];
                if id < 0 || id as i64 >= shape.num_pages as i64 {
                    count += 1;
                    first.get_or_insert((j as i32, id));
                } else {
                    out.block_table[b * columns + j] = id;
                }
            }
            let (place, value) = match (c == 0 && bad_len, first) {
                (true, _) => (-1, len),
                (false, Some(f)) => f,
                (false, None) => (0, 0),
            };
            out.faults.extend([count, place, value]);
        }
    }
    out
}

/// A bad input `guard_ids` found in one sequence of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdFault {
    /// The sequence.
    pub seq: usize,
    /// Bad values in it (its length counts as one).
    pub count: u32,
    /// The first of them, as the host check would have reported it (`EmptySequence` for a
    /// length below 1, `LongerThanPlanned` above the plan, `PageOutOfPool` for a page id).
    pub first: BatchError,
}

impl IdFault {
    /// The faults in `guard_ids`' records (`[batch × chunks × GUARD_FAULT_WORDS]`, chunks as
    /// [`guard_chunks`]) of a step planned for sequences of up to `longest` tokens; sequences
    /// without one are left out.
    pub fn decode(records: &[i32], chunks: u32, longest: u32, num_pages: u32) -> Vec<IdFault> {
        let per_seq = (chunks.max(1) as u64 * GUARD_FAULT_WORDS) as usize;
        records
            .chunks_exact(per_seq)
            .enumerate()
            .filter_map(|(seq, r)| {
                let recs: Vec<&[i32]> = r.chunks_exact(GUARD_FAULT_WORDS as usize).collect();
                let count: i64 = recs.iter().map(|c| c[0].max(0) as i64).sum();
                let first = recs.iter().find(|c| c[0] > 0)?;
                Some(IdFault {
                    seq,
                    count: count.min(u32::MAX as i64) as u32,
                    first: match first[1] {
                        -1 if first[2] < 1 => BatchError::EmptySequence { seq, len: first[2] },
                        -1 => BatchError::LongerThanPlanned {
                            seq,
                            len: first[2],
                            longest,
                        },
                        logical => BatchError::PageOutOfPool {
                            seq,
                            logical: logical.max(0) as usize,
                            page: first[2],
                            num_pages,
                        },
                    },
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, DecodeSpec};

    fn spec() -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap()
    }

    #[test]
    fn reference_clamps_and_records_the_first_bad_input() {
        let s = spec();
        let shape = PagedShape {
            batch: 4,
            kv_heads: 1,
            num_pages: 10,
            max_pages: 3,
        };
        // Sequence 0 is fine; 1 has two bad ids; 2 a length past the plan; 3 an empty one.
        // Entries past a sequence's pages are not looked at (−5 in sequence 0).
        let lens = [20, 33, 40, 0];
        let table = [4, 9, -5, 1, 10, -2, 7, 8, 3, 6, 2, 2];
        let g = guard_ids_reference(&s, &shape, 36, &lens, &table);
        assert_eq!(g.seq_lens, [20, 33, 36, 1]);
        assert_eq!(g.block_table, [4, 9, 0, 1, 0, 0, 7, 8, 3, 6, 0, 0]);
        assert_eq!(g.faults, [0, 0, 0, 2, 1, 10, 1, -1, 40, 1, -1, 0]);
        let f = IdFault::decode(&g.faults, 1, 36, 10);
        assert_eq!(f.len(), 3);
        assert_eq!(
            f[0].first,
            BatchError::PageOutOfPool {
                seq: 1,
                logical: 1,
                page: 10,
                num_pages: 10
            }
        );
        assert_eq!(f[0].count, 2);
        assert_eq!(
            f[1].first,
            BatchError::LongerThanPlanned {
                seq: 2,
                len: 40,
                longest: 36
            }
        );
        assert_eq!(f[2].first, BatchError::EmptySequence { seq: 3, len: 0 });
        assert!(
            f[1].first.to_string().contains("seq_lens[2] = 40 on the device"),
            "{}",
            f[1].first
        );
    }

    #[test]
    fn calls_name_the_copies_and_refuse_a_bad_longest() {
        let s = spec();
        let shape = PagedShape {
            batch: 2,
            kv_heads: 1,
            num_pages: 10,
            max_pages: 3,
        };
        let plan = guard_ids_calls(&s, &shape, 48).unwrap();
        assert_eq!(plan.calls.len(), 1);
        assert_eq!(plan.calls[0].geometry.grid, [1, 2, 1]);
        assert_eq!(plan.buffers.iter().map(|b| b.len).collect::<Vec<_>>(), [6, 2, 6]);
        assert!(guard_ids_calls(&s, &shape, 49).is_err());
        assert!(guard_ids_calls(&s, &shape, 0).is_err());
    }

    /// A row of several chunks: each CTA's record holds its own chunk's faults, and the decode
    /// merges them (the count summed, the first chunk with a fault naming it; the length first).
    #[test]
    fn records_of_several_chunks_merge() {
        let s = spec();
        let shape = PagedShape {
            batch: 2,
            kv_heads: 1,
            num_pages: 5000,
            max_pages: 2100,
        };
        let longest = 2100 * 16;
        assert_eq!(guard_chunks(&s, longest), 3);
        assert_eq!(guard_chunks(&s, 16 * 1024), 1);
        assert_eq!(guard_chunks(&s, 16 * 1024 + 1), 2);
        let mut table: Vec<i32> = (0..2 * 2100).map(|i| i % 5000).collect();
        table[2100 + 1500] = 5000;
        table[2100 + 5] = -2;
        table[2100 + 2099] = -3;
        table[30] = 7000; // sequence 0 is 400 tokens (25 pages): column 30 is past it
        let lens = [400, longest as i32];
        let g = guard_ids_reference(&s, &shape, longest, &lens, &table);
        assert_eq!(g.faults.len(), 2 * 3 * 3);
        assert_eq!(&g.faults[9..], [1, 5, -2, 1, 1500, 5000, 1, 2099, -3]);
        assert_eq!(g.block_table[30], 0);
        let f = IdFault::decode(&g.faults, 3, longest, 5000);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].seq, f[0].count), (1, 3));
        assert_eq!(
            f[0].first,
            BatchError::PageOutOfPool {
                seq: 1,
                logical: 5,
                page: -2,
                num_pages: 5000
            }
        );
        let lens = [400, 0];
        let g = guard_ids_reference(&s, &shape, longest, &lens, &table);
        let f = IdFault::decode(&g.faults, 3, longest, 5000);
        // A length of 0 is clamped to one token: only column 0 is reached, and it is in range.
        assert_eq!(
            (f[0].count, &f[0].first),
            (1, &BatchError::EmptySequence { seq: 1, len: 0 })
        );
    }
}
