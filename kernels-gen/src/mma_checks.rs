//! The integer tensor-core `mma` ([`KernelBuilder::mma_i8`]) against an exact host product,
//! in the interpreter and on the GPU (`entkv gpu-check` runs the suite): the check a kernel's
//! byte-fragment layout can rest on. Two warps each multiply their own 16×32 A by a 32×8 B and
//! add C; the kernel packs the fragments from row-major bytes with the PTX ISA's formulas written
//! out here (independently of `entkv_dsl::mma::int8`), so a wrong layout in the interpreter or
//! in codegen fails against the host's plain matrix product.

use crate::program::{ArgRef, Program};
use crate::suite::{KernelCheck, Outcome, SuiteError};
use entkv_abi::LaunchGeometry;
use entkv_dsl::interp::HostBuffer;
use entkv_dsl::*;
use rand::{Rng, SeedableRng};
use std::rc::Rc;

const WARPS: u32 = 2;
const A_LEN: u32 = 16 * 32;
const B_LEN: u32 = 32 * 8;
const C_LEN: u32 = 16 * 8;

/// One sign combination of the byte operands.
struct ImmaCheck {
    a_signed: bool,
    b_signed: bool,
    seed: u64,
}

pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    [(true, false), (false, true), (true, true), (false, false)]
        .into_iter()
        .enumerate()
        .map(|(i, (a_signed, b_signed))| {
            Box::new(ImmaCheck {
                a_signed,
                b_signed,
                seed: 0x1a3a + i as u64,
            }) as Box<dyn KernelCheck>
        })
        .collect()
}

fn sign(signed: bool) -> &'static str {
    if signed {
        "s8"
    } else {
        "u8"
    }
}

/// `D = A·B + C` per warp; A, B are row-major bytes (one a U32 element), C and D row-major i32.
fn kernel(a_signed: bool, b_signed: bool) -> Kernel {
    let mut k = KernelBuilder::new(
        format!("imma_tile_{}_{}", sign(a_signed), sign(b_signed)),
        WARPS * WARP,
    );
    let a = k.buffer("a", Scalar::U32, Access::Read);
    let b = k.buffer("b", Scalar::U32, Access::Read);
    let c = k.buffer("c", Scalar::I32, Access::Read);
    let d = k.buffer("d", Scalar::I32, Access::Write);
    let w = k.let_("w", k.warp());
    let g = k.let_("g", k.lane() / 4u32);
    let t = k.let_("t", k.lane() % 4u32);
    // A word `r` of a lane: row g (+8 for odd r), columns 4t..4t+3 (+16 for r ≥ 2), byte j in
    // bits 8j..8j+7. B word `r`: rows 4t..4t+3 (+16 for r = 1) of column g.
    let pack = |bytes: [Expr; 4]| {
        let [b0, b1, b2, b3] = bytes;
        b0 | (b1 << 8u32) | (b2 << 16u32) | (b3 << 24u32)
    };
    let av: Vec<Expr> = (0..4u32)
        .map(|r| {
            let row = g + 8 * (r % 2);
            pack(
                [0u32, 1, 2, 3]
                    .map(|j| a.at(w * A_LEN + row.clone() * 32u32 + t * 4u32 + (j + 16 * (r / 2)))),
            )
        })
        .collect();
    let bv: Vec<Expr> = (0..2u32)
        .map(|r| pack([0u32, 1, 2, 3].map(|j| b.at(w * B_LEN + (t * 4u32 + (j + 16 * r)) * 8u32 + g))))
        .collect();
    let cidx = |i: u32| w * C_LEN + (g + 8 * (i / 2)) * 8u32 + t * 2u32 + i % 2;
    let cv: Vec<Expr> = (0..4u32).map(|i| c.at(cidx(i))).collect();
    let out = k.mma_i8(&av, a_signed, &bv, b_signed, &cv);
    for (i, o) in out.iter().enumerate() {
        k.store(d, cidx(i as u32), *o);
    }
    k.finish().expect("the integer mma check kernel is valid")
}

impl ImmaCheck {
    /// Bytes of A and B (0..=255, read as signed where the operand is), and C.
    fn inputs(&self) -> (Vec<u32>, Vec<u32>, Vec<i32>) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let mut bytes = |n: u32| -> Vec<u32> { (0..WARPS * n).map(|_| rng.gen_range(0..=255u32)).collect() };
        let (a, b) = (bytes(A_LEN), bytes(B_LEN));
        // Sums stay far inside i32: |A·B| ≤ 32·128·255 and |C| < 2²⁴.
        let c = (0..WARPS * C_LEN)
            .map(|_| rng.gen_range(-(1 << 24)..(1 << 24)))
            .collect();
        (a, b, c)
    }

    fn reference(&self) -> Vec<i64> {
        let (a, b, c) = self.inputs();
        let val = |x: u32, signed: bool| if signed { x as u8 as i8 as i64 } else { x as i64 };
        let mut d = Vec::with_capacity(c.len());
        for w in 0..WARPS as usize {
            for m in 0..16 {
                for n in 0..8 {
                    let dot: i64 = (0..32)
                        .map(|j| {
                            val(a[w * 512 + m * 32 + j], self.a_signed)
                                * val(b[w * 256 + j * 8 + n], self.b_signed)
                        })
                        .sum();
                    d.push(c[w * 128 + m * 8 + n] as i64 + dot);
                }
            }
        }
        d
    }
}

impl KernelCheck for ImmaCheck {
    fn name(&self) -> String {
        format!(
            "mma m16n8k32 {}·{} (integer tensor cores, {WARPS} warps)",
            sign(self.a_signed),
            sign(self.b_signed)
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let (a, b, c) = self.inputs();
        let mut p = Program::new();
        p.buffer("a", HostBuffer::U32(a))
            .buffer("b", HostBuffer::U32(b))
            .buffer("c", HostBuffer::I32(c))
            .poisoned("d", Scalar::I32, (WARPS * C_LEN) as usize);
        p.call(
            Rc::new(kernel(self.a_signed, self.b_signed)),
            LaunchGeometry::linear(1, WARPS * WARP),
            ["a", "b", "c", "d"].map(ArgRef::buf).to_vec(),
        );
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let HostBuffer::I32(got) = ran.get("d") else {
            return Outcome::new(false, "d is not an i32 buffer");
        };
        let want = self.reference();
        let wrong: Vec<usize> = (0..want.len()).filter(|&i| got[i] as i64 != want[i]).collect();
        match wrong.first() {
            None => Outcome::new(true, format!("{} elements exact", want.len())),
            Some(&i) => Outcome::new(
                false,
                format!(
                    "{} of {} elements differ; first D[{}] = {} want {}",
                    wrong.len(),
                    want.len(),
                    i,
                    got[i],
                    want[i]
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::run_interp;

    /// The interpreter's integer mma matches the host product at every sign combination, and a
    /// B whose columns are permuted (a wrong fragment layout) fails the check.
    #[test]
    fn integer_mma_matches_the_host_product() {
        for c in checks() {
            let o = run_interp(c.as_ref()).unwrap();
            assert!(o.passed, "{}: {}", c.name(), o.detail);
        }
        let check = ImmaCheck {
            a_signed: true,
            b_signed: false,
            seed: 7,
        };
        let mut p = check.program().unwrap();
        let (_, mut b, _) = check.inputs();
        // Swap B's columns 0 and 1 in every row: the product's columns 0 and 1 swap.
        for row in b.chunks_mut(8) {
            row.swap(0, 1);
        }
        p.buffer("b", HostBuffer::U32(b));
        p.run_interp().unwrap();
        let o = check.verify(&p);
        assert!(!o.passed, "{}", o.detail);
    }
}
