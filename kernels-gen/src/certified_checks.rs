//! Suite checks of the certified-exact decode: its output must equal full-cache entmax (the
//! float64 reference over *every* token) on every input, adversarial ones included, while the
//! number of kept tokens is reported.

use crate::certified;
use crate::check::{compare, DenseOutputs};
use crate::decode_checks::add_paged_inputs;
use crate::paged_data::{paged_reference, KeyData, PagedCase};
use crate::pipelines::{
    certified_bounds_pipeline, certified_prune_pipeline_with, decode_pipeline, meta_build_pipeline,
    DecodeKind,
};
use crate::program::Program;
use crate::suite::{KernelCheck, Outcome, SuiteError};
use entkv_abi::{full_pages, BoxScoreTile, DType, DecodeSpec, DenseTile, PagedSpec, SelectTopkTile};
use entkv_dsl::interp::HostBuffer;

pub struct CertifiedCheck {
    pub case: PagedCase,
    pub tile: DenseTile,
    pub sm_count: u32,
    /// Prune pages first (`entkv_abi::pipeline::certified_prune_calls`) and decode the rest
    /// (`DecodeKind::CertifiedSelected`); the output must still equal full-cache entmax.
    pub pruned: bool,
}

impl KernelCheck for CertifiedCheck {
    fn name(&self) -> String {
        let s = &self.case.spec;
        format!(
            "certified{} α={} d={} g={} P={} s{} {}{} kv{} lens={:?} {:?} {}",
            if self.pruned { " pruned" } else { "" },
            s.decode.alpha,
            s.decode.head_dim,
            s.decode.group,
            s.page_size,
            s.sketch_bits,
            s.decode.kv_dtype,
            if s.alibi { " alibi" } else { "" },
            self.case.kv_heads,
            self.case.seq_lens,
            self.case.data,
            self.tile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let spec = &self.case.spec;
        let x = self.case.inputs();
        let max_tokens = x.shape.max_pages as u64 * spec.page_size as u64;
        let kind = if self.pruned {
            DecodeKind::CertifiedSelected
        } else {
            DecodeKind::Certified
        };
        let mut pipeline = decode_pipeline(kind, spec, &self.tile, &x.shape, max_tokens, self.sm_count)?;
        if self.pruned {
            // On the small assumed GPU the page bounds run one warp a CTA and one page a lane
            // group too, so that `page_bounds`' rounds (entkv_abi::PAGE_BOUNDS_ROUNDS) each hold
            // pages of the longer sequences.
            let box_tile = if self.sm_count == 1 {
                BoxScoreTile {
                    threads: 32,
                    pages_per_group: 1,
                }
            } else {
                BoxScoreTile::default_for(spec)
            };
            let sel_tile = SelectTopkTile::default_for(spec);
            pipeline = certified_prune_pipeline_with(spec, &x.shape, &box_tile, &sel_tile)?.then(pipeline);
        } else if certified::refines(spec) {
            // The pass's candidates hold exact scores; rerun it without rescoring (after the
            // finish has read them) so that `verify` sees, and checks, the sketch bounds.
            pipeline = pipeline.then(certified_bounds_pipeline(
                spec,
                &self.tile,
                &x.shape,
                max_tokens,
                self.sm_count,
            )?);
        }
        // Metadata for every full page, built by `page_meta_build` in the same program.
        let pages =
            full_pages(spec, &x.shape, &x.seq_lens, &x.block_table).map_err(crate::KernelGenError::from)?;
        let (meta, list) = meta_build_pipeline(spec, &x.shape, &pages)?;
        let mut p = Program::new();
        add_paged_inputs(&mut p, &x);
        p.buffer("meta_pages", HostBuffer::I32(list));
        meta.add_to(&mut p);
        pipeline.add_to(&mut p);
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let spec = &self.case.spec;
        let x = self.case.inputs();
        let full = paged_reference(spec, &x);
        let got = DenseOutputs::of_program(ran);
        let c = compare(&full, &got, None);
        let kept = ran.get("kept").to_f64_vec();
        let group = spec.decode.group as usize;
        let hq = x.shape.kv_heads as usize * group;
        let tokens: f64 = (0..kept.len()).map(|i| x.seq_lens[i / hq] as f64).sum();
        let kept_sum: f64 = kept.iter().sum();
        // Kept counts are between the support size and the sequence length.
        let kept_ok = kept.iter().enumerate().all(|(i, &kc)| {
            kc >= full.heads[i].support as f64 && kc <= x.seq_lens[i / hq] as f64 && kc.is_finite()
        });
        // Every candidate's upper bound must hold for its float64 score (a bound that is too
        // tight drops tokens only when they happen to matter; this catches it on any data).
        // Sketched tokens exactly: the bound's slack covers every f32 rounding, so it holds
        // against the float64 score of the same f16/bf16 inputs with no tolerance. Tokens of
        // the last page carry their f32 exact score, which may round below the float64 one, and
        // so does every candidate of a pass that rescores what clears its bound (4-bit
        // sketches, `certified::refines`): it appends only rescored tokens. So the plain run of
        // such a spec is followed by the pass without rescoring, whose bounds are checked here.
        let (ub, idx, count) = (
            ran.get("cand_ub").to_f64_vec(),
            ran.get("cand_idx").to_f64_vec(),
            ran.get("cand_count").to_f64_vec(),
        );
        let splits = count.len() / full.heads.len();
        let seg_len = ub.len() / count.len();
        let page = self.case.spec.page_size as usize;
        // A rescoring pass's candidates hold exact scores, except where the check reran it
        // without rescoring (`program`): the pruned runs.
        let refined = self.pruned && certified::refines(&self.case.spec);
        let mut bad_bounds = 0usize;
        for (seg, &n) in count.iter().enumerate() {
            // A count or index the pass did not write (the poison is −7) is a bad bound, not
            // an empty segment or token 0.
            if !(0.0..=seg_len as f64).contains(&n) {
                bad_bounds += 1;
                continue;
            }
            let head = seg / splits;
            let z = &full.heads[head].z;
            let sketched = (x.seq_lens[head / hq] as usize - 1) / page * page;
            for at in seg * seg_len..seg * seg_len + n as usize {
                if !(0.0..z.len() as f64).contains(&idx[at]) {
                    bad_bounds += 1;
                    continue;
                }
                let t = idx[at] as usize;
                let tol = if t < sketched && !refined {
                    0.0
                } else {
                    1e-5 * z[t].abs().max(1.0)
                };
                if ub[at].is_nan() || ub[at] < z[t] - tol {
                    bad_bounds += 1;
                }
            }
        }
        let pruning = if self.pruned {
            match self.page_bounds_hold(ran, &x, &full.heads) {
                Ok(s) => s,
                Err(e) => return Outcome::new(false, e),
            }
        } else {
            String::new()
        };
        Outcome::new(
            c.passed && kept_ok && bad_bounds == 0,
            format!(
                "vs full cache: rel err {:.2e}, τ err {:.2e}, support ≤ {}, mismatches {}, non-finite {}; kept {:.2}% of tokens{}",
                c.max_rel_err,
                c.max_tau_err,
                c.max_support,
                c.support_mismatches,
                c.non_finite,
                100.0 * kept_sum / tokens,
                if kept_ok { "" } else { " (kept counts out of range)" }
            ) + &pruning
                + &if bad_bounds > 0 {
                format!(", {bad_bounds} candidates with ub < z")
            } else {
                String::new()
            },
        )
    }
}

impl CertifiedCheck {
    /// The pruned pipeline's upper page bounds hold for every token's float64 score (tolerance
    /// as for the candidates' bounds), and the row's largest lower bound (the maximum of
    /// `page_bounds`' per-warp maxima) for every token of some page: what makes `τ_low` a lower
    /// bound on τ. The selection is what `crate::prune::check_pruned_row` requires against
    /// `τ_low` recomputed here (a list, or for rows walked in full a count), and keeps every
    /// page holding a support token of any head of the group. Returns the share of full pages
    /// kept.
    fn page_bounds_hold(
        &self,
        ran: &Program,
        x: &crate::paged_data::PagedInputs,
        heads: &[crate::reference::HeadReference],
    ) -> Result<String, String> {
        let spec = &self.case.spec;
        let p = spec.page_size as usize;
        let group = spec.decode.group as usize;
        let kv_heads = x.shape.kv_heads as usize;
        let mp = x.shape.max_pages as usize;
        let ub = ran.get("page_ub").to_f64_vec();
        let lb_max = ran.get("page_lb_max").to_f64_vec();
        let lb_slots = lb_max.len() / (x.seq_lens.len() * kv_heads);
        let (sel, count) = (
            ran.get("sel_pages").to_f64_vec(),
            ran.get("sel_count").to_f64_vec(),
        );
        let (mut full_pages, mut kept_full) = (0usize, 0usize);
        for (b, &len) in x.seq_lens.iter().enumerate() {
            let len = len as usize;
            let pages = len.div_ceil(p);
            for kvh in 0..kv_heads {
                let row = (b * kv_heads + kvh) * mp;
                // The row's largest lower bound: some page's tokens must all score at least it,
                // for every head of the group.
                let slots = &lb_max[(b * kv_heads + kvh) * lb_slots..][..lb_slots];
                // Every warp writes its slot of every head of its block (−∞ without pages); a
                // slot left poisoned (NaN) would be ignored by τ_low and prune less.
                if let Some(s) = slots.iter().position(|v| v.is_nan()) {
                    return Err(format!(
                        "b {b} kv head {kvh}: lower-bound slot {s} was never written"
                    ));
                }
                let best = slots.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v as f32));
                let floor_of = |j: usize| -> f64 {
                    (0..group)
                        .flat_map(|g| {
                            heads[b * kv_heads * group + kvh * group + g].z[j * p..(j + 1) * p]
                                .iter()
                                .copied()
                        })
                        .fold(f64::INFINITY, f64::min)
                };
                let best_floor = (0..pages - 1).map(floor_of).fold(f64::NEG_INFINITY, f64::max);
                let wrong = if pages == 1 {
                    best != f32::NEG_INFINITY // no full page: nothing to bound τ with
                } else {
                    best.is_nan() || (best as f64) > best_floor + 1e-5 * best_floor.abs().max(1.0)
                };
                if wrong {
                    return Err(format!(
                        "b {b} kv head {kvh}: largest page lower bound {best} exceeds every page's \
                         smallest score (at most {best_floor})"
                    ));
                }
                let tau_low = crate::prune::host_tau_low(spec, best);
                let ub_row: Vec<f32> = ub[row..row + pages].iter().map(|&u| u as f32).collect();
                let pruned = crate::prune::check_pruned_row(
                    pages,
                    count[b * kv_heads + kvh],
                    &sel[row..row + mp],
                    &ub_row,
                    tau_low,
                    None,
                )
                .map_err(|e| format!("b {b} kv head {kvh}: {e}"))?;
                full_pages += pages - 1;
                kept_full += pruned.kept_full;
                for j in 0..pages - 1 {
                    let mut needed = false;
                    for g in 0..group {
                        let h = &heads[b * kv_heads * group + kvh * group + g];
                        for t in j * p..(j + 1) * p {
                            let z = h.z[t];
                            let tol = 1e-5 * z.abs().max(1.0);
                            if ub[row + j].is_nan() || ub[row + j] < z - tol {
                                return Err(format!(
                                    "b {b} kv head {kvh} page {j}: upper bound {} misses token {t}'s z = {z}",
                                    ub[row + j]
                                ));
                            }
                            needed |= z > h.tau;
                        }
                    }
                    if needed && !pruned.keeps[j] {
                        return Err(format!(
                            "b {b} kv head {kvh}: page {j} holds support but was pruned"
                        ));
                    }
                }
            }
        }
        Ok(format!(
            "; pruning kept {:.1}% of {full_pages} full pages",
            100.0 * kept_full as f64 / full_pages.max(1) as f64
        ))
    }
}

/// Certified-exact checks: each axis value, adversarial data, odd lengths.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    let mk = |alpha: f64,
              d: u32,
              g: u32,
              p: u32,
              bits: u32,
              dtype: DType,
              alibi: bool,
              lens: Vec<u32>,
              data: KeyData| {
        let decode = DecodeSpec::new(alpha, d, g, dtype).expect("spec");
        PagedCase {
            spec: PagedSpec::new(decode, p, alibi, bits).expect("paged spec"),
            kv_heads: 2,
            seq_lens: lens,
            seed: 101 + d as u64 + bits as u64,
            data,
            spare_pages: 2,
        }
    };
    let cases = vec![
        mk(
            1.5,
            32,
            1,
            16,
            4,
            DType::F16,
            false,
            vec![1, 16, 17, 2000],
            KeyData::Normal,
        ),
        mk(1.5, 32, 1, 16, 8, DType::F16, false, vec![1500], KeyData::Normal),
        mk(
            2.0,
            32,
            3,
            16,
            4,
            DType::F16,
            true,
            vec![300, 1000],
            KeyData::Normal,
        ),
        mk(
            4.0 / 3.0,
            64,
            2,
            32,
            4,
            DType::BF16,
            false,
            vec![800],
            KeyData::Peaked,
        ),
        mk(
            1.25,
            128,
            1,
            64,
            8,
            DType::BF16,
            true,
            vec![129, 640],
            KeyData::Normal,
        ),
        mk(1.5, 32, 4, 16, 4, DType::F16, false, vec![400], KeyData::Ties),
        mk(
            1.5,
            32,
            8,
            32,
            4,
            DType::BF16,
            false,
            vec![500, 33],
            KeyData::Dominant,
        ),
        mk(2.0, 32, 1, 16, 4, DType::F16, false, vec![700], KeyData::Extreme),
        mk(1.5, 32, 1, 16, 8, DType::BF16, false, vec![300], KeyData::Tiny),
        // Sketch errors aligned with q: the bounds are tested near their worst case.
        mk(
            1.5,
            32,
            1,
            16,
            8,
            DType::F16,
            false,
            vec![700, 45],
            KeyData::SketchWorst,
        ),
        mk(
            1.5,
            32,
            1,
            16,
            4,
            DType::F16,
            false,
            vec![700],
            KeyData::SketchWorst,
        ),
        mk(
            2.0,
            64,
            2,
            32,
            8,
            DType::BF16,
            true,
            vec![500],
            KeyData::SketchWorst,
        ),
        mk(1.5, 32, 2, 16, 8, DType::F16, true, vec![1200], KeyData::Peaked),
        // Tokens at the page box's corners: the pruning's page bounds are tested where they
        // are attained (f16 and f32 keys; one and two lanes a page of `page_bounds`).
        mk(
            1.5,
            32,
            1,
            16,
            4,
            DType::F16,
            false,
            vec![600, 17],
            KeyData::BoxCorner,
        ),
        mk(
            2.0,
            64,
            1,
            16,
            8,
            DType::F32,
            false,
            vec![400],
            KeyData::BoxCorner,
        ),
        // Over 4-bit sketches, long enough to seed: the seeded page-pruned walk (`_pw`) gives
        // the first head's pairs to the selected walk (no samples) and the others to the seeded
        // full walk in the same step.
        mk(
            1.5,
            32,
            1,
            16,
            4,
            DType::F16,
            false,
            vec![3000, 1300],
            KeyData::PeakedFirstHead,
        ),
        // Rows whose pruning bounds differ: each must use its own (a row mix-up drops support).
        mk(
            1.5,
            32,
            1,
            16,
            8,
            DType::F16,
            false,
            vec![3000, 500],
            KeyData::PeakedFirstHead,
        ),
        // Page-coherent keys with a few query-aligned pages, long enough that the pruning
        // drops most pages (the selected score pass then walks scattered pages).
        mk(
            1.5,
            32,
            1,
            16,
            8,
            DType::F16,
            false,
            vec![6000, 700],
            KeyData::Peaked,
        ),
        // BENCH.md's `gqa` spec: one lane a token (d·G = 64 q registers a lane).
        mk(
            1.5,
            32,
            2,
            16,
            8,
            DType::BF16,
            false,
            vec![2000, 129],
            KeyData::Normal,
        ),
        // BENCH.md's `wide` spec: its default tile is the wide-row one (8 lanes × 4 tokens).
        mk(
            1.5,
            128,
            4,
            32,
            8,
            DType::BF16,
            false,
            vec![700, 90],
            KeyData::Normal,
        ),
    ];
    // More KV heads: `page_bounds` takes H of them a block (`entkv_abi::page_bounds_heads`:
    // 8, 4 and 1 here), each warp publishing one lower-bound maximum a head.
    let heads = |kv_heads: u32, c: PagedCase| PagedCase { kv_heads, ..c };
    let cases = cases.into_iter().chain([
        heads(
            8,
            mk(
                1.5,
                32,
                1,
                16,
                4,
                DType::F16,
                false,
                vec![3000, 700],
                KeyData::Peaked,
            ),
        ),
        heads(
            8,
            mk(
                1.5,
                32,
                1,
                16,
                4,
                DType::F16,
                false,
                vec![600, 17],
                KeyData::BoxCorner,
            ),
        ),
        heads(
            12,
            mk(
                1.5,
                32,
                2,
                16,
                4,
                DType::BF16,
                true,
                vec![1500, 33],
                KeyData::Normal,
            ),
        ),
        heads(
            3,
            mk(
                2.0,
                64,
                1,
                16,
                4,
                DType::F16,
                false,
                vec![900],
                KeyData::PeakedFirstHead,
            ),
        ),
    ]);
    let mut v: Vec<Box<dyn KernelCheck>> = Vec::new();
    for case in cases {
        let tile = DenseTile::default_certified(&case.spec);
        let small = DenseTile {
            threads: 64,
            // Never more tokens than the default (GQA 8 holds one token's terms for 8 heads).
            tokens_per_group: tile.tokens_per_group.min(2),
            // No register cap from the occupancy heuristic (the driver's JIT spilled GQA 4, 8).
            score_min_blocks: 1,
            finish_threads: 64,
            finish_capacity: 64,
            ..tile
        };
        // The default tile, then small tiles on a small assumed GPU (several chunks and splits;
        // on the pruned path chunks span several selected, non-adjacent pages); over a
        // per-token grid also the small tile with the other choice of head-bound sharing (where
        // the group allows it), so both are checked with many splits of a head.
        let mut tiles = vec![(tile, 132), (small, 1)];
        let other = DenseTile {
            share_bound: !small.share_bound,
            ..small
        };
        if case.spec.sketch_token_grid() && other.check_for(&case.spec, DecodeKind::Certified).is_ok() {
            tiles.push((other, 1));
        }
        for (tile, sm_count) in tiles {
            for pruned in [false, true] {
                v.push(Box::new(CertifiedCheck {
                    case: case.clone(),
                    tile,
                    sm_count,
                    pruned,
                }));
            }
        }
        // The seeded full walk (`entkv_abi::seed`) on the small tile, where the group shares
        // head bounds; sequences under ~1k tokens take no seed and run as `_h`. And the same
        // tile seeded on the page-pruned walk (`_pw`): the pairs that keep most pages are
        // seeded, the others run the selected walk unseeded.
        let seeded = DenseTile {
            share_bound: true,
            seed: true,
            ..small
        };
        if case.spec.sketch_token_grid() && seeded.check_for(&case.spec, DecodeKind::Certified).is_ok() {
            let pw = DenseTile {
                pruned_walk: true,
                ..seeded
            };
            for (tile, pruned) in [(seeded, false), (pw, true)] {
                v.push(Box::new(CertifiedCheck {
                    case: case.clone(),
                    tile,
                    sm_count: 1,
                    pruned,
                }));
            }
        }
        // Rescoring on the tensor cores (`_tc`) where the small tile already takes one lane a
        // token over a per-token grid (elsewhere one lane a token alone changes the pass, and
        // its checks-only rerun spills at GQA 4, d = 32 and GQA 2, d = 64): the full and pruned
        // walks, and seeded where the group shares bounds.
        let tc = DenseTile { mma: true, ..small };
        if case.spec.sketch_token_grid()
            && small.lanes_per_token == 1
            && tc.check_for(&case.spec, DecodeKind::Certified).is_ok()
        {
            let mut tc_tiles = vec![(tc, false), (tc, true)];
            let tc_seeded = DenseTile { mma: true, ..seeded };
            if tc_seeded.check_for(&case.spec, DecodeKind::Certified).is_ok() {
                tc_tiles.push((tc_seeded, false));
            }
            for (tile, pruned) in tc_tiles {
                v.push(Box::new(CertifiedCheck {
                    case: case.clone(),
                    tile,
                    sm_count: 1,
                    pruned,
                }));
            }
        }
        // The sketch sums on the tensor cores (`_im`) where the small tile takes one lane a
        // token: the full and pruned walks, and seeded with `_tc` rescoring where the group
        // shares bounds (the shipped `wide` shape).
        let im = DenseTile {
            sketch_mma: true,
            ..small
        };
        if im.check_for(&case.spec, DecodeKind::Certified).is_ok() {
            let mut im_tiles = vec![(im, false), (im, true)];
            let im_seeded = DenseTile {
                sketch_mma: true,
                mma: true,
                ..seeded
            };
            if im_seeded.check_for(&case.spec, DecodeKind::Certified).is_ok() {
                im_tiles.push((im_seeded, false));
                im_tiles.push((
                    DenseTile {
                        pruned_walk: true,
                        ..im_seeded
                    },
                    true,
                ));
            }
            for (tile, pruned) in im_tiles {
                v.push(Box::new(CertifiedCheck {
                    case: case.clone(),
                    tile,
                    sm_count: 1,
                    pruned,
                }));
            }
        }
    }
    v.extend(
        seed_decoy_checks()
            .into_iter()
            .map(|c| Box::new(c) as Box<dyn KernelCheck>),
    );
    v
}

/// BENCH.md's `wide` spec over 4-bit sketches (its shipped default: one lane a token, two tokens
/// a lane, seeded shared bounds, rescoring on the tensor cores) on a small tile; the same
/// rescoring with FMAs and at one token a lane; and the page-pruned walk at its default's shape
/// (unseeded, one token a lane, on the tensor cores); both again with the sketch sums on the
/// tensor cores (`_im`). Interpreter
/// only (`kernels-gen/tests/certified.rs`): the suite's checks rerun the pass without rescoring
/// to check its bounds, and that never-shipped pass needs more than 255 registers at d = 128,
/// G = 4 (it scores the last page exactly: ~7 KB spilled, local ptxas 13), which the GPU suite
/// would report. The tuner checks the shipped `wide` tiles against float64 on the GPU.
pub fn wide_4bit_checks() -> Vec<CertifiedCheck> {
    let decode = DecodeSpec::new(1.5, 128, 4, DType::BF16).expect("spec");
    let case = PagedCase {
        spec: PagedSpec::new(decode, 32, false, 4).expect("paged spec"),
        kv_heads: 2,
        seq_lens: vec![1500, 90],
        seed: 233,
        data: KeyData::Normal,
        spare_pages: 2,
    };
    // A default tile's shape on small CTAs (several chunks and splits on the one-SM GPU).
    let small_of = |t: DenseTile| DenseTile {
        threads: 64,
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..t
    };
    let small = small_of(DenseTile::default_certified(&case.spec));
    [
        (small, false),
        (DenseTile { mma: false, ..small }, false),
        (
            DenseTile {
                tokens_per_group: 1,
                ..small
            },
            false,
        ),
        (small_of(DenseTile::default_certified_pruned(&case.spec)), true),
        // The sketch sums on the tensor cores (`_im`), full and page-pruned walks.
        (
            DenseTile {
                sketch_mma: true,
                ..small
            },
            false,
        ),
        (
            DenseTile {
                sketch_mma: true,
                ..small_of(DenseTile::default_certified_pruned(&case.spec))
            },
            true,
        ),
    ]
    .into_iter()
    .map(|(tile, pruned)| CertifiedCheck {
        case: case.clone(),
        tile,
        sm_count: 1,
        pruned,
    })
    .collect()
}

/// The seeded pass on keys whose samples overstate the scores ([`KeyData::SeedDecoy`]): the
/// estimate passes τ, `certified_verify` flags the pairs, and the repair launches must
/// restore the exact output (`kernels-gen/tests/certified.rs` shows the first pass alone
/// would not). GQA 1 and 2, f16 and bf16, ALiBi, a sequence too short to seed beside a long one;
/// each on the full walk and on the page-pruned walk seeded (`_pw`).
pub fn seed_decoy_checks() -> Vec<CertifiedCheck> {
    let case = |alpha: f64, g: u32, dtype: DType, alibi: bool, lens: Vec<u32>| {
        let decode = DecodeSpec::new(alpha, 32, g, dtype).expect("spec");
        PagedCase {
            spec: PagedSpec::new(decode, 16, alibi, 4).expect("paged spec"),
            kv_heads: 2,
            seq_lens: lens,
            seed: 77 + g as u64,
            data: KeyData::SeedDecoy,
            spare_pages: 2,
        }
    };
    [
        case(1.5, 1, DType::F16, false, vec![2000, 300]),
        case(2.0, 2, DType::BF16, true, vec![1500]),
    ]
    .into_iter()
    .flat_map(|case| {
        let tile = DenseTile {
            threads: 64,
            tokens_per_group: 2,
            score_min_blocks: 1,
            finish_threads: 64,
            finish_capacity: 64,
            share_bound: true,
            seed: true,
            // The GQA-2 case's repair rescores on the tensor cores.
            mma: case.spec.decode.group == 2,
            ..DenseTile::default_certified(&case.spec)
        };
        let pw = DenseTile {
            pruned_walk: true,
            ..tile
        };
        [(tile, false), (pw, true)].map(|(tile, pruned)| CertifiedCheck {
            case: case.clone(),
            tile,
            sm_count: 1,
            pruned,
        })
    })
    .collect()
}
