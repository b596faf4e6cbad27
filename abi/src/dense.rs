//! The dense (full-cache) entmax decode: two kernels, their tile configuration, the per-call
//! plan, launch geometry and workspace.
//!
//! 1. `decode_dense_score`, grid (splits, kv heads, batch): each CTA streams one split of the
//!    sequence in chunks of `chunk_len` tokens, scoring every query head of its GQA group (K is
//!    read once per group). It keeps a running lower bound `lo` on the threshold of the tokens
//!    seen so far (`max − 1`, then Newton steps, which never overshoot) and the *candidates*
//!    above it in its workspace segment, pruning them as the bound rises. Every token of the
//!    global support is a candidate of its split, because the threshold of a subset never
//!    exceeds the threshold of the whole (spec §1, issue #3 fact a).
//! 2. `decode_dense_finish`, grid (query heads, batch): reads a head's candidates (staged in
//!    shared memory when they fit), solves the exact threshold τ over them (closed forms for
//!    α = 2 and 3/2 once the active set settles, bracketed Newton otherwise), and writes
//!    `o = Σ p_j v_j / Σ p_j`, τ and the support size.

use crate::geometry::{ceil_div, LaunchGeometry};
use crate::paged::PagedSpec;
use crate::pipeline::DecodeKind;
use crate::spec::{DType, DecodeSpec, SpecError};
use serde::{Deserialize, Serialize};

/// Rows (head dim × GQA group) from which [`DenseTile::default_for`] trades q registers for
/// longer chunks (up to G = 4).
pub const WIDE_ROW_DIMS: u32 = 512;

/// Tokens a one-lane-a-token group holds by default with ALiBi ([`DenseTile::default_paged`]).
pub const ALIBI_TOKENS_PER_GROUP: u32 = 8;

/// Whether the default tiles treat `spec` as a wide row (d·G ≥ [`WIDE_ROW_DIMS`], G ≤ 4: at
/// G = 8 holding 128 q floats a lane spills).
fn wide_row(spec: &DecodeSpec) -> bool {
    spec.head_dim * spec.group >= WIDE_ROW_DIMS && spec.group <= 4
}

/// Whether the tensor cores can take this spec's K and V (`mma` multiplies f16 or bf16; f32
/// caches keep FMA tiles).
fn mma_takes(spec: &DecodeSpec) -> bool {
    spec.kv_dtype != DType::F32
}

/// Whether the default tiles give each token one lane although the group's q slices then take
/// d·G = 64 registers a lane: GQA 2 at d = 32 (BENCH.md's `gqa`). The tuner on the H200
/// (results/2026-11-30-wide/4-same-call-e77be65, tune-log-gqa.jsonl) put one lane ahead of two
/// at every length, 1M: dense 2.31 vs 3.33 ms and sparse 0.75 vs 1.01 ms (6 tokens), certified
/// 3.72 vs 6.18 ms (4 tokens); 128–238 registers at two CTAs per SM, no spills.
fn one_lane_pair(spec: &DecodeSpec) -> bool {
    spec.head_dim == 32 && spec.group == 2
}

/// Lanes a token for rows narrower than [`WIDE_ROW_DIMS`]: d·G/32 rounded up to a power of
/// two, so the group's q slices stay near 32 registers a lane, with at least 8 dimensions (one
/// 16-byte f16 load) a lane; one lane for [`one_lane_pair`].
fn narrow_row_lanes(spec: &DecodeSpec) -> u32 {
    if one_lane_pair(spec) {
        1
    } else {
        (spec.head_dim * spec.group / 32)
            .next_power_of_two()
            .clamp(1, (spec.head_dim / 8).max(1))
    }
}

/// Largest GQA group whose certified pass may share head bounds ([`DenseTile::share_bound`]):
/// each head holds the bound it read, and at GQA 8 the full walk over the rest spilled (4 B,
/// local ptxas 13).
pub const MAX_SHARE_BOUND_GROUP: u32 = 4;

/// Largest GQA group a tensor-core score pass ([`DenseTile::mma`]) takes: the heads are the
/// 8 columns of its `m16n8k16` products.
pub const MMA_MAX_GROUP: u32 = 8;

/// Largest GQA group whose certified sketch sums run on the tensor cores
/// ([`DenseTile::sketch_mma`]): each head takes two of the `m16n8k32` product's 8 columns
/// (its weights' high and low bytes).
pub const SKETCH_MMA_MAX_GROUP: u32 = 4;

/// Most splits one head may have (the finish pass keeps their offsets in shared memory).
pub const MAX_SPLITS: u32 = 1024;

/// Tile configuration of the dense decode (the autotuner searches these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DenseTile {
    /// Threads per CTA of the score pass.
    pub threads: u32,
    /// Lanes that share one token's dot product (each loads `head_dim / lanes_per_token` dims).
    pub lanes_per_token: u32,
    /// Tokens each lane group scores per chunk (held in registers).
    pub tokens_per_group: u32,
    /// Newton steps on the running threshold bound after a chunk adds candidates.
    pub newton_steps: u32,
    /// Occupancy hint for the score pass (`.minnctapersm`; 0 = none). Without a hint ptxas
    /// may cap registers for occupancy and spill the per-head registers of large GQA groups.
    pub score_min_blocks: u32,
    /// Score CTAs per SM the plan aims for, times four waves (see [`dense_plan`]).
    pub ctas_per_sm: u32,
    /// Threads per CTA of the finish pass.
    pub finish_threads: u32,
    /// Candidates the finish pass stages in shared memory; more are read from the workspace.
    pub finish_capacity: u32,
    /// Certified pass over a per-token grid (4-bit sketches) only: a head's splits share
    /// their threshold bounds through a global `head_bound` per query head (reset by
    /// `certified_init` each step), so a split's first chunks filter against what the others
    /// found. Pays where a head is cut into many splits whose warps see few tokens (`wide`);
    /// costs a launch and L2 round trips where they see many. Tag suffix `_h`; absent from
    /// bundles and logs written before it existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share_bound: bool,
    /// The group's dot products on the tensor cores (`mma.sync` m16n8k16, f32 accumulation),
    /// each warp scoring 32 tokens a round as two 16×16 K tiles against the group's raw q
    /// (heads as the 8 columns, so G ≤ 8), then passing each lane its own token's scores; needs
    /// one lane a token. A lane holds d/8 q registers instead of d·G, and no multiply or
    /// conversion a dimension. The dense and sparse score passes score every token so; a
    /// certified pass over 4-bit sketches rescores its queued tokens so (a batch is a warp's
    /// 32 tokens), where it otherwise spends d·G FMAs and shared q' loads a token. Tag suffix
    /// `_tc`; absent from bundles and logs written before it existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mma: bool,
    /// Certified pass with [`DenseTile::share_bound`] only: each head's shared bound starts at
    /// an estimate of its threshold from a sample of exact scores, checked after the finish
    /// and repaired where it was too high (`crate::seed`). Costs three small launches and a
    /// second pass and finish that return at once unless a pair needs the repair. Tag suffix
    /// `_seed`; absent from bundles and logs written before it existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seed: bool,
    /// Seeded certified pass ([`DenseTile::seed`]) only: the tile also serves the page-pruned
    /// walk (`DecodeKind::CertifiedSelected`), seeded there too. Its module adds that walk's
    /// two passes (which then take `repair, gate`) and a sample pass that skips the pairs the
    /// selected walk takes (they get no estimate, as unseeded), so the pairs whose pruning
    /// keeps most pages (every pair on iid keys) run the seeded full walk's filter. A knob of
    /// its own because those passes spill where the full walk does not (`wide` at two tokens a
    /// lane on the tensor cores): a seeded full walk's module leaves them out. Tag suffix
    /// `_pw`; absent from bundles and logs written before it existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pruned_walk: bool,
    /// Sparse score pass only: look up the next chunk's pages while this one is scored
    /// (`sel_pages` loads when a chunk starts, block-table loads once its K rows arrived) where
    /// [`page_lookahead_by_default`] leaves it off (bf16 keys, GQA groups, ALiBi): there it
    /// holds registers across a chunk that spilled on some tiles, so the tuner times it per
    /// tile. Tag suffix `_la`; absent from bundles and logs written before it existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lookahead: bool,
    /// Certified pass over 4-bit sketches only: the sketch's integer dot products
    /// (`Σ m_i·code_i` of every head of the group) on the integer tensor cores (`mma.sync`
    /// m16n8k32, unsigned code bytes against the heads' signed weight bytes, high and low
    /// bytes as the 8 columns, so G ≤ [`SKETCH_MMA_MAX_GROUP`]), each warp's 32 tokens a round
    /// as two 16-token tiles, then each lane's own token's sums through warp-private shared
    /// memory; needs one lane a token and a head dim that is a multiple of 32. The sums are
    /// the `dp4a` chains' to the bit, so every bound is too. The page-pruned walk's selected
    /// pass keeps `dp4a`. Tag suffix `_im`; absent from bundles and logs written before it
    /// existed (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sketch_mma: bool,
}

/// Why tile knob `knob` (its name and tag) cannot be on for this pass, if it is not the certified
/// pass over 4-bit sketches: the knobs of that pass's warp stream and sketch sums.
fn certified_4bit_only(knob: &str, certified: bool, spec: &PagedSpec) -> Option<String> {
    (!certified || !spec.sketch_token_grid()).then(|| {
        format!(
            "{knob} is a tile of the certified pass over 4-bit sketches only (this is {}, {}-bit)",
            if certified {
                "the certified pass"
            } else {
                "a dense or sparse decode"
            },
            spec.sketch_bits
        )
    })
}

/// Whether the sparse score pass looks up the next chunk's pages ahead on every tile: f16 keys,
/// one head a group, no ALiBi. There the lookahead took registers from 74 to 60 at d = 32 and
/// made the pass 5–10% faster; elsewhere it cost registers and spilled at some tiles
/// (results/2026-11-30-lookahead), so it is a tile knob there ([`DenseTile::lookahead`]).
pub fn page_lookahead_by_default(spec: &DecodeSpec, alibi: bool) -> bool {
    !alibi && spec.group == 1 && spec.kv_dtype == DType::F16
}

impl DenseTile {
    /// Whether a certified row of this tile can serve the page-pruned walk
    /// (`DecodeKind::CertifiedSelected`): an unseeded tile, or a seeded one with
    /// [`DenseTile::pruned_walk`]. Any other seeded row's module holds the full walk's kernels
    /// only.
    pub fn serves_pruned_walk(&self) -> bool {
        !self.seed || self.pruned_walk
    }

    pub fn default_for(spec: &DecodeSpec) -> DenseTile {
        if wide_row(spec) {
            return if mma_takes(spec) {
                DenseTile::default_wide(spec)
            } else {
                DenseTile::fma_wide(spec)
            };
        }
        // One lane per token (four independent 16-byte loads per row, no shuffles) measured
        // fastest on the H200 for d = 32 (results/2026-11-29-dense-variants). Larger heads and
        // GQA groups split the row over more lanes (`narrow_row_lanes`).
        let lanes_per_token = narrow_row_lanes(spec);
        DenseTile {
            threads: 256,
            lanes_per_token,
            // A GQA group's z registers (tokens × heads) plus in-flight K rows must fit 128
            // registers at 256 threads: 16 tokens alone, about 12 shared across a group.
            tokens_per_group: if spec.group == 1 {
                16
            } else {
                (12 / spec.group).max(2)
            },
            // Four steps: with one chunk per split (short contexts) two leave a loose bound and
            // ~4× the candidates; at 1M the extra steps cost nothing measurable
            // (results/2026-11-29-dense-streamed).
            newton_steps: 4,
            // Without a floor ptxas caps groups of 2 and 3 at 80 registers and spills; two
            // CTAs per SM allow 128.
            score_min_blocks: if matches!(spec.group, 2 | 3) { 2 } else { 0 },
            ctas_per_sm: 3,
            finish_threads: 256,
            finish_capacity: 4096,
            share_bound: false,
            mma: false,
            seed: false,
            pruned_walk: false,
            lookahead: false,
            sketch_mma: false,
        }
    }

    /// The paged decodes' tile (dense and sparse): [`DenseTile::default_for`], except that with
    /// ALiBi a one-lane-a-token group holds [`ALIBI_TOKENS_PER_GROUP`] tokens. The ALiBi term's
    /// positions add a register a token, and at 16 the score passes spill 12–24 B under ptxas
    /// 13 (the driver's JIT) at d = 32, G = 1 for most α × P × dtype (docs/perf-notes.md,
    /// "ALiBi defaults without spills").
    pub fn default_paged(spec: &PagedSpec) -> DenseTile {
        let tile = DenseTile::default_for(&spec.decode);
        if spec.alibi && tile.lanes_per_token == 1 {
            DenseTile {
                tokens_per_group: tile.tokens_per_group.min(ALIBI_TOKENS_PER_GROUP),
                ..tile
            }
        } else {
            tile
        }
    }

    /// The sparse decode's tile: [`DenseTile::default_paged`], except at GQA 2, d = 32 (`gqa`),
    /// where the tuner picked tensor-core tiles at 32k, 128k and 1M over every FMA tile (40 vs
    /// 49, 107 vs 115, 513 vs 548 µs a top-k decode; results/2026-12-05-tensor-cores/
    /// 1-check-tune-ab): 256 threads, four rounds of 32 tokens a warp, four CTAs an SM (64
    /// registers; three with ALiBi, whose positions spill 8 B at 64, local ptxas 13). The dense
    /// walk keeps its FMA tile there (1.69 vs 2.15 ms at 1M): over every page one lane a token
    /// streams at 3.8 TB/s already.
    ///
    /// Wide rows without ALiBi look their pages up a chunk ahead ([`DenseTile::lookahead`]):
    /// 3–6% faster on every tile the tuner timed both ways at `wide` 128k and 1M, top-k and
    /// Gaussian (the default 143.2 → 138.5 µs at 128k and 868.6 → 835.3 at 1M, top-k, on an
    /// H100; results/2026-12-05-lookahead-knob/1-check-bench). With ALiBi it spills 16 B at 128
    /// registers (local ptxas 13). At `gqa` it won only on one- and two-round tiles, slower
    /// than the default's four rounds, where it spills.
    pub fn default_sparse(spec: &PagedSpec) -> DenseTile {
        let tile = DenseTile::default_paged(spec);
        if wide_row(&spec.decode) && tile.mma && !spec.alibi {
            return DenseTile {
                lookahead: true,
                ..tile
            };
        }
        if one_lane_pair(&spec.decode) && mma_takes(&spec.decode) {
            DenseTile {
                threads: 256,
                lanes_per_token: 1,
                tokens_per_group: 4,
                score_min_blocks: if spec.alibi { 3 } else { 4 },
                mma: true,
                ..tile
            }
        } else {
            tile
        }
    }

    /// The contiguous-cache decode's tile: [`DenseTile::default_for`], except that GQA 2 at
    /// d = 32 keeps two lanes a token. Its score pass holds a 64-bit row offset a token, and
    /// with one lane it spills 8 bytes at two CTAs per SM (local ptxas 12.9, every α and dtype).
    pub fn default_contiguous(spec: &DecodeSpec) -> DenseTile {
        let tile = DenseTile::default_for(spec);
        if one_lane_pair(spec) {
            DenseTile {
                lanes_per_token: 2,
                // f32 rows are twice the registers: six tokens spill 56 B (local ptxas 13).
                tokens_per_group: if spec.kv_dtype == DType::F32 {
                    3
                } else {
                    tile.tokens_per_group
                },
                ..tile
            }
        } else {
            tile
        }
    }

    /// Rows of d·G ≥ [`WIDE_ROW_DIMS`] with G ≤ 4 (that is d = 128, G = 4: the `wide`
    /// workload). With FMA dot products a lane held 128 q floats (d·G/128 lanes a token, 6
    /// tokens a lane group: 213–255 registers, two 128-thread CTAs an SM, 12.5% occupancy;
    /// [`DenseTile::fma_wide`]). On the tensor cores ([`DenseTile::mma`]) q takes 16 registers
    /// a lane, and the tuner's pick at 32k, 128k and 1M, for the dense and the sparse walk
    /// alike, is one round a chunk (128-token chunks) at four CTAs an SM (128 registers):
    /// dense 1M 4.01 → 2.67 ms, top-k 1M 1.19 → 0.79 ms a decode
    /// (results/2026-12-05-tensor-cores/1-check-tune-ab).
    fn default_wide(spec: &DecodeSpec) -> DenseTile {
        DenseTile {
            lanes_per_token: 1,
            tokens_per_group: 1,
            score_min_blocks: 4,
            ctas_per_sm: 2,
            mma: true,
            ..DenseTile::fma_wide(spec)
        }
    }

    /// The FMA tile of wide rows, the default before the tensor-core pass: 128 q floats a lane
    /// (d·G/128 lanes a token) in 128-thread CTAs with six tokens a lane group, 192-token
    /// chunks (results/2026-11-30-wide: 2.3× faster at 1M than q slices of 32 registers and
    /// 48-token chunks); one Newton step a chunk 1.7× faster again. The certified pass starts
    /// from it.
    pub fn fma_wide(spec: &DecodeSpec) -> DenseTile {
        DenseTile {
            threads: 128,
            lanes_per_token: (spec.head_dim * spec.group / 128).clamp(1, (spec.head_dim / 8).max(1)),
            tokens_per_group: 6,
            // With 4 heads a chunk of 192 tokens, each Newton step (a sweep of 4 segments and a
            // block reduction) costs more than the looser bound it saves: one step measured
            // 1.3× (32k) and 1.7× (1M) faster than four.
            newton_steps: 1,
            score_min_blocks: 0,
            ctas_per_sm: 3,
            finish_threads: 256,
            finish_capacity: 4096,
            share_bound: false,
            mma: false,
            seed: false,
            pruned_walk: false,
            lookahead: false,
            sketch_mma: false,
        }
    }

    /// The certified decode's tile. Its score pass keeps per token and head the raw sketch
    /// words and its bounds, so rows are split over lanes like the dense pass (≥ 8 dimensions
    /// each: one 4-bit sketch word). It is bound by latency (the per-chunk page terms and
    /// reductions), not by arithmetic: 128-thread CTAs with an occupancy floor, one lane per
    /// d = 32 token, four tokens a lane group and two Newton steps measured fastest on the H200
    /// at 128k and 1M (results/2026-11-29-certified-dp4a; eight tokens at two or three CTAs an
    /// SM and 256 threads were slower again with the one-phase page terms,
    /// results/2026-11-30-certified-terms); choices checked with ptxas for 0 spills across d and
    /// GQA. Its finish pass stages an upper bound per candidate too, so it stages fewer to fit
    /// static shared memory.
    pub fn default_certified(paged: &PagedSpec) -> DenseTile {
        let spec = &paged.decode;
        // Four CTAs per SM (≤ 128 registers) where that allocates without spilling.
        let four = spec.head_dim * spec.group <= 32 && !paged.alibi;
        // Wide rows with 8-bit sketches: the tuner at d = 128, G = 4 (results/2026-11-30-wide)
        // favoured 8 lanes × 4 tokens over `default_for`'s 16 × 2 and one Newton step, later
        // (results/2026-11-30-jit-pool/2-wide-gqa) 8 lanes × 8 tokens: 10.4 → 7.7 ms at 1M.
        // With 4-bit sketches (the default) they take one lane a token (the pass stages q' in
        // shared memory, so a lane holds no q slices) and two tokens a lane: 2.45 / 0.71 / 0.26
        // ms at 1M / 128k / 32k against 7.83 / 2.07 / 0.83 at 8 lanes × 4 (shared bounds, the
        // tuner in one call: results/2026-12-05-long-select/3-checks-bench, tune-log-wide).
        let wide = wide_row(spec);
        let wide_grid = wide && paged.sketch_token_grid();
        // f32 rows at one lane a token would hold 512 B of K a lane: they keep the 8-bit
        // layout's lanes (and FMA rescoring: the tensor cores take no f32).
        let one_lane_wide = wide_grid && mma_takes(spec);
        let tile = DenseTile {
            threads: 128,
            lanes_per_token: if one_lane_wide {
                1
            } else if wide {
                spec.head_dim * spec.group / 64
            } else {
                narrow_row_lanes(spec)
            },
            // Each token holds its sketch words while the page terms load (d·bits/32 registers
            // a token): four tokens a lane group at four CTAs an SM (eight spill at 128
            // registers); eight where two CTAs an SM leave 255 (G 2–3 and 8-bit wide rows): the
            // tuner's best at 32k–1M, 1.25× (`gqa`) and 1.35× (`wide`) faster than four at 1M
            // (results/2026-11-30-jit-pool/2-wide-gqa). Four stay with 4-bit sketches (the gated
            // stream spills 4–48 B with eight at G = 2) and for 8-bit wide rows with ALiBi (8–16
            // B at P = 64; local ptxas 13).
            tokens_per_group: match spec.group {
                _ if one_lane_wide => 2,
                _ if wide && paged.alibi => 4,
                _ if wide => 8,
                1 => 4,
                2..=3 if paged.sketch_bits == 8 => 8,
                2..=3 => 4,
                4 => 2,
                _ => 1,
            },
            newton_steps: if wide { 1 } else { 2 },
            // The pass is latency-bound, so resident warps matter most (results/
            // 2026-11-29-certified-dp4a: 2, 3, 4 CTAs per SM → 5.0, 3.95, 3.42 ms at 1M). The
            // occupancy floor also keeps ptxas (and the driver's JIT) from capping registers into
            // spills: four 128-thread CTAs (≤ 128 registers) for d = 32 without GQA or ALiBi
            // (with ALiBi they spill a few bytes), three (≤ 168) with ALiBi, two (≤ 255) for
            // larger heads and groups.
            score_min_blocks: if four {
                4
            } else if spec.head_dim * spec.group <= 32 {
                3
            } else {
                2
            },
            finish_capacity: 2048,
            // Rescoring on the tensor cores (`mma`): the tuner's to pick, except at `wide` (below).
            ..if wide {
                DenseTile::fma_wide(spec)
            } else {
                DenseTile::default_for(spec)
            }
        };
        // Wide rows' heads are cut into many splits (`wide`: 32 (sequence, KV head) pairs, 37
        // splits a head at 1M), so a warp's own bound stays far below its head's threshold and
        // about half its tokens are rescored; shared head bounds measured 3.85 → 2.99 ms at 1M
        // (results/2026-12-01-exact-finish/4-head-bound-ab). Elsewhere the tuner decides.
        // Seeding them (`seed`) pays more on `wide` at every length the tuner timed (the tile
        // above: 32k 261 → 239 µs, 128k 705 → 490, 1M 2452 → 1806; results/2026-12-05-long-select/
        // 3-checks-bench, tune logs), so the full walk's default there is seeded, and so is
        // the page-pruned walk's ([`DenseTile::default_certified_pruned`]). `gqa` gains from
        // 32k up but loses at 8k (72 → 98 µs) and `paper` at 1M: the tuner decides there.
        let tile = DenseTile {
            share_bound: wide_grid,
            seed: wide_grid,
            ..tile
        };
        if wide_grid {
            // Rescoring on the tensor cores (`mma`) and no occupancy floor: at one token a lane
            // the H200 tuner's best seeded tile at 32k and 1M (225 / 414 / 1723 µs against 240 /
            // 481 / 1743 for the best FMA tiles; results/2026-12-05-certified-tc/3-tune-wide).
            // Two tokens a lane (the tile above) beat one at every length once a seeded tile no
            // longer carried the pruned walk's kernels, whose tensor-core pass spills at two:
            // 196.5 / 406.1 / 1667 µs against 229.7 / 440.2 / 1770 in one H100 tuner run
            // (results/2026-12-05-refresh/2-bench). The pruned walk keeps one token a lane
            // ([`DenseTile::default_certified_pruned`]).
            //
            // And the sketch sums on the integer tensor cores (`_im`): 0.90× the `dp4a` pass at
            // 1M on this tile (1491 → 1345 µs), 0.91× at 128k on its four-CTA plan twin (386 →
            // 350; results/2026-12-07-im/1-ab), with split plans for two CTAs an SM (what its
            // 254 registers allow): 345.8 / 1355.0 µs at 128k / 1M against 389.0 / 1386.2 for
            // three, and the page-pruned walk's one token a lane 372.2 / 1452.1 against 394.7 /
            // 1502.9 (an H100 tuner run, results/2026-12-07-im/2-default; three was the best
            // plan for the `dp4a` pass). Untuned steps, c3 → c2: certified 0.410 → 0.290 ms at
            // 128k, 1.411 → 1.371 at 1M; certified-pruned 0.460 → 0.354 and 1.839 → 1.775
            // (results/2026-12-07-im/3-plan).
            let im = mma_takes(spec);
            return DenseTile {
                score_min_blocks: 0,
                mma: im,
                sketch_mma: im,
                ctas_per_sm: if im { 2 } else { tile.ctas_per_sm },
                ..tile
            };
        }
        if paged.sketch_token_grid() && spec.head_dim * spec.group <= 64 {
            // The 4-bit pass streams warp-locally and rescores in batches, so a chunk costs
            // little beyond its tokens: 256-thread CTAs, two an SM (≤ 128 registers), measured
            // best of nine tiles across 32k–1M at `paper` (1.32 / 0.246 / 0.110 ms at 1M / 128k /
            // 32k, results/2026-12-01-warp-stream/5-rescore-queue). Wider rows keep the tile
            // above: at two 256-thread CTAs an SM they spill (4–300 B, local ptxas 13).
            return DenseTile {
                threads: 256,
                score_min_blocks: 2,
                ctas_per_sm: 2,
                ..tile
            };
        }
        tile
    }

    /// The page-pruned certified walk's default: [`DenseTile::default_certified`], at one token
    /// a lane where it rescores on the tensor cores (`wide`: two tokens a lane spill the
    /// selected walk's pass there, 480 B, local ptxas 13). Where that default is seeded
    /// (`wide`) the pruned walk is seeded too ([`DenseTile::pruned_walk`], `_seed_pw`): on iid
    /// keys pruning keeps every page, so the pruned step is the full walk, and the seeded one
    /// took 609 → 400 µs at 128k and 2387 → 1577 µs at 1M against this tile unseeded (an H100,
    /// twice in one session alike; results/2026-12-07-pw/1-probe, tune logs). Elsewhere the
    /// full default is unseeded, and so is this one (`gqa` gains there too, 0.80× at 128k and
    /// 0.91× at 1M, but its full default stays unseeded for 8k: the tuner decides).
    pub fn default_certified_pruned(paged: &PagedSpec) -> DenseTile {
        let full = DenseTile::default_certified(paged);
        DenseTile {
            pruned_walk: full.seed,
            tokens_per_group: if full.mma { 1 } else { full.tokens_per_group },
            ..full
        }
    }

    /// Tokens one score CTA covers per chunk.
    pub fn chunk_len(&self) -> u32 {
        self.threads / self.lanes_per_token * self.tokens_per_group
    }

    /// Lane groups per finish CTA accumulating V rows (each group loads one row).
    pub fn finish_row_lanes(&self, spec: &DecodeSpec) -> u32 {
        (spec.head_dim * spec.kv_dtype.size_bytes() / 16).max(1)
    }

    /// `t256_l1_r16_n2_m0_c3_f256_s4096`, with `_h` when the splits share a head bound, `_tc`
    /// when the dot products run on the tensor cores, `_seed` when the shared bounds start at
    /// an estimate, `_pw` when a seeded tile also serves the page-pruned walk, `_la` when
    /// the sparse pass looks its pages up a chunk ahead and `_im` when the certified sketch sums
    /// run on the tensor cores.
    pub fn tag(&self) -> String {
        format!(
            "t{}_l{}_r{}_n{}_m{}_c{}_f{}_s{}{}{}{}{}{}{}",
            self.threads,
            self.lanes_per_token,
            self.tokens_per_group,
            self.newton_steps,
            self.score_min_blocks,
            self.ctas_per_sm,
            self.finish_threads,
            self.finish_capacity,
            if self.share_bound { "_h" } else { "" },
            if self.mma { "_tc" } else { "" },
            if self.seed { "_seed" } else { "" },
            if self.pruned_walk { "_pw" } else { "" },
            if self.lookahead { "_la" } else { "" },
            if self.sketch_mma { "_im" } else { "" }
        )
    }

    /// Whether this tile is valid for `spec`'s paged decode of `kind`: its shape
    /// ([`DenseTile::check`]) and the knobs that belong to one pass. [`DenseTile::share_bound`]
    /// is for the warp stream of a certified pass over a per-token grid (4-bit sketches), at GQA
    /// ≤ [`MAX_SHARE_BOUND_GROUP`]; [`DenseTile::mma`] for the dense and sparse score passes
    /// and the rescoring of a certified pass over 4-bit sketches;
    /// [`DenseTile::seed`] needs `share_bound` (the estimate is where the shared bounds start),
    /// and [`DenseTile::pruned_walk`] needs `seed` (an unseeded tile serves that walk already);
    /// [`DenseTile::lookahead`] is for the sparse pass where [`page_lookahead_by_default`] is off;
    /// [`DenseTile::sketch_mma`] for the certified pass over 4-bit sketches at one lane a token,
    /// GQA ≤ [`SKETCH_MMA_MAX_GROUP`] and a head dim that is a multiple of 32.
    pub fn check_for(&self, spec: &PagedSpec, kind: DecodeKind) -> Result<(), SpecError> {
        self.check(&spec.decode)?;
        self.check_pass_knobs(kind, spec)
    }

    /// Whether the sparse score pass of this tile looks its pages up a chunk ahead.
    pub fn page_lookahead(&self, spec: &DecodeSpec, alibi: bool) -> bool {
        self.lookahead || page_lookahead_by_default(spec, alibi)
    }

    fn check_pass_knobs(&self, kind: DecodeKind, spec: &PagedSpec) -> Result<(), SpecError> {
        let certified = kind.is_certified();
        if self.mma && certified && !spec.sketch_token_grid() {
            return Err(SpecError::BadTile {
                kernel: "decode_certified",
                reason: format!(
                    "mma (`_tc`) on the certified pass rescores on the tensor cores, which only the pass over 4-bit sketches does (this spec's sketch is {}-bit)",
                    spec.sketch_bits
                ),
            });
        }
        if self.sketch_mma {
            let shape_fits = self.lanes_per_token == 1
                && spec.decode.group <= SKETCH_MMA_MAX_GROUP
                && spec.decode.head_dim % 32 == 0;
            let why = certified_4bit_only("sketch_mma (`_im`)", certified, spec).or_else(|| {
                (!shape_fits).then(|| {
                    format!(
                        "sketch_mma (`_im`) needs one lane a token, GQA ≤ {SKETCH_MMA_MAX_GROUP} (two of the \
                         tensor tile's 8 columns a head) and a head dim that is a multiple of 32 \
                         (lanes_per_token {}, group {}, head_dim {})",
                        self.lanes_per_token, spec.decode.group, spec.decode.head_dim
                    )
                })
            });
            if let Some(reason) = why {
                return Err(SpecError::BadTile {
                    kernel: "decode_certified",
                    reason,
                });
            }
        }
        if self.lookahead && kind != DecodeKind::Sparse {
            return Err(SpecError::BadTile {
                kernel: if certified {
                    "decode_certified"
                } else {
                    "decode_dense"
                },
                reason: "lookahead (`_la`) is a tile of the sparse score pass (the walk over selected pages)"
                    .into(),
            });
        }
        if self.lookahead && page_lookahead_by_default(&spec.decode, spec.alibi) {
            return Err(SpecError::BadTile {
                kernel: "decode_sparse",
                reason: "lookahead (`_la`) is already on for f16 keys, GQA 1 and no ALiBi: drop the flag"
                    .into(),
            });
        }
        if self.seed && !self.share_bound {
            return Err(SpecError::BadTile {
                kernel: "decode_certified",
                reason: "seed (`_seed`) needs share_bound (`_h`): the estimate is where the heads' shared bounds start".into(),
            });
        }
        if self.pruned_walk && !self.seed {
            return Err(SpecError::BadTile {
                kernel: "decode_certified",
                reason: "pruned_walk (`_pw`) needs seed (`_seed`): an unseeded tile serves the page-pruned walk already"
                    .into(),
            });
        }
        if !self.share_bound {
            return Ok(());
        }
        let reason = if let Some(why) = certified_4bit_only("share_bound (`_h`)", certified, spec) {
            why
        } else if spec.decode.group > MAX_SHARE_BOUND_GROUP {
            format!(
                "share_bound (`_h`) needs GQA ≤ {MAX_SHARE_BOUND_GROUP} (group {}: registers)",
                spec.decode.group
            )
        } else {
            return Ok(());
        };
        Err(SpecError::BadTile {
            kernel: "decode_certified",
            reason,
        })
    }

    pub fn check(&self, spec: &DecodeSpec) -> Result<(), SpecError> {
        let bad = |reason: String| SpecError::BadTile {
            kernel: "decode_dense",
            reason,
        };
        for (name, t) in [("threads", self.threads), ("finish_threads", self.finish_threads)] {
            if !(32..=1024).contains(&t) || t % 32 != 0 {
                return Err(bad(format!("{name} = {t} must be a multiple of 32 in 32..=1024")));
            }
        }
        let l = self.lanes_per_token;
        if !l.is_power_of_two() || l > 32 || spec.head_dim % l != 0 {
            return Err(bad(format!(
                "lanes_per_token = {l} must be a power of two ≤ 32 dividing head_dim {}",
                spec.head_dim
            )));
        }
        if spec.head_dim / l * spec.kv_dtype.size_bytes() > 256 {
            return Err(bad(format!(
                "{} dims per lane is too many registers",
                spec.head_dim / l
            )));
        }
        if self.mma && (l != 1 || spec.group > MMA_MAX_GROUP || spec.head_dim % 16 != 0) {
            return Err(bad(format!(
                "mma (`_tc`) needs one lane a token, GQA ≤ {MMA_MAX_GROUP} (the heads are the tensor \
                 tile's columns) and a head dim that is a multiple of 16 (lanes_per_token {l}, \
                 group {}, head_dim {})",
                spec.group, spec.head_dim
            )));
        }
        if self.mma && !mma_takes(spec) {
            return Err(bad(format!(
                "mma (`_tc`) multiplies f16 or bf16 keys, not {}",
                spec.kv_dtype.name()
            )));
        }
        // In u64: a bundle's row may hold any u32, and a wrapped product would pass.
        let per_lane = u64::from(self.tokens_per_group) * u64::from(spec.group);
        if !(1..=64).contains(&per_lane) {
            return Err(bad(format!(
                "tokens_per_group × group = {per_lane} must be in 1..=64 (registers)"
            )));
        }
        if self.newton_steps > 16 || self.score_min_blocks > 32 || !(1..=32).contains(&self.ctas_per_sm) {
            return Err(bad(
                "newton_steps ≤ 16, score_min_blocks ≤ 32 and ctas_per_sm in 1..=32".into(),
            ));
        }
        if !(32..=4096).contains(&self.finish_capacity) {
            return Err(bad("finish_capacity must be in 32..=4096".into()));
        }
        Ok(())
    }
}

/// Shapes of one dense decode call (contiguous cache `[batch, kv_heads, n, head_dim]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseShape {
    pub batch: u32,
    pub kv_heads: u32,
    pub n: u64,
}

impl DenseShape {
    pub fn q_heads(&self, spec: &DecodeSpec) -> u32 {
        self.kv_heads * spec.group
    }
}

/// How one call is cut into splits: decided on the host from the shape and the GPU size, passed
/// to both kernels as arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DensePlan {
    pub chunks_per_split: u32,
    pub splits: u32,
    /// `chunks_per_split × chunk_len` tokens.
    pub split_len: u64,
}

/// Chunks a split of the sparse decode walks at least, whatever its plan: a split's later
/// chunks are pruned by the bound of its earlier ones, so one-chunk runs leave many more
/// candidates for the finish pass (`decode_sparse_score` cuts a selection into runs of at least
/// this many chunks, when its plan allows).
pub const SPARSE_MIN_RUN: u32 = 2;

/// How [`split_plan`] picks among the split lengths that launch at most about four waves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitPolicy {
    /// The shortest: the most CTAs. The streamed walks (dense, sparse) are memory-bound, and
    /// the CTAs of a partial last wave run faster than a full wave's, so more, shorter splits
    /// win: the least-tail choice below cost top-k 4–22% (results/2026-11-30-split-plan).
    MostCtas,
    /// The one whose last wave is least empty: CTAs run in rounds of `sm_count × ctas_per_sm`,
    /// so a split of `c` chunks costs `rounds × c` chunk-times. The certified score pass does
    /// the same sketch arithmetic for every token, so its CTAs take the same time whatever else
    /// runs: 1M tokens in 8 splits (1536 CTAs, 3.9 rounds of 396) instead of 9 (4.4 rounds) took
    /// 3.07 instead of 3.19 ms. Ties go to the fewer, longer splits: a longer split's own bound
    /// rises over more tokens, so it rescores fewer of them, and at `paper` 128k the one-warp
    /// `_h` tile's 22 splits (one round) ran 0.262 ms against 44 splits' (two rounds) 0.286;
    /// `gqa`'s untuned certified step 0.304 → 0.240 ms at 128k, nothing slower
    /// (results/2026-12-06-split-tie, an H100).
    LeastTail,
}

/// [`split_plan`] with [`SplitPolicy::MostCtas`].
pub fn dense_plan(tile: &DenseTile, shape: &DenseShape, sm_count: u32) -> Result<DensePlan, SpecError> {
    split_plan(tile, shape, sm_count, SplitPolicy::MostCtas)
}

/// Choose the split length: as long as possible (long splits have tight threshold bounds, so
/// few candidates) while still launching about four waves of `ctas_per_sm` CTAs per SM, and
/// never more than [`MAX_SPLITS`] splits; `policy` picks among the lengths that allow.
pub fn split_plan(
    tile: &DenseTile,
    shape: &DenseShape,
    sm_count: u32,
    policy: SplitPolicy,
) -> Result<DensePlan, SpecError> {
    split_plan_segmented(tile, shape, sm_count, policy, 1)
}

/// [`split_plan`] for a score pass that keeps `segments` workspace segments a split (one per
/// warp, see `crate::pipeline::segments_per_split`): at most `MAX_SPLITS / segments` splits,
/// so the finish pass sees at most [`MAX_SPLITS`] segments a head.
pub fn split_plan_segmented(
    tile: &DenseTile,
    shape: &DenseShape,
    sm_count: u32,
    policy: SplitPolicy,
    segments: u32,
) -> Result<DensePlan, SpecError> {
    if segments == 0 || segments > MAX_SPLITS {
        return Err(SpecError::BadShape(format!(
            "{segments} workspace segments a split (must be in 1..={MAX_SPLITS})"
        )));
    }
    if shape.n == 0 || shape.batch == 0 || shape.kv_heads == 0 {
        return Err(SpecError::BadShape(format!(
            "batch, kv_heads and n must be positive (got {}, {}, {})",
            shape.batch, shape.kv_heads, shape.n
        )));
    }
    if shape.n > i32::MAX as u64 {
        return Err(SpecError::BadShape(format!(
            "context length {} exceeds 2^31 − 1 tokens",
            shape.n
        )));
    }
    if shape.kv_heads > 65_535 || shape.batch > 65_535 {
        return Err(SpecError::BadShape(
            "batch and kv_heads must be ≤ 65535 (grid limits)".into(),
        ));
    }
    let chunk = tile.chunk_len() as u64;
    let chunks = ceil_div(shape.n, chunk);
    let groups = shape.batch as u64 * shape.kv_heads as u64;
    let slots = (sm_count.max(1) as u64) * tile.ctas_per_sm.max(1) as u64;
    let by_fill = ceil_div(chunks * groups, slots * 4);
    let by_limit = ceil_div(chunks, (MAX_SPLITS / segments) as u64);
    let shortest = by_fill.max(by_limit).clamp(1, chunks);
    let chunks_per_split = match policy {
        SplitPolicy::MostCtas => shortest,
        SplitPolicy::LeastTail => {
            // Every split count the shortest length allows, most splits first; a tie goes to the
            // fewer, longer splits.
            let (mut best_cost, mut best) = (u64::MAX, shortest);
            for splits in (1..=ceil_div(chunks, shortest)).rev() {
                let cps = ceil_div(chunks, splits);
                let cost = ceil_div(ceil_div(chunks, cps) * groups, slots) * cps;
                if cost <= best_cost {
                    (best_cost, best) = (cost, cps);
                }
            }
            best
        }
    };
    let splits = ceil_div(chunks, chunks_per_split);
    Ok(DensePlan {
        chunks_per_split: chunks_per_split as u32,
        splits: splits as u32,
        split_len: chunks_per_split * chunk,
    })
}

/// Element counts of the workspace buffers the two kernels share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseWorkspace {
    /// `cand_z` (f32) and `cand_idx` (i32): `[batch, q_heads, splits, split_len]`.
    pub cand_elems: u64,
    /// `cand_count` (i32) and `cand_lb` (f32): `[batch, q_heads, splits]`.
    pub split_elems: u64,
}

impl DenseWorkspace {
    pub fn bytes(&self) -> u64 {
        self.cand_elems * 8 + self.split_elems * 8
    }
}

pub fn dense_workspace(spec: &DecodeSpec, shape: &DenseShape, plan: &DensePlan) -> DenseWorkspace {
    dense_workspace_segmented(spec, shape, plan, 1)
}

/// [`dense_workspace`] with `segments` segments a split: the same candidate elements, and a
/// count and bound per segment.
pub fn dense_workspace_segmented(
    spec: &DecodeSpec,
    shape: &DenseShape,
    plan: &DensePlan,
    segments: u32,
) -> DenseWorkspace {
    let heads = shape.batch as u64 * shape.q_heads(spec) as u64;
    DenseWorkspace {
        cand_elems: heads * plan.splits as u64 * plan.split_len,
        split_elems: heads * plan.splits as u64 * segments as u64,
    }
}

/// The largest [`DenseWorkspace`] any batch of at most `max_batch` sequences of at most
/// `max_n` tokens plans under `policy` with `segments` segments a split (each buffer's maximum;
/// exact, by evaluating [`split_plan_segmented`] at every batch size and chunk count, since
/// split rounding makes the sizes non-monotone). Sizes an engine's workspace once so that every
/// later plan fits it.
#[allow(clippy::too_many_arguments)]
pub fn dense_workspace_bound(
    spec: &DecodeSpec,
    tile: &DenseTile,
    max_batch: u32,
    kv_heads: u32,
    max_n: u64,
    sm_count: u32,
    policy: SplitPolicy,
    segments: u32,
) -> Result<DenseWorkspace, SpecError> {
    let chunk = tile.chunk_len() as u64;
    let mut bound = DenseWorkspace {
        cand_elems: 0,
        split_elems: 0,
    };
    for batch in 1..=max_batch.max(1) {
        for chunks in 1..=ceil_div(max_n.max(1), chunk) {
            let shape = DenseShape {
                batch,
                kv_heads,
                n: (chunks * chunk).min(max_n.max(1)),
            };
            let plan = split_plan_segmented(tile, &shape, sm_count, policy, segments)?;
            let ws = dense_workspace_segmented(spec, &shape, &plan, segments);
            bound.cand_elems = bound.cand_elems.max(ws.cand_elems);
            bound.split_elems = bound.split_elems.max(ws.split_elems);
        }
    }
    Ok(bound)
}

pub fn dense_score_geometry(tile: &DenseTile, shape: &DenseShape, plan: &DensePlan) -> LaunchGeometry {
    LaunchGeometry {
        grid: [plan.splits, shape.kv_heads, shape.batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

pub fn dense_finish_geometry(spec: &DecodeSpec, tile: &DenseTile, shape: &DenseShape) -> LaunchGeometry {
    LaunchGeometry {
        grid: [shape.q_heads(spec), shape.batch, 1],
        block: tile.finish_threads,
        shared_bytes: 0,
    }
}

/// Entry names of the contiguous pair: `decode_contiguous_{score,finish}__<spec>__<tile>`.
pub fn dense_entry_names(spec: &DecodeSpec, tile: &DenseTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.tag(), tile.tag());
    (
        format!("decode_contiguous_score__{suffix}"),
        format!("decode_contiguous_finish__{suffix}"),
    )
}

/// Entry names of the paged decode pair: `decode_dense_{score,finish}__<paged spec>__<tile>` over
/// every page, `decode_sparse_…` over the selected pages.
pub fn paged_decode_entry_names(
    spec: &crate::PagedSpec,
    tile: &DenseTile,
    selected: bool,
) -> (String, String) {
    let kind = if selected { "decode_sparse" } else { "decode_dense" };
    let suffix = format!("{}__{}", spec.tag(), tile.tag());
    (
        format!("{kind}_score__{suffix}"),
        format!("{kind}_finish__{suffix}"),
    )
}

/// Score-pass geometry of the paged decodes: the plan covers the longest walk (the longest
/// sequence, or the largest possible selection).
pub fn paged_score_geometry(tile: &DenseTile, batch: u32, kv_heads: u32, plan: &DensePlan) -> LaunchGeometry {
    LaunchGeometry {
        grid: [plan.splits, kv_heads, batch],
        block: tile.threads,
        shared_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DType;

    #[test]
    fn alibi_halves_the_one_lane_groups_of_the_paged_default() {
        for (d, g) in [(32, 1), (32, 2), (64, 1), (128, 4)] {
            for kv in [DType::F16, DType::BF16] {
                let decode = DecodeSpec::new(1.5, d, g, kv).unwrap();
                let plain = PagedSpec::new(decode, 16, false, 8).unwrap();
                let alibi = PagedSpec::new(decode, 16, true, 8).unwrap();
                let base = DenseTile::default_for(&decode);
                assert_eq!(DenseTile::default_paged(&plain), base);
                let t = DenseTile::default_paged(&alibi);
                if base.lanes_per_token == 1 {
                    assert_eq!(
                        t.tokens_per_group,
                        base.tokens_per_group.min(ALIBI_TOKENS_PER_GROUP)
                    );
                    assert_eq!(
                        DenseTile {
                            tokens_per_group: base.tokens_per_group,
                            ..t
                        },
                        base
                    );
                } else {
                    assert_eq!(t, base, "d {d} G {g}");
                }
                t.check(&decode).unwrap();
            }
        }
        let paper = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, true, 8).unwrap();
        assert_eq!(DenseTile::default_paged(&paper).tokens_per_group, 8);
    }

    #[test]
    fn tokens_per_group_that_wraps_u32_is_refused() {
        // A bundle row's 2³¹ tokens a group times group 2 is 0 in u32: the check must not pass
        // it on to a zero chunk length (a division by zero in the plan).
        let spec = DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap();
        let tile = DenseTile {
            tokens_per_group: 1 << 31,
            ..DenseTile::default_for(&spec)
        };
        let e = tile.check(&spec).unwrap_err().to_string();
        assert!(e.contains("tokens_per_group × group = 4294967296"), "{e}");
    }

    #[test]
    fn plan_fills_the_gpu_and_bounds_splits() {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let tile = DenseTile::default_for(&spec);
        let chunk = tile.chunk_len() as u64;
        for (n, batch, heads) in [
            (1u64, 1, 1),
            (32_768, 8, 24),
            (1 << 20, 8, 24),
            (1 << 20, 1, 1),
            (3_000_001, 1, 2),
        ] {
            let shape = DenseShape {
                batch,
                kv_heads: heads,
                n,
            };
            let p = dense_plan(&tile, &shape, 132).unwrap();
            assert!(p.splits >= 1 && p.splits <= MAX_SPLITS, "{p:?}");
            assert!(p.splits as u64 * p.split_len >= n, "covers the sequence: {p:?}");
            assert!((p.splits as u64 - 1) * p.split_len < n, "no empty split: {p:?}");
            assert_eq!(p.split_len, p.chunks_per_split as u64 * chunk);
        }
        // The paper shape at 1M: long splits, about four waves.
        let p = dense_plan(
            &tile,
            &DenseShape {
                batch: 8,
                kv_heads: 24,
                n: 1 << 20,
            },
            132,
        )
        .unwrap();
        let ctas = p.splits as u64 * 8 * 24;
        assert!((1000..=3000).contains(&ctas), "{p:?}: {ctas} CTAs");
    }

    #[test]
    fn least_tail_fills_the_last_round() {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let tile = DenseTile {
            threads: 128,
            lanes_per_token: 1,
            tokens_per_group: 4,
            ctas_per_sm: 3,
            ..DenseTile::default_for(&spec)
        };
        let chunk = tile.chunk_len() as u64;
        let slots = 132 * 3;
        // Rounds of CTAs × chunks per split: the time the plan takes in chunk-times.
        let ctas = |p: &DensePlan, groups: u64| p.splits as u64 * groups;
        let time = |p: &DensePlan, groups: u64| ceil_div(ctas(p, groups), slots) * p.chunks_per_split as u64;
        // Certified-exact at 1M (paper shapes): 2048 chunks, 192 heads.
        let paper = DenseShape {
            batch: 8,
            kv_heads: 24,
            n: 1 << 20,
        };
        let most = split_plan(&tile, &paper, 132, SplitPolicy::MostCtas).unwrap();
        let least = split_plan(&tile, &paper, 132, SplitPolicy::LeastTail).unwrap();
        assert_eq!((most.splits, most.chunks_per_split), (9, 249));
        // 8 splits of 256 chunks (4 rounds) and 2 of 1024 (384 CTAs, one round) both take
        // 1024 chunk-times; the tie goes to the longer splits.
        assert_eq!((least.splits, least.chunks_per_split), (2, 1024));
        assert_eq!(time(&least, 192), 1024);
        assert!(time(&most, 192) > 1024);
        for n in [1u64, 100, 4096, 20_000, 131_072, 333_333, 1 << 20, 3_000_001] {
            for (batch, heads) in [(1, 1), (1, 8), (8, 24), (3, 5), (64, 32)] {
                let shape = DenseShape {
                    batch,
                    kv_heads: heads,
                    n,
                };
                let groups = batch as u64 * heads as u64;
                let most = split_plan(&tile, &shape, 132, SplitPolicy::MostCtas).unwrap();
                let least = split_plan(&tile, &shape, 132, SplitPolicy::LeastTail).unwrap();
                // Never shorter than the four-wave length, never slower by the round count.
                assert!(least.chunks_per_split >= most.chunks_per_split, "{shape:?}");
                assert!(time(&least, groups) <= time(&most, groups), "{shape:?}");
                assert!(least.splits as u64 * least.split_len >= n);
                assert!((least.splits as u64 - 1) * least.split_len < n, "no empty split");
                assert_eq!(least.split_len, least.chunks_per_split as u64 * chunk);
            }
        }
    }

    #[test]
    fn plan_rejects_bad_shapes() {
        let spec = DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap();
        let tile = DenseTile::default_for(&spec);
        for shape in [
            DenseShape {
                batch: 0,
                kv_heads: 1,
                n: 10,
            },
            DenseShape {
                batch: 1,
                kv_heads: 1,
                n: 0,
            },
            DenseShape {
                batch: 1,
                kv_heads: 1,
                n: 1 << 31,
            },
            DenseShape {
                batch: 70_000,
                kv_heads: 1,
                n: 10,
            },
        ] {
            assert!(
                matches!(dense_plan(&tile, &shape, 132), Err(SpecError::BadShape(_))),
                "{shape:?}"
            );
        }
    }
}
