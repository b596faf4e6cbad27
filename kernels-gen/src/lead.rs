//! `lead_spin`: a kernel that only keeps the GPU busy for a while, a chain of dependent integer
//! hashes on one thread. The timing harness launches it just before a timed region's start event,
//! so the event fires when the GPU is done with it and by then every launch of the region is
//! queued: the region's time is the GPU's, not the host's launch latency as well (with an idle
//! GPU, the start event fires at once and the first kernel only starts when its launch arrives).

use crate::fill::{fmix32, fmix32_dsl};
use crate::KernelGenError;
use entkv_dsl::*;

/// Hash rounds that keep an H100/H200 busy for about 0.1 ms (each round is a chain of nine
/// dependent integer operations, ~40 cycles; estimated from the PTX, not timed), several times
/// what the host takes to queue a decode step's launches.
pub const LEAD_ROUNDS: i32 = 5_000;

/// `lead_spin(out: u32[1], rounds: i32, seed: u32)`, one thread: `out[0]` = [`lead_value`].
pub fn lead_kernel() -> Result<Kernel, KernelGenError> {
    let mut k = KernelBuilder::new("lead_spin", 32);
    let out = k.buffer("out", Scalar::U32, Access::Write);
    let rounds = k.scalar_param("rounds", Scalar::I32);
    let seed = k.scalar_param("seed", Scalar::U32);
    k.if_(k.thread_idx().eq_(0u32), |k| {
        let h = k.let_("h", seed);
        k.for_("i", 0i32, rounds, 1i32, |k, i| {
            let next = fmix32_dsl(k, h ^ i.u32());
            k.assign(h, next);
        });
        k.store(out, 0i32, h);
    });
    Ok(k.finish()?)
}

/// What [`lead_kernel`] writes (the store keeps the chain from being optimised away).
pub fn lead_value(rounds: i32, seed: u32) -> u32 {
    (0..rounds.max(0)).fold(seed, |h, i| fmix32(h ^ i as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_dsl::interp::{run, Arg, HostBuffer, LaunchDims};

    #[test]
    fn kernel_writes_the_hash_chain() {
        let k = lead_kernel().unwrap();
        for (rounds, seed) in [(0, 7u32), (1, 7), (257, 0xdead_beef)] {
            let mut out = HostBuffer::filled_f64(Scalar::U32, 1, 0.0);
            let mut args = [Arg::Buf(&mut out), Arg::scalar(rounds), Arg::scalar(seed)];
            run(&k, LaunchDims::linear(1, 32), &mut args).unwrap();
            assert_eq!(
                out.to_f64_vec()[0] as u32,
                lead_value(rounds, seed),
                "{rounds} rounds"
            );
        }
        assert_ne!(lead_value(1, 7), 7);
    }
}
