//! Decode pipelines as data: which entry points run, in which order, on which grid, with which
//! arguments — buffers by canonical name, scalars by value. This is the one place each kernel's
//! argument list is spelled out. Generated kernels (`entkv-kernels`) are attached to these
//! plans by entry name for the interpreter and the GPU checks; the runtime binds the names to an
//! engine's device pointers and launches the entries from a bundle's PTX.
//!
//! Canonical buffer names: inputs `q`, `k_pool`, `v_pool`, `block_table`, `seq_lens`,
//! `alibi_slopes` (with ALiBi); metadata `meta_bounds`, `meta_moments`, `sketch`, `meta_box` (and
//! `meta_pages`, the page list a build takes); selections `sel_pages`, `sel_count`; outputs
//! `out`, `tau`, `support`, `kept`; everything else is workspace.

use crate::gaussian::{
    check_gaussian_shape, gauss_entry_names, gauss_tau_geometry, gaussian_workspace,
    page_score_moments_entry, page_score_moments_geometry, select_gaussian_geometry, GaussTile,
    GaussianParams, MomentsTile,
};
use crate::meta::{meta_build_geometry, meta_entry_names, meta_update_geometry, MetaTile};
use crate::seed::{seed_entry_names, seed_pruned_scores_entry, seed_samples, SEED_THREADS};
use crate::signature::Elem;
use crate::topk::{
    page_bounds_entry, page_bounds_geometry, page_bounds_heads, page_score_box_entry,
    page_score_box_geometry, page_scores_elems, prune_geometry, prune_mark_entry, prune_mask_words,
    prune_tau_entry, select_pruned_entry, select_topk_entry, select_topk_geometry, softmax_topk_entry_names,
    softmax_topk_finish_geometry, softmax_topk_plan, softmax_topk_score_geometry, softmax_topk_workspace,
    BoxScoreTile, SelectTopkTile, SoftmaxTopkTile,
};
use crate::{
    dense_finish_geometry, dense_workspace_bound, dense_workspace_segmented, paged_decode_entry_names,
    paged_score_geometry, split_plan_segmented, DenseShape, DenseTile, DenseWorkspace, LaunchGeometry,
    PagedShape, PagedSpec, SpecError, SplitPolicy,
};
use serde::{Deserialize, Serialize};

/// One argument of a call: a named buffer, or a scalar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ArgRef {
    Buf(String),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
}

impl ArgRef {
    pub fn buf(name: &str) -> ArgRef {
        ArgRef::Buf(name.to_string())
    }
}

/// One launch of one entry point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallPlan {
    pub entry: String,
    pub geometry: LaunchGeometry,
    pub args: Vec<ArgRef>,
}

/// A buffer a pipeline writes besides its inputs (workspace or output).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferSpec {
    pub name: String,
    pub elem: Elem,
    pub len: u64,
}

impl BufferSpec {
    fn new(name: &str, elem: Elem, len: u64) -> BufferSpec {
        BufferSpec {
            name: name.to_string(),
            elem,
            len,
        }
    }
    pub fn bytes(&self) -> u64 {
        self.len * self.elem.size_bytes() as u64
    }
}

/// Calls in order and the buffers they write.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PipelinePlan {
    pub calls: Vec<CallPlan>,
    pub buffers: Vec<BufferSpec>,
}

impl PipelinePlan {
    /// This pipeline followed by `next` (buffers of both, each name once).
    pub fn then(mut self, next: PipelinePlan) -> PipelinePlan {
        self.calls.extend(next.calls);
        merge_buffers(&mut self.buffers, next.buffers);
        self
    }

    /// Entry points in call order (each once).
    pub fn entries(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for c in &self.calls {
            if !v.contains(&c.entry.as_str()) {
                v.push(&c.entry);
            }
        }
        v
    }

    /// Bytes of the buffers the pipeline writes (its workspace and outputs).
    pub fn workspace_bytes(&self) -> u64 {
        self.buffers.iter().map(BufferSpec::bytes).sum()
    }
}

/// Append `more` to `buffers`, each name once (the first spec of a name wins).
pub fn merge_buffers(buffers: &mut Vec<BufferSpec>, more: Vec<BufferSpec>) {
    for b in more {
        if !buffers.iter().any(|x| x.name == b.name) {
            buffers.push(b);
        }
    }
}

fn buf(name: &str) -> ArgRef {
    ArgRef::buf(name)
}

/// Which entmax decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DecodeKind {
    /// Every page (`decode_dense`).
    Dense,
    /// The pages in `sel_pages`/`sel_count` (`decode_sparse`).
    Sparse,
    /// The sketch-certified superset of the support (`select_certified` + `decode_certified`).
    Certified,
    /// [`DecodeKind::Certified`] over the pages in `sel_pages`/`sel_count` that
    /// [`certified_prune_calls`] kept (`select_certified_rest` for the pairs that kept more than
    /// 3/4 of their pages, `select_certified_sel` for the others, then `decode_certified`):
    /// exact as long as the selection holds every page with a support token, which the
    /// pruning proves.
    CertifiedSelected,
}

impl DecodeKind {
    /// Whether the kind's score pass is the certified one (sketch bounds, candidate stream).
    pub fn is_certified(self) -> bool {
        matches!(self, DecodeKind::Certified | DecodeKind::CertifiedSelected)
    }

    /// How the kind's score pass is cut into splits.
    pub fn split_policy(self) -> SplitPolicy {
        match self {
            DecodeKind::Dense | DecodeKind::Sparse => SplitPolicy::MostCtas,
            DecodeKind::Certified | DecodeKind::CertifiedSelected => SplitPolicy::LeastTail,
        }
    }
}

/// Workspace segments a score split of `kind` writes: one per warp for a certified pass over a
/// per-token sketch grid (4-bit sketches), whose candidate stream is warp-local, else one. The
/// finish pass then reads `splits × segments` segments of `split_len / segments` elements a
/// head (its `splits` and `split_len` arguments).
pub fn segments_per_split(kind: DecodeKind, spec: &PagedSpec, tile: &DenseTile) -> u32 {
    match kind {
        DecodeKind::Certified | DecodeKind::CertifiedSelected if spec.sketch_token_grid() => {
            tile.threads / 32
        }
        _ => 1,
    }
}

/// Entry names of the certified pair: `select_certified__<spec+sketch>__<tile>`,
/// `decode_certified__…`.
pub fn certified_entry_names(spec: &PagedSpec, tile: &DenseTile) -> (String, String) {
    let suffix = format!("{}__{}", spec.sketch_tag(), tile.tag());
    (
        format!("select_certified__{suffix}"),
        format!("decode_certified__{suffix}"),
    )
}

/// Entry name of the kernel that resets the per-head shared threshold bounds (`head_bound`)
/// before a certified pass over a per-token grid (4-bit sketches) raises them:
/// `certified_init__<spec+sketch>__<tile>`.
pub fn certified_init_entry(spec: &PagedSpec, tile: &DenseTile) -> String {
    format!("certified_init__{}__{}", spec.sketch_tag(), tile.tag())
}

/// Threads a block of `certified_init`.
pub const CERTIFIED_INIT_THREADS: u32 = 128;

/// Entry name of the certified score pass over a page selection:
/// `select_certified_sel__<spec+sketch>__<tile>` (its finish pass is `decode_certified`).
pub fn certified_selected_entry(spec: &PagedSpec, tile: &DenseTile) -> String {
    format!("select_certified_sel__{}__{}", spec.sketch_tag(), tile.tag())
}

/// Entry name of the certified full walk over the (sequence, KV head) pairs whose pruning kept
/// most pages: `select_certified_rest__<spec+sketch>__<tile>`.
pub fn certified_rest_entry(spec: &PagedSpec, tile: &DenseTile) -> String {
    format!("select_certified_rest__{}__{}", spec.sketch_tag(), tile.tag())
}

/// After page pruning, the selected walk takes the (sequence, KV head) pairs that kept at most
/// this share (numerator, denominator) of their pages (`sel_count` against the sequence's
/// pages, the last page included in both); `select_certified_rest` walks every token of the
/// others (faster per token where most pages stay: no selection lookups), and the pruning
/// writes only their `sel_count`, not their `sel_pages`, which nothing reads.
pub const SELECTED_WALK_SHARE: (u32, u32) = (3, 4);

/// Whether the selected walk takes a pair whose pruning kept `count` of its `pages` pages
/// ([`SELECTED_WALK_SHARE`]); the kernels' test is the same comparison in i32.
pub fn selected_walk_takes(count: u64, pages: u64) -> bool {
    count * SELECTED_WALK_SHARE.1 as u64 <= pages * SELECTED_WALK_SHARE.0 as u64
}

/// One decode step over the paged cache. `max_tokens` bounds the tokens any (sequence, KV
/// head) visits (the longest sequence, or the largest selection) and `sm_count` sizes the
/// split plan; neither needs anything from the device.
pub fn decode_calls(
    kind: DecodeKind,
    spec: &PagedSpec,
    tile: &DenseTile,
    shape: &PagedShape,
    max_tokens: u64,
    sm_count: u32,
) -> Result<PipelinePlan, SpecError> {
    let ds = &spec.decode;
    tile.check_for(spec, kind)?;
    let dshape = DenseShape {
        batch: shape.batch,
        kv_heads: shape.kv_heads,
        n: max_tokens.max(1),
    };
    let segments = segments_per_split(kind, spec, tile);
    let plan = split_plan_segmented(tile, &dshape, sm_count, kind.split_policy(), segments)?;
    let ws = dense_workspace_segmented(ds, &dshape, &plan, segments);
    if kind == DecodeKind::CertifiedSelected && !tile.serves_pruned_walk() {
        return Err(SpecError::BadTile {
            kernel: "decode_certified",
            reason:
                "a seed (`_seed`) without pruned_walk (`_pw`) is a tile of the full walk; the page-pruned walk's row takes unseeded tiles or `_seed_pw` ones"
                    .into(),
        });
    }
    let samples = seed_samples(dshape.n);
    let buffers = decode_buffers(kind, spec, tile, shape.batch, shape.kv_heads, &ws, samples);
    let alibi: Vec<ArgRef> = if spec.alibi {
        vec![buf("alibi_slopes")]
    } else {
        Vec::new()
    };
    let mp = ArgRef::I32(shape.max_pages as i32);
    let score_geom = paged_score_geometry(tile, shape.batch, shape.kv_heads, &plan);
    let finish_geom = dense_finish_geometry(ds, tile, &dshape);
    // A split's length is a whole number of chunks, and a chunk a whole number of warps'
    // tokens, so `segments` divides it.
    let tail = [
        ArgRef::I32((plan.splits * segments) as i32),
        ArgRef::I64((plan.split_len / segments as u64) as i64),
        mp.clone(),
    ];
    let chunks = ArgRef::I32(plan.chunks_per_split as i32);
    let (score, finish, a1, mut a2) = match kind {
        DecodeKind::Dense | DecodeKind::Sparse => {
            let selected = kind == DecodeKind::Sparse;
            let (score, finish) = paged_decode_entry_names(spec, tile, selected);
            let mut a1 = vec![buf("q"), buf("k_pool"), buf("block_table"), buf("seq_lens")];
            if selected {
                a1.extend([buf("sel_pages"), buf("sel_count")]);
            }
            a1.extend(alibi);
            a1.extend([
                buf("cand_z"),
                buf("cand_idx"),
                buf("cand_count"),
                buf("cand_lb"),
                mp.clone(),
                chunks,
            ]);
            let a2 = vec![
                buf("cand_z"),
                buf("cand_idx"),
                buf("cand_count"),
                buf("cand_lb"),
                buf("v_pool"),
                buf("block_table"),
                buf("seq_lens"),
                buf("out"),
                buf("tau"),
                buf("support"),
            ];
            (score, finish, a1, a2)
        }
        DecodeKind::Certified | DecodeKind::CertifiedSelected => {
            let (mut select, decode) = certified_entry_names(spec, tile);
            let mut a1 = vec![buf("q"), buf("k_pool"), buf("block_table"), buf("seq_lens")];
            if kind == DecodeKind::CertifiedSelected {
                select = certified_selected_entry(spec, tile);
                a1.extend([buf("sel_pages"), buf("sel_count")]);
            }
            a1.extend([buf("meta_bounds"), buf("sketch")]);
            a1.extend(alibi.clone());
            a1.extend([
                buf("cand_lb"),
                buf("cand_ub"),
                buf("cand_idx"),
                buf("cand_count"),
                buf("cand_bound"),
            ]);
            if tile.share_bound {
                a1.push(buf("head_bound"));
            }
            if tile.seed {
                // The first pass: every CTA walks (gate 0).
                a1.extend([buf("repair"), ArgRef::I32(0)]);
            }
            a1.extend([mp.clone(), chunks]);
            let mut a2 = vec![
                buf("q"),
                buf("k_pool"),
                buf("v_pool"),
                buf("block_table"),
                buf("seq_lens"),
            ];
            a2.extend(alibi);
            a2.extend([
                buf("cand_lb"),
                buf("cand_ub"),
                buf("cand_idx"),
                buf("cand_count"),
                buf("cand_bound"),
                buf("out"),
                buf("tau"),
                buf("support"),
                buf("kept"),
            ]);
            if tile.seed {
                a2.extend([buf("repair"), ArgRef::I32(0)]);
            }
            (select, decode, a1, a2)
        }
    };
    a2.extend(tail);
    let mut calls = Vec::new();
    let heads = shape.batch as u64 * shape.kv_heads as u64 * ds.group as u64;
    if tile.seed {
        calls.extend(seed_calls(spec, tile, shape, samples, kind)?);
    } else if tile.share_bound {
        // Every head's shared bound starts at −∞: the score pass's CTAs raise it with bounds
        // on this step's threshold only (a workspace holds anything between steps).
        let heads = heads_i32(heads)?;
        calls.push(CallPlan {
            entry: certified_init_entry(spec, tile),
            geometry: LaunchGeometry::cover(heads, CERTIFIED_INIT_THREADS),
            args: vec![buf("head_bound"), ArgRef::I32(heads as i32)],
        });
    }
    // The score passes: after page pruning first the full walk of the pairs whose pruning kept
    // most pages (the selected pass's arguments without `sel_pages`), then the selected walk.
    let mut passes = Vec::new();
    if kind == DecodeKind::CertifiedSelected {
        let args = a1.iter().filter(|a| **a != buf("sel_pages")).cloned().collect();
        passes.push((certified_rest_entry(spec, tile), args));
    }
    passes.push((score, a1));
    for (entry, args) in &passes {
        calls.push(CallPlan {
            entry: entry.clone(),
            geometry: score_geom,
            args: args.clone(),
        });
    }
    calls.push(CallPlan {
        entry: finish.clone(),
        geometry: finish_geom,
        args: a2.clone(),
    });
    if tile.seed {
        // Check every head's estimate against its threshold, then repair the flagged pairs:
        // the same passes from the first one's rigorous bound τ(K) (`repair_bound`, written by
        // the check) and the same finish, gated (1) on `repair`.
        let [_, _, verify] = seed_entry_names(spec, tile);
        let heads = heads_i32(heads)?;
        calls.push(CallPlan {
            entry: verify,
            geometry: LaunchGeometry::cover(heads, SEED_THREADS),
            args: vec![
                buf("tau"),
                buf("seed"),
                buf("repair"),
                buf("repair_bound"),
                ArgRef::I32(heads as i32),
            ],
        });
        let gated = |args: Vec<ArgRef>| -> Vec<ArgRef> {
            let gate = args
                .iter()
                .position(|a| *a == buf("repair"))
                .expect("seeded calls pass `repair`")
                + 1;
            args.into_iter()
                .enumerate()
                .map(|(i, a)| match a {
                    _ if i == gate => ArgRef::I32(1),
                    ArgRef::Buf(b) if b == "head_bound" => buf("repair_bound"),
                    a => a,
                })
                .collect()
        };
        for (entry, args) in passes {
            calls.push(CallPlan {
                entry,
                geometry: score_geom,
                args: gated(args),
            });
        }
        calls.push(CallPlan {
            entry: finish,
            geometry: finish_geom,
            args: gated(a2),
        });
    }
    Ok(PipelinePlan { calls, buffers })
}

/// Query heads a step, refused past the i32 the init and verify kernels take.
fn heads_i32(heads: u64) -> Result<u32, SpecError> {
    u32::try_from(heads)
        .ok()
        .filter(|&h| h <= i32::MAX as u32)
        .ok_or_else(|| SpecError::BadShape(format!("{heads} query heads a step (at most 2^31 − 1)")))
}

/// The seeded pass's first launches (`crate::seed`): exact scores of every head's samples
/// (grid (sample blocks, KV heads, batch)), then one CTA a head turns them into the estimate,
/// which starts `head_bound`, and resets `repair`. After page pruning the samples skip the
/// pairs the selected walk takes (`certified_seed_scores_pruned`, which reads `sel_count`).
fn seed_calls(
    spec: &PagedSpec,
    tile: &DenseTile,
    shape: &PagedShape,
    samples: u64,
    kind: DecodeKind,
) -> Result<Vec<CallPlan>, SpecError> {
    let [mut scores, estimate, _] = seed_entry_names(spec, tile);
    let pruned = kind == DecodeKind::CertifiedSelected;
    if pruned {
        scores = seed_pruned_scores_entry(spec, tile);
    }
    let samples_i32 = i32::try_from(samples)
        .map_err(|_| SpecError::BadShape(format!("{samples} seed samples a head (at most 2^31 − 1)")))?;
    let blocks = u32::try_from(samples.div_ceil(SEED_THREADS as u64)).expect("samples fit i32");
    let mut score_args = vec![buf("q"), buf("k_pool"), buf("block_table"), buf("seq_lens")];
    if pruned {
        score_args.push(buf("sel_count"));
    }
    if spec.alibi {
        score_args.push(buf("alibi_slopes"));
    }
    score_args.extend([
        buf("seed_z"),
        ArgRef::I32(samples_i32),
        ArgRef::I32(shape.max_pages as i32),
    ]);
    Ok(vec![
        CallPlan {
            entry: scores,
            geometry: LaunchGeometry {
                grid: [blocks, shape.kv_heads, shape.batch],
                block: SEED_THREADS,
                shared_bytes: 0,
            },
            args: score_args,
        },
        CallPlan {
            entry: estimate,
            geometry: LaunchGeometry {
                grid: [shape.kv_heads * spec.decode.group, shape.batch, 1],
                block: SEED_THREADS,
                shared_bytes: 0,
            },
            args: vec![
                buf("seed_z"),
                buf("seed"),
                buf("head_bound"),
                buf("repair"),
                ArgRef::I32(samples_i32),
            ],
        },
    ])
}

/// The workspace and outputs of one decode with workspace `ws`.
fn decode_buffers(
    kind: DecodeKind,
    spec: &PagedSpec,
    tile: &DenseTile,
    batch: u32,
    kv_heads: u32,
    ws: &DenseWorkspace,
    seed_samples: u64,
) -> Vec<BufferSpec> {
    let ds = &spec.decode;
    let heads = batch as u64 * kv_heads as u64 * ds.group as u64;
    let mut buffers = vec![
        BufferSpec::new("cand_idx", Elem::I32, ws.cand_elems),
        BufferSpec::new("cand_count", Elem::I32, ws.split_elems),
        BufferSpec::new("out", ds.out_dtype.into(), heads * ds.head_dim as u64),
        BufferSpec::new("tau", Elem::F32, heads),
        BufferSpec::new("support", Elem::I32, heads),
    ];
    match kind {
        DecodeKind::Dense | DecodeKind::Sparse => {
            buffers.push(BufferSpec::new("cand_z", Elem::F32, ws.cand_elems));
            buffers.push(BufferSpec::new("cand_lb", Elem::F32, ws.split_elems));
        }
        DecodeKind::Certified | DecodeKind::CertifiedSelected => {
            buffers.push(BufferSpec::new("cand_lb", Elem::F32, ws.cand_elems));
            buffers.push(BufferSpec::new("cand_ub", Elem::F32, ws.cand_elems));
            buffers.push(BufferSpec::new("cand_bound", Elem::F32, ws.split_elems));
            buffers.push(BufferSpec::new("kept", Elem::I32, heads));
            if tile.share_bound {
                // Per query head, the best bound on its threshold any CTA has found (the f32's
                // order-preserving i32), shared by every split of the head.
                buffers.push(BufferSpec::new("head_bound", Elem::I32, heads));
            }
            if tile.seed {
                // Samples' exact scores, the estimate, the repair's own shared bounds and the
                // per-pair repair flags (`crate::seed`).
                buffers.push(BufferSpec::new("seed_z", Elem::F32, heads * seed_samples));
                buffers.push(BufferSpec::new("seed", Elem::F32, heads));
                buffers.push(BufferSpec::new("repair_bound", Elem::I32, heads));
                buffers.push(BufferSpec::new(
                    "repair",
                    Elem::I32,
                    batch as u64 * kv_heads as u64,
                ));
            }
        }
    }
    buffers
}

/// The largest buffers [`decode_calls`] plans for any batch of at most `max_batch` sequences
/// visiting at most `max_tokens` tokens (see [`crate::dense_workspace_bound`]).
pub fn decode_buffers_bound(
    kind: DecodeKind,
    spec: &PagedSpec,
    tile: &DenseTile,
    max_batch: u32,
    kv_heads: u32,
    max_tokens: u64,
    sm_count: u32,
) -> Result<Vec<BufferSpec>, SpecError> {
    tile.check_for(spec, kind)?;
    let ws = dense_workspace_bound(
        &spec.decode,
        tile,
        max_batch,
        kv_heads,
        max_tokens,
        sm_count,
        kind.split_policy(),
        segments_per_split(kind, spec, tile),
    )?;
    Ok(decode_buffers(
        kind,
        spec,
        tile,
        max_batch,
        kv_heads,
        &ws,
        seed_samples(max_tokens.max(1)),
    ))
}

fn meta_buffers(spec: &PagedSpec, shape: &PagedShape) -> Vec<BufferSpec> {
    let kv: Elem = spec.decode.kv_dtype.into();
    vec![
        BufferSpec::new("meta_bounds", kv, shape.meta_elems(spec)),
        BufferSpec::new("meta_moments", kv, shape.meta_elems(spec)),
        BufferSpec::new("sketch", Elem::U32, shape.sketch_words(spec)),
        BufferSpec::new("meta_box", Elem::U32, shape.box_words(spec)),
    ]
}

/// Build the metadata of the `pages` physical pages listed in buffer `meta_pages` (e.g.
/// `entkv_abi::full_pages` after prefill). No call when the list is empty.
pub fn meta_build_calls(
    spec: &PagedSpec,
    tile: &MetaTile,
    shape: &PagedShape,
    pages: u64,
) -> Result<PipelinePlan, SpecError> {
    let mut calls = Vec::new();
    if pages > 0 {
        calls.push(CallPlan {
            entry: meta_entry_names(spec, tile).0,
            geometry: meta_build_geometry(tile, shape, pages)?,
            args: vec![
                buf("k_pool"),
                buf("meta_pages"),
                buf("meta_bounds"),
                buf("meta_moments"),
                buf("sketch"),
                buf("meta_box"),
                ArgRef::I32(pages as i32),
            ],
        });
    }
    Ok(PipelinePlan {
        calls,
        buffers: meta_buffers(spec, shape),
    })
}

/// Rebuild the metadata of the page each sequence's newest token completed (on append).
pub fn meta_update_calls(
    spec: &PagedSpec,
    tile: &MetaTile,
    shape: &PagedShape,
) -> Result<PipelinePlan, SpecError> {
    Ok(PipelinePlan {
        calls: vec![CallPlan {
            entry: meta_entry_names(spec, tile).1,
            geometry: meta_update_geometry(tile, shape)?,
            args: vec![
                buf("k_pool"),
                buf("block_table"),
                buf("seq_lens"),
                buf("meta_bounds"),
                buf("meta_moments"),
                buf("sketch"),
                buf("meta_box"),
                ArgRef::I32(shape.max_pages as i32),
            ],
        }],
        buffers: meta_buffers(spec, shape),
    })
}

/// The leading arguments of a pass over every page's metadata `meta`: `q`, `meta`,
/// `block_table`, `seq_lens` (and `alibi_slopes` with ALiBi).
fn page_pass_args(spec: &PagedSpec, meta: &str) -> Vec<ArgRef> {
    let mut a = vec![buf("q"), buf(meta), buf("block_table"), buf("seq_lens")];
    if spec.alibi {
        a.push(buf("alibi_slopes"));
    }
    a
}

fn selection_buffers(shape: &PagedShape) -> [BufferSpec; 2] {
    [
        BufferSpec::new("sel_pages", Elem::I32, shape.selection_elems()),
        BufferSpec::new("sel_count", Elem::I32, shape.batch as u64 * shape.kv_heads as u64),
    ]
}

/// Top-k page selection: box bounds of every scored page, then the `budget_pages` best per
/// (sequence, KV head) plus the last page into `sel_pages`/`sel_count`.
pub fn topk_select_calls(
    spec: &PagedSpec,
    box_tile: &BoxScoreTile,
    sel_tile: &SelectTopkTile,
    shape: &PagedShape,
    budget_pages: i32,
) -> Result<PipelinePlan, SpecError> {
    box_tile.check(spec)?;
    sel_tile.check(spec)?;
    let mut a1 = page_pass_args(spec, "meta_bounds");
    a1.extend([buf("page_scores"), ArgRef::I32(shape.max_pages as i32)]);
    let mut buffers = vec![BufferSpec::new(
        "page_scores",
        Elem::F32,
        page_scores_elems(shape),
    )];
    buffers.extend(selection_buffers(shape));
    Ok(PipelinePlan {
        calls: vec![
            CallPlan {
                entry: page_score_box_entry(spec, box_tile),
                geometry: page_score_box_geometry(spec, box_tile, shape),
                args: a1,
            },
            CallPlan {
                entry: select_topk_entry(spec, sel_tile),
                geometry: select_topk_geometry(sel_tile, shape),
                args: vec![
                    buf("page_scores"),
                    buf("seq_lens"),
                    buf("sel_pages"),
                    buf("sel_count"),
                    ArgRef::I32(shape.max_pages as i32),
                    ArgRef::I32(budget_pages),
                ],
            },
        ],
        buffers,
    })
}

/// Page pruning for the certified decode: rigorous box bounds of every full page
/// (`page_bounds`: `page_ub`, in `(α − 1)·score` units, the largest over the GQA group, and
/// `page_lb_max`, the largest of the pages' lower bounds — each the smallest over the group —
/// per warp of pages), then per (sequence, KV head) the pages whose upper bound exceeds a lower
/// bound on the entmax threshold (`prune_mark`: a bitmask and a count per slice of pages), plus
/// the last page, compacted into `sel_pages`/`sel_count` (by `select_pruned` when a row spans
/// several slices, by `prune_mark` itself otherwise).
/// [`DecodeKind::CertifiedSelected`] decodes them.
pub fn certified_prune_calls(
    spec: &PagedSpec,
    box_tile: &BoxScoreTile,
    sel_tile: &SelectTopkTile,
    shape: &PagedShape,
) -> Result<PipelinePlan, SpecError> {
    box_tile.check(spec)?;
    sel_tile.check(spec)?;
    let mut a1 = page_pass_args(spec, "meta_box");
    a1.extend([
        buf("page_ub"),
        buf("page_lb_max"),
        ArgRef::I32(shape.max_pages as i32),
        ArgRef::I32(page_bounds_heads(spec, shape).trailing_zeros() as i32),
    ]);
    let bounds_geometry = page_bounds_geometry(spec, box_tile, shape);
    // One maximum per page_bounds warp (32 threads) and KV head: grid (kv heads / H, page
    // blocks, batch), every warp holding pages of all H heads of its block.
    let lb_slots = crate::topk::page_pass_blocks(&bounds_geometry) * (box_tile.threads / 32);
    let rows = shape.kv_heads as u64 * shape.batch as u64;
    let prune = prune_geometry(sel_tile, shape);
    let mut buffers = vec![
        BufferSpec::new("page_ub", Elem::F32, page_scores_elems(shape)),
        BufferSpec::new("page_lb_max", Elem::F32, lb_slots as u64 * rows),
        BufferSpec::new("prune_mask", Elem::U32, prune_mask_words(shape) as u64 * rows),
        BufferSpec::new("prune_counts", Elem::I32, prune.grid[0] as u64 * rows),
        BufferSpec::new("prune_tau", Elem::F32, rows),
    ];
    buffers.extend(selection_buffers(shape));
    // With one slice a row, `prune_mark` finds τ_low and writes the selection itself.
    let sliced = prune.grid[0] > 1;
    let mut calls = vec![CallPlan {
        entry: page_bounds_entry(spec, box_tile),
        geometry: bounds_geometry,
        args: a1,
    }];
    if sliced {
        calls.push(CallPlan {
            entry: prune_tau_entry(spec, sel_tile),
            geometry: select_topk_geometry(sel_tile, shape),
            args: vec![buf("page_lb_max"), ArgRef::I32(lb_slots as i32), buf("prune_tau")],
        });
    }
    calls.push(CallPlan {
        entry: prune_mark_entry(spec, sel_tile),
        geometry: prune,
        args: vec![
            buf("page_ub"),
            buf("page_lb_max"),
            ArgRef::I32(lb_slots as i32),
            buf("prune_tau"),
            buf("seq_lens"),
            buf("prune_mask"),
            buf("prune_counts"),
            buf("sel_pages"),
            buf("sel_count"),
            ArgRef::I32(shape.max_pages as i32),
        ],
    });
    if sliced {
        calls.push(CallPlan {
            entry: select_pruned_entry(spec, sel_tile),
            geometry: prune,
            args: vec![
                buf("prune_mask"),
                buf("prune_counts"),
                buf("seq_lens"),
                buf("sel_pages"),
                buf("sel_count"),
                ArgRef::I32(shape.max_pages as i32),
            ],
        });
    }
    Ok(PipelinePlan { calls, buffers })
}

/// Softmax attention over the selected pages (the Quest baseline), planned for selections of at
/// most `budget_pages` + 1 pages.
pub fn softmax_topk_calls(
    spec: &PagedSpec,
    tile: &SoftmaxTopkTile,
    shape: &PagedShape,
    budget_pages: i32,
    sm_count: u32,
) -> Result<PipelinePlan, SpecError> {
    tile.check(spec)?;
    let plan = softmax_topk_plan(spec, tile, shape, budget_pages, sm_count)?;
    let ws = softmax_topk_workspace(spec, shape, &plan);
    let (score, finish) = softmax_topk_entry_names(spec, tile);
    let mut a1 = vec![
        buf("q"),
        buf("k_pool"),
        buf("v_pool"),
        buf("block_table"),
        buf("seq_lens"),
        buf("sel_pages"),
        buf("sel_count"),
    ];
    if spec.alibi {
        a1.push(buf("alibi_slopes"));
    }
    a1.extend([
        buf("part_ml"),
        buf("part_acc"),
        ArgRef::I32(shape.max_pages as i32),
        ArgRef::I32(plan.chunks_per_split as i32),
    ]);
    let heads = shape.batch as u64 * shape.q_heads(spec) as u64;
    Ok(PipelinePlan {
        calls: vec![
            CallPlan {
                entry: score,
                geometry: softmax_topk_score_geometry(tile, shape, &plan),
                args: a1,
            },
            CallPlan {
                entry: finish,
                geometry: softmax_topk_finish_geometry(spec, tile, shape),
                args: vec![
                    buf("part_ml"),
                    buf("part_acc"),
                    buf("sel_count"),
                    buf("seq_lens"),
                    buf("out"),
                    ArgRef::I32(plan.splits as i32),
                    ArgRef::I32(plan.split_len as i32),
                ],
            },
        ],
        buffers: vec![
            BufferSpec::new("part_ml", Elem::F32, ws.ml_elems),
            BufferSpec::new("part_acc", Elem::F32, ws.acc_elems),
            BufferSpec::new(
                "out",
                spec.decode.out_dtype.into(),
                heads * spec.decode.head_dim as u64,
            ),
        ],
    })
}

/// Gaussian-aware page selection: moments, τ̂, σ̄ and the keep rule, into
/// `sel_pages`/`sel_count` (and `tau_hat`).
pub fn gaussian_select_calls(
    spec: &PagedSpec,
    mtile: &MomentsTile,
    gtile: &GaussTile,
    params: &GaussianParams,
    shape: &PagedShape,
) -> Result<PipelinePlan, SpecError> {
    check_gaussian_shape(spec, shape)?;
    mtile.check(spec)?;
    gtile.check(spec)?;
    let consts = params.constants(spec.page_size)?;
    let ws = gaussian_workspace(spec, mtile, shape);
    let (tau, select) = gauss_entry_names(spec, gtile);
    let mp = shape.max_pages as i32;
    let mut margs = page_pass_args(spec, "meta_moments");
    margs.extend([
        buf("page_mu"),
        buf("page_sigma"),
        buf("tile_stats"),
        ArgRef::I32(mp),
    ]);
    let mg = page_score_moments_geometry(mtile, shape);
    let regime = params.regime_args(&consts);
    let (fx, clamp, fc) = params.select_args(&consts);
    let mut buffers = vec![
        BufferSpec::new("page_mu", Elem::F32, ws.page_elems),
        BufferSpec::new("page_sigma", Elem::F32, ws.page_elems),
        BufferSpec::new("tile_stats", Elem::F32, ws.tile_stats_elems),
        BufferSpec::new("head_stats", Elem::F32, ws.head_stats_elems),
        BufferSpec::new("sel_consts", Elem::F32, ws.consts_elems),
        BufferSpec::new("tau_hat", Elem::F32, ws.tau_hat_elems),
    ];
    buffers.extend(selection_buffers(shape));
    Ok(PipelinePlan {
        calls: vec![
            CallPlan {
                entry: page_score_moments_entry(spec, mtile),
                geometry: mg,
                args: margs,
            },
            CallPlan {
                entry: tau,
                geometry: gauss_tau_geometry(spec, gtile, shape),
                args: vec![
                    buf("tile_stats"),
                    buf("page_mu"),
                    buf("page_sigma"),
                    buf("seq_lens"),
                    buf("head_stats"),
                    ArgRef::I32(mg.grid[0] as i32),
                    ArgRef::I32(mtile.tile_pages() as i32),
                    ArgRef::I32(mp),
                ],
            },
            CallPlan {
                entry: select,
                geometry: select_gaussian_geometry(gtile, shape),
                args: vec![
                    buf("page_mu"),
                    buf("page_sigma"),
                    buf("head_stats"),
                    buf("seq_lens"),
                    buf("sel_consts"),
                    buf("sel_pages"),
                    buf("sel_count"),
                    buf("tau_hat"),
                    ArgRef::I32(mp),
                    ArgRef::F32(regime[0]),
                    ArgRef::F32(regime[1]),
                    ArgRef::F32(regime[2]),
                    ArgRef::F32(regime[3]),
                    ArgRef::F32(regime[4]),
                    ArgRef::F32(fx[0]),
                    ArgRef::F32(fx[1]),
                    ArgRef::I32(clamp),
                    ArgRef::F32(fc[0]),
                    ArgRef::F32(fc[1]),
                ],
            },
        ],
        buffers,
    })
}
