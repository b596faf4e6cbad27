//! The search space of each kernel family: tile configs around the family's default, and the
//! analytic pruning that rejects a point before anything is compiled.
//!
//! Spaces are kept modest on purpose (about 10–60 valid points per family): every candidate
//! costs an LLVM compile and a driver load (~50–150 ms), and the whole default run must finish
//! in about two minutes. The knobs that change the work decomposition (threads, lanes, tokens
//! or pages per lane group) form a small grid; secondary knobs (occupancy hints, Newton steps,
//! waves) are varied one at a time from the default, since they rarely interact strongly.

use entkv_abi::gaussian::{GaussTile, MomentsTile};
use entkv_abi::{
    page_lookahead_by_default, BoxScoreTile, DenseTile, KernelFamily, MetaTile, PagedSpec, SelectTopkTile,
    Selector, TileConfig, RADIX_BINS,
};

/// What a CTA may use on the devices entkv targets (sm_90), checked per generated entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Threads per block (and a multiple of 32, a whole number of warps).
    pub max_threads: u32,
    /// Static shared memory per block. The kernels declare `.shared` arrays (no dynamic shared
    /// memory), and static shared memory is capped at 48 KiB on every architecture; the 227 KiB
    /// of an H200 SM is only reachable through dynamic shared memory with an opt-in.
    pub max_static_shared_bytes: u64,
}

impl Default for DeviceLimits {
    fn default() -> Self {
        DeviceLimits {
            max_threads: 1024,
            max_static_shared_bytes: 48 * 1024,
        }
    }
}

/// A family's candidates at one spec: the valid points (the default first, then the rest in a
/// fixed order) and the points pruned analytically, with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    pub family: KernelFamily,
    pub valid: Vec<TileConfig>,
    pub invalid: Vec<(TileConfig, String)>,
}

impl Space {
    /// The family's default tile (always `valid[0]`).
    pub fn default_tile(&self) -> TileConfig {
        self.valid[0]
    }

    /// The points that serve `selector`'s walk, its default first
    /// ([`KernelFamily::default_tile_for`]: the page-pruned walk's where the family's default
    /// is a seeded certified tile, which cannot serve it). The seeded page-pruned walk's
    /// points (`_pw`) are that walk's only: elsewhere they run as their twins without `_pw`.
    pub fn for_selector(&self, spec: &PagedSpec, selector: Option<Selector>) -> Space {
        let default = self.family.default_tile_for(spec, selector);
        let rest = self
            .valid
            .iter()
            .filter(|t| t.serves(selector) && **t != default && **t == for_walk(**t, selector));
        Space {
            family: self.family,
            valid: std::iter::once(default).chain(rest.copied()).collect(),
            invalid: self.invalid.clone(),
        }
    }
}

/// Why `tile` cannot run as `family` at `spec`, found without compiling: the ABI's own check,
/// then the block size and static shared memory of every entry the kernel generator builds
/// (building the DSL kernels is cheap; LLVM is not involved).
pub fn analytic_check(
    family: KernelFamily,
    spec: &PagedSpec,
    tile: &TileConfig,
    limits: &DeviceLimits,
) -> Result<(), String> {
    tile.check(family, spec).map_err(|e| e.to_string())?;
    let kernels = entkv_kernels::family_kernels(family, spec, tile)
        .map_err(|e| format!("the kernel generator refuses the tile: {e}"))?;
    for k in &kernels {
        let t = k.block_threads;
        if t == 0 || t > limits.max_threads || t % 32 != 0 {
            return Err(format!(
                "{}: {t} threads per block (must be a multiple of 32 ≤ {})",
                k.name, limits.max_threads
            ));
        }
        let shared = k.shared_bytes();
        if shared > limits.max_static_shared_bytes {
            return Err(format!(
                "{}: {shared} bytes of static shared memory (at most {})",
                k.name, limits.max_static_shared_bytes
            ));
        }
    }
    Ok(())
}

/// The candidates of `family` at `spec`, pruned by [`analytic_check`]. The default is always
/// `valid[0]`; a default that fails the check is a bug in the ABI or the generator and is
/// returned as an error.
pub fn family_space(family: KernelFamily, spec: &PagedSpec, limits: &DeviceLimits) -> Result<Space, String> {
    let default = family.default_tile(spec);
    if let Err(e) = analytic_check(family, spec, &default, limits) {
        return Err(format!(
            "the default tile {} of {family} at {} is invalid: {e}",
            default.tag(),
            spec.sketch_tag()
        ));
    }
    let mut space = Space {
        family,
        valid: vec![default],
        invalid: Vec::new(),
    };
    for tile in grid(family, spec, &default) {
        if space.valid.contains(&tile) || space.invalid.iter().any(|(t, _)| *t == tile) {
            continue;
        }
        match analytic_check(family, spec, &tile, limits) {
            Ok(()) => space.valid.push(tile),
            Err(why) => space.invalid.push((tile, why)),
        }
    }
    Ok(space)
}

/// The unpruned points of `family` around `default` (may repeat the default and hold invalid
/// points; [`family_space`] removes both).
fn grid(family: KernelFamily, spec: &PagedSpec, default: &TileConfig) -> Vec<TileConfig> {
    let d = spec.decode.head_dim;
    let g = spec.decode.group;
    match (family, *default) {
        (_, TileConfig::Meta(_)) => [32, 64, 128, 256, 512]
            .into_iter()
            .map(|threads| TileConfig::Meta(MetaTile { threads }))
            .collect(),
        (_, TileConfig::BoxScore(_)) => cross(&[64, 128, 256, 512, 1024], &[1, 2, 4, 8])
            .map(|(threads, pages_per_group)| {
                TileConfig::BoxScore(BoxScoreTile {
                    threads,
                    pages_per_group,
                })
            })
            .collect(),
        (_, TileConfig::SelectTopk(_)) => cross(&[RADIX_BINS, 512, 1024], &[2, 4, 8, 16])
            .map(|(threads, items_per_thread)| {
                TileConfig::SelectTopk(SelectTopkTile {
                    threads,
                    items_per_thread,
                })
            })
            .collect(),
        (_, TileConfig::Moments(def)) => {
            let mut v = Vec::new();
            for (threads, lanes_per_page) in cross(&[128, 256, 512], &around_pow2(def.lanes_per_page)) {
                // 8 pages a group was tried (results/2026-11-30-select): never chosen.
                for pages_per_group in [1, 2, 4] {
                    v.push(TileConfig::Moments(MomentsTile {
                        threads,
                        lanes_per_page,
                        pages_per_group,
                    }));
                }
            }
            v
        }
        (_, TileConfig::Gauss(_)) => {
            // Without ALiBi `gauss_tau` only merges tiles per head (small CTAs suffice); with
            // ALiBi every solver step is a pass over the pages.
            let solve: &[u32] = if spec.alibi { &[128, 256, 512] } else { &[32, 128] };
            let mut v = Vec::new();
            // 1024 selection threads was tried (results/2026-11-30-select): never chosen.
            for (solve_threads, select_threads) in cross(solve, &[128, 256, 512]) {
                for select_pages_per_thread in [2, 4, 8, 16] {
                    v.push(TileConfig::Gauss(GaussTile {
                        solve_threads,
                        select_threads,
                        select_pages_per_thread,
                    }));
                }
            }
            v
        }
        (_, TileConfig::Dense(def)) => {
            let mut v = dense_grid(&def, d, g);
            if family != KernelFamily::DecodeCertified {
                v.extend(mma_points(&def, &spec.decode));
            }
            if family == KernelFamily::DecodeSparse && !page_lookahead_by_default(&spec.decode, spec.alibi) {
                // The page lookahead where it is a tile knob, on the default and the
                // tensor-core points (the tiles `gqa` and `wide` pick): it frees the chunk
                // start of two dependent loads for registers held across the chunk.
                let ahead: Vec<DenseTile> = std::iter::once(def)
                    .chain(mma_points(&def, &spec.decode))
                    .map(flip_lookahead)
                    .collect();
                v.extend(ahead);
            }
            if family == KernelFamily::DecodeCertified && spec.sketch_token_grid() {
                let small = small_cta_points(&def);
                // Head-bound sharing flipped on the default and the small-CTA points: it pays
                // where a head's splits are many and short (the plan decides that per length).
                let flipped: Vec<DenseTile> = std::iter::once(def)
                    .chain(small.iter().copied())
                    .map(flip_share)
                    .collect();
                // And seeded (`entkv_abi::seed`, shared bounds that start at an estimate): it
                // pays where the splits' own bounds rescore much of K (`wide`).
                let seeded: Vec<DenseTile> = std::iter::once(def)
                    .chain(small.iter().copied())
                    .map(flip_seed)
                    .collect();
                // And rescoring on the tensor cores, on each of these with one lane a token (the
                // invalid ones are filtered with the rest), and on the default and its seeded
                // twin at one token a lane: at `wide` two tokens a lane spill the pruned walk's
                // kernel on the tensor cores, one does not (results/2026-12-05-certified-tc);
                // a seeded tile has no pruned walk's kernels, so its two-token twin is timed.
                let one_token = [def, flip_seed(def)].map(|t| DenseTile {
                    tokens_per_group: 1,
                    ..t
                });
                let tc: Vec<DenseTile> = std::iter::once(def)
                    .chain(small.iter().copied())
                    .chain(flipped.iter().copied())
                    .chain(seeded.iter().copied())
                    .chain(one_token)
                    .filter(|t| t.lanes_per_token == 1)
                    .map(flip_mma)
                    .collect();
                // And the other choice of the sketch sums on the tensor cores (`_im`: off at
                // `wide`, whose default takes them, on elsewhere) on the default, the seeded and
                // the tensor-core points; and `_im` on the default's shape seeded, rescoring on
                // the tensor cores, at occupancy floors of three and four CTAs an SM, one token
                // a lane too (invalid ones drop out): at `wide` the `dp4a` pass spills 792 B at
                // three (two tokens a lane), the `_im` pass none (local ptxas 13).
                let im_floors = [3, 4].map(|score_min_blocks| DenseTile {
                    score_min_blocks,
                    share_bound: true,
                    seed: true,
                    mma: true,
                    sketch_mma: true,
                    ..def
                });
                let im: Vec<DenseTile> = std::iter::once(def)
                    .chain(seeded.iter().copied())
                    .chain(tc.iter().copied())
                    .chain(one_token.iter().copied())
                    .map(flip_sketch_mma)
                    .chain(im_floors.iter().copied())
                    .chain(im_floors.map(|t| DenseTile {
                        tokens_per_group: 1,
                        ..t
                    }))
                    .filter(|t| t.lanes_per_token == 1)
                    .collect();
                // And every seeded point as the page-pruned walk's (`_pw`, timed in that walk's
                // row only: `Space::for_selector`); invalid and spilling ones drop out as usual.
                let pruned_walk: Vec<DenseTile> = seeded
                    .iter()
                    .chain(tc.iter().filter(|t| t.seed))
                    .chain(im.iter().filter(|t| t.seed))
                    .map(|t| walk_twin(*t, Some(Selector::Pruned)))
                    .collect();
                v.extend(small);
                v.extend(flipped);
                v.extend(seeded);
                v.extend(tc);
                v.extend(im);
                v.extend(pruned_walk);
            }
            v.into_iter().map(TileConfig::Dense).collect()
        }
    }
}

/// Dense-tile points (decode_dense, decode_sparse, decode_certified): the grid threads ×
/// lanes per token × tokens per lane group, then ctas_per_sm, newton_steps and
/// score_min_blocks one at a time from the default. The finish pass keeps the default's
/// threads and staging capacity (its shared memory is sized for them).
fn dense_grid(def: &DenseTile, head_dim: u32, group: u32) -> Vec<DenseTile> {
    // Every power of two with at least 8 dimensions (one 16-byte f16 load) per lane.
    let lanes: Vec<u32> = (0..6).map(|s| 1u32 << s).filter(|l| head_dim / l >= 8).collect();
    let tokens: Vec<u32> = [
        def.tokens_per_group / 2,
        def.tokens_per_group,
        def.tokens_per_group * 2,
    ]
    .into_iter()
    .filter(|&t| tokens_fit(t, group))
    .collect();
    let mut v = Vec::new();
    for threads in [128, 256, 512] {
        for &lanes_per_token in &lanes {
            for &tokens_per_group in &tokens {
                v.push(DenseTile {
                    threads,
                    lanes_per_token,
                    tokens_per_group,
                    ..*def
                });
            }
        }
    }
    v.extend(dense_secondaries(def));
    v
}

/// Tensor-core score passes ([`DenseTile::mma`], one lane a token): 128 and 256 threads, a
/// few rounds of 32 tokens a warp, each at the register caps of resident CTA counts. With q
/// out of the registers a lane holds its rounds' K rows (d/4 × 4 elements a round), and local
/// ptxas 13 fits rows of d·G ≤ 128 (`paper`, `gqa`) in 64 registers up to four rounds, while
/// `wide` (d·G = 512) spills below 128: there only 128-register points, up to four rounds.
fn mma_points(def: &DenseTile, spec: &entkv_abi::DecodeSpec) -> Vec<DenseTile> {
    let narrow = spec.head_dim * spec.group <= 128;
    let tokens: &[u32] = if narrow { &[1, 2, 4, 8] } else { &[1, 2, 4] };
    let caps: &[u32] = if narrow { &[128, 64] } else { &[128] };
    let mut v = Vec::new();
    for threads in [128u32, 256] {
        for &tokens_per_group in tokens {
            for &regs in caps {
                let t = DenseTile {
                    threads,
                    lanes_per_token: 1,
                    tokens_per_group,
                    score_min_blocks: 65536 / regs / threads,
                    mma: true,
                    ..*def
                };
                if t.check(spec).is_ok() {
                    v.push(t);
                }
            }
        }
    }
    v
}

/// Small CTAs at full occupancy for the certified pass over a per-token grid: its stream is
/// warp-local, so one- and two-warp CTAs lose no collectives, and each holds a split of its
/// own (more, shorter splits). Two 32-thread warps a CTA at 16 an SM measured fastest at
/// `paper` 1M (1.24 ms against the default's 1.32; results/2026-12-01-warp-stream/
/// 5-rescore-queue).
fn small_cta_points(def: &DenseTile) -> Vec<DenseTile> {
    [(32, 32), (64, 16), (128, 8)]
        .into_iter()
        .map(|(threads, ctas)| DenseTile {
            threads,
            tokens_per_group: 2,
            score_min_blocks: ctas,
            ctas_per_sm: ctas,
            ..*def
        })
        .collect()
}

/// `t` with the other choice of head-bound sharing (unseeded: a seed needs sharing).
fn flip_share(t: DenseTile) -> DenseTile {
    DenseTile {
        share_bound: !t.share_bound,
        seed: false,
        pruned_walk: false,
        ..t
    }
}

/// `t` with the other choice of looking the sparse pass's pages up a chunk ahead.
fn flip_lookahead(t: DenseTile) -> DenseTile {
    DenseTile {
        lookahead: !t.lookahead,
        ..t
    }
}

/// `t` with the other choice of the tensor cores (for a certified pass: its rescoring).
fn flip_mma(t: DenseTile) -> DenseTile {
    DenseTile { mma: !t.mma, ..t }
}

/// `t` with the other choice of the certified pass's sketch sums on the tensor cores.
fn flip_sketch_mma(t: DenseTile) -> DenseTile {
    DenseTile {
        sketch_mma: !t.sketch_mma,
        ..t
    }
}

/// `t` with the other choice of seeding its shared head bounds (sharing them if it did not).
fn flip_seed(t: DenseTile) -> DenseTile {
    DenseTile {
        share_bound: t.share_bound || !t.seed,
        seed: !t.seed,
        pruned_walk: false,
        ..t
    }
}

/// Tokens a lane group the dense grids try: at least one, and at most 64 scores a lane
/// (tokens × heads of the group) held across a chunk.
fn tokens_fit(tokens_per_group: u32, group: u32) -> bool {
    tokens_per_group >= 1 && tokens_per_group * group <= 64
}

/// The secondary knobs of a dense tile moved one at a time from `def`.
fn dense_secondaries(def: &DenseTile) -> Vec<DenseTile> {
    let mut v = Vec::new();
    for ctas_per_sm in [2, 3, 4] {
        v.push(DenseTile { ctas_per_sm, ..*def });
    }
    // One Newton step makes the certified score pass cheaper (its candidates are bounded by
    // the sketch, not by the local threshold): the tuner picks it at 128k and 1M. Six or eight
    // steps (fewer finish candidates at 32k) never beat four by more than the tie band, and
    // with them the default run took 129 s, over its 120 s budget (results/2026-11-29-bench-3).
    for newton_steps in [1, 2, 4] {
        v.push(DenseTile { newton_steps, ..*def });
    }
    // Three resident CTAs is what the dense score pass wins with at 128k and 1M (1.02–1.04×),
    // four the certified default; one never won.
    for score_min_blocks in [0, 2, 3] {
        v.push(DenseTile {
            score_min_blocks,
            ..*def
        });
    }
    v
}

/// At most this many points are added around each point a first round refines from
/// ([`refinements`]).
pub const MAX_REFINEMENTS: usize = 12;
/// The runners-up whose decomposition is retried with the best's secondary knobs.
const REFINE_RUNNERS_UP: usize = 3;

/// Points to time after a first round ranked `ranked` (best first), none of them in `tried`:
/// one step of coordinate descent from the best. The grid varies the secondary knobs around
/// the default only, but they interact with the decomposition: on `gqa` one Newton step and
/// 12 tokens a lane group each won alone, and the pair was never timed
/// (results/2026-11-30-prune-slices/5-gqa-wide-faf797d). So for dense tiles: the secondary
/// knobs moved one at a time from the best, the runners-up's decompositions with the best's
/// secondary knobs, and half and twice the best's tokens a lane group; analytically valid
/// points only, at most [`MAX_REFINEMENTS`]. The other families have no secondary knobs, and
/// their grids are already the whole cross product: nothing to add.
///
/// `fastest` is the first round's fastest median when the ranking put another point first (a
/// tie within the band goes to the default): it gets the same step of its own, up to
/// [`MAX_REFINEMENTS`] more. Stepping from the default alone lost the certified pass at 32k its
/// best tile: t128 r4 tied with the default, and its register caps were never tried
/// (results/2026-12-03-page-access, 0.083 → 0.096 ms).
pub fn refinements(
    family: KernelFamily,
    spec: &PagedSpec,
    limits: &DeviceLimits,
    selector: Option<Selector>,
    ranked: &[TileConfig],
    fastest: Option<TileConfig>,
    tried: &[TileConfig],
) -> Vec<TileConfig> {
    let Some(TileConfig::Dense(best)) = ranked.first().copied() else {
        return Vec::new();
    };
    let mut out: Vec<TileConfig> = Vec::new();
    let add = |points: Vec<DenseTile>, out: &mut Vec<TileConfig>| {
        let cap = out.len() + MAX_REFINEMENTS;
        for p in points
            .into_iter()
            .map(|t| for_walk(TileConfig::Dense(t), selector))
        {
            if out.len() == cap {
                break;
            }
            if !tried.contains(&p) && !out.contains(&p) && analytic_check(family, spec, &p, limits).is_ok() {
                out.push(p);
            }
        }
    };
    add(descent_step(family, spec, &best, &ranked[1..]), &mut out);
    if let Some(TileConfig::Dense(f)) = fastest.filter(|f| *f != ranked[0]) {
        add(descent_step(family, spec, &f, &[]), &mut out);
    }
    out
}

/// `t` as `selector`'s walk runs it: a seeded certified tile serves the page-pruned walk as
/// its `_pw` twin ([`DenseTile::pruned_walk`]), every other walk without `_pw`.
fn for_walk(t: TileConfig, selector: Option<Selector>) -> TileConfig {
    match t {
        TileConfig::Dense(d) => TileConfig::Dense(walk_twin(d, selector)),
        t => t,
    }
}

/// [`for_walk`] of a dense tile.
fn walk_twin(t: DenseTile, selector: Option<Selector>) -> DenseTile {
    DenseTile {
        pruned_walk: t.seed && selector == Some(Selector::Pruned),
        ..t
    }
}

/// One step of coordinate descent from `centre`: its secondary knobs moved one at a time (the
/// head-bound sharing flipped first for the 4-bit certified pass, so the cap never drops it),
/// the decompositions of up to [`REFINE_RUNNERS_UP`] of `runners_up` with its secondary knobs,
/// and half and twice its tokens a lane group. Unchecked: [`refinements`] filters.
fn descent_step(
    family: KernelFamily,
    spec: &PagedSpec,
    centre: &DenseTile,
    runners_up: &[TileConfig],
) -> Vec<DenseTile> {
    let primaries = |t: &DenseTile| {
        (
            t.threads,
            t.lanes_per_token,
            t.tokens_per_group,
            t.mma,
            t.lookahead,
        )
    };
    let mut points = dense_secondaries(centre);
    if family == KernelFamily::DecodeCertified && spec.sketch_token_grid() {
        points.insert(0, flip_seed(*centre));
        points.insert(0, flip_share(*centre));
        if centre.lanes_per_token == 1 {
            points.insert(0, flip_mma(*centre));
            points.insert(0, flip_sketch_mma(*centre));
        }
    }
    if family == KernelFamily::DecodeSparse && !page_lookahead_by_default(&spec.decode, spec.alibi) {
        points.insert(0, flip_lookahead(*centre));
    }
    let mut seen = vec![primaries(centre)];
    for t in runners_up {
        let TileConfig::Dense(t) = t else { continue };
        if seen.len() > REFINE_RUNNERS_UP {
            break;
        }
        if !seen.contains(&primaries(t)) {
            seen.push(primaries(t));
            points.push(DenseTile {
                threads: t.threads,
                lanes_per_token: t.lanes_per_token,
                tokens_per_group: t.tokens_per_group,
                mma: t.mma,
                lookahead: t.lookahead,
                ..*centre
            });
        }
    }
    for tokens_per_group in [centre.tokens_per_group / 2, centre.tokens_per_group * 2] {
        if tokens_fit(tokens_per_group, spec.decode.group) {
            points.push(DenseTile {
                tokens_per_group,
                ..*centre
            });
        }
    }
    points
}

/// Half, the same and double a power of two (at least 1).
fn around_pow2(x: u32) -> Vec<u32> {
    let mut v = vec![(x / 2).max(1), x, x * 2];
    v.dedup();
    v
}

fn cross<'a>(a: &'a [u32], b: &'a [u32]) -> impl Iterator<Item = (u32, u32)> + 'a {
    a.iter().flat_map(move |&x| b.iter().map(move |&y| (x, y)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_abi::{DType, DecodeSpec};

    fn spec(d: u32, g: u32, p: u32, alibi: bool) -> PagedSpec {
        PagedSpec::new(DecodeSpec::new(1.5, d, g, DType::F16).unwrap(), p, alibi, 8).unwrap()
    }

    #[test]
    fn every_point_is_valid_unique_and_the_default_comes_first() {
        let limits = DeviceLimits::default();
        for s in [
            spec(32, 1, 16, false),
            spec(128, 4, 64, true),
            spec(64, 8, 32, false),
        ] {
            for f in KernelFamily::ALL {
                let sp = family_space(f, &s, &limits).unwrap();
                assert_eq!(sp.default_tile(), f.default_tile(&s), "{f}");
                for t in &sp.valid {
                    assert!(t.check(f, &s).is_ok(), "{f} {}", t.tag());
                }
                let mut tags: Vec<String> = sp.valid.iter().map(|t| t.tag()).collect();
                tags.sort();
                tags.dedup();
                assert_eq!(tags.len(), sp.valid.len(), "{f}: unique points");
                assert!(
                    (2..=60).contains(&sp.valid.len()),
                    "{f} at {}: {} points",
                    s.sketch_tag(),
                    sp.valid.len()
                );
                for (t, why) in &sp.invalid {
                    assert!(!sp.valid.contains(t));
                    assert!(!why.is_empty());
                }
            }
        }
    }

    #[test]
    fn refinements_step_from_the_best_and_skip_what_was_tried() {
        let s = spec(32, 1, 16, false);
        let limits = DeviceLimits::default();
        let f = KernelFamily::DecodeDense;
        let space = family_space(f, &s, &limits).unwrap();
        let dense = |t: &TileConfig| match t {
            TileConfig::Dense(d) => *d,
            _ => panic!("a dense tile"),
        };
        // The default best: every neighbour was in the grid already.
        let tried = space.valid.clone();
        assert!(refinements(f, &s, &limits, None, &tried, None, &tried).is_empty());
        // Another best: its knobs moved, the runners-up at its knobs, its tokens halved and
        // doubled; never a tried or invalid point, at most MAX_REFINEMENTS.
        let best = *space
            .valid
            .iter()
            .find(|t| dense(t).threads == 128 && dense(t).tokens_per_group == 32)
            .unwrap();
        let mut ranked = vec![best];
        ranked.extend(space.valid.iter().filter(|t| **t != best).copied());
        let r = refinements(f, &s, &limits, None, &ranked, None, &tried);
        assert!(!r.is_empty() && r.len() <= MAX_REFINEMENTS, "{}", r.len());
        let b = dense(&best);
        for t in &r {
            assert!(!tried.contains(t), "{} was tried", t.tag());
            assert!(analytic_check(f, &s, t, &limits).is_ok());
            let d = dense(t);
            let same_knobs = (d.newton_steps, d.ctas_per_sm, d.score_min_blocks)
                == (b.newton_steps, b.ctas_per_sm, b.score_min_blocks);
            let same_shape = (d.threads, d.lanes_per_token, d.tokens_per_group)
                == (b.threads, b.lanes_per_token, b.tokens_per_group);
            assert!(
                same_knobs || same_shape,
                "{}: one step from {}",
                t.tag(),
                best.tag()
            );
        }
        let mut tags: Vec<String> = r.iter().map(|t| t.tag()).collect();
        tags.sort();
        tags.dedup();
        assert_eq!(tags.len(), r.len(), "no repeats");
        // Non-dense families have nothing to refine.
        let topk = family_space(KernelFamily::SelectTopk, &s, &limits).unwrap();
        let mut ranked = topk.valid.clone();
        ranked.rotate_left(1);
        assert!(refinements(KernelFamily::SelectTopk, &s, &limits, None, &ranked, None, &[]).is_empty());
    }

    /// The certified pass over 4-bit sketches is timed with head-bound sharing flipped, and
    /// seeded, on its default and small-CTA points, each also rescoring on the tensor cores and
    /// with the other choice of sketch sums on the tensor cores (`_im`, also at occupancy
    /// floors), and refined with the best's sketch sums, tensor cores, sharing, then seeding,
    /// flipped first;
    /// the page-pruned walk times the seeded points as `_pw` twins, which the full walk does not
    /// time; no other family gets sharing or seeding, and GQA 8 counts those points invalid
    /// (registers).
    #[test]
    fn shared_head_bounds_are_tried_for_the_certified_pass_only() {
        let limits = DeviceLimits::default();
        let bits4 =
            |g: u32| PagedSpec::new(DecodeSpec::new(1.5, 32, g, DType::F16).unwrap(), 16, false, 4).unwrap();
        let shares = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.share_bound);
        let s = bits4(1);
        let f = KernelFamily::DecodeCertified;
        let whole = family_space(f, &s, &limits).unwrap();
        let space = whole.for_selector(&s, None);
        let TileConfig::Dense(def) = space.default_tile() else {
            panic!("a dense tile")
        };
        assert!(!def.share_bound);
        assert!(space.valid.contains(&TileConfig::Dense(flip_share(def))));
        let seeded = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.seed);
        let pw = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.pruned_walk);
        // The page-pruned walk: the unseeded points and a `_pw` twin of every seeded one.
        let pruned = whole.for_selector(&s, Some(entkv_abi::Selector::Pruned));
        assert!(!space.valid.iter().any(pw));
        assert_eq!(
            pruned.valid.iter().filter(|t| pw(t)).count(),
            space.valid.iter().filter(|t| seeded(t)).count()
        );
        assert!(pruned.valid.iter().all(|t| !seeded(t) || pw(t)));
        assert_eq!(
            pruned.valid.len(),
            space.valid.len(),
            "the same points, seeded ones as their twins"
        );
        let tc = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.mma);
        let im = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.sketch_mma);
        let fma_points = || space.valid.iter().filter(|t| !tc(t) && !im(t));
        assert_eq!(fma_points().filter(|t| shares(t)).count(), 8);
        assert_eq!(fma_points().filter(|t| seeded(t)).count(), 4);
        // Each of them (one lane a token at d = 32) also rescores on the tensor cores, and so do
        // the default and its seeded twin at one token a lane.
        assert_eq!(space.valid.iter().filter(|t| tc(t) && !im(t)).count(), 14);
        // And each of those also takes its sketch sums on the tensor cores, as do the one-token
        // points and the seeded default's shape at occupancy floors of 3 and 4 (one and four
        // tokens a lane), where they do not coincide.
        let ims: Vec<String> = space.valid.iter().filter(|t| im(t)).map(|t| t.tag()).collect();
        assert!(ims.len() >= 14 + 2, "{ims:?}");
        for floor in ["_m3_", "_m4_"] {
            assert!(
                ims.iter().any(|t| t.contains(floor) && t.contains("_seed")),
                "{ims:?}"
            );
        }
        let ranked: Vec<TileConfig> = space.valid.iter().rev().copied().collect();
        let TileConfig::Dense(best) = ranked[0] else {
            panic!("a dense tile")
        };
        assert!(best.seed && best.mma);
        let r = refinements(f, &s, &limits, None, &ranked, None, &[]);
        assert_eq!(r[0], TileConfig::Dense(flip_sketch_mma(best)));
        assert_eq!(r[1], TileConfig::Dense(flip_mma(best)));
        assert_eq!(r[2], TileConfig::Dense(flip_share(best)));
        assert_eq!(r[3], TileConfig::Dense(flip_seed(best)));
        assert!(matches!(r[2], TileConfig::Dense(t) if !t.share_bound && !t.seed));
        assert!(matches!(r[3], TileConfig::Dense(t) if t.share_bound && !t.seed));
        assert!(!ranked[0].serves(Some(entkv_abi::Selector::Pruned)));
        // Refined for the page-pruned walk, a seeded refinement is a `_pw` tile, an unseeded one
        // is not.
        let rp = refinements(
            f,
            &s,
            &limits,
            Some(entkv_abi::Selector::Pruned),
            &ranked,
            None,
            &[],
        );
        assert!(rp.iter().any(pw) && rp.iter().all(|t| seeded(t) == pw(t)));
        assert!(rp.iter().all(|t| t.serves(Some(entkv_abi::Selector::Pruned))));
        for other in [KernelFamily::DecodeDense, KernelFamily::DecodeSparse] {
            let sp = family_space(other, &s, &limits).unwrap();
            assert!(!sp.valid.iter().any(shares), "{other}");
        }
        assert!(!family_space(f, &spec(32, 1, 16, false), &limits)
            .unwrap()
            .valid
            .iter()
            .any(shares));
        let g8 = family_space(f, &bits4(8), &limits).unwrap();
        assert!(!g8.valid.iter().any(shares));
        assert!(g8.invalid.iter().any(|(t, why)| shares(t) && why.contains("GQA")));
    }

    /// The sparse pass is timed with the page lookahead where it is a tile knob (bf16, GQA,
    /// ALiBi), on its default and tensor-core points, and refined with the best's flipped
    /// first; no other family gets it, nor a spec where the lookahead is always on.
    #[test]
    fn the_page_lookahead_is_tried_for_the_sparse_pass_where_it_is_a_knob() {
        let limits = DeviceLimits::default();
        let gqa = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::BF16).unwrap(), 16, false, 4).unwrap();
        let ahead = |t: &TileConfig| matches!(t, TileConfig::Dense(d) if d.lookahead);
        let f = KernelFamily::DecodeSparse;
        let space = family_space(f, &gqa, &limits).unwrap();
        let TileConfig::Dense(def) = space.default_tile() else {
            panic!("a dense tile")
        };
        assert!(!def.lookahead);
        assert!(space.valid.contains(&TileConfig::Dense(flip_lookahead(def))));
        let n_mma = mma_points(&def, &gqa.decode).len();
        assert!(n_mma > 0);
        // The default is a tensor-core point at `gqa`: it and its flip are counted once.
        assert_eq!(space.valid.iter().filter(|t| ahead(t)).count(), n_mma);
        let ranked: Vec<TileConfig> = space.valid.iter().rev().copied().collect();
        let TileConfig::Dense(best) = ranked[0] else {
            panic!("a dense tile")
        };
        let r = refinements(f, &gqa, &limits, None, &ranked, None, &[]);
        assert_eq!(r[0], TileConfig::Dense(flip_lookahead(best)));
        for other in [KernelFamily::DecodeDense, KernelFamily::DecodeCertified] {
            let sp = family_space(other, &gqa, &limits).unwrap();
            assert!(!sp.valid.iter().any(ahead), "{other}");
        }
        let paper = spec(32, 1, 16, false);
        assert!(!family_space(f, &paper, &limits).unwrap().valid.iter().any(ahead));
        let e = flip_lookahead(DenseTile::default_sparse(&paper))
            .check_for(&paper, entkv_abi::DecodeKind::Sparse)
            .unwrap_err();
        assert!(e.to_string().contains("already on"), "{e}");
    }

    #[test]
    fn invalid_points_are_counted_with_a_reason() {
        // P·d/8 = 64 chunks: MetaTile allows 32 and 64 threads only.
        let s = spec(32, 1, 16, false);
        let sp = family_space(KernelFamily::PageMeta, &s, &DeviceLimits::default()).unwrap();
        assert_eq!(sp.valid.len(), 2);
        assert_eq!(sp.invalid.len(), 3);
        assert!(sp.invalid.iter().all(|(_, why)| why.contains("threads")));
    }

    #[test]
    fn device_limits_prune_before_compiling() {
        let s = spec(32, 1, 16, false);
        let tiny = DeviceLimits {
            max_threads: 1024,
            max_static_shared_bytes: 1024,
        };
        // The dense finish pass stages 4096 candidates in shared memory: over 1 KiB.
        let t = KernelFamily::DecodeDense.default_tile(&s);
        let e = analytic_check(KernelFamily::DecodeDense, &s, &t, &tiny).unwrap_err();
        assert!(e.contains("shared memory"), "{e}");
        assert!(family_space(KernelFamily::DecodeDense, &s, &tiny).is_err());
    }
}
