//! Checks of the page pruning's selection (`prune_mark` + `select_pruned`) on synthetic bounds:
//! rows several slices long, a partly filled last slice, rows of one page, special values. The
//! whole certified pipeline's checks (`crate::certified_checks`) cover the bounds themselves.

use crate::pipelines::certified_prune_pipeline_with;
use crate::program::{Program, POISON_INT};
use crate::prune::{check_pruned_row, host_tau_low};
use crate::suite::{KernelCheck, Outcome, SuiteError};
use crate::topk::reference::{pages_of, selection_shape};
use entkv_abi::{BoxScoreTile, DType, DecodeSpec, PagedShape, PagedSpec, SelectTopkTile};
use entkv_dsl::interp::HostBuffer;
use rand::{Rng, SeedableRng};

/// How a row's upper bounds sit against its `τ_low`.
#[derive(Clone, Copy, Debug)]
pub enum BoundPattern {
    /// Uniform around `τ_low`: about half the pages kept.
    Mixed,
    /// Every page far above `τ_low`: all kept.
    AllKept,
    /// Every page far below: only the last page is selected.
    NoneKept,
    /// NaN (kept), ±∞, ±0 and ±f32::MAX among the bounds and the per-warp maxima.
    Special,
}

pub struct PruneCheck {
    pub label: &'static str,
    pub spec: PagedSpec,
    pub kv_heads: u32,
    pub seq_lens: Vec<i32>,
    pub pattern: BoundPattern,
    pub tile: SelectTopkTile,
    pub seed: u64,
}

struct Bounds {
    ub: Vec<f32>,
    lb_max: Vec<f32>,
}

impl PruneCheck {
    fn pages(&self, len: i32) -> usize {
        pages_of(&self.spec, len)
    }

    fn shape(&self) -> PagedShape {
        selection_shape(&self.spec, self.kv_heads, &self.seq_lens)
    }

    fn box_tile(&self) -> BoxScoreTile {
        BoxScoreTile::default_for(&self.spec)
    }

    /// `page_ub` (NaN past each row's full pages: never read) and `page_lb_max`, seeded.
    fn bounds(&self, lb_slots: usize) -> Bounds {
        let shape = self.shape();
        let mp = shape.max_pages as usize;
        let rows = (shape.batch * shape.kv_heads) as usize;
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
        let special = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN,
        ];
        let mut lb_max = vec![f32::NEG_INFINITY; rows * lb_slots];
        let mut ub = vec![f32::NAN; rows * mp];
        for (b, &len) in self.seq_lens.iter().enumerate() {
            let n = self.pages(len).saturating_sub(1);
            for kvh in 0..self.kv_heads as usize {
                let r = b * self.kv_heads as usize + kvh;
                // Only the slots of warps that had pages hold a maximum.
                let live = lb_slots.min(n.div_ceil(32).max(1));
                for v in &mut lb_max[r * lb_slots..][..live] {
                    *v = match self.pattern {
                        // NaN or −∞ (a maximum ignores both).
                        BoundPattern::Special if rng.gen_bool(0.2) => special[2 * rng.gen_range(0..2)],
                        _ => rng.gen_range(-3.0f32..1.0),
                    };
                }
                // One row with a +∞ maximum: τ_low is NaN and every page is kept.
                if matches!(self.pattern, BoundPattern::Special) && r == 1 && n > 0 {
                    lb_max[r * lb_slots] = f32::INFINITY;
                }
                if n == 0 {
                    // A sequence of one page has no bounds: every slot is −∞.
                    lb_max[r * lb_slots..][..lb_slots].fill(f32::NEG_INFINITY);
                }
                for v in &mut ub[r * mp..][..n] {
                    *v = match self.pattern {
                        BoundPattern::Mixed => rng.gen_range(-2.0f32..3.0),
                        BoundPattern::AllKept => rng.gen_range(10.0f32..20.0),
                        BoundPattern::NoneKept => rng.gen_range(-20.0f32..-10.0),
                        BoundPattern::Special => {
                            if rng.gen_bool(0.3) {
                                special[rng.gen_range(0..special.len())]
                            } else {
                                rng.gen_range(-2.0f32..3.0)
                            }
                        }
                    };
                }
            }
        }
        Bounds { ub, lb_max }
    }

    fn lb_slots(&self) -> Result<usize, SuiteError> {
        let p = self.pipeline()?;
        Ok(p.buffers
            .iter()
            .find(|b| b.name == "page_lb_max")
            .map(|b| b.len as usize)
            .unwrap_or(0)
            / (self.seq_lens.len() * self.kv_heads as usize))
    }

    fn pipeline(&self) -> Result<crate::pipelines::Pipeline, SuiteError> {
        Ok(certified_prune_pipeline_with(
            &self.spec,
            &self.shape(),
            &self.box_tile(),
            &self.tile,
        )?)
    }
}

impl KernelCheck for PruneCheck {
    fn name(&self) -> String {
        format!(
            "select_pruned/{}/{}/kv{}/lens{:?}/{:?}/{}",
            self.label,
            self.spec.sketch_tag(),
            self.kv_heads,
            self.seq_lens,
            self.pattern,
            self.tile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let mut pipeline = self.pipeline()?;
        // The bounds are given: drop `page_bounds`, keep the selection's two calls.
        pipeline.calls.remove(0);
        let bounds = self.bounds(self.lb_slots()?);
        let mut p = Program::new();
        pipeline.add_to(&mut p);
        p.buffer("page_ub", HostBuffer::F32(bounds.ub))
            .buffer("page_lb_max", HostBuffer::F32(bounds.lb_max))
            .buffer("seq_lens", HostBuffer::I32(self.seq_lens.clone()));
        Ok(p)
    }

    /// The selection is ascending, ends with the last page, and holds exactly the full pages
    /// whose bound is not `≤ τ_low` (τ_low recomputed in f32; bounds within 10⁻⁶ of it are not
    /// judged, as the GPU may fuse its two operations). A row that kept more than the selected
    /// walk takes (`entkv_abi::pipeline::SELECTED_WALK_SHARE`) has the same count and an
    /// unwritten list (the poison left before its last entry).
    fn verify(&self, ran: &Program) -> Outcome {
        let r = (|| -> Result<String, String> {
            let lb_slots = self.lb_slots().map_err(|e| e.to_string())?;
            let b = self.bounds(lb_slots);
            let mp = self.shape().max_pages as usize;
            let sel = ran.get("sel_pages").to_f64_vec();
            let count = ran.get("sel_count").to_f64_vec();
            let (mut full, mut kept) = (0usize, 0usize);
            for (bi, &len) in self.seq_lens.iter().enumerate() {
                let pages = self.pages(len);
                for kvh in 0..self.kv_heads as usize {
                    let r = bi * self.kv_heads as usize + kvh;
                    let best = b.lb_max[r * lb_slots..][..lb_slots]
                        .iter()
                        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    let tau_low = host_tau_low(&self.spec, best);
                    let row = check_pruned_row(
                        pages,
                        count[r],
                        &sel[r * mp..][..mp],
                        &b.ub[r * mp..][..mp],
                        tau_low,
                        Some(POISON_INT),
                    )
                    .map_err(|e| format!("b {bi} kv head {kvh}: {e}"))?;
                    full += pages - 1;
                    kept += row.kept_full;
                }
            }
            Ok(format!("kept {kept} of {full} full pages"))
        })();
        match r {
            Ok(d) => Outcome::new(true, d),
            Err(e) => Outcome::new(false, e),
        }
    }
}

/// Rows of one page, of one slice exactly, a partly filled last slice and several slices
/// (slices of `threads × PRUNE_PAGES_PER_LANE` pages: 4096 at 256 threads), grids of one slice
/// (where `prune_mark` writes the selection) and of several.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 8).unwrap();
    let t = |threads, items| SelectTopkTile {
        threads,
        items_per_thread: items,
    };
    let case = |label, lens: Vec<i32>, pattern, tile, seed| {
        Box::new(PruneCheck {
            label,
            spec,
            kv_heads: 2,
            seq_lens: lens,
            pattern,
            tile,
            seed,
        }) as Box<dyn KernelCheck>
    };
    vec![
        case(
            "mixed",
            vec![1, 17, 16 * 4097, 16 * 9001 + 5, 16 * 300 + 3],
            BoundPattern::Mixed,
            t(256, 1),
            1,
        ),
        case(
            "mixed",
            vec![16 * 8193 + 1, 16 * 20000, 40],
            BoundPattern::Mixed,
            t(512, 3),
            2,
        ),
        case(
            "all_kept",
            vec![16 * 12000 + 7, 5],
            BoundPattern::AllKept,
            t(256, 2),
            3,
        ),
        case(
            "all_kept_one_slice",
            vec![16 * 3000 + 1, 33, 5],
            BoundPattern::AllKept,
            t(256, 2),
            9,
        ),
        case(
            "none_kept",
            vec![16 * 9000, 16 * 3],
            BoundPattern::NoneKept,
            t(256, 1),
            4,
        ),
        case(
            "special",
            vec![16 * 15000 + 1, 33, 16 * 5200],
            BoundPattern::Special,
            t(256, 1),
            5,
        ),
        case(
            "special_one_slice",
            vec![16 * 3000 + 1, 33, 16 * 2000],
            BoundPattern::Special,
            t(256, 2),
            8,
        ),
        case(
            "one_slice",
            vec![16 * 3000 + 3, 1, 17, 16 * 4096 + 1],
            BoundPattern::Mixed,
            t(256, 3),
            7,
        ),
        case(
            "default_tile",
            vec![16 * 20000 + 9, 1, 16 * 8193],
            BoundPattern::Mixed,
            SelectTopkTile::default_for(&spec),
            6,
        ),
    ]
}
