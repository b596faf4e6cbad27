//! The lockstep block executor.
//!
//! Active lanes are a sorted list of thread indices. Expressions are evaluated column-wise over
//! that list (element `j` of every column belongs to thread `lanes[j]`), with columns taken
//! from and returned to a pool so the steady state allocates nothing.

use super::error::{fault, render_path, FResult, Fault, InterpError, Location, MemAccess, RaceAccess, Seg};
use super::ops;
use super::values::{f32_of, int_value, raw_f32, Arg, HostBuffer};
use super::{BufferStats, InterpOptions, LaunchDims, RunStats};
use crate::builder::WARP;
use crate::ir::*;
use half::{bf16, f16};
use std::collections::VecDeque;

pub(crate) fn execute(
    kernel: &Kernel,
    dims: LaunchDims,
    args: &mut [Arg<'_>],
    opts: &InterpOptions,
) -> Result<RunStats, InterpError> {
    let mut m = Machine::new(kernel, dims, args, opts);
    for z in 0..dims.grid[2] {
        for y in 0..dims.grid[1] {
            for x in 0..dims.grid[0] {
                if let Err(f) = m.run_block([x, y, z]) {
                    return Err(m.finish_fault(*f));
                }
            }
        }
    }
    Ok(m.into_stats())
}

/// "No warp" marker in [`Track`].
const NONE: u8 = u8::MAX;

/// Race-detection state of one shared-memory or writable global element. Epochs are global
/// across the run (each block starts a new one), so nothing needs resetting between blocks.
#[derive(Clone, Copy)]
struct Track {
    w_epoch: u64,
    r_epoch: u64,
    a_epoch: u64,
    w_warp: u8,
    /// First reader and another, different reader in `r_epoch` (or `NONE`).
    r_first: u8,
    r_second: u8,
    a_first: u8,
    a_second: u8,
}

impl Default for Track {
    fn default() -> Self {
        Track {
            w_epoch: 0,
            r_epoch: 0,
            a_epoch: 0,
            w_warp: NONE,
            r_first: NONE,
            r_second: NONE,
            a_first: NONE,
            a_second: NONE,
        }
    }
}

type Race = (RaceAccess, u8);

impl Track {
    /// A warp other than `w` in the set `{first, second}`.
    #[inline]
    fn other(first: u8, second: u8, w: u8) -> Option<u8> {
        if first != w {
            Some(first)
        } else if second != NONE {
            Some(second)
        } else {
            None
        }
    }

    #[inline]
    fn add(epoch: &mut u64, first: &mut u8, second: &mut u8, e: u64, w: u8) {
        if *epoch != e {
            *epoch = e;
            *first = w;
            *second = NONE;
        } else if *first != w && *second == NONE {
            *second = w;
        }
    }

    #[inline]
    fn check_write(&self, e: u64, w: u8) -> Result<(), Race> {
        if self.w_epoch == e && self.w_warp != w {
            return Err((RaceAccess::Write, self.w_warp));
        }
        Ok(())
    }

    #[inline]
    fn check_reads(&self, e: u64, w: u8) -> Result<(), Race> {
        if self.r_epoch == e {
            if let Some(o) = Self::other(self.r_first, self.r_second, w) {
                return Err((RaceAccess::Read, o));
            }
        }
        Ok(())
    }

    #[inline]
    fn check_atomics(&self, e: u64, w: u8) -> Result<(), Race> {
        if self.a_epoch == e {
            if let Some(o) = Self::other(self.a_first, self.a_second, w) {
                return Err((RaceAccess::Atomic, o));
            }
        }
        Ok(())
    }

    #[inline]
    fn read(&mut self, e: u64, w: u8) -> Result<(), Race> {
        self.check_write(e, w)?;
        self.check_atomics(e, w)?;
        Self::add(&mut self.r_epoch, &mut self.r_first, &mut self.r_second, e, w);
        Ok(())
    }

    #[inline]
    fn write(&mut self, e: u64, w: u8) -> Result<(), Race> {
        self.check_write(e, w)?;
        self.check_reads(e, w)?;
        self.check_atomics(e, w)?;
        self.w_epoch = e;
        self.w_warp = w;
        Ok(())
    }

    #[inline]
    fn atomic(&mut self, e: u64, w: u8) -> Result<(), Race> {
        self.check_write(e, w)?;
        self.check_reads(e, w)?;
        Self::add(&mut self.a_epoch, &mut self.a_first, &mut self.a_second, e, w);
        Ok(())
    }
}

/// Race tracking of one writable global buffer, a page of elements allocated on its first
/// access: a launch touches a small part of most workspaces, and a track entry is 32 bytes.
struct GlobalTrack {
    pages: Vec<Option<Box<[Track]>>>,
}

impl GlobalTrack {
    const PAGE: usize = 1024;

    fn new(len: usize) -> GlobalTrack {
        GlobalTrack {
            pages: (0..len.div_ceil(Self::PAGE)).map(|_| None).collect(),
        }
    }

    /// The entry of element `i` (in bounds: accesses are checked first).
    #[inline]
    fn at(&mut self, i: usize) -> &mut Track {
        let page = self.pages[i / Self::PAGE]
            .get_or_insert_with(|| vec![Track::default(); Self::PAGE].into_boxed_slice());
        &mut page[i % Self::PAGE]
    }
}

struct SharedMem {
    data: Vec<u64>,
    /// Block generation that last wrote each element (initialised iff equal to the current).
    gen: Vec<u64>,
    /// Async copies in flight into each element (0 or 1: a second is an error).
    inflight: Vec<u8>,
    /// Empty when race checking is off.
    track: Vec<Track>,
}

/// One thread's async copy into shared memory, not landed yet: its source was read when it
/// was issued, and its bytes land in `array[first..]` when a wait retires its group.
struct PendingCopy {
    array: usize,
    first: usize,
    values: Vec<u64>,
}

/// A thread's async copies: those since its last commit, and its committed groups, oldest
/// first.
#[derive(Default)]
struct ThreadCopies {
    open: Vec<PendingCopy>,
    groups: VecDeque<Vec<PendingCopy>>,
}

impl ThreadCopies {
    fn count(&self) -> u64 {
        (self.open.len() + self.groups.iter().map(Vec::len).sum::<usize>()) as u64
    }
}

/// Why a shared-memory access failed.
enum SharedBad {
    Uninit,
    Race(Race),
    InFlight,
}

struct Machine<'k, 'b> {
    k: &'k Kernel,
    bufs: Vec<Option<&'b mut HostBuffer>>,
    /// Raw values of scalar parameters (0 for buffers).
    params: Vec<u64>,
    nt: usize,
    block: [u32; 3],
    grid: [u32; 3],
    max_steps: u64,
    races: bool,
    regs: Vec<u64>,
    reg_init: Vec<bool>,
    /// Register known to be initialised in every thread of the block.
    var_full: Vec<bool>,
    shared: Vec<SharedMem>,
    epoch: u64,
    gen: u64,
    pool: Vec<Vec<u64>>,
    lane_pool: Vec<Vec<u32>>,
    stats: RunStats,
    buf_loaded: Vec<u64>,
    buf_stored: Vec<u64>,
    /// Race tracking of each writable global buffer (`None` for read-only buffers, scalars, or
    /// when race checking is off).
    global_track: Vec<Option<GlobalTrack>>,
    /// Each thread's async copies in flight, and their total (elements), which is 0 in every
    /// kernel that issues none, so shared accesses check `inflight` only when it is not.
    copies: Vec<ThreadCopies>,
    copies_in_flight: u64,
}

#[inline]
fn lane_at(lanes: &[u32], j: usize) -> u32 {
    lanes.get(j).copied().unwrap_or(0)
}

fn axis_index(a: Axis) -> usize {
    match a {
        Axis::X => 0,
        Axis::Y => 1,
        Axis::Z => 2,
    }
}

impl<'k, 'b> Machine<'k, 'b> {
    fn new(k: &'k Kernel, dims: LaunchDims, args: &'b mut [Arg<'_>], opts: &InterpOptions) -> Self {
        let nt = k.block_threads as usize;
        let mut params = Vec::with_capacity(args.len());
        let mut bufs = Vec::with_capacity(args.len());
        for a in args.iter_mut() {
            match a {
                Arg::Buf(b) => {
                    params.push(0);
                    bufs.push(Some(&mut **b));
                }
                Arg::Scalar(v) => {
                    params.push(v.raw());
                    bufs.push(None);
                }
            }
        }
        let races = opts.check_races;
        let global_track = k
            .params
            .iter()
            .zip(&bufs)
            .map(|(p, b)| match (&p.kind, b) {
                (ParamKind::Buffer { access, .. }, Some(b)) if races && *access != Access::Read => {
                    Some(GlobalTrack::new(b.len()))
                }
                _ => None,
            })
            .collect();
        let shared = k
            .shared
            .iter()
            .map(|a| SharedMem {
                data: vec![0; a.len as usize],
                gen: vec![0; a.len as usize],
                inflight: vec![0; a.len as usize],
                track: if races {
                    vec![Track::default(); a.len as usize]
                } else {
                    Vec::new()
                },
            })
            .collect();
        let nv = k.vars.len();
        Machine {
            k,
            bufs,
            params,
            nt,
            block: [0; 3],
            grid: dims.grid,
            max_steps: opts.max_steps,
            races,
            regs: vec![0; nv * nt],
            reg_init: vec![false; nv * nt],
            var_full: vec![false; nv],
            shared,
            epoch: 0,
            gen: 0,
            pool: Vec::new(),
            lane_pool: Vec::new(),
            stats: RunStats::default(),
            buf_loaded: vec![0; k.params.len()],
            buf_stored: vec![0; k.params.len()],
            global_track,
            copies: (0..nt).map(|_| ThreadCopies::default()).collect(),
            copies_in_flight: 0,
        }
    }

    fn into_stats(mut self) -> RunStats {
        for (i, p) in self.k.params.iter().enumerate() {
            if let ParamKind::Buffer { .. } = p.kind {
                self.stats.buffers.push(BufferStats {
                    name: p.name.clone(),
                    bytes_loaded: self.buf_loaded[i],
                    bytes_stored: self.buf_stored[i],
                });
            }
        }
        self.stats.global_bytes_loaded = self.buf_loaded.iter().sum();
        self.stats.global_bytes_stored = self.buf_stored.iter().sum();
        self.stats
    }

    fn finish_fault(&self, f: Fault) -> InterpError {
        let Fault {
            mut err,
            thread,
            path,
        } = f;
        if let Some(loc) = err.location_mut() {
            *loc = Location {
                kernel: self.k.name.clone(),
                block: self.block,
                thread,
                path: render_path(&path),
            };
        }
        err
    }

    // ----- pools -------------------------------------------------------------------------

    #[inline]
    fn take(&mut self, n: usize) -> Vec<u64> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v.reserve(n);
        v
    }

    #[inline]
    fn filled(&mut self, n: usize, x: u64) -> Vec<u64> {
        let mut v = self.take(n);
        v.resize(n, x);
        v
    }

    #[inline]
    fn give(&mut self, v: Vec<u64>) {
        self.pool.push(v);
    }

    #[inline]
    fn take_lanes(&mut self) -> Vec<u32> {
        let mut v = self.lane_pool.pop().unwrap_or_default();
        v.clear();
        v
    }

    #[inline]
    fn give_lanes(&mut self, v: Vec<u32>) {
        self.lane_pool.push(v);
    }

    // ----- blocks and statements ---------------------------------------------------------

    fn run_block(&mut self, b: [u32; 3]) -> FResult<()> {
        self.block = b;
        self.gen += 1;
        self.epoch += 1;
        self.reg_init.fill(false);
        self.var_full.fill(false);
        self.stats.blocks += 1;
        if self.stats.statements.saturating_add(self.stats.blocks) > self.max_steps {
            return Err(fault(
                InterpError::Timeout {
                    loc: Box::default(),
                    max_steps: self.max_steps,
                },
                0,
            ));
        }
        // Only empty groups can be left from an earlier block (it ended with none in flight).
        for c in &mut self.copies {
            c.groups.clear();
        }
        let mut all = self.take_lanes();
        all.extend(0..self.nt as u32);
        let k = self.k;
        self.exec_block(&k.body, &all)?;
        self.give_lanes(all);
        if self.copies_in_flight > 0 {
            let (t, c) = self
                .copies
                .iter()
                .enumerate()
                .find(|(_, c)| c.count() > 0)
                .expect("copies in flight belong to a thread");
            return Err(fault(
                InterpError::AsyncCopyNotWaited {
                    loc: Box::default(),
                    copies: c.count(),
                },
                t as u32,
            ));
        }
        Ok(())
    }

    #[inline]
    fn count_steps(&mut self, lanes: &[u32]) -> FResult<()> {
        self.stats.statements += lanes.len() as u64;
        if self.stats.statements.saturating_add(self.stats.blocks) > self.max_steps {
            return Err(fault(
                InterpError::Timeout {
                    loc: Box::default(),
                    max_steps: self.max_steps,
                },
                lane_at(lanes, 0),
            ));
        }
        Ok(())
    }

    fn exec_block(&mut self, stmts: &[Stmt], lanes: &[u32]) -> FResult<()> {
        for (i, s) in stmts.iter().enumerate() {
            if let Err(mut f) = self.exec_stmt(s, lanes) {
                f.path.push(Seg::Index(i));
                return Err(f);
            }
        }
        Ok(())
    }

    fn exec_stmt(&mut self, s: &Stmt, lanes: &[u32]) -> FResult<()> {
        self.count_steps(lanes)?;
        let n = lanes.len();
        match s {
            Stmt::Assign { var, value } => {
                let v = self.eval(value, lanes)?;
                self.write_var(*var, lanes, &v)?;
                self.give(v);
            }
            Stmt::Store { mem, index, value } => {
                let mut idx = self.eval(index, lanes)?;
                let val = self.eval(value, lanes)?;
                self.check_index(*mem, &mut idx, index.ty(), lanes, 1, MemAccess::Store)?;
                self.store(*mem, &idx, 0, lanes, &val)?;
                self.give(idx);
                self.give(val);
            }
            Stmt::LoadVec { vars, mem, index } => {
                let mut idx = self.eval(index, lanes)?;
                self.check_index(
                    *mem,
                    &mut idx,
                    index.ty(),
                    lanes,
                    vars.len(),
                    MemAccess::VectorLoad,
                )?;
                for (c, v) in vars.iter().enumerate() {
                    let mut out = self.take(n);
                    self.load(*mem, &idx, c, lanes, &mut out, MemAccess::VectorLoad)?;
                    self.write_var(*v, lanes, &out)?;
                    self.give(out);
                }
                self.give(idx);
            }
            Stmt::StoreVec { mem, index, values } => {
                let mut idx = self.eval(index, lanes)?;
                let mut vals = Vec::with_capacity(values.len());
                for v in values {
                    vals.push(self.eval(v, lanes)?);
                }
                self.check_index(
                    *mem,
                    &mut idx,
                    index.ty(),
                    lanes,
                    values.len(),
                    MemAccess::VectorStore,
                )?;
                for (c, v) in vals.iter().enumerate() {
                    self.store(*mem, &idx, c, lanes, v)?;
                }
                self.give(idx);
                for v in vals {
                    self.give(v);
                }
            }
            Stmt::Atomic {
                op,
                mem,
                index,
                value,
                result,
            } => {
                let mut idx = self.eval(index, lanes)?;
                let val = self.eval(value, lanes)?;
                self.check_index(*mem, &mut idx, index.ty(), lanes, 1, MemAccess::Atomic)?;
                let mut old = self.take(n);
                self.atomic(*op, *mem, &idx, lanes, &val, &mut old)?;
                if let Some(r) = result {
                    self.write_var(*r, lanes, &old)?;
                }
                self.give(old);
                self.give(idx);
                self.give(val);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.eval(cond, lanes)?;
                let mut t = self.take_lanes();
                let mut e = self.take_lanes();
                for (&l, &cv) in lanes.iter().zip(&c) {
                    if cv != 0 {
                        t.push(l);
                    } else {
                        e.push(l);
                    }
                }
                self.give(c);
                if !t.is_empty() && !then_body.is_empty() {
                    if let Err(mut f) = self.exec_block(then_body, &t) {
                        f.path.push(Seg::Then);
                        return Err(f);
                    }
                }
                if !e.is_empty() && !else_body.is_empty() {
                    if let Err(mut f) = self.exec_block(else_body, &e) {
                        f.path.push(Seg::Else);
                        return Err(f);
                    }
                }
                self.give_lanes(t);
                self.give_lanes(e);
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => {
                let sv = self.eval(start, lanes)?;
                self.write_var(*var, lanes, &sv)?;
                self.give(sv);
                let mut act = self.take_lanes();
                act.extend_from_slice(lanes);
                self.run_for(*var, end, step, body, &mut act)?;
                self.give_lanes(act);
            }
            Stmt::While { cond, body } => {
                let mut act = self.take_lanes();
                act.extend_from_slice(lanes);
                loop {
                    let c = self.eval(cond, &act)?;
                    retain_lanes(&mut act, |j| c[j] != 0);
                    self.give(c);
                    if act.is_empty() {
                        break;
                    }
                    self.count_steps(&act)?;
                    if let Err(mut f) = self.exec_block(body, &act) {
                        f.path.push(Seg::Body);
                        return Err(f);
                    }
                }
                self.give_lanes(act);
            }
            Stmt::Barrier => {
                if n != self.nt {
                    let missing = (0..self.nt as u32)
                        .zip(lanes.iter().copied().chain(std::iter::repeat(u32::MAX)))
                        .find(|(t, l)| t != l)
                        .map_or(0, |(t, _)| t);
                    return Err(fault(
                        InterpError::BarrierDivergence {
                            loc: Box::default(),
                            active: n as u32,
                            total: self.nt as u32,
                        },
                        missing,
                    ));
                }
                self.epoch += 1;
                self.stats.barriers += 1;
            }
            Stmt::Shuffle {
                dst,
                value,
                mode,
                arg,
            } => {
                check_full_warps(lanes, "shuffle")?;
                let val = self.eval(value, lanes)?;
                let a = self.eval(arg, lanes)?;
                let mut out = self.take(n);
                for (cv, ca) in val.chunks_exact(WARP as usize).zip(a.chunks_exact(WARP as usize)) {
                    for (lane, &arg) in ca.iter().enumerate() {
                        let lane = lane as u64;
                        // PTX `shfl.sync` uses the low 5 bits of the lane/offset operand
                        // (`bval[4:0] = b[4:0]`) in every mode.
                        let arg = arg & 31;
                        let src = match mode {
                            ShuffleMode::Xor => lane ^ arg,
                            ShuffleMode::Down => lane + arg,
                            ShuffleMode::Up => lane.checked_sub(arg).unwrap_or(u64::MAX),
                            ShuffleMode::Idx => arg,
                        };
                        // Out-of-range sources keep their own value.
                        let src = if src < WARP as u64 { src } else { lane };
                        out.push(cv[src as usize]);
                    }
                }
                self.write_var(*dst, lanes, &out)?;
                self.give(out);
                self.give(val);
                self.give(a);
            }
            Stmt::WarpSync => check_full_warps(lanes, "warp sync")?,
            Stmt::CopyAsync {
                dst,
                dst_index,
                src,
                src_index,
                len,
            } => {
                let l = *len as usize;
                let (dmem, smem) = (Mem::Shared(*dst), Mem::Global(*src));
                let mut di = self.eval(dst_index, lanes)?;
                let mut si = self.eval(src_index, lanes)?;
                self.check_index(dmem, &mut di, dst_index.ty(), lanes, l, MemAccess::VectorStore)?;
                self.check_index(smem, &mut si, src_index.ty(), lanes, l, MemAccess::VectorLoad)?;
                let mut vals = Vec::with_capacity(l);
                for c in 0..l {
                    let mut out = self.take(n);
                    self.load(smem, &si, c, lanes, &mut out, MemAccess::VectorLoad)?;
                    vals.push(out);
                }
                let a = dst.0 as usize;
                for (j, &t) in lanes.iter().enumerate() {
                    let first = di[j] as usize;
                    if let Some(c) = (0..l).find(|&c| self.shared[a].inflight[first + c] > 0) {
                        return Err(self.in_flight(a, first + c, MemAccess::VectorStore, t));
                    }
                    if self.races {
                        // The copy may write at any time from now until its wait: a read or
                        // write by another warp in this barrier interval is a race already.
                        let (epoch, w) = (self.epoch, (t / WARP) as u8);
                        for i in first..first + l {
                            if let Err(r) = self.shared[a].track[i].write(epoch, w) {
                                return Err(self.race(dmem, i, RaceAccess::Write, t, r));
                            }
                        }
                    }
                    self.shared[a].inflight[first..first + l].fill(1);
                    self.copies[t as usize].open.push(PendingCopy {
                        array: a,
                        first,
                        values: vals.iter().map(|v| v[j]).collect(),
                    });
                    self.copies_in_flight += l as u64;
                }
                for v in vals {
                    self.give(v);
                }
                self.give(di);
                self.give(si);
            }
            Stmt::CopyAsyncCommit => {
                for &t in lanes {
                    let c = &mut self.copies[t as usize];
                    // Like PTX, a commit with no copies still makes a (empty) group.
                    let group = std::mem::take(&mut c.open);
                    c.groups.push_back(group);
                }
            }
            Stmt::CopyAsyncWait { pending } => {
                for &t in lanes {
                    while self.copies[t as usize].groups.len() > *pending as usize {
                        let group = self.copies[t as usize].groups.pop_front().unwrap_or_default();
                        for copy in group {
                            self.land(t, copy)?;
                        }
                    }
                }
            }
            Stmt::Mma { kind, dst, a, b, c } => {
                check_full_warps(lanes, "mma")?;
                let ab = a[0].ty();
                let mut eval_all = |xs: &[Expr]| -> FResult<Vec<Vec<u64>>> {
                    xs.iter().map(|x| self.eval(x, lanes)).collect()
                };
                let (av, bv, cv) = (eval_all(a)?, eval_all(b)?, eval_all(c)?);
                // Lanes come in whole warps, in order: one product per warp.
                let mut out: Vec<Vec<u64>> = vec![Vec::with_capacity(n); dst.len()];
                for w in 0..n / WARP as usize {
                    let d = match *kind {
                        MmaKind::Float => ops::mma_warp(ab, &av, &bv, &cv, w * WARP as usize),
                        MmaKind::Int8 { a_signed, b_signed } => {
                            ops::mma_i8_warp(a_signed, b_signed, &av, &bv, &cv, w * WARP as usize)
                        }
                    };
                    for (o, di) in out.iter_mut().zip(d) {
                        o.extend(di);
                    }
                }
                for (v, vals) in dst.iter().zip(&out) {
                    self.write_var(*v, lanes, vals)?;
                }
                for x in av.into_iter().chain(bv).chain(cv) {
                    self.give(x);
                }
            }
            Stmt::Ballot { dst, pred } => {
                check_full_warps(lanes, "ballot")?;
                let p = self.eval(pred, lanes)?;
                let mut out = self.take(n);
                for cp in p.chunks_exact(WARP as usize) {
                    let bits = cp
                        .iter()
                        .enumerate()
                        .fold(0u64, |acc, (i, &b)| acc | (((b != 0) as u64) << i));
                    out.extend(std::iter::repeat_n(bits, WARP as usize));
                }
                self.write_var(*dst, lanes, &out)?;
                self.give(out);
                self.give(p);
            }
        }
        Ok(())
    }

    fn run_for(
        &mut self,
        var: VarId,
        end: &Expr,
        step: &Expr,
        body: &Block,
        act: &mut Vec<u32>,
    ) -> FResult<()> {
        let k = self.k;
        let decl = k
            .vars
            .get(var.0 as usize)
            .ok_or_else(|| fault(InterpError::internal("undeclared loop variable"), lane_at(act, 0)))?;
        let ty = decl.ty;
        loop {
            let e = self.eval(end, act)?;
            let v = self.read_var(var, act)?;
            retain_lanes(act, |j| ops::compare_one(CmpOp::Lt, ty, v[j], e[j]));
            self.give(e);
            self.give(v);
            if act.is_empty() {
                return Ok(());
            }
            self.count_steps(act)?;
            if let Err(mut f) = self.exec_block(body, act) {
                f.path.push(Seg::Body);
                return Err(f);
            }
            let st = self.eval(step, act)?;
            for (j, &s) in st.iter().enumerate() {
                let s = int_value(s, ty);
                if s <= 0 {
                    return Err(fault(
                        InterpError::BadLoopStep {
                            loc: Box::default(),
                            var: decl.name.clone(),
                            step: s,
                        },
                        lane_at(act, j),
                    ));
                }
            }
            let mut v = self.read_var(var, act)?;
            ops::binary(BinOp::Add, ty, &mut v, &st).map_err(|(j, e)| fault(*e, lane_at(act, j)))?;
            self.write_var(var, act, &v)?;
            self.give(v);
            self.give(st);
        }
    }

    // ----- registers ---------------------------------------------------------------------

    fn read_var(&mut self, v: VarId, lanes: &[u32]) -> FResult<Vec<u64>> {
        let vi = v.0 as usize;
        let nt = self.nt;
        if vi >= self.var_full.len() {
            return Err(fault(
                InterpError::internal(format!("undeclared register #{vi}")),
                lane_at(lanes, 0),
            ));
        }
        let mut out = self.take(lanes.len());
        let regs = &self.regs[vi * nt..(vi + 1) * nt];
        if lanes.len() == nt && self.var_full[vi] {
            out.extend_from_slice(regs);
            return Ok(out);
        }
        let init = &self.reg_init[vi * nt..(vi + 1) * nt];
        for &l in lanes {
            let l = l as usize;
            if !init[l] {
                return Err(fault(
                    InterpError::UninitRegister {
                        loc: Box::default(),
                        var: self.k.vars[vi].name.clone(),
                    },
                    l as u32,
                ));
            }
            out.push(regs[l]);
        }
        if lanes.len() == nt {
            self.var_full[vi] = true;
        }
        Ok(out)
    }

    fn write_var(&mut self, v: VarId, lanes: &[u32], vals: &[u64]) -> FResult<()> {
        let vi = v.0 as usize;
        let nt = self.nt;
        if vi >= self.var_full.len() || vals.len() != lanes.len() {
            return Err(fault(
                InterpError::internal(format!("bad register write #{vi}")),
                lane_at(lanes, 0),
            ));
        }
        let regs = &mut self.regs[vi * nt..(vi + 1) * nt];
        let init = &mut self.reg_init[vi * nt..(vi + 1) * nt];
        if lanes.len() == nt {
            regs.copy_from_slice(vals);
            if !self.var_full[vi] {
                init.fill(true);
                self.var_full[vi] = true;
            }
        } else {
            for (&l, &x) in lanes.iter().zip(vals) {
                regs[l as usize] = x;
                init[l as usize] = true;
            }
        }
        Ok(())
    }

    // ----- expressions -------------------------------------------------------------------

    fn eval(&mut self, e: &Expr, lanes: &[u32]) -> FResult<Vec<u64>> {
        let n = lanes.len();
        self.stats.lane_ops += n as u64;
        let ty = e.ty();
        match e.kind() {
            ExprKind::Lit(l) => Ok(self.filled(n, ops::lit_raw(l, ty))),
            ExprKind::Var(v) => self.read_var(*v, lanes),
            ExprKind::Param(p) => match self.params.get(p.0 as usize) {
                Some(&r) => Ok(self.filled(n, r)),
                None => Err(fault(
                    InterpError::internal(format!("param #{} out of range", p.0)),
                    lane_at(lanes, 0),
                )),
            },
            ExprKind::Builtin(b) => Ok(match b {
                Builtin::ThreadIdx => {
                    let mut o = self.take(n);
                    o.extend(lanes.iter().map(|&l| l as u64));
                    o
                }
                Builtin::BlockIdx(a) => self.filled(n, self.block[axis_index(*a)] as u64),
                Builtin::GridDim(a) => self.filled(n, self.grid[axis_index(*a)] as u64),
            }),
            ExprKind::Unary(op, a) => {
                let mut x = self.eval(a, lanes)?;
                ops::unary(*op, ty, &mut x).map_err(|e| fault(e, lane_at(lanes, 0)))?;
                Ok(x)
            }
            ExprKind::Binary(op, a, b) => {
                let mut x = self.eval(a, lanes)?;
                let y = self.eval(b, lanes)?;
                let r = ops::binary(*op, ty, &mut x, &y);
                self.give(y);
                r.map_err(|(j, e)| fault(*e, lane_at(lanes, j)))?;
                Ok(x)
            }
            ExprKind::Cmp(op, a, b) => {
                let mut x = self.eval(a, lanes)?;
                let y = self.eval(b, lanes)?;
                ops::compare(*op, a.ty(), &mut x, &y);
                self.give(y);
                Ok(x)
            }
            ExprKind::Fma(a, b, c) => {
                let mut x = self.eval(a, lanes)?;
                let y = self.eval(b, lanes)?;
                let z = self.eval(c, lanes)?;
                if ty != Scalar::F32 {
                    return Err(fault(
                        InterpError::internal(format!("fma on {ty}")),
                        lane_at(lanes, 0),
                    ));
                }
                ops::fma(&mut x, &y, &z);
                self.give(y);
                self.give(z);
                Ok(x)
            }
            ExprKind::Dp4a {
                a_signed,
                b_signed,
                a,
                b,
                c,
            } => {
                let x = self.eval(a, lanes)?;
                let y = self.eval(b, lanes)?;
                let mut z = self.eval(c, lanes)?;
                ops::dp4a(*a_signed, *b_signed, &x, &y, &mut z);
                self.give(x);
                self.give(y);
                Ok(z)
            }
            ExprKind::Prmt { a, b, selector } => {
                let x = self.eval(a, lanes)?;
                let mut y = self.eval(b, lanes)?;
                ops::prmt(&x, &mut y, *selector);
                self.give(x);
                Ok(y)
            }
            ExprKind::Select(c, a, b) => {
                let cv = self.eval(c, lanes)?;
                let av = self.eval(a, lanes)?;
                let mut bv = self.eval(b, lanes)?;
                ops::select(&cv, &av, &mut bv);
                self.give(cv);
                self.give(av);
                Ok(bv)
            }
            ExprKind::Cast(t, a) => {
                let mut x = self.eval(a, lanes)?;
                ops::cast(a.ty(), *t, &mut x);
                Ok(x)
            }
            ExprKind::Bitcast(t, a) => {
                let mut x = self.eval(a, lanes)?;
                ops::bitcast(*t, &mut x);
                Ok(x)
            }
            ExprKind::Load(mem, index) => {
                let mut idx = self.eval(index, lanes)?;
                self.check_index(*mem, &mut idx, index.ty(), lanes, 1, MemAccess::Load)?;
                let mut out = self.take(n);
                self.load(*mem, &idx, 0, lanes, &mut out, MemAccess::Load)?;
                self.give(idx);
                Ok(out)
            }
        }
    }

    // ----- memory ------------------------------------------------------------------------

    fn mem_len(&self, mem: Mem) -> Option<usize> {
        match mem {
            Mem::Global(p) => self.bufs.get(p.0 as usize)?.as_ref().map(|b| b.len()),
            Mem::Shared(s) => self.shared.get(s.0 as usize).map(|s| s.data.len()),
        }
    }

    fn no_mem(&self, mem: Mem, lanes: &[u32]) -> Box<Fault> {
        fault(
            InterpError::internal(format!("{mem:?} is not a buffer or shared array")),
            lane_at(lanes, 0),
        )
    }

    /// Turn raw index lanes of type `ity` into element offsets, checking that `vl` elements
    /// from each are in bounds and (for vectors) aligned.
    fn check_index(
        &self,
        mem: Mem,
        idx: &mut [u64],
        ity: Scalar,
        lanes: &[u32],
        vl: usize,
        access: MemAccess,
    ) -> FResult<()> {
        let len = self.mem_len(mem).ok_or_else(|| self.no_mem(mem, lanes))?;
        let vl128 = vl as i128;
        for (j, r) in idx.iter_mut().enumerate() {
            let i = int_value(*r, ity);
            if vl > 1 && i.rem_euclid(vl128) != 0 {
                return Err(fault(
                    InterpError::Misaligned {
                        loc: Box::default(),
                        buffer: self.k.mem_name(mem),
                        access,
                        index: i,
                        vec_len: vl as u32,
                    },
                    lane_at(lanes, j),
                ));
            }
            if i < 0 || i + vl128 > len as i128 {
                return Err(fault(
                    InterpError::OutOfBounds {
                        loc: Box::default(),
                        buffer: self.k.mem_name(mem),
                        access,
                        // The first element out of bounds.
                        index: if i < 0 { i } else { i.max(len as i128) },
                        len: len as u64,
                    },
                    lane_at(lanes, j),
                ));
            }
            *r = i as u64;
        }
        Ok(())
    }

    fn uninit_shared(&self, s: usize, i: usize, access: MemAccess, thread: u32) -> Box<Fault> {
        fault(
            InterpError::UninitShared {
                loc: Box::default(),
                array: self.k.shared[s].name.clone(),
                access,
                index: i as u64,
            },
            thread,
        )
    }

    fn in_flight(&self, s: usize, i: usize, access: MemAccess, thread: u32) -> Box<Fault> {
        fault(
            InterpError::AsyncCopyInFlight {
                loc: Box::default(),
                array: self.k.shared[s].name.clone(),
                access,
                index: i as u64,
            },
            thread,
        )
    }

    /// The fault of a failed access to element `i` of a shared array.
    fn shared_fault(
        &self,
        mem: Mem,
        i: usize,
        access: MemAccess,
        race: RaceAccess,
        thread: u32,
        bad: SharedBad,
    ) -> Box<Fault> {
        let Mem::Shared(s) = mem else {
            return self.no_mem(mem, &[thread]);
        };
        match bad {
            SharedBad::Uninit => self.uninit_shared(s.0 as usize, i, access, thread),
            SharedBad::InFlight => self.in_flight(s.0 as usize, i, access, thread),
            SharedBad::Race(r) => self.race(mem, i, race, thread, r),
        }
    }

    /// Land thread `t`'s async copy: its bytes are stored now, by `t`, in this barrier interval
    /// (through [`Machine::store`], so with its race tracking and statistics).
    fn land(&mut self, t: u32, copy: PendingCopy) -> FResult<()> {
        let (a, n) = (copy.array, copy.values.len());
        self.shared[a].inflight[copy.first..copy.first + n].fill(0);
        self.copies_in_flight -= n as u64;
        let mem = Mem::Shared(SharedId(a as u32));
        for (c, &x) in copy.values.iter().enumerate() {
            self.store(mem, &[copy.first as u64], c, &[t], &[x])?;
        }
        Ok(())
    }

    /// A race on element `i` of `mem` (shared array or global buffer).
    fn race(&self, mem: Mem, i: usize, access: RaceAccess, thread: u32, r: Race) -> Box<Fault> {
        let (loc, index, warp) = (Box::default(), i as u64, thread / WARP);
        let (other_access, other_warp) = (r.0, r.1 as u32);
        let e = match mem {
            Mem::Shared(s) => InterpError::SharedRace {
                loc,
                array: self.k.shared[s.0 as usize].name.clone(),
                index,
                access,
                warp,
                other_access,
                other_warp,
            },
            Mem::Global(p) => InterpError::GlobalRace {
                loc,
                buffer: self.k.params[p.0 as usize].name.clone(),
                index,
                access,
                warp,
                other_access,
                other_warp,
            },
        };
        fault(e, thread)
    }

    /// Record the accesses `idx[j] + c` by `lanes[j]` of a writable global buffer `p`.
    fn track_global(
        &mut self,
        p: usize,
        idx: &[u64],
        c: usize,
        lanes: &[u32],
        access: RaceAccess,
    ) -> FResult<()> {
        let epoch = self.epoch;
        let Some(Some(track)) = self.global_track.get_mut(p) else {
            return Ok(());
        };
        for (j, &i) in idx.iter().enumerate() {
            let i = i as usize + c;
            let w = (lane_at(lanes, j) / WARP) as u8;
            let t = track.at(i);
            let r = match access {
                RaceAccess::Read => t.read(epoch, w),
                RaceAccess::Write => t.write(epoch, w),
                RaceAccess::Atomic => t.atomic(epoch, w),
            };
            if let Err(r) = r {
                return Err(self.race(Mem::Global(ParamId(p as u32)), i, access, lane_at(lanes, j), r));
            }
        }
        Ok(())
    }

    /// `out[j] = mem[idx[j] + c]` (indices already checked).
    fn load(
        &mut self,
        mem: Mem,
        idx: &[u64],
        c: usize,
        lanes: &[u32],
        out: &mut Vec<u64>,
        access: MemAccess,
    ) -> FResult<()> {
        match mem {
            Mem::Global(p) => {
                let pi = p.0 as usize;
                let Some(Some(buf)) = self.bufs.get(pi) else {
                    return Err(self.no_mem(mem, lanes));
                };
                gather_global(buf, idx, c, out);
                self.buf_loaded[pi] += idx.len() as u64 * buf.elem().size_bytes() as u64;
                self.track_global(pi, idx, c, lanes, RaceAccess::Read)?;
            }
            Mem::Shared(s) => {
                let si = s.0 as usize;
                let (gen, epoch, races) = (self.gen, self.epoch, self.races);
                let Some(sm) = self.shared.get_mut(si) else {
                    return Err(self.no_mem(mem, lanes));
                };
                let copies = self.copies_in_flight > 0;
                let mut bad = None;
                for (j, &i) in idx.iter().enumerate() {
                    let i = i as usize + c;
                    if copies && sm.inflight[i] > 0 {
                        bad = Some((j, i, SharedBad::InFlight));
                        break;
                    }
                    if sm.gen[i] != gen {
                        bad = Some((j, i, SharedBad::Uninit));
                        break;
                    }
                    if races {
                        if let Err(r) = sm.track[i].read(epoch, (lane_at(lanes, j) / WARP) as u8) {
                            bad = Some((j, i, SharedBad::Race(r)));
                            break;
                        }
                    }
                    out.push(sm.data[i]);
                }
                if let Some((j, i, b)) = bad {
                    return Err(self.shared_fault(mem, i, access, RaceAccess::Read, lane_at(lanes, j), b));
                }
                self.stats.shared_bytes_loaded +=
                    idx.len() as u64 * self.k.shared[si].elem.size_bytes() as u64;
            }
        }
        Ok(())
    }

    /// `mem[idx[j] + c] = vals[j]` in thread order (indices already checked).
    fn store(&mut self, mem: Mem, idx: &[u64], c: usize, lanes: &[u32], vals: &[u64]) -> FResult<()> {
        match mem {
            Mem::Global(p) => {
                let pi = p.0 as usize;
                let Some(Some(buf)) = self.bufs.get_mut(pi) else {
                    return Err(self.no_mem(mem, lanes));
                };
                scatter_global(buf, idx, c, vals);
                self.buf_stored[pi] += idx.len() as u64 * buf.elem().size_bytes() as u64;
                self.track_global(pi, idx, c, lanes, RaceAccess::Write)?;
            }
            Mem::Shared(s) => {
                let si = s.0 as usize;
                let (gen, epoch, races) = (self.gen, self.epoch, self.races);
                let Some(sm) = self.shared.get_mut(si) else {
                    return Err(self.no_mem(mem, lanes));
                };
                let copies = self.copies_in_flight > 0;
                let mut bad = None;
                for (j, (&i, &x)) in idx.iter().zip(vals).enumerate() {
                    let i = i as usize + c;
                    if copies && sm.inflight[i] > 0 {
                        bad = Some((j, i, SharedBad::InFlight));
                        break;
                    }
                    if races {
                        if let Err(r) = sm.track[i].write(epoch, (lane_at(lanes, j) / WARP) as u8) {
                            bad = Some((j, i, SharedBad::Race(r)));
                            break;
                        }
                    }
                    sm.data[i] = x;
                    sm.gen[i] = gen;
                }
                if let Some((j, i, b)) = bad {
                    let access = MemAccess::Store;
                    return Err(self.shared_fault(mem, i, access, RaceAccess::Write, lane_at(lanes, j), b));
                }
                self.stats.shared_bytes_stored +=
                    idx.len() as u64 * self.k.shared[si].elem.size_bytes() as u64;
            }
        }
        Ok(())
    }

    /// Atomic read-modify-write, lane by lane in thread order; `old` receives the old values.
    fn atomic(
        &mut self,
        op: AtomicOp,
        mem: Mem,
        idx: &[u64],
        lanes: &[u32],
        vals: &[u64],
        old: &mut Vec<u64>,
    ) -> FResult<()> {
        let elem = self.k.mem_elem(mem).ok_or_else(|| self.no_mem(mem, lanes))?;
        match mem {
            Mem::Global(p) => {
                let pi = p.0 as usize;
                let Some(Some(buf)) = self.bufs.get_mut(pi) else {
                    return Err(self.no_mem(mem, lanes));
                };
                for (&i, &v) in idx.iter().zip(vals) {
                    let o = global_get(buf, i as usize);
                    global_set(buf, i as usize, atomic_apply(op, elem, o, v));
                    old.push(o);
                }
                let bytes = idx.len() as u64 * elem.size_bytes() as u64;
                self.buf_loaded[pi] += bytes;
                self.buf_stored[pi] += bytes;
                self.track_global(pi, idx, 0, lanes, RaceAccess::Atomic)?;
            }
            Mem::Shared(s) => {
                let si = s.0 as usize;
                let (gen, epoch, races) = (self.gen, self.epoch, self.races);
                let Some(sm) = self.shared.get_mut(si) else {
                    return Err(self.no_mem(mem, lanes));
                };
                let copies = self.copies_in_flight > 0;
                let mut bad = None;
                for (j, (&i, &v)) in idx.iter().zip(vals).enumerate() {
                    let i = i as usize;
                    if copies && sm.inflight[i] > 0 {
                        bad = Some((j, i, SharedBad::InFlight));
                        break;
                    }
                    if sm.gen[i] != gen {
                        bad = Some((j, i, SharedBad::Uninit));
                        break;
                    }
                    if races {
                        if let Err(r) = sm.track[i].atomic(epoch, (lane_at(lanes, j) / WARP) as u8) {
                            bad = Some((j, i, SharedBad::Race(r)));
                            break;
                        }
                    }
                    let o = sm.data[i];
                    sm.data[i] = atomic_apply(op, elem, o, v);
                    old.push(o);
                }
                if let Some((j, i, b)) = bad {
                    let (access, t) = (MemAccess::Atomic, lane_at(lanes, j));
                    return Err(self.shared_fault(mem, i, access, RaceAccess::Atomic, t, b));
                }
                let bytes = idx.len() as u64 * elem.size_bytes() as u64;
                self.stats.shared_bytes_loaded += bytes;
                self.stats.shared_bytes_stored += bytes;
            }
        }
        Ok(())
    }
}

/// Keep the lanes whose column index `j` satisfies `keep(j)`, in order.
#[inline]
fn retain_lanes(lanes: &mut Vec<u32>, keep: impl Fn(usize) -> bool) {
    let mut w = 0;
    for j in 0..lanes.len() {
        if keep(j) {
            lanes[w] = lanes[j];
            w += 1;
        }
    }
    lanes.truncate(w);
}

/// Every warp with an active lane must have all 32 active. On success, `lanes` is a sequence
/// of whole warps, so `chunks_exact(32)` of a column walks warp by warp.
fn check_full_warps(lanes: &[u32], op: &'static str) -> FResult<()> {
    let mut j = 0;
    while j < lanes.len() {
        let w = lanes[j] / WARP;
        let mut mask = 0u32;
        while j < lanes.len() && lanes[j] / WARP == w {
            mask |= 1 << (lanes[j] % WARP);
            j += 1;
        }
        if mask != u32::MAX {
            return Err(fault(
                InterpError::PartialWarp {
                    loc: Box::default(),
                    op,
                    warp: w,
                    mask,
                },
                w * WARP + (!mask).trailing_zeros(),
            ));
        }
    }
    Ok(())
}

fn atomic_apply(op: AtomicOp, ty: Scalar, old: u64, v: u64) -> u64 {
    match op {
        AtomicOp::Exch => v,
        AtomicOp::Add => match ty {
            Scalar::F32 => raw_f32(f32_of(old) + f32_of(v)),
            Scalar::I32 | Scalar::U32 => (old as u32).wrapping_add(v as u32) as u64,
            _ => old.wrapping_add(v),
        },
        AtomicOp::Min => {
            if ops::compare_one(CmpOp::Lt, ty, v, old) {
                v
            } else {
                old
            }
        }
        AtomicOp::Max => {
            if ops::compare_one(CmpOp::Gt, ty, v, old) {
                v
            } else {
                old
            }
        }
    }
}

fn gather_global(buf: &HostBuffer, idx: &[u64], c: usize, out: &mut Vec<u64>) {
    macro_rules! g {
        ($v:expr, $conv:expr) => {
            out.extend(idx.iter().map(|&i| $conv($v[i as usize + c])))
        };
    }
    match buf {
        HostBuffer::F16(v) => g!(v, |x: f16| x.to_bits() as u64),
        HostBuffer::BF16(v) => g!(v, |x: bf16| x.to_bits() as u64),
        HostBuffer::F32(v) => g!(v, |x: f32| x.to_bits() as u64),
        HostBuffer::I32(v) => g!(v, |x: i32| x as u32 as u64),
        HostBuffer::U32(v) => g!(v, |x: u32| x as u64),
        HostBuffer::I64(v) => g!(v, |x: i64| x as u64),
        HostBuffer::U64(v) => g!(v, |x: u64| x),
    }
}

fn scatter_global(buf: &mut HostBuffer, idx: &[u64], c: usize, vals: &[u64]) {
    macro_rules! s {
        ($v:expr, $conv:expr) => {
            for (&i, &x) in idx.iter().zip(vals) {
                $v[i as usize + c] = $conv(x);
            }
        };
    }
    match buf {
        HostBuffer::F16(v) => s!(v, |x: u64| f16::from_bits(x as u16)),
        HostBuffer::BF16(v) => s!(v, |x: u64| bf16::from_bits(x as u16)),
        HostBuffer::F32(v) => s!(v, |x: u64| f32::from_bits(x as u32)),
        HostBuffer::I32(v) => s!(v, |x: u64| x as u32 as i32),
        HostBuffer::U32(v) => s!(v, |x: u64| x as u32),
        HostBuffer::I64(v) => s!(v, |x: u64| x as i64),
        HostBuffer::U64(v) => s!(v, |x: u64| x),
    }
}

fn global_get(buf: &HostBuffer, i: usize) -> u64 {
    let mut out = Vec::with_capacity(1);
    gather_global(buf, &[i as u64], 0, &mut out);
    out[0]
}

fn global_set(buf: &mut HostBuffer, i: usize, r: u64) {
    scatter_global(buf, &[i as u64], 0, &[r]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn track_rules() {
        let mut t = Track::default();
        // Same warp: anything goes.
        t.write(1, 0).unwrap();
        t.read(1, 0).unwrap();
        t.write(1, 0).unwrap();
        // Other warp reads what warp 0 wrote.
        assert_eq!(t.read(1, 1), Err((RaceAccess::Write, 0)));
        // New epoch: fine, and many readers are fine.
        t.read(2, 1).unwrap();
        t.read(2, 2).unwrap();
        t.read(2, 1).unwrap();
        // A write by a reader races with the other reader.
        assert_eq!(t.write(2, 1), Err((RaceAccess::Read, 2)));
        assert_eq!(t.write(2, 2), Err((RaceAccess::Read, 1)));
        // Atomics from several warps are fine together, not with plain accesses.
        let mut t = Track::default();
        t.atomic(3, 0).unwrap();
        t.atomic(3, 1).unwrap();
        assert_eq!(t.read(3, 0), Err((RaceAccess::Atomic, 1)));
        assert_eq!(t.write(3, 1), Err((RaceAccess::Atomic, 0)));
        t.read(4, 5).unwrap();
        assert_eq!(t.atomic(4, 6), Err((RaceAccess::Read, 5)));
    }
}
