//! `guard_ids`: the device-side check of a step's lengths and page ids (`entkv_abi::guard`).
//! A CTA copies [`GUARD_COLUMNS`] block-table columns of one sequence (and the first chunk its
//! length) into the workspace, each value clamped into range, and writes its fault record;
//! `entkv_abi::guard_ids_reference` is the host mirror.

use crate::program::Program;
use crate::suite::{KernelCheck, Outcome, SuiteError};
use crate::KernelGenError;
use entkv_abi::{
    guard_chunks, guard_ids_calls, guard_ids_entry, guard_ids_reference, DType, DecodeSpec, IdFault,
    PagedShape, PagedSpec, GUARDED_INPUTS, GUARD_COLUMNS, GUARD_FAULTS, GUARD_FAULT_WORDS, GUARD_THREADS,
};
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::rc::Rc;

/// `guard_ids`: grid (column chunks, batch). Parameters as `entkv_abi::guard_ids_calls`.
pub fn guard_ids_kernel(spec: &PagedSpec) -> Result<Kernel, KernelGenError> {
    let p = spec.page_size as i32;
    let mut k = KernelBuilder::new(guard_ids_entry(spec), GUARD_THREADS);
    let block_table = k.buffer(GUARDED_INPUTS[0].0, Scalar::I32, Access::Read);
    let seq_lens = k.buffer(GUARDED_INPUTS[1].0, Scalar::I32, Access::Read);
    let ids_table = k.buffer(GUARDED_INPUTS[0].1, Scalar::I32, Access::Write);
    let ids_lens = k.buffer(GUARDED_INPUTS[1].1, Scalar::I32, Access::Write);
    let faults = k.buffer(GUARD_FAULTS, Scalar::I32, Access::Write);
    let max_pages = k.scalar_param("max_pages", Scalar::I32);
    let longest = k.scalar_param("longest", Scalar::I32);
    let num_pages = k.scalar_param("num_pages", Scalar::I32);
    // The chunk's first bad column (max_pages when none) and how many there are.
    let first_bad = k.shared("first_bad", Scalar::I32, 1);
    let bad_count = k.shared("bad_count", Scalar::I32, 1);

    let chunk = k.let_("chunk", k.block_idx(Axis::X).i32());
    let b = k.let_("b", k.block_idx(Axis::Y));
    let chunks = k.let_("chunks", k.grid_dim(Axis::X));
    let tid = k.let_("tid", k.thread_idx().i32());
    let row = k.let_("row", b.i64() * max_pages.clone().i64());
    let len = k.let_("len", seq_lens.at(b));
    // Only the first chunk reports the length; every chunk clamps it alike.
    let bad_len = k.let_(
        "bad_len",
        chunk.eq_(0i32).and(len.lt(1i32).or(len.gt(longest.clone()))),
    );
    let clamped = k.let_("clamped", len.max(1i32).min(longest.clone()));
    let pages = k.let_("pages", (clamped + (p - 1)) / p);
    // Columns a step planned for `longest` tokens can reach.
    let columns = k.let_("columns", (longest + (p - 1)) / p);
    k.if_(tid.eq_(0i32), |k| {
        k.store(first_bad, 0i32, max_pages.clone());
        k.store(bad_count, 0i32, 0i32);
    });
    k.barrier();
    // Four columns a thread (coalesced across the CTA), their ids loaded before any branch so
    // the four loads are in flight together (an unused column loads the row's first entry).
    // A column past the sequence's pages is written as page 0, one past `columns` not at all.
    let base = k.let_("base", chunk * GUARD_COLUMNS as i32 + tid);
    let loaded: Vec<(Var, Var, Var)> = (0..GUARD_COLUMNS / GUARD_THREADS)
        .map(|i| {
            let j = k.let_(&format!("j{i}"), base.e() + (i * GUARD_THREADS) as i32);
            let used = k.let_(&format!("used{i}"), j.lt(pages));
            let at = select(used, row.e() + j.i64(), row.e());
            let id = k.let_(&format!("id{i}"), select(used, block_table.at(at), 0i32));
            (j, used, id)
        })
        .collect();
    for (j, used, id) in loaded {
        k.if_(j.lt(columns), |k| {
            let bad = k.let_("bad", used.and(id.lt(0i32).or(id.ge(num_pages.clone()))));
            k.store(ids_table, row.e() + j.i64(), select(bad, 0i32, id));
            k.if_(bad, |k| {
                k.atomic_no_ret(AtomicOp::Min, first_bad, 0i32, j);
                k.atomic_no_ret(AtomicOp::Add, bad_count, 0i32, 1i32);
            });
        });
    }
    k.barrier();
    k.if_(tid.eq_(0i32), |k| {
        let count = k.let_("count", bad_count.at(0i32) + select(bad_len, 1i32, 0i32));
        let first = k.let_("first", first_bad.at(0i32));
        let paged = k.let_("paged", first.lt(max_pages.clone()));
        let place = select(bad_len, -1i32, select(paged, first, 0i32));
        let value = select(
            bad_len,
            len,
            select(
                paged,
                block_table.at(row.e() + first.min(max_pages - 1i32).i64()),
                0i32,
            ),
        );
        let rec = k.let_(
            "rec",
            (b.i64() * chunks.i64() + chunk.i64()) * GUARD_FAULT_WORDS as i64,
        );
        k.if_(chunk.eq_(0i32), |k| k.store(ids_lens, b, clamped));
        k.store(faults, rec.e(), count);
        k.store(faults, rec.e() + 1i64, place);
        k.store(faults, rec.e() + 2i64, value);
    });
    Ok(k.finish()?)
}

/// One `guard_ids` case: a random batch (lengths, a block table of pool ids) of `batch`
/// sequences, with bad values injected in `round`s past 0 (ids below 0 and past the pool
/// anywhere, also past a sequence's pages where they are no faults; a length of 0, −3, past the
/// plan or `i32::MAX`), checked against `guard_ids_reference` exactly, outputs poisoned.
pub struct GuardCheck {
    pub spec: PagedSpec,
    pub shape: PagedShape,
    pub round: usize,
    pub seed: u64,
}

impl GuardCheck {
    /// Lengths, block table and the plan's longest.
    fn inputs(&self) -> (Vec<i32>, Vec<i32>, u32) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let (s, p) = (&self.shape, self.spec.page_size);
        let cap = (s.max_pages * p) as i32;
        let mut lens: Vec<i32> = (0..s.batch).map(|_| rng.gen_range(1..=cap)).collect();
        let longest = *lens.iter().max().unwrap_or(&1) as u32;
        let mut table: Vec<i32> = (0..s.batch * s.max_pages)
            .map(|_| rng.gen_range(0..s.num_pages as i32))
            .collect();
        if self.round > 0 {
            for _ in 0..rng.gen_range(1..=6) {
                let i = rng.gen_range(0..table.len());
                table[i] = [-1, s.num_pages as i32, i32::MAX, i32::MIN][rng.gen_range(0..4)];
            }
            let b = rng.gen_range(0..s.batch as usize);
            lens[b] = [0, -3, longest as i32 + 1, i32::MAX][(self.round - 1) % 4];
        }
        (lens, table, longest)
    }
}

impl KernelCheck for GuardCheck {
    fn name(&self) -> String {
        let s = &self.shape;
        format!(
            "guard_ids p{} batch {} max_pages {} pool {} {}",
            self.spec.page_size,
            s.batch,
            s.max_pages,
            s.num_pages,
            if self.round == 0 {
                "all in range".to_string()
            } else {
                format!("bad values {}", self.round)
            }
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let (lens, table, longest) = self.inputs();
        let plan = guard_ids_calls(&self.spec, &self.shape, longest).map_err(KernelGenError::from)?;
        let mut prog = Program::new();
        prog.buffer(GUARDED_INPUTS[0].0, HostBuffer::I32(table));
        prog.buffer(GUARDED_INPUTS[1].0, HostBuffer::I32(lens));
        for buf in &plan.buffers {
            prog.poisoned(&buf.name, Scalar::I32, buf.len as usize);
        }
        let kernel = Rc::new(guard_ids_kernel(&self.spec)?);
        for c in plan.calls {
            prog.call(kernel.clone(), c.geometry, c.args);
        }
        Ok(prog)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let (lens, table, longest) = self.inputs();
        let want = guard_ids_reference(&self.spec, &self.shape, longest, &lens, &table);
        let chunks = guard_chunks(&self.spec, longest);
        let faults = IdFault::decode(&want.faults, chunks, longest, self.shape.num_pages).len();
        // The copy's rows are `max_pages` apart; only the reachable columns are written.
        let (mp, cols) = (self.shape.max_pages as usize, want.columns);
        let copied: Vec<f64> = ran.get(GUARDED_INPUTS[0].1).to_f64_vec();
        let copied: Vec<f64> = (0..lens.len())
            .flat_map(|b| copied[b * mp..b * mp + cols].to_vec())
            .collect();
        for (name, got, want) in [
            (GUARDED_INPUTS[0].1, copied, &want.block_table),
            (
                GUARDED_INPUTS[1].1,
                ran.get(GUARDED_INPUTS[1].1).to_f64_vec(),
                &want.seq_lens,
            ),
            (GUARD_FAULTS, ran.get(GUARD_FAULTS).to_f64_vec(), &want.faults),
        ] {
            if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&(want[i] as f64))) {
                return Outcome::new(
                    false,
                    format!("{name}[{i}] = {:?}, the reference has {}", got.get(i), want[i]),
                );
            }
        }
        // A case with injected values must find them, one without none.
        let passed = (faults > 0) == (self.round > 0);
        Outcome::new(
            passed,
            format!("{faults} sequences with bad values over {chunks} chunks a row, as the reference"),
        )
    }
}

/// The suite's `guard_ids` cases: one page a sequence and a pool of two; 300 pages a row (more
/// than a thread's share, less than a chunk); 64-token pages and an odd row; rows of three
/// chunks; each in range and with bad values.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    let spec = |p| PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), p, false, 4);
    let mut v: Vec<Box<dyn KernelCheck>> = Vec::new();
    for (i, (p, max_pages, batch, num_pages)) in [
        (16, 1, 3, 2),
        (16, 300, 5, 700),
        (64, 37, 4, 40),
        (16, 2500, 3, 3000),
    ]
    .into_iter()
    .enumerate()
    {
        let Ok(spec) = spec(p) else { continue };
        for round in 0..3 {
            v.push(Box::new(GuardCheck {
                spec,
                shape: PagedShape {
                    batch,
                    kv_heads: 1,
                    num_pages,
                    max_pages,
                },
                round: round + i,
                seed: 0x9a4d + (10 * i + round) as u64,
            }));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::interp_failures;

    /// The kernels a family's module carries beyond its rows are the entries the ABI lists.
    #[test]
    fn module_extra_kernels_are_the_abi_entries() {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
        for family in entkv_abi::KernelFamily::ALL {
            let names: Vec<String> = crate::module_extra_kernels(family, &spec)
                .unwrap()
                .into_iter()
                .map(|k| k.name)
                .collect();
            assert_eq!(names, family.module_extra_entries(&spec), "{family}");
            assert_eq!(names.len(), family.is_decode() as usize, "{family}");
        }
    }

    #[test]
    fn guard_checks_pass_in_the_interpreter() {
        assert!(interp_failures(checks()).is_empty());
    }

    /// The checks can fail: a kernel that copies bad ids unclamped, or reports no place, is
    /// caught.
    #[test]
    fn a_wrong_copy_fails_the_check() {
        for check in checks().into_iter().skip(1) {
            let mut p = check.program().unwrap();
            p.run_interp().unwrap();
            let mut broken = p.clone();
            let name = GUARD_FAULTS;
            let mut words = broken.get(name).as_i32().unwrap().to_vec();
            words.iter_mut().step_by(3).for_each(|c| *c = 0);
            broken.buffer(name, HostBuffer::I32(words));
            assert!(check.verify(&p).passed, "{}", check.name());
            assert!(
                !check.verify(&broken).passed || check.name().contains("all in range"),
                "{}",
                check.name()
            );
        }
    }
}
