//! The device-side check of a step's lengths and page ids (opt in: the runtime's
//! `Problem::check_device_ids`).
//!
//! The planner checks the host copies of the lengths and the block table, but a step reads the
//! device's, which a caller may change between a plan and its launches (a graph replay). With
//! the check on, a step starts with `guard_ids`: one CTA a sequence copies its length and block
//! table row into the workspace, every value clamped into range (lengths into `1..=longest`,
//! the plan's longest; the ids of the pages a clamped length covers into the pool, a bad one
//! becoming page 0), and records per sequence what it had to clamp. Every later launch of the
//! step reads the copies, so out-of-range values cannot make a kernel read outside its buffers:
//! the step computes something (wrong where an input was bad) instead of faulting, and the
//! fault words say which input was bad ([`IdFault`]).

use crate::pipeline::{ArgRef, BufferSpec, CallPlan, PipelinePlan};
use crate::signature::Elem;
use crate::{BatchError, LaunchGeometry, PagedShape, PagedSpec, SpecError};

/// Threads of a `guard_ids` CTA (one a sequence).
pub const GUARD_THREADS: u32 = 256;
/// i32 words of a sequence's fault record: bad inputs found, where (−1 the length, else the
/// first bad logical page), the bad value.
pub const GUARD_FAULT_WORDS: u64 = 3;
/// The workspace copies a guarded step reads in place of each caller tensor.
pub const GUARDED_INPUTS: [(&str, &str); 2] =
    [("block_table", "ids_block_table"), ("seq_lens", "ids_seq_lens")];
/// The workspace slot of the fault records (`[batch × GUARD_FAULT_WORDS]` i32).
pub const GUARD_FAULTS: &str = "ids_faults";

/// `guard_ids__<spec>`: the entry every decode family's module carries from bundle schema 14.
pub fn guard_ids_entry(spec: &PagedSpec) -> String {
    format!("guard_ids__{}", spec.sketch_tag())
}

/// Grid (batch) of `guard_ids`.
pub fn guard_ids_geometry(shape: &PagedShape) -> Result<LaunchGeometry, SpecError> {
    if shape.batch == 0 || shape.batch > i32::MAX as u32 {
        return Err(SpecError::BadShape(format!(
            "batch = {} must be in 1..=2^31−1",
            shape.batch
        )));
    }
    Ok(LaunchGeometry::linear(shape.batch, GUARD_THREADS))
}

/// The buffers `guard_ids` writes for `shape`.
pub fn guard_ids_buffers(shape: &PagedShape) -> Vec<BufferSpec> {
    let batch = shape.batch as u64;
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
            len: batch * GUARD_FAULT_WORDS,
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
            geometry: guard_ids_geometry(shape)?,
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
        buffers: guard_ids_buffers(shape),
    })
}

/// What `guard_ids` writes for one batch, computed on the host: the clamped copies and the
/// fault records (the kernel's reference, and the contract [`IdFault::decode`] reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardedIds {
    pub block_table: Vec<i32>,
    pub seq_lens: Vec<i32>,
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
    let mut out = GuardedIds {
        block_table: vec![0; seq_lens.len() * mp],
        seq_lens: Vec::with_capacity(seq_lens.len()),
        faults: Vec::with_capacity(seq_lens.len() * GUARD_FAULT_WORDS as usize),
    };
    for (b, &len) in seq_lens.iter().enumerate() {
        let bad_len = len < 1 || len as i64 > longest as i64;
        let clamped = (len as i64).clamp(1, longest as i64);
        let pages = ((clamped + p - 1) / p) as usize;
        let (mut count, mut first) = (bad_len as i32, None);
        for j in 0..pages {
            let id = block_table[b * mp + j];
            if id < 0 || id as i64 >= shape.num_pages as i64 {
                count += 1;
                first.get_or_insert((j as i32, id));
            } else {
                out.block_table[b * mp + j] = id;
            }
        }
        out.seq_lens.push(clamped as i32);
        let (place, value) = match (bad_len, first) {
            (true, _) => (-1, len),
            (false, Some(f)) => f,
            (false, None) => (0, 0),
        };
        out.faults.extend([count, place, value]);
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
    /// The faults in `guard_ids`' records (`[batch × GUARD_FAULT_WORDS]`) of a step planned for
    /// sequences of up to `longest` tokens; sequences without one are left out.
    pub fn decode(records: &[i32], longest: u32, num_pages: u32) -> Vec<IdFault> {
        records
            .chunks_exact(GUARD_FAULT_WORDS as usize)
            .enumerate()
            .filter(|(_, r)| r[0] != 0)
            .map(|(seq, r)| IdFault {
                seq,
                count: r[0] as u32,
                first: match r[1] {
                    -1 if r[2] < 1 => BatchError::EmptySequence { seq, len: r[2] },
                    -1 => BatchError::LongerThanPlanned {
                        seq,
                        len: r[2],
                        longest,
                    },
                    logical => BatchError::PageOutOfPool {
                        seq,
                        logical: logical.max(0) as usize,
                        page: r[2],
                        num_pages,
                    },
                },
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
        let f = IdFault::decode(&g.faults, 36, 10);
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
        assert_eq!(plan.calls[0].geometry.grid, [2, 1, 1]);
        assert_eq!(plan.buffers.iter().map(|b| b.len).collect::<Vec<_>>(), [6, 2, 6]);
        assert!(guard_ids_calls(&s, &shape, 49).is_err());
        assert!(guard_ids_calls(&s, &shape, 0).is_err());
    }
}
