//! Decode pipelines as kernel calls over *named* buffers: the one place where each kernel's
//! argument list and launch geometry are spelled out. Interpreter checks put the buffers in a
//! [`Program`](crate::program::Program); the GPU harness binds the same names to device memory.
//!
//! Canonical buffer names: inputs `q`, `k_pool`, `v_pool`, `block_table`, `seq_lens`,
//! `alibi_slopes` (with ALiBi), `meta_bounds`, `sketch`, `sel_pages`/`sel_count` (sparse);
//! workspace `cand_*`; outputs `out`, `tau`, `support` (+ `kept` for certified).

use crate::certified;
use crate::decode::paged_kernels;
use crate::program::{ArgRef, Call};
use crate::{scalar_of, KernelGenError};
use entkv_abi::{
    dense_finish_geometry, dense_plan, dense_workspace, page_score_box_geometry, page_scores_elems,
    paged_score_geometry, select_topk_geometry, softmax_topk_finish_geometry, softmax_topk_plan,
    softmax_topk_score_geometry, softmax_topk_workspace, BoxScoreTile, DenseShape, DenseTile, PagedShape,
    PagedSpec, SelectTopkTile, SoftmaxTopkTile,
};
use entkv_dsl::Scalar;
use std::rc::Rc;

/// A buffer a pipeline needs besides its inputs: name, element type, length.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferSpec {
    pub name: &'static str,
    pub elem: Scalar,
    pub len: usize,
}

/// A pipeline's calls and the workspace/output buffers it writes.
#[derive(Clone, Debug)]
pub struct Pipeline {
    pub calls: Vec<Call>,
    pub buffers: Vec<BufferSpec>,
}

/// Which decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeKind {
    /// Every page (`decode_dense`).
    Dense,
    /// The pages in `sel_pages`/`sel_count` (`decode_sparse`).
    Sparse,
    /// The sketch-certified superset of the support (`select_certified` + `decode_certified`).
    Certified,
}

fn buf(name: &str) -> ArgRef {
    ArgRef::buf(name)
}

/// The calls of one decode step over the paged cache. `max_tokens` bounds the tokens any
/// (sequence, KV head) visits (the longest sequence, or the largest selection), `sm_count` sizes
/// the split plan.
pub fn decode_pipeline(
    kind: DecodeKind,
    spec: &PagedSpec,
    tile: &DenseTile,
    shape: &PagedShape,
    max_tokens: u64,
    sm_count: u32,
) -> Result<Pipeline, KernelGenError> {
    let ds = &spec.decode;
    let dshape = DenseShape {
        batch: shape.batch,
        kv_heads: shape.kv_heads,
        n: max_tokens.max(1),
    };
    let plan = dense_plan(tile, &dshape, sm_count)?;
    let ws = dense_workspace(ds, &dshape, &plan);
    let heads = (shape.batch * shape.q_heads(spec)) as usize;
    let mut buffers = vec![
        BufferSpec {
            name: "cand_idx",
            elem: Scalar::I32,
            len: ws.cand_elems as usize,
        },
        BufferSpec {
            name: "cand_count",
            elem: Scalar::I32,
            len: ws.split_elems as usize,
        },
        BufferSpec {
            name: "out",
            elem: scalar_of(ds.out_dtype),
            len: heads * ds.head_dim as usize,
        },
        BufferSpec {
            name: "tau",
            elem: Scalar::F32,
            len: heads,
        },
        BufferSpec {
            name: "support",
            elem: Scalar::I32,
            len: heads,
        },
    ];
    let alibi: Vec<ArgRef> = if spec.alibi {
        vec![buf("alibi_slopes")]
    } else {
        Vec::new()
    };
    let mp = ArgRef::I32(shape.max_pages as i32);
    let score_geom = paged_score_geometry(tile, shape.batch, shape.kv_heads, &plan);
    let finish_geom = dense_finish_geometry(ds, tile, &dshape);
    let tail = |extra: Vec<ArgRef>| {
        let mut v = extra;
        v.extend([
            ArgRef::I32(plan.splits as i32),
            ArgRef::I64(plan.split_len as i64),
            mp.clone(),
        ]);
        v
    };
    let calls = match kind {
        DecodeKind::Dense | DecodeKind::Sparse => {
            let selected = kind == DecodeKind::Sparse;
            buffers.push(BufferSpec {
                name: "cand_z",
                elem: Scalar::F32,
                len: ws.cand_elems as usize,
            });
            buffers.push(BufferSpec {
                name: "cand_lb",
                elem: Scalar::F32,
                len: ws.split_elems as usize,
            });
            let [score, finish] = paged_kernels(spec, tile, selected)?;
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
                ArgRef::I32(plan.chunks_per_split as i32),
            ]);
            let a2 = tail(vec![
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
            ]);
            vec![
                Call {
                    kernel: Rc::new(score),
                    geometry: score_geom,
                    args: a1,
                },
                Call {
                    kernel: Rc::new(finish),
                    geometry: finish_geom,
                    args: a2,
                },
            ]
        }
        DecodeKind::Certified => {
            for name in ["cand_lb", "cand_ub"] {
                buffers.push(BufferSpec {
                    name,
                    elem: Scalar::F32,
                    len: ws.cand_elems as usize,
                });
            }
            buffers.push(BufferSpec {
                name: "cand_bound",
                elem: Scalar::F32,
                len: ws.split_elems as usize,
            });
            buffers.push(BufferSpec {
                name: "kept",
                elem: Scalar::I32,
                len: heads,
            });
            let select = certified::select_kernel(spec, tile)?;
            let decode = certified::decode_kernel(spec, tile)?;
            let mut a1 = vec![
                buf("q"),
                buf("k_pool"),
                buf("block_table"),
                buf("seq_lens"),
                buf("meta_bounds"),
                buf("sketch"),
            ];
            a1.extend(alibi.clone());
            a1.extend([
                buf("cand_lb"),
                buf("cand_ub"),
                buf("cand_idx"),
                buf("cand_count"),
                buf("cand_bound"),
                mp.clone(),
                ArgRef::I32(plan.chunks_per_split as i32),
            ]);
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
            let a2 = tail(a2);
            vec![
                Call {
                    kernel: Rc::new(select),
                    geometry: score_geom,
                    args: a1,
                },
                Call {
                    kernel: Rc::new(decode),
                    geometry: finish_geom,
                    args: a2,
                },
            ]
        }
    };
    Ok(Pipeline { calls, buffers })
}

/// Build the metadata (bounds, moments, sketch) of the physical pages in `pages` (e.g.
/// `entkv_abi::full_pages` after prefill). Adds the page list as buffer `meta_pages`.
pub fn meta_build_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    pages: &[i32],
) -> Result<(Pipeline, Vec<i32>), KernelGenError> {
    let tile = entkv_abi::MetaTile::default_for(spec);
    let kernel = crate::page_meta::build_kernel(spec, &tile)?;
    let kv = scalar_of(spec.decode.kv_dtype);
    let buffers = vec![
        BufferSpec {
            name: "meta_bounds",
            elem: kv,
            len: shape.meta_elems(spec) as usize,
        },
        BufferSpec {
            name: "meta_moments",
            elem: kv,
            len: shape.meta_elems(spec) as usize,
        },
        BufferSpec {
            name: "sketch",
            elem: Scalar::U32,
            len: shape.sketch_words(spec) as usize,
        },
    ];
    let mut calls = Vec::new();
    if !pages.is_empty() {
        calls.push(Call {
            kernel: Rc::new(kernel),
            geometry: entkv_abi::meta_build_geometry(&tile, shape, pages.len() as u64)?,
            args: vec![
                buf("k_pool"),
                buf("meta_pages"),
                buf("meta_bounds"),
                buf("meta_moments"),
                buf("sketch"),
                ArgRef::I32(pages.len() as i32),
            ],
        });
    }
    Ok((Pipeline { calls, buffers }, pages.to_vec()))
}

/// Top-k page selection: box bounds of every scored page, then the `budget_pages` best per
/// (sequence, KV head) plus the last page into `sel_pages`/`sel_count`.
pub fn topk_select_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    budget_pages: i32,
) -> Result<Pipeline, KernelGenError> {
    let box_tile = BoxScoreTile::default_for(spec);
    let sel_tile = SelectTopkTile::default_for(spec);
    let score = crate::topk::score::box_kernel(spec, &box_tile)?;
    let select = crate::topk::select::select_kernel(spec, &sel_tile)?;
    let mut a1 = vec![buf("q"), buf("meta_bounds"), buf("block_table"), buf("seq_lens")];
    if spec.alibi {
        a1.push(buf("alibi_slopes"));
    }
    a1.extend([buf("page_scores"), ArgRef::I32(shape.max_pages as i32)]);
    let a2 = vec![
        buf("page_scores"),
        buf("seq_lens"),
        buf("sel_pages"),
        buf("sel_count"),
        ArgRef::I32(shape.max_pages as i32),
        ArgRef::I32(budget_pages),
    ];
    Ok(Pipeline {
        calls: vec![
            Call {
                kernel: Rc::new(score),
                geometry: page_score_box_geometry(spec, &box_tile, shape),
                args: a1,
            },
            Call {
                kernel: Rc::new(select),
                geometry: select_topk_geometry(&sel_tile, shape),
                args: a2,
            },
        ],
        buffers: selection_buffers(shape, page_scores_elems(shape) as usize),
    })
}

fn selection_buffers(shape: &PagedShape, scores: usize) -> Vec<BufferSpec> {
    vec![
        BufferSpec {
            name: "page_scores",
            elem: Scalar::F32,
            len: scores,
        },
        BufferSpec {
            name: "sel_pages",
            elem: Scalar::I32,
            len: shape.selection_elems() as usize,
        },
        BufferSpec {
            name: "sel_count",
            elem: Scalar::I32,
            len: (shape.batch * shape.kv_heads) as usize,
        },
    ]
}

/// Softmax attention over the selected pages (the Quest baseline), planned for selections of at
/// most `budget_pages` + 1 pages.
pub fn softmax_topk_pipeline(
    spec: &PagedSpec,
    shape: &PagedShape,
    budget_pages: i32,
    sm_count: u32,
) -> Result<Pipeline, KernelGenError> {
    let tile = SoftmaxTopkTile::default_for(spec);
    let plan = softmax_topk_plan(spec, &tile, shape, budget_pages, sm_count)?;
    let ws = softmax_topk_workspace(spec, shape, &plan);
    let score = crate::topk::softmax::score_kernel(spec, &tile)?;
    let finish = crate::topk::softmax::finish_kernel(spec, &tile)?;
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
    let a2 = vec![
        buf("part_ml"),
        buf("part_acc"),
        buf("sel_count"),
        buf("seq_lens"),
        buf("out"),
        ArgRef::I32(plan.splits as i32),
        ArgRef::I32(plan.split_len as i32),
    ];
    let heads = (shape.batch * shape.q_heads(spec)) as usize;
    Ok(Pipeline {
        calls: vec![
            Call {
                kernel: Rc::new(score),
                geometry: softmax_topk_score_geometry(&tile, shape, &plan),
                args: a1,
            },
            Call {
                kernel: Rc::new(finish),
                geometry: softmax_topk_finish_geometry(spec, &tile, shape),
                args: a2,
            },
        ],
        buffers: vec![
            BufferSpec {
                name: "part_ml",
                elem: Scalar::F32,
                len: ws.ml_elems as usize,
            },
            BufferSpec {
                name: "part_acc",
                elem: Scalar::F32,
                len: ws.acc_elems as usize,
            },
            BufferSpec {
                name: "out",
                elem: scalar_of(spec.decode.out_dtype),
                len: heads * spec.decode.head_dim as usize,
            },
        ],
    })
}

/// Gaussian-aware page selection with the default tiles and the reference's parameters:
/// moments, τ̂, σ̄ and the keep rule, into `sel_pages`/`sel_count` (and `tau_hat`).
pub fn gaussian_select_pipeline(spec: &PagedSpec, shape: &PagedShape) -> Result<Pipeline, KernelGenError> {
    let (calls, buffers) = crate::gaussian::gaussian_pipeline(
        spec,
        &entkv_abi::gaussian::MomentsTile::default_for(spec),
        &entkv_abi::gaussian::GaussTile::default_for(spec),
        &entkv_abi::gaussian::GaussianParams::default(),
        shape,
    )?;
    Ok(Pipeline { calls, buffers })
}

impl Pipeline {
    /// This pipeline followed by `next` (buffers of both).
    pub fn then(mut self, next: Pipeline) -> Pipeline {
        self.calls.extend(next.calls);
        for b in next.buffers {
            if !self.buffers.iter().any(|x| x.name == b.name) {
                self.buffers.push(b);
            }
        }
        self
    }

    /// Add the pipeline's workspace and outputs to a program, poisoned.
    pub fn add_to(self, p: &mut crate::program::Program) {
        for b in &self.buffers {
            p.poisoned(b.name, b.elem, b.len);
        }
        p.calls.extend(self.calls);
    }
}
