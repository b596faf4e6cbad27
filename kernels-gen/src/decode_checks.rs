//! Suite checks of the paged decodes: `decode_dense` (every page) against full-cache entmax,
//! and `decode_sparse` (given selections) against entmax over the selected tokens — and, for a
//! selection that covers the support, against full-cache entmax too (Prop. 3.2: exact).

use crate::check::{compare, DenseOutputs};
use crate::data::Tensor;
use crate::paged_data::{paged_reference, KeyData, PagedCase, PagedInputs};
use crate::pipelines::{decode_pipeline, DecodeKind};
use crate::program::Program;
use crate::reference::{attend, DecodeReference};
use crate::suite::{KernelCheck, Outcome, SuiteError};
use entkv_abi::{page_lookahead_by_default, DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_dsl::interp::HostBuffer;

/// Which pages a sparse decode is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every page (the dense decode).
    All,
    /// Every `k`-th page plus the last.
    Strided(usize),
    /// The pages holding the full-cache support, plus the last: the output must be exact.
    Support,
}

pub struct PagedDecodeCheck {
    pub case: PagedCase,
    pub tile: DenseTile,
    pub selection: Selection,
    /// SMs the split plan assumes (small values give several chunks per split).
    pub sm_count: u32,
}

/// Host buffer of a tensor in its storage type.
pub fn host_tensor(t: &Tensor) -> HostBuffer {
    match t.dtype {
        DType::F16 => HostBuffer::F16(t.to_f16()),
        DType::BF16 => HostBuffer::BF16(t.to_bf16()),
        DType::F32 => HostBuffer::F32(t.to_f32()),
    }
}

/// The q, pools, block table, lengths and slopes of a paged problem as program buffers.
pub fn add_paged_inputs(p: &mut Program, x: &PagedInputs) {
    p.buffer("q", host_tensor(&x.q));
    p.buffer("k_pool", host_tensor(&x.k_pool));
    p.buffer("v_pool", host_tensor(&x.v_pool));
    p.buffer("block_table", HostBuffer::I32(x.block_table.clone()));
    p.buffer("seq_lens", HostBuffer::I32(x.seq_lens.clone()));
    if !x.alibi_slopes.is_empty() {
        p.buffer("alibi_slopes", HostBuffer::F32(x.alibi_slopes.clone()));
    }
}

impl PagedDecodeCheck {
    fn spec(&self) -> &PagedSpec {
        &self.case.spec
    }

    /// Selected logical pages per (sequence, KV head), ascending, the last page last.
    fn pages(&self, x: &PagedInputs, full: &DecodeReference) -> Vec<Vec<Vec<i32>>> {
        let p = self.spec().page_size as usize;
        let group = self.spec().decode.group as usize;
        let hkv = x.shape.kv_heads as usize;
        x.seq_lens
            .iter()
            .enumerate()
            .map(|(b, &len)| {
                let pages = (len as usize).div_ceil(p);
                (0..hkv)
                    .map(|kvh| {
                        let mut keep: Vec<bool> = match self.selection {
                            Selection::All => vec![true; pages],
                            Selection::Strided(s) => (0..pages).map(|j| j % s == 1).collect(),
                            Selection::Support => {
                                let mut keep = vec![false; pages];
                                for g in 0..group {
                                    let h = &full.heads[b * hkv * group + kvh * group + g];
                                    for (t, &z) in h.z.iter().enumerate() {
                                        if z > h.tau {
                                            keep[t / p] = true;
                                        }
                                    }
                                }
                                keep
                            }
                        };
                        keep[pages - 1] = true;
                        (0..pages as i32).filter(|&j| keep[j as usize]).collect()
                    })
                    .collect()
            })
            .collect()
    }
}

impl KernelCheck for PagedDecodeCheck {
    fn name(&self) -> String {
        let s = self.spec();
        format!(
            "decode {:?} α={} d={} g={} P={} {}{} lens={:?} {:?} {}",
            self.selection,
            s.decode.alpha,
            s.decode.head_dim,
            s.decode.group,
            s.page_size,
            s.decode.kv_dtype,
            if s.alibi { " alibi" } else { "" },
            self.case.seq_lens,
            self.case.data,
            self.tile.tag()
        )
    }

    fn program(&self) -> Result<Program, SuiteError> {
        let spec = self.spec();
        let x = self.case.inputs();
        let full = paged_reference(spec, &x);
        let kind = if self.selection == Selection::All {
            DecodeKind::Dense
        } else {
            DecodeKind::Sparse
        };
        let max_tokens = x.shape.max_pages as u64 * spec.page_size as u64;
        let pipeline = decode_pipeline(kind, spec, &self.tile, &x.shape, max_tokens, self.sm_count)?;
        let mut p = Program::new();
        add_paged_inputs(&mut p, &x);
        if kind == DecodeKind::Sparse {
            let mp = x.shape.max_pages as usize;
            let mut sel = vec![-7; x.shape.selection_elems() as usize];
            let mut count = Vec::new();
            for (b, per_head) in self.pages(&x, &full).iter().enumerate() {
                for (kvh, pages) in per_head.iter().enumerate() {
                    let row = (b * x.shape.kv_heads as usize + kvh) * mp;
                    sel[row..row + pages.len()].copy_from_slice(pages);
                    count.push(pages.len() as i32);
                }
            }
            p.buffer("sel_pages", HostBuffer::I32(sel));
            p.buffer("sel_count", HostBuffer::I32(count));
        }
        pipeline.add_to(&mut p);
        Ok(p)
    }

    fn verify(&self, ran: &Program) -> Outcome {
        let spec = self.spec();
        let x = self.case.inputs();
        let full = paged_reference(spec, &x);
        let reference = match self.selection {
            Selection::All => full.clone(),
            _ => selected_reference(spec, &x, &self.pages(&x, &full)),
        };
        let got = DenseOutputs::of_program(ran);
        let c = compare(&reference, &got, None);
        let mut passed = c.passed;
        let mut detail = format!(
            "rel err {:.2e}, τ err {:.2e}, support ≤ {}, mismatches {}, non-finite {} ({} heads)",
            c.max_rel_err, c.max_tau_err, c.max_support, c.support_mismatches, c.non_finite, c.heads
        );
        if self.selection == Selection::Support {
            // Covering the support makes the sparse decode exact (Prop. 3.2).
            let e = compare(&full, &got, None);
            passed &= e.passed;
            detail.push_str(&format!(
                "; vs full cache: rel err {:.2e}, passed {}",
                e.max_rel_err, e.passed
            ));
        }
        Outcome::new(passed, detail)
    }
}

/// Entmax over the selected tokens of each head.
pub fn selected_reference(spec: &PagedSpec, x: &PagedInputs, pages: &[Vec<Vec<i32>>]) -> DecodeReference {
    let p = spec.page_size as usize;
    let d = spec.decode.head_dim as usize;
    let group = spec.decode.group as usize;
    let q_heads = x.shape.kv_heads as usize * group;
    let mut heads = Vec::new();
    for (b, &len) in x.seq_lens.iter().enumerate() {
        let len = len as usize;
        for h in 0..q_heads {
            let kvh = h / group;
            let toks: Vec<usize> = pages[b][kvh]
                .iter()
                .flat_map(|&j| (j as usize * p..(j as usize + 1) * p).filter(|&t| t < len))
                .collect();
            let keys: Vec<&[f64]> = toks.iter().map(|&t| x.key(spec, b, kvh, t)).collect();
            let values: Vec<&[f64]> = toks.iter().map(|&t| x.value(spec, b, kvh, t)).collect();
            let bias: Vec<f64> = if x.alibi_slopes.is_empty() {
                Vec::new()
            } else {
                toks.iter().map(|&t| x.alibi(h, t, len)).collect()
            };
            let q = &x.q.values[(b * q_heads + h) * d..][..d];
            heads.push(attend(q, &keys, &values, &bias, spec.decode.alpha));
        }
    }
    DecodeReference { heads }
}

/// The paged-decode checks: each axis value at least once, odd sizes, scattered pages.
pub fn checks() -> Vec<Box<dyn KernelCheck>> {
    let mut v: Vec<Box<dyn KernelCheck>> = Vec::new();
    let mk =
        |alpha: f64, d: u32, g: u32, p: u32, dtype: DType, alibi: bool, lens: Vec<u32>, data: KeyData| {
            let decode = DecodeSpec::new(alpha, d, g, dtype).expect("spec");
            PagedCase {
                spec: PagedSpec::new(decode, p, alibi, 4).expect("paged spec"),
                kv_heads: 2,
                seq_lens: lens,
                seed: 11 + d as u64 + p as u64 + g as u64,
                data,
                spare_pages: 3,
            }
        };
    let small_tile = |spec: &DecodeSpec| DenseTile {
        threads: 64,
        tokens_per_group: 2,
        // No register cap from ptxas's occupancy heuristic (GQA 8 spilled under the driver).
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..DenseTile::default_for(spec)
    };
    let lens = vec![1, 16, 300, 777];
    let cases = vec![
        (
            mk(1.5, 32, 1, 16, DType::F16, false, lens.clone(), KeyData::Normal),
            Selection::All,
        ),
        (
            mk(2.0, 32, 3, 16, DType::F16, true, lens.clone(), KeyData::Normal),
            Selection::All,
        ),
        (
            mk(
                4.0 / 3.0,
                64,
                2,
                32,
                DType::BF16,
                false,
                vec![33, 64, 500],
                KeyData::Peaked,
            ),
            Selection::All,
        ),
        (
            mk(
                1.25,
                128,
                1,
                64,
                DType::BF16,
                true,
                vec![65, 200],
                KeyData::Normal,
            ),
            Selection::All,
        ),
        (
            mk(1.5, 32, 4, 16, DType::F16, false, vec![17, 250], KeyData::Ties),
            Selection::All,
        ),
        (
            mk(
                1.5,
                32,
                8,
                32,
                DType::BF16,
                false,
                vec![100, 40],
                KeyData::Dominant,
            ),
            Selection::All,
        ),
        (
            mk(2.0, 32, 1, 16, DType::F16, false, vec![5, 300], KeyData::Extreme),
            Selection::All,
        ),
        (
            mk(1.5, 32, 1, 16, DType::F16, false, lens.clone(), KeyData::Normal),
            Selection::Strided(3),
        ),
        (
            mk(2.0, 64, 2, 32, DType::BF16, true, vec![700, 90], KeyData::Peaked),
            Selection::Strided(2),
        ),
        (
            mk(
                1.5,
                32,
                3,
                16,
                DType::F16,
                false,
                vec![1000, 333],
                KeyData::Peaked,
            ),
            Selection::Support,
        ),
        (
            mk(1.5, 32, 1, 64, DType::F16, true, vec![900], KeyData::Normal),
            Selection::Support,
        ),
        // BENCH.md's `gqa` spec: one lane a token with both heads' q slices.
        (
            mk(
                1.5,
                32,
                2,
                16,
                DType::BF16,
                false,
                vec![1000, 77],
                KeyData::Normal,
            ),
            Selection::Strided(3),
        ),
        // d = 128 takes four lanes per token: the small tile's chunk (32 tokens) lies inside
        // one 64-token page, the staged-page path's other case.
        (
            mk(
                1.25,
                128,
                1,
                64,
                DType::BF16,
                true,
                vec![65, 200, 129],
                KeyData::Normal,
            ),
            Selection::Strided(2),
        ),
    ];
    for (case, selection) in cases {
        let tile = match selection {
            Selection::All => DenseTile::default_paged(&case.spec),
            _ => DenseTile::default_sparse(&case.spec),
        };
        let small = small_tile(&case.spec.decode);
        // The tensor-core pass (GQA 1–8, every d, f16 and bf16, ALiBi) on a small assumed GPU:
        // three rounds of two warps a chunk, so chunks and splits end inside warps and pages;
        // over 64-token pages also one round of three warps, 96-token chunks that start inside
        // pages (per-token page lookups).
        let mma_tile = |threads, tokens_per_group| DenseTile {
            threads,
            lanes_per_token: 1,
            tokens_per_group,
            mma: true,
            ..small
        };
        let mut mma_tiles = vec![mma_tile(64, 3)];
        if case.spec.page_size == 64 {
            mma_tiles.push(mma_tile(96, 1));
        }
        for &tile in &mma_tiles {
            v.push(Box::new(PagedDecodeCheck {
                case: case.clone(),
                tile,
                selection,
                sm_count: 1,
            }));
        }
        v.push(Box::new(PagedDecodeCheck {
            case: case.clone(),
            tile,
            selection,
            sm_count: 132,
        }));
        // The page lookahead where it is a tile knob (bf16, GQA, ALiBi), on the small FMA
        // tile and on a tensor-core tile: pages fetched a chunk ahead over runs of chunks.
        let knob =
            selection != Selection::All && !page_lookahead_by_default(&case.spec.decode, case.spec.alibi);
        if knob {
            for tile in [small, mma_tiles[0]] {
                v.push(Box::new(PagedDecodeCheck {
                    case: case.clone(),
                    tile: DenseTile {
                        lookahead: true,
                        ..tile
                    },
                    selection,
                    sm_count: 1,
                }));
            }
        }
        // Small tiles, a small assumed GPU: several chunks per split, several splits, and
        // candidates beyond the finish pass's shared staging.
        v.push(Box::new(PagedDecodeCheck {
            case,
            tile: small,
            selection,
            sm_count: 1,
        }));
    }
    // BENCH.md's `wide` spec, with its default tile (tensor cores, 128-token chunks), the same
    // looking its pages up a chunk ahead (the sparse walk's default there), the FMA
    // tile (six tokens × 32 lane groups: 192-token chunks, whole pages) and with 16 lanes × 3
    // tokens a lane group: 48-token chunks over 32-token pages, so chunks start inside pages
    // (the default before 2026-11-30, whose staging bug the GPU found).
    let case = mk(
        1.5,
        128,
        4,
        32,
        DType::BF16,
        false,
        vec![700, 90],
        KeyData::Normal,
    );
    let wide = DenseTile::default_for(&case.spec.decode);
    let wide_sparse = DenseTile::default_sparse(&case.spec);
    assert!(wide_sparse.lookahead, "the wide sparse default looks ahead");
    let fma = DenseTile::fma_wide(&case.spec.decode);
    let unaligned = DenseTile {
        threads: 256,
        lanes_per_token: 16,
        tokens_per_group: 3,
        ..fma
    };
    for tile in [wide, wide_sparse, fma, unaligned] {
        v.push(Box::new(PagedDecodeCheck {
            tile,
            case: case.clone(),
            selection: Selection::Strided(2),
            sm_count: 132,
        }));
    }
    // The page lookahead (f16, GQA 1, no ALiBi) with two pages a thread: 64 threads × 32 tokens
    // span 128 pages of 16, over runs of several chunks.
    let case = mk(
        1.5,
        32,
        1,
        16,
        DType::F16,
        false,
        vec![20_000, 3_001],
        KeyData::Normal,
    );
    let tile = DenseTile {
        tokens_per_group: 32,
        ..small_tile(&case.spec.decode)
    };
    v.push(Box::new(PagedDecodeCheck {
        case,
        tile,
        selection: Selection::Strided(2),
        sm_count: 1,
    }));
    v
}
