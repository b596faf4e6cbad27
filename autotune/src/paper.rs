//! Decode pipelines at the BENCH.md shapes on the GPU: a paged cache of gigabytes generated on
//! the device (pools filled by the counter-based generators, pages scattered by a shuffled block
//! table), the pipelines of `entkv_kernels::pipelines` run on it, outputs checked against the
//! float64 reference on sampled heads (K/V regenerated on the host by the generators' bit-exact
//! twins), and each decode step timed with CUDA events.

use crate::device::{time_ms, DeviceProgram, FunctionCache, Kernels, SEED_K, SEED_V};
use crate::record::{Environment, TimingRecord};
use anyhow::{Context, Result};
use entkv_abi::{DenseShape, DenseTile, PagedShape, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_kernels::check::{compare, DenseCheck, DenseOutputs};
use entkv_kernels::data::{normal, Tensor};
use entkv_kernels::fill::value_at;
use entkv_kernels::peaked::{first_query, PeakedKeys};
use entkv_kernels::pipelines::{decode_pipeline, DecodeKind, Pipeline};
use entkv_kernels::reference::{attend_scores, attend_softmax, scores, DecodeReference, HeadReference};
use entkv_runtime::Gpu;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// How a device cache's keys are generated; values are iid N(0, 1) either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKeys {
    /// iid N(0, 1) (`entkv_kernels::fill`): BENCH.md `paper`, `gqa`, `wide`.
    Normal,
    /// Page-coherent keys with hot pages aligned with the queries (`entkv_kernels::peaked`):
    /// BENCH.md `peaked`.
    Peaked,
}

/// Selected logical pages per (sequence, KV head) as a selector wrote them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// `[batch, kv_heads, max_pages]`.
    pub pages: Vec<i32>,
    /// `[batch, kv_heads]`.
    pub count: Vec<i32>,
}

/// The host side of a [`PaperCache`]: `batch` sequences of `n` tokens whose pages fill the pool
/// exactly, scattered by a shuffle of `seed`, and the queries (iid normal, drawn from `seed`).
#[derive(Clone, Debug)]
pub struct PaperLayout {
    pub shape: PagedShape,
    pub block_table: Vec<i32>,
    pub seq_lens: Vec<i32>,
    /// `[batch, q_heads, d]`.
    pub q: Tensor,
}

impl PaperLayout {
    /// The pool's shape for `batch` sequences of `n` tokens, or why it cannot be built (host
    /// only: commands check their lengths with it before opening the GPU).
    pub fn shape(spec: &PagedSpec, batch: u32, kv_heads: u32, n: u64) -> Result<PagedShape> {
        anyhow::ensure!(
            (1..=entkv_abi::MAX_SEQUENCE_TOKENS).contains(&n),
            "n = {n} must be in 1..=2³⁰ (a sequence's most tokens, MAX_SEQUENCE_TOKENS)"
        );
        let pages_per_seq = n.div_ceil(spec.page_size as u64) as u32;
        Ok(PagedShape {
            batch,
            kv_heads,
            num_pages: batch
                .checked_mul(pages_per_seq)
                .filter(|&p| p <= i32::MAX as u32)
                .with_context(|| {
                    format!("n = {n}: the pool has more pages than an i32 block table can address")
                })?,
            max_pages: pages_per_seq,
        })
    }

    pub fn new(spec: &PagedSpec, batch: u32, kv_heads: u32, n: u64, seed: u64) -> Result<PaperLayout> {
        let shape = PaperLayout::shape(spec, batch, kv_heads, n)?;
        let len = n as i32;
        let mut block_table: Vec<i32> = (0..shape.num_pages as i32).collect();
        block_table.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        let q_heads = shape.q_heads(spec) as usize;
        let d = spec.decode.head_dim as usize;
        let q = Tensor::from_f64(spec.decode.q_dtype, &normal(seed, batch as usize * q_heads * d));
        Ok(PaperLayout {
            shape,
            block_table,
            seq_lens: vec![len; batch as usize],
            q,
        })
    }
}

/// Compare, bit for bit, pages of a peaked pool (read by `read(start, len)`, element offsets)
/// with the twin: the first and last page and the first hot page of the first and of the last
/// (sequence, KV head). Returns the pages compared; a difference is an error naming the row.
#[allow(clippy::too_many_arguments)]
pub fn spot_check_peaked(
    spec: &PagedSpec,
    shape: &PagedShape,
    block_table: &[i32],
    q: &Tensor,
    g: &PeakedKeys,
    n: u64,
    mut read: impl FnMut(u64, usize) -> Result<Vec<f64>>,
) -> Result<usize> {
    let (p, d) = (spec.page_size as usize, spec.decode.head_dim as usize);
    let pages = n.div_ceil(p as u64) as u32;
    let last = (shape.batch.max(1) - 1, shape.kv_heads.max(1) - 1);
    let mut picked = BTreeSet::new();
    for (b, kvh) in [(0, 0), last] {
        let hot = g.hot_pages(b, kvh, n as u32);
        for j in [Some(0), Some(pages - 1), hot.first().copied()]
            .into_iter()
            .flatten()
        {
            picked.insert((b, kvh, j));
        }
    }
    for &(b, kvh, j) in &picked {
        let (bu, hu) = (b as usize, kvh as usize);
        let tokens: Vec<usize> = (j as usize * p..(j as usize + 1) * p).collect();
        let want = g.rows(&first_query(spec, shape, q, bu, hu), b, kvh, n as u32, &tokens)?;
        // A (page, KV head) block of the pool is `page_size` contiguous rows.
        let got = read(shape.row_offset(spec, block_table, bu, hu, tokens[0]), p * d)?;
        for (t, row) in tokens.iter().zip(&want) {
            for (i, &w) in row.iter().enumerate() {
                let x = got[(t % p) * d + i];
                if x.to_bits() != w.to_bits() {
                    anyhow::bail!(
                        "peaked keys on the device differ from the host twin: sequence {b}, KV head \
                         {kvh}, token {t}, dim {i}: device {x}, twin {w}"
                    );
                }
            }
        }
    }
    Ok(picked.len())
}

/// The peaked-key generator (seed `SEED_K`) of a layout, checked: it writes every owned page
/// once and nothing else.
pub fn peaked_generator(
    spec: &PagedSpec,
    shape: &PagedShape,
    seq_lens: &[i32],
    block_table: &[i32],
) -> Result<PeakedKeys> {
    let g = PeakedKeys::new(spec, shape, SEED_K);
    g.check(spec, shape, seq_lens, block_table)
        .context("the peaked-key generator cannot fill this layout")?;
    Ok(g)
}

/// A paged cache on the device with every sequence `n` tokens long.
pub struct PaperCache {
    pub spec: PagedSpec,
    pub shape: PagedShape,
    pub n: u64,
    pub q: Tensor,
    pub block_table: Vec<i32>,
    pub dev: DeviceProgram,
    pub keys: DeviceKeys,
    /// The generator of the keys when they are peaked (its twin regenerates rows).
    peaked: Option<PeakedKeys>,
    /// Every token's score per checked head ([`PaperCache::scores`]).
    score_memo: Mutex<HashMap<usize, Arc<Vec<f64>>>>,
}

impl PaperCache {
    /// Allocate and fill q, the pools (iid normal keys), the block table and the lengths.
    pub fn new(
        gpu: &Gpu,
        kernels: &mut Kernels,
        spec: PagedSpec,
        batch: u32,
        kv_heads: u32,
        n: u64,
        seed: u64,
    ) -> Result<PaperCache> {
        PaperCache::with_keys(gpu, kernels, spec, batch, kv_heads, n, seed, DeviceKeys::Normal)
    }

    /// [`PaperCache::new`] with keys generated as `keys` says. `seed` draws q and the page
    /// shuffle; the pools' generators have fixed seeds (peaked keys still differ between seeds:
    /// their hot pages point along q).
    #[allow(clippy::too_many_arguments)]
    pub fn with_keys(
        gpu: &Gpu,
        kernels: &mut Kernels,
        spec: PagedSpec,
        batch: u32,
        kv_heads: u32,
        n: u64,
        seed: u64,
        keys: DeviceKeys,
    ) -> Result<PaperCache> {
        let PaperLayout {
            shape,
            block_table: perm,
            seq_lens,
            q,
        } = PaperLayout::new(&spec, batch, kv_heads, n, seed)?;
        let q_heads = shape.q_heads(&spec) as usize;
        let mut dev = DeviceProgram::new();
        dev.put(gpu, "q", &entkv_kernels::decode_checks::host_tensor(&q))?;
        dev.put(gpu, "block_table", &HostBuffer::I32(perm.clone()))?;
        dev.put(gpu, "seq_lens", &HostBuffer::I32(seq_lens.clone()))?;
        let pool = shape.pool_elems(&spec);
        let peaked = match keys {
            DeviceKeys::Normal => {
                dev.alloc_normal(gpu, kernels, "k_pool", spec.decode.kv_dtype, pool, SEED_K)?;
                None
            }
            DeviceKeys::Peaked => {
                // Reads q, the block table and the lengths put above.
                let g = peaked_generator(&spec, &shape, &seq_lens, &perm)?;
                let elem = entkv_kernels::scalar_of(spec.decode.kv_dtype);
                dev.alloc_poisoned(gpu, "k_pool", elem, pool as usize)?;
                let call = g.call(gpu.info().sm_count * 16)?;
                dev.launch_calls(&mut kernels.functions, &[call], gpu.stream_raw())?;
                // The reference regenerates keys with the twin: check on a few pages that it
                // describes what the device wrote (the copies follow the launch on its stream).
                spot_check_peaked(&spec, &shape, &perm, &q, &g, n, |start, len| {
                    Ok(dev.get_range("k_pool", start, len)?.to_f64_vec())
                })?;
                Some(g)
            }
        };
        dev.alloc_normal(gpu, kernels, "v_pool", spec.decode.kv_dtype, pool, SEED_V)?;
        if spec.alibi {
            let slopes: Vec<f32> = (1..=q_heads)
                .map(|i| (-8.0 * i as f64 / q_heads as f64).exp2() as f32)
                .collect();
            dev.put(gpu, "alibi_slopes", &HostBuffer::F32(slopes))?;
        }
        Ok(PaperCache {
            spec,
            shape,
            n,
            q,
            block_table: perm,
            dev,
            keys,
            peaked,
            score_memo: Mutex::new(HashMap::new()),
        })
    }

    /// Keys of (sequence `b`, KV head `kvh`) at logical positions `toks`, as the device holds
    /// them.
    fn key_rows(&self, b: usize, kvh: usize, toks: &[usize]) -> Result<Vec<Vec<f64>>> {
        self.check_tokens(toks)?;
        Ok(match &self.peaked {
            Some(g) => {
                let q = first_query(&self.spec, &self.shape, &self.q, b, kvh);
                g.rows(&q, b as u32, kvh as u32, self.n as u32, toks)?
            }
            None => toks.iter().map(|&t| self.row(SEED_K, b, kvh, t)).collect(),
        })
    }

    fn value_rows(&self, b: usize, kvh: usize, toks: &[usize]) -> Result<Vec<Vec<f64>>> {
        self.check_tokens(toks)?;
        Ok(toks.iter().map(|&t| self.row(SEED_V, b, kvh, t)).collect())
    }

    /// Tokens to regenerate must lie in the sequences (a selection read back from the device
    /// could hold anything).
    fn check_tokens(&self, toks: &[usize]) -> Result<()> {
        match toks.iter().find(|&&t| t as u64 >= self.n) {
            Some(t) => anyhow::bail!("token {t} is past the {} tokens of the sequence", self.n),
            None => Ok(()),
        }
    }

    fn row(&self, seed: u32, b: usize, kvh: usize, t: usize) -> Vec<f64> {
        let d = self.spec.decode.head_dim as u64;
        let base = self.shape.row_offset(&self.spec, &self.block_table, b, kvh, t);
        (0..d)
            .map(|i| value_at(self.spec.decode.kv_dtype, seed, 1.0, base + i))
            .collect()
    }

    /// Sequence, query head and KV head of head `hd` (= b·q_heads + h).
    fn head(&self, hd: usize) -> (usize, usize, usize) {
        let q_heads = self.shape.q_heads(&self.spec) as usize;
        let h = hd % q_heads;
        (hd / q_heads, h, h / self.spec.decode.group as usize)
    }

    /// Full-cache float64 reference of head `hd` (= b·q_heads + h) over `tokens` (all when
    /// `None`), from K/V regenerated on the host: the head's scores over every token once per
    /// cache (`PaperCache::scores`), V rows for the support only.
    pub fn reference(&self, hd: usize, tokens: Option<&[usize]>) -> Result<HeadReference> {
        let d = self.spec.decode.head_dim as usize;
        let (b, _, kvh) = self.head(hd);
        let all = self.scores(hd)?;
        let (s, toks): (Vec<f64>, Vec<usize>) = match tokens {
            Some(t) => {
                self.check_tokens(t)?;
                (t.iter().map(|&j| all[j]).collect(), t.to_vec())
            }
            None => (all.to_vec(), (0..self.n as usize).collect()),
        };
        attend_scores(&s, d, self.spec.decode.alpha, |support| {
            let rows: Vec<usize> = support.iter().map(|&i| toks[i]).collect();
            self.value_rows(b, kvh, &rows)
        })
    }

    /// Scores `q·k_t/√d + bias_t` of head `hd` over every token, computed on first use and kept:
    /// the checks of every method at one bucket sample the same heads, and regenerating a
    /// million keys per check made the tuner's verification most of its run (22 of 59 s at
    /// `paper`, 92 of 200 s at `wide`; results/2026-11-30-preload/3-verify-time-db1039b).
    fn scores(&self, hd: usize) -> Result<Arc<Vec<f64>>> {
        if let Some(s) = self.score_memo.lock().expect("score memo").get(&hd) {
            return Ok(s.clone());
        }
        let q_heads = self.shape.q_heads(&self.spec) as usize;
        let d = self.spec.decode.head_dim as usize;
        let (b, h, kvh) = self.head(hd);
        let q = &self.q.values[hd * d..][..d];
        let slope = (-8.0 * (h + 1) as f64 / q_heads as f64).exp2() as f32 as f64;
        let n = self.n as usize;
        let mut out = Vec::with_capacity(n);
        // In blocks, so a million key rows are never alive at once.
        let all: Vec<usize> = (0..n).collect();
        for block in all.chunks(1 << 16) {
            let keys = self.key_rows(b, kvh, block)?;
            let kr: Vec<&[f64]> = keys.iter().map(|v| v.as_slice()).collect();
            let bias: Vec<f64> = if self.spec.alibi {
                block
                    .iter()
                    .map(|&t| slope * (t as f64 - (self.n as f64 - 1.0)))
                    .collect()
            } else {
                Vec::new()
            };
            out.extend(scores(q, &kr, &bias));
        }
        let out = Arc::new(out);
        self.score_memo
            .lock()
            .expect("score memo")
            .insert(hd, out.clone());
        Ok(out)
    }

    /// Allocate a pipeline's workspace and outputs (poisoned).
    pub fn prepare(&mut self, gpu: &Gpu, pipeline: &Pipeline) -> Result<()> {
        for b in &pipeline.buffers {
            self.dev.alloc_poisoned(
                gpu,
                &b.name,
                entkv_kernels::scalar_of_elem(b.elem),
                b.len as usize,
            )?;
        }
        Ok(())
    }

    /// The decode pipeline of `kind` with the default tile for this GPU.
    pub fn pipeline(&self, kind: DecodeKind, tile: &DenseTile, sm_count: u32) -> Result<Pipeline> {
        let max_tokens = self.shape.max_pages as u64 * self.spec.page_size as u64;
        Ok(decode_pipeline(
            kind,
            &self.spec,
            tile,
            &self.shape,
            max_tokens,
            sm_count,
        )?)
    }

    /// Outputs of the last run.
    pub fn outputs(&self) -> Result<DenseOutputs> {
        Ok(DenseOutputs {
            out: self.dev.get("out")?.to_f64_vec(),
            tau: self.dev.get("tau")?.to_f64_vec(),
            support: self
                .dev
                .get("support")?
                .to_f64_vec()
                .into_iter()
                .map(|v| v as i64)
                .collect(),
        })
    }

    /// Heads checked against the reference: evenly spaced, the first and the last.
    pub fn sample(&self, samples: usize) -> Vec<usize> {
        let heads = (self.shape.batch * self.shape.q_heads(&self.spec)) as usize;
        let step = (heads / samples.max(1)).max(1);
        let mut sample: Vec<usize> = (0..heads).step_by(step).collect();
        if sample.last() != Some(&(heads - 1)) {
            sample.push(heads - 1);
        }
        sample
    }

    /// The selection of the last run, read back from `sel_pages`/`sel_count`.
    pub fn selection(&self) -> Result<Selection> {
        let ints = |name: &str| -> Result<Vec<i32>> {
            Ok(self
                .dev
                .get(name)?
                .to_f64_vec()
                .into_iter()
                .map(|v| v as i32)
                .collect())
        };
        Ok(Selection {
            pages: ints("sel_pages")?,
            count: ints("sel_count")?,
        })
    }

    /// Tokens of head `hd`'s selection.
    pub fn selected_tokens(&self, hd: usize, sel: &Selection) -> Result<Vec<usize>> {
        let (b, _, kvh) = self.head(hd);
        let row = b * self.shape.kv_heads as usize + kvh;
        let mp = self.shape.max_pages as usize;
        let count = *sel
            .count
            .get(row)
            .ok_or_else(|| anyhow::anyhow!("sel_count has no row {row}"))?;
        if count < 1 || count as usize > mp {
            anyhow::bail!("sel_count[{row}] = {count} outside 1..={mp}");
        }
        let p = self.spec.page_size as usize;
        let pages = &sel.pages[row * mp..row * mp + count as usize];
        crate::engine_bench::check_selection_row(pages, (self.n as usize).div_ceil(p))
            .with_context(|| format!("selection row {row}"))?;
        Ok(pages
            .iter()
            .flat_map(|&j| (j as usize * p..(j as usize + 1) * p).filter(|&t| t < self.n as usize))
            .collect())
    }

    /// Compare sampled heads of `got` with the full-cache reference (multithreaded), or with
    /// entmax over each head's own selection when one is given.
    pub fn check_sampled(
        &self,
        got: &DenseOutputs,
        samples: usize,
        selection: Option<&Selection>,
    ) -> Result<DenseCheck> {
        let sample = self.sample(samples);
        let toks: Vec<Option<Vec<usize>>> = sample
            .iter()
            .map(|&hd| match selection {
                Some(sel) => self.selected_tokens(hd, sel).map(Some),
                None => Ok(None),
            })
            .collect::<Result<_>>()?;
        let refs: Vec<HeadReference> = std::thread::scope(|s| {
            let hs: Vec<_> = sample
                .iter()
                .zip(&toks)
                .map(|(&hd, t)| s.spawn(move || self.reference(hd, t.as_deref())))
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("reference thread"))
                .collect::<Result<_>>()
        })?;
        let d = self.spec.decode.head_dim as usize;
        let picked = DenseOutputs {
            out: sample
                .iter()
                .flat_map(|&hd| got.out[hd * d..][..d].to_vec())
                .collect(),
            tau: sample.iter().map(|&hd| got.tau[hd]).collect(),
            support: sample.iter().map(|&hd| got.support[hd]).collect(),
        };
        let mut c = compare(&DecodeReference { heads: refs }, &picked, None);
        // Every head, sampled or not, must have produced finite results.
        if !(got.out.iter().chain(&got.tau).all(|x| x.is_finite()) && got.support.iter().all(|&s| s > 0)) {
            c.passed = false;
            c.non_finite += 1;
        }
        Ok(c)
    }

    /// Max relative L2 error of sampled heads of `out` against softmax attention over each
    /// head's selection (the Quest baseline), the selection read back from `sel_pages`/`sel_count`.
    pub fn check_softmax_sampled(&self, out: &[f64], samples: usize) -> Result<f64> {
        self.check_softmax_selection(out, samples, &self.selection()?)
    }

    /// [`PaperCache::check_softmax_sampled`] against the selection `sel` (wherever it was
    /// written, e.g. a runtime decoder's workspace); the sampled heads' references are computed
    /// on one thread each. A non-finite output in any head, sampled or not, scores infinity.
    pub fn check_softmax_selection(&self, out: &[f64], samples: usize, sel: &Selection) -> Result<f64> {
        let d = self.spec.decode.head_dim as usize;
        let sample = self.sample(samples);
        let toks = sample
            .iter()
            .map(|&hd| self.selected_tokens(hd, sel))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<Vec<f64>> = std::thread::scope(|s| {
            let hs: Vec<_> = sample
                .iter()
                .zip(&toks)
                .map(|(&hd, toks)| {
                    s.spawn(move || {
                        let (b, _, kvh) = self.head(hd);
                        let keys = self.key_rows(b, kvh, toks)?;
                        let values = self.value_rows(b, kvh, toks)?;
                        let kr: Vec<&[f64]> = keys.iter().map(|v| v.as_slice()).collect();
                        let vr: Vec<&[f64]> = values.iter().map(|v| v.as_slice()).collect();
                        Ok(attend_softmax(&self.q.values[hd * d..][..d], &kr, &vr, &[]))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("reference thread"))
                .collect::<Result<_>>()
        })?;
        let mut worst = 0.0f64;
        for (&hd, r) in sample.iter().zip(&refs) {
            let o = &out[hd * d..][..d];
            let diff = r
                .iter()
                .zip(o)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
            let norm = r.iter().map(|a| a * a).sum::<f64>().sqrt();
            let rel = if o.iter().all(|x| x.is_finite()) {
                diff / norm
            } else {
                f64::INFINITY
            };
            worst = worst.max(entkv_kernels::check::nan_as_inf(rel));
        }
        // Every head, sampled or not, must have produced finite outputs.
        if !out.iter().all(|x| x.is_finite()) {
            worst = f64::INFINITY;
        }
        Ok(worst)
    }
}

/// Largest relative L2 error of a softmax top-k output against its float64 reference that
/// passes; one constant so that `entkv gpu-check` and `entkv bench` judge the baseline alike.
pub const SOFTMAX_REL_TOL: f64 = 1e-4;

/// Run `pipeline` once (for checking) and then time it; returns the per-step times.
pub fn run_and_time(
    gpu: &Gpu,
    cache: &mut FunctionCache,
    pc: &PaperCache,
    pipeline: &Pipeline,
    warmup: usize,
    iters: usize,
) -> Result<Vec<f64>> {
    pc.dev.launch_calls(cache, &pipeline.calls, gpu.stream_raw())?;
    gpu.synchronize()?;
    time_ms(gpu, warmup, iters, |s| {
        pc.dev.launch_calls(cache, &pipeline.calls, s)
    })
}

/// A timing record of one method at a paper shape.
pub fn record(
    env: &Environment,
    workload: &str,
    method: &str,
    pc: &PaperCache,
    times: &[f64],
    bytes: u64,
) -> TimingRecord {
    let mut rec = TimingRecord::new(
        env,
        workload,
        method,
        &DenseShape {
            batch: pc.shape.batch,
            kv_heads: pc.shape.kv_heads,
            n: pc.n,
        },
        &pc.spec.decode,
        times,
        bytes,
        crate::gpucheck::CEILING_BYTES_PER_S,
    );
    rec.sketch_bits = Some(pc.spec.sketch_bits);
    rec
}

/// Per-kernel and per-step medians (ms) of a decode pipeline for tile variants at a paper shape,
/// printed as a table (`entkv bench-paper`).
pub fn bench_variants(
    kind: DecodeKind,
    n: u64,
    sketch_bits: u32,
    tiles: &[DenseTile],
    iters: usize,
) -> Result<()> {
    use entkv_abi::{full_pages, DType, DecodeSpec};
    use entkv_kernels::pipelines::meta_build_pipeline;
    let gpu = Gpu::open(0)?;
    let mut kernels = Kernels::new(&gpu);
    let mut cache = FunctionCache::new(&gpu);
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16)?, 16, false, sketch_bits)?;
    let mut pc = PaperCache::new(&gpu, &mut kernels, spec, 8, 24, n, 2026)?;
    let pages = full_pages(&spec, &pc.shape, &[n as i32; 8], &pc.block_table)?;
    let (meta, list) = meta_build_pipeline(&spec, &pc.shape, &pages)?;
    pc.dev.put(&gpu, "meta_pages", &HostBuffer::I32(list))?;
    pc.prepare(&gpu, &meta)?;
    pc.dev.launch_calls(&mut cache, &meta.calls, gpu.stream_raw())?;
    let sm = gpu.info().sm_count;
    for tile in tiles {
        let p = pc.pipeline(kind, tile, sm)?;
        pc.prepare(&gpu, &p)?;
        let step = run_and_time(&gpu, &mut cache, &pc, &p, 3, iters)?;
        let mut per = Vec::new();
        for c in &p.calls {
            let one = std::slice::from_ref(c);
            let t = time_ms(&gpu, 2, iters, |s| pc.dev.launch_calls(&mut cache, one, s))?;
            per.push(crate::record::summarize(&t).0);
        }
        // Restore the pipeline's outputs (the lone runs may have changed its workspace).
        pc.dev.launch_calls(&mut cache, &p.calls, gpu.stream_raw())?;
        gpu.synchronize()?;
        let kept = if kind == DecodeKind::Certified {
            let k: f64 = pc.dev.get("kept")?.to_f64_vec().iter().sum();
            format!("kept {:.3}%", 100.0 * k / (8.0 * 24.0 * n as f64))
        } else {
            String::new()
        };
        let cands: f64 = pc.dev.get("cand_count")?.to_f64_vec().iter().sum();
        // A seeded step's (sequence, KV head) pairs whose estimate `certified_verify` flagged.
        let repaired = if tile.seed {
            let flags = pc.dev.get("repair")?.to_f64_vec();
            let flagged = flags.iter().filter(|&&f| f != 0.0).count();
            format!("  repaired {flagged} of {} pairs", flags.len())
        } else {
            String::new()
        };
        println!(
            "{:<44} step {:>7.3} ms  kernels {:?} ms  cand/head {:>8.1} {kept}{repaired}",
            tile.tag(),
            crate::record::summarize(&step).0,
            per.iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>(),
            cands / (8.0 * 24.0)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_cmd::BenchWorkload;

    /// `entkv bench --workload peaked` at 1M tokens: the generator accepts the layout, which
    /// has more than 2³² pool elements (64-bit offsets on both sides), and the twin regenerates
    /// rows at both ends of the last head, whose noise counters pass 2³².
    #[test]
    fn peaked_layout_at_1m_tokens() {
        let w = BenchWorkload::named("peaked").unwrap();
        let spec = w.spec().unwrap();
        let n = 1u64 << 20;
        let l = PaperLayout::new(&spec, w.batch, w.kv_heads, n, 7).unwrap();
        assert!(l.shape.pool_elems(&spec) > 1 << 32);
        let g = peaked_generator(&spec, &l.shape, &l.seq_lens, &l.block_table).unwrap();
        assert_eq!(g.threads(), 8 * 24 * 65_536 * 32);
        let d = 32;
        let q: Vec<f32> = l.q.values[(7 * 24 + 23) * d..][..d]
            .iter()
            .map(|&x| x as f32)
            .collect();
        let rows = g.rows(&q, 7, 23, n as u32, &[0, n as usize - 1]).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .all(|r| r.len() == d && r.iter().all(|x| x.is_finite())));
        assert_ne!(rows[0], rows[1]);
        // A broken table is an error, not a launch.
        let mut shared = l.block_table.clone();
        shared[1] = shared[0];
        let e = peaked_generator(&spec, &l.shape, &l.seq_lens, &shared).unwrap_err();
        assert!(format!("{e:#}").contains("owned twice"), "{e:#}");
    }

    /// What `PaperCache::with_keys` launches for peaked keys, run in the interpreter on a
    /// small layout with the same buffers: the pool holds at every row what the reference
    /// regenerates there (`first_query`, `PagedShape::row_offset`, `PeakedKeys::rows`).
    #[test]
    fn peaked_cache_generation_matches_its_reference_rows() {
        use entkv_dsl::interp::HostBuffer;
        use entkv_kernels::program::Program;
        let spec = BenchWorkload::named("peaked").unwrap().spec().unwrap();
        let n = 300u64;
        let l = PaperLayout::new(&spec, 2, 3, n, 9).unwrap();
        let g = peaked_generator(&spec, &l.shape, &l.seq_lens, &l.block_table).unwrap();
        let mut p = Program::new();
        p.buffer("q", entkv_kernels::decode_checks::host_tensor(&l.q));
        p.buffer("block_table", HostBuffer::I32(l.block_table.clone()));
        p.buffer("seq_lens", HostBuffer::I32(l.seq_lens.clone()));
        let elem = entkv_kernels::scalar_of(spec.decode.kv_dtype);
        p.poisoned("k_pool", elem, l.shape.pool_elems(&spec) as usize);
        p.calls.push(g.call(4).unwrap());
        p.run_interp().unwrap();
        let pool = p.get("k_pool").to_f64_vec();
        // The spot check PaperCache runs after a launch passes on this pool, and catches a
        // changed element.
        let read = |pool: &[f64], start: u64, len: usize| Ok(pool[start as usize..][..len].to_vec());
        let checked = spot_check_peaked(&spec, &l.shape, &l.block_table, &l.q, &g, n, |s, len| {
            read(&pool, s, len)
        });
        // First, last and first hot page of two heads (a hot page may be the first or last).
        assert!((4..=6).contains(&checked.unwrap()));
        let mut bad = pool.clone();
        let at = l.shape.row_offset(&spec, &l.block_table, 1, 2, 300 - 1) as usize + 31;
        bad[at] = -bad[at];
        let e = spot_check_peaked(&spec, &l.shape, &l.block_table, &l.q, &g, n, |s, len| {
            read(&bad, s, len)
        });
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("sequence 1, KV head 2, token 299, dim 31"),
            "the flipped element is in the last page of the last head"
        );
        let tokens: Vec<usize> = (0..n as usize).collect();
        for b in 0..2 {
            for kvh in 0..3 {
                let q = first_query(&spec, &l.shape, &l.q, b, kvh);
                let rows = g.rows(&q, b as u32, kvh as u32, n as u32, &tokens).unwrap();
                for (t, row) in rows.iter().enumerate() {
                    let at = l.shape.row_offset(&spec, &l.block_table, b, kvh, t) as usize;
                    assert_eq!(&pool[at..at + 32], row.as_slice(), "seq {b} head {kvh} token {t}");
                }
            }
        }
    }

    #[test]
    fn layout_sizes_are_checked() {
        let spec = BenchWorkload::named("paper").unwrap().spec().unwrap();
        let l = PaperLayout::new(&spec, 2, 3, 33, 1).unwrap();
        assert_eq!((l.shape.num_pages, l.shape.max_pages), (6, 3));
        assert_eq!(l.seq_lens, vec![33, 33]);
        assert_eq!(l.q.len(), 2 * 3 * 32);
        let mut t = l.block_table.clone();
        t.sort();
        assert_eq!(t, (0..6).collect::<Vec<i32>>());
        assert!(PaperLayout::new(&spec, 2, 3, 0, 1).is_err());
        assert!(PaperLayout::new(&spec, 2, 3, 1 << 31, 1).is_err());
    }
}
