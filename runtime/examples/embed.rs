//! Embedding the engine: one decode step of certified-exact entmax attention over a paged cache.
//!
//! `cargo run --release -p entkv-runtime --example embed -- BUNDLE_DIR` (make the bundle with
//! `entkv bundle create --alpha 1.5 --head-dim 32 --out BUNDLE_DIR`). An engine passes its own
//! stream and tensors instead of the buffers allocated here.

use std::sync::Arc;

use entkv_runtime::engine::{DecodeBuffers, Decoder, DeviceRegion, DeviceTensor, Method, Problem};
use entkv_runtime::{Bundle, DeviceBuffer, Elem, Gpu};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: embed BUNDLE_DIR")?;
    let bundle = Arc::new(Bundle::open(dir.as_ref())?); // schema + sha256 of every artifact
    let gpu = Gpu::open(0)?;
    let problem = Problem {
        q_heads: 8,
        kv_heads: 8,
        max_batch: 2,
        num_pages: 512,
        max_pages: 256,
        ..Problem::new(1.5, 32, 16, Method::Certified)
    };
    let decoder = Decoder::new(&gpu, bundle, &problem)?; // device and problem checked here
    decoder.load_modules()?; // the driver's JIT, at start-up rather than in the first step

    // The engine's tensors (here: f16 values as u16 bits, one sequence of 1000 tokens).
    let (pool_elems, q_elems) = (512 * 8 * 16 * 32, 8 * 32);
    let k = DeviceBuffer::from_host(&gpu, &vec![0x3c00u16; pool_elems])?; // 1.0
    let v = DeviceBuffer::from_host(&gpu, &vec![0x3800u16; pool_elems])?; // 0.5
    let q = DeviceBuffer::from_host(&gpu, &vec![0x3c00u16; q_elems])?;
    let seq_lens = [1000i32];
    let block_table: Vec<i32> = (0..256).map(|j| if j < 63 { 2 * j } else { -1 }).collect();
    let lens_dev = DeviceBuffer::from_host(&gpu, &seq_lens)?;
    let table_dev = DeviceBuffer::from_host(&gpu, &block_table)?;
    let out = DeviceBuffer::<f32>::alloc_zeros(&gpu, q_elems)?;
    let metadata = DeviceBuffer::<u8>::alloc_zeros(&gpu, decoder.metadata_size() as usize)?;
    let workspace = DeviceBuffer::<u8>::alloc_zeros(&gpu, decoder.workspace_size() as usize)?;

    let pool = [512, 8, 16, 32];
    let buffers = DecodeBuffers {
        q: DeviceTensor::contiguous(q.device_ptr(), Elem::F16, &[1, 8, 32]),
        k_pool: DeviceTensor::contiguous(k.device_ptr(), Elem::F16, &pool),
        v_pool: DeviceTensor::contiguous(v.device_ptr(), Elem::F16, &pool),
        block_table: DeviceTensor::contiguous(table_dev.device_ptr(), Elem::I32, &[1, 256]),
        seq_lens: DeviceTensor::contiguous(lens_dev.device_ptr(), Elem::I32, &[1]),
        alibi_slopes: None,
        out: DeviceTensor::contiguous(out.device_ptr(), Elem::F32, &[1, 8, 32]),
        metadata: DeviceRegion {
            ptr: metadata.device_ptr(),
            bytes: metadata.size_bytes() as u64,
        },
        workspace: DeviceRegion {
            ptr: workspace.device_ptr(),
            bytes: workspace.size_bytes() as u64,
        },
    };
    let stream = gpu.stream_raw(); // an engine passes its own CUstream: RawStream::from_raw(..)
    let step = decoder.plan(&seq_lens, &block_table)?; // host only; once per batch shape
                                                       // SAFETY: every pointer is live device memory of this context with the described shape.
    unsafe {
        decoder.build_metadata(stream, &seq_lens, &block_table, &buffers.k_pool, buffers.metadata)?;
        decoder.run(&step, stream, &buffers)?; // no allocation, no host sync: graph-capturable
    }
    gpu.synchronize()?;
    println!("{:?}: out[0..4] = {:?}", step.plan().method, &out.to_host()?[..4]);
    Ok(())
}
