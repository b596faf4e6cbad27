//! Decode pipelines at the BENCH.md shapes on the GPU: a paged cache of gigabytes generated on
//! the device (pools filled by the counter-based generator, pages scattered by a shuffled block
//! table), the pipelines of `entkv_kernels::pipelines` run on it, outputs checked against the
//! float64 reference on sampled heads (K/V regenerated on the host), and each decode step timed
//! with CUDA events.

use crate::device::{time_ms, DeviceProgram, FunctionCache, Kernels};
use crate::record::{Environment, TimingRecord};
use anyhow::Result;
use entkv_abi::{DenseShape, DenseTile, PagedShape, PagedSpec};
use entkv_dsl::interp::HostBuffer;
use entkv_kernels::check::{compare, DenseCheck, DenseOutputs};
use entkv_kernels::data::{normal, Tensor};
use entkv_kernels::fill::value_at;
use entkv_kernels::pipelines::{decode_pipeline, DecodeKind, Pipeline};
use entkv_kernels::reference::{attend, attend_softmax, DecodeReference, HeadReference};
use entkv_runtime::Gpu;
use rand::seq::SliceRandom;
use rand::SeedableRng;

const SEED_K: u32 = 0x1234_5678;
const SEED_V: u32 = 0x0bad_cafe;

/// Selected logical pages per (sequence, KV head) as a selector wrote them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// `[batch, kv_heads, max_pages]`.
    pub pages: Vec<i32>,
    /// `[batch, kv_heads]`.
    pub count: Vec<i32>,
}

/// A paged cache on the device with every sequence `n` tokens long.
pub struct PaperCache {
    pub spec: PagedSpec,
    pub shape: PagedShape,
    pub n: u64,
    pub q: Tensor,
    pub block_table: Vec<i32>,
    pub dev: DeviceProgram,
}

impl PaperCache {
    /// Allocate and fill q, the pools, the block table and the lengths.
    pub fn new(
        gpu: &Gpu,
        kernels: &mut Kernels,
        spec: PagedSpec,
        batch: u32,
        kv_heads: u32,
        n: u64,
        seed: u64,
    ) -> Result<PaperCache> {
        let p = spec.page_size as u64;
        let pages_per_seq = n.div_ceil(p) as u32;
        let shape = PagedShape {
            batch,
            kv_heads,
            num_pages: batch * pages_per_seq,
            max_pages: pages_per_seq,
        };
        let mut perm: Vec<i32> = (0..shape.num_pages as i32).collect();
        perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
        let q_heads = shape.q_heads(&spec) as usize;
        let d = spec.decode.head_dim as usize;
        let q = Tensor::from_f64(spec.decode.q_dtype, &normal(seed, batch as usize * q_heads * d));
        let mut dev = DeviceProgram::new();
        dev.put(gpu, "q", &entkv_kernels::decode_checks::host_tensor(&q))?;
        let pool = shape.pool_elems(&spec);
        dev.alloc_normal(gpu, kernels, "k_pool", spec.decode.kv_dtype, pool, SEED_K)?;
        dev.alloc_normal(gpu, kernels, "v_pool", spec.decode.kv_dtype, pool, SEED_V)?;
        dev.put(gpu, "block_table", &HostBuffer::I32(perm.clone()))?;
        dev.put(gpu, "seq_lens", &HostBuffer::I32(vec![n as i32; batch as usize]))?;
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
        })
    }

    fn row(&self, seed: u32, b: usize, kvh: usize, t: usize) -> Vec<f64> {
        let (p, d) = (self.spec.page_size as usize, self.spec.decode.head_dim as usize);
        let page = self.block_table[b * self.shape.max_pages as usize + t / p] as u64;
        let base = ((page * self.shape.kv_heads as u64 + kvh as u64) * p as u64 + (t % p) as u64) * d as u64;
        (0..d as u64)
            .map(|i| value_at(self.spec.decode.kv_dtype, seed, 1.0, base + i))
            .collect()
    }

    /// Full-cache float64 reference of head `hd` (= b·q_heads + h) over `tokens` (all when
    /// `None`), from K/V regenerated on the host.
    pub fn reference(&self, hd: usize, tokens: Option<&[usize]>) -> HeadReference {
        let q_heads = self.shape.q_heads(&self.spec) as usize;
        let d = self.spec.decode.head_dim as usize;
        let (b, h) = (hd / q_heads, hd % q_heads);
        let kvh = h / self.spec.decode.group as usize;
        let all: Vec<usize> = (0..self.n as usize).collect();
        let toks = tokens.unwrap_or(&all);
        let keys: Vec<Vec<f64>> = toks.iter().map(|&t| self.row(SEED_K, b, kvh, t)).collect();
        let values: Vec<Vec<f64>> = toks.iter().map(|&t| self.row(SEED_V, b, kvh, t)).collect();
        let kr: Vec<&[f64]> = keys.iter().map(|v| v.as_slice()).collect();
        let vr: Vec<&[f64]> = values.iter().map(|v| v.as_slice()).collect();
        let bias: Vec<f64> = if self.spec.alibi {
            let slope = (-8.0 * (h + 1) as f64 / q_heads as f64).exp2() as f32 as f64;
            toks.iter()
                .map(|&t| slope * (t as f64 - (self.n as f64 - 1.0)))
                .collect()
        } else {
            Vec::new()
        };
        attend(
            &self.q.values[hd * d..][..d],
            &kr,
            &vr,
            &bias,
            self.spec.decode.alpha,
        )
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
        let q_heads = self.shape.q_heads(&self.spec) as usize;
        let (b, h) = (hd / q_heads, hd % q_heads);
        let kvh = h / self.spec.decode.group as usize;
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
        Ok(sel.pages[row * mp..row * mp + count as usize]
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
                .collect()
        });
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
    /// on one thread each. A head with a non-finite output scores infinity.
    pub fn check_softmax_selection(&self, out: &[f64], samples: usize, sel: &Selection) -> Result<f64> {
        let d = self.spec.decode.head_dim as usize;
        let q_heads = self.shape.q_heads(&self.spec) as usize;
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
                        let (b, h) = (hd / q_heads, hd % q_heads);
                        let kvh = h / self.spec.decode.group as usize;
                        let keys: Vec<Vec<f64>> = toks.iter().map(|&t| self.row(SEED_K, b, kvh, t)).collect();
                        let values: Vec<Vec<f64>> =
                            toks.iter().map(|&t| self.row(SEED_V, b, kvh, t)).collect();
                        let kr: Vec<&[f64]> = keys.iter().map(|v| v.as_slice()).collect();
                        let vr: Vec<&[f64]> = values.iter().map(|v| v.as_slice()).collect();
                        attend_softmax(&self.q.values[hd * d..][..d], &kr, &vr, &[])
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("reference thread"))
                .collect()
        });
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
            worst = worst.max(rel);
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
    TimingRecord::new(
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
    )
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
        println!(
            "{:<44} step {:>7.3} ms  kernels {:?} ms  cand/head {:>8.1} {kept}",
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
