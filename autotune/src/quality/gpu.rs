//! One decode step of host inputs (`PagedInputs`, generated or loaded from `.npy`) through the
//! runtime's `Decoder` on the GPU, with the whole workspace read back afterwards — the
//! selections (`sel_pages`/`sel_count`) and certified's candidates and `kept` counts live
//! there. `engine_bench::HostCase` runs steps the same way but is built from a seeded
//! `PagedCase` and keeps the workspace to itself; this takes any inputs and hands the
//! workspace out.

use anyhow::{Context, Result};
use entkv_abi::{Elem, PagedSpec};
use entkv_kernels::paged_data::PagedInputs;
use entkv_runtime::engine::{DecodeBuffers, Decoder, DeviceRegion, DeviceTensor, RegionLayout, StepPlan};
use entkv_runtime::{DeviceBuffer, Gpu};
use half::{bf16, f16};

/// The inputs of one problem on the device, and its output buffer.
pub struct DeviceInputs {
    spec: PagedSpec,
    batch: u64,
    q_heads: u64,
    max_pages: u64,
    pool: [u64; 4],
    seq_lens_host: Vec<i32>,
    block_table_host: Vec<i32>,
    q: DeviceBuffer<u8>,
    k: DeviceBuffer<u8>,
    v: DeviceBuffer<u8>,
    block_table: DeviceBuffer<i32>,
    seq_lens: DeviceBuffer<i32>,
    alibi: Option<DeviceBuffer<f32>>,
    out: DeviceBuffer<f32>,
}

/// What a step left on the device, copied back.
pub struct GpuStep {
    /// The step's plan (method, launches).
    pub plan: StepPlan,
    /// `[batch, q_heads, d]` f32 output.
    pub out: Vec<f64>,
    workspace: Vec<u8>,
}

impl GpuStep {
    /// The workspace slot `name` (laid out by `layout`, the decoder's workspace layout) widened
    /// to f64.
    pub fn read(&self, layout: &RegionLayout, name: &str) -> Result<Vec<f64>> {
        let s = layout
            .get(name)
            .with_context(|| format!("the workspace has no `{name}`"))?;
        let bytes = self
            .workspace
            .get(s.offset as usize..(s.offset + s.bytes()) as usize)
            .with_context(|| format!("`{name}` lies past the workspace read back"))?;
        Ok(match s.elem {
            Elem::F32 => bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            Elem::I32 => bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            Elem::U32 => bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            Elem::I64 => bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64)
                .collect(),
            Elem::F16 => bytes
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            Elem::BF16 => bytes
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
        })
    }
}

impl DeviceInputs {
    /// Copy `x` (laid out for `spec`) to the device.
    pub fn upload(gpu: &Gpu, spec: &PagedSpec, x: &PagedInputs) -> Result<DeviceInputs> {
        let sh = &x.shape;
        let d = spec.decode.head_dim as u64;
        Ok(DeviceInputs {
            spec: *spec,
            batch: sh.batch as u64,
            q_heads: sh.q_heads(spec) as u64,
            max_pages: sh.max_pages as u64,
            pool: [sh.num_pages as u64, sh.kv_heads as u64, spec.page_size as u64, d],
            seq_lens_host: x.seq_lens.clone(),
            block_table_host: x.block_table.clone(),
            q: DeviceBuffer::from_host(gpu, &x.q.to_le_bytes())?,
            k: DeviceBuffer::from_host(gpu, &x.k_pool.to_le_bytes())?,
            v: DeviceBuffer::from_host(gpu, &x.v_pool.to_le_bytes())?,
            block_table: DeviceBuffer::from_host(gpu, &x.block_table)?,
            seq_lens: DeviceBuffer::from_host(gpu, &x.seq_lens)?,
            alibi: if x.alibi_slopes.is_empty() {
                None
            } else {
                Some(DeviceBuffer::from_host(gpu, &x.alibi_slopes)?)
            },
            out: DeviceBuffer::alloc_zeros(gpu, x.q.len())?,
        })
    }

    fn buffers(&self, workspace: &DeviceBuffer<u8>, metadata: &DeviceBuffer<u8>) -> DecodeBuffers {
        let ds = &self.spec.decode;
        let (b, h, d) = (self.batch, self.q_heads, ds.head_dim as u64);
        let kv: Elem = ds.kv_dtype.into();
        let region = |buf: &DeviceBuffer<u8>| DeviceRegion {
            ptr: buf.device_ptr(),
            bytes: buf.size_bytes() as u64,
        };
        DecodeBuffers {
            q: DeviceTensor::contiguous(self.q.device_ptr(), ds.q_dtype.into(), &[b, h, d]),
            k_pool: DeviceTensor::contiguous(self.k.device_ptr(), kv, &self.pool),
            v_pool: DeviceTensor::contiguous(self.v.device_ptr(), kv, &self.pool),
            block_table: DeviceTensor::contiguous(
                self.block_table.device_ptr(),
                Elem::I32,
                &[b, self.max_pages],
            ),
            seq_lens: DeviceTensor::contiguous(self.seq_lens.device_ptr(), Elem::I32, &[b]),
            alibi_slopes: self
                .alibi
                .as_ref()
                .map(|a| DeviceTensor::contiguous(a.device_ptr(), Elem::F32, &[h])),
            out: DeviceTensor::contiguous(self.out.device_ptr(), Elem::F32, &[b, h, d]),
            metadata: region(metadata),
            workspace: region(workspace),
        }
    }

    /// Build `dec`'s page metadata, run one step on a NaN-poisoned output and workspace (what
    /// a kernel should have written and did not shows), and copy output and workspace back.
    pub fn run(&mut self, gpu: &Gpu, dec: &Decoder) -> Result<GpuStep> {
        let mut workspace = DeviceBuffer::<u8>::alloc_zeros(gpu, dec.workspace_size().max(256) as usize)?;
        let metadata = DeviceBuffer::<u8>::alloc_zeros(gpu, dec.metadata_size().max(256) as usize)?;
        workspace.fill_bytes(0xff)?;
        self.out.fill_bytes(0xff)?;
        let b = self.buffers(&workspace, &metadata);
        let stream = gpu.stream_raw();
        let step = dec
            .plan(&self.seq_lens_host, &self.block_table_host)
            .context("planning the step")?;
        // SAFETY: every buffer was allocated with the shapes the problem describes (`upload`
        // and the decoder's own region sizes above).
        unsafe {
            if dec.metadata_size() > 0 {
                dec.build_metadata(
                    stream,
                    &self.seq_lens_host,
                    &self.block_table_host,
                    &b.k_pool,
                    b.metadata,
                )
                .context("building the page metadata")?;
            }
            dec.run(&step, stream, &b).context("running the step")?;
        }
        gpu.synchronize()?;
        Ok(GpuStep {
            plan: step.plan().clone(),
            out: self.out.to_host()?.into_iter().map(f64::from).collect(),
            workspace: workspace.to_host()?,
        })
    }
}
