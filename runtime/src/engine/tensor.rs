//! Device tensors as the caller describes them (pointer, dtype, shape, strides) and the checks a
//! step runs on them before any launch. Fixed-size arrays: describing and checking a tensor
//! allocates nothing.

use entkv_abi::Elem;

use super::EngineError;

/// Largest rank a tensor argument has.
pub const MAX_RANK: usize = 4;

/// Alignment every tensor base pointer needs (bytes): the kernels load 16-byte vectors.
pub const TENSOR_ALIGN: u64 = 16;

/// A tensor in device memory: base address, element type, shape and strides (in elements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTensor {
    /// Device address of element 0.
    pub ptr: u64,
    /// Element type.
    pub elem: Elem,
    rank: usize,
    shape: [u64; MAX_RANK],
    strides: [i64; MAX_RANK],
}

impl DeviceTensor {
    /// A row-major contiguous tensor. Ranks above [`MAX_RANK`] are recorded as rank 0 and
    /// refused by the step's checks.
    pub fn contiguous(ptr: u64, elem: Elem, shape: &[u64]) -> DeviceTensor {
        let mut strides = [0i64; MAX_RANK];
        let mut acc = 1i64;
        for i in (0..shape.len().min(MAX_RANK)).rev() {
            strides[i] = acc;
            acc = acc.saturating_mul(shape[i] as i64);
        }
        DeviceTensor::strided(ptr, elem, shape, &strides[..shape.len().min(MAX_RANK)])
    }

    /// A tensor with explicit strides (elements), e.g. from `torch.Tensor.stride()`.
    pub fn strided(ptr: u64, elem: Elem, shape: &[u64], strides: &[i64]) -> DeviceTensor {
        let mut t = DeviceTensor {
            ptr,
            elem,
            rank: 0,
            shape: [0; MAX_RANK],
            strides: [0; MAX_RANK],
        };
        if shape.len() <= MAX_RANK && shape.len() == strides.len() {
            t.rank = shape.len();
            t.shape[..t.rank].copy_from_slice(shape);
            t.strides[..t.rank].copy_from_slice(strides);
        } else {
            t.rank = usize::MAX;
        }
        t
    }

    /// The dimensions.
    pub fn shape(&self) -> &[u64] {
        &self.shape[..self.rank.min(MAX_RANK)]
    }

    /// The strides in elements.
    pub fn strides(&self) -> &[i64] {
        &self.strides[..self.rank.min(MAX_RANK)]
    }

    /// Check dtype, rank, dims (`expect[i]`; `lead_at_least` lets dim 0 be larger, for buffers
    /// sized for the largest batch), row-major contiguity, non-null and aligned base.
    pub(crate) fn check(
        &self,
        name: &'static str,
        elem: Elem,
        expect: &[u64],
        lead_at_least: bool,
    ) -> Result<(), EngineError> {
        let bad = |problem: String| EngineError::BadTensor { name, problem };
        if self.rank == usize::MAX {
            return Err(bad(format!(
                "rank or strides invalid (rank ≤ {MAX_RANK}, one stride per dim)"
            )));
        }
        if self.elem != elem {
            return Err(bad(format!("dtype {:?}, expected {:?}", self.elem, elem)));
        }
        if self.rank != expect.len() {
            return Err(bad(format!("shape {:?}, expected {:?}", self.shape(), expect)));
        }
        for (i, (&got, &want)) in self.shape().iter().zip(expect).enumerate() {
            let ok = if i == 0 && lead_at_least {
                got >= want
            } else {
                got == want
            };
            if !ok {
                let rel = if i == 0 && lead_at_least { "at least " } else { "" };
                return Err(bad(format!(
                    "shape {:?}: dim {i} is {got}, expected {rel}{want} (expected shape {:?})",
                    self.shape(),
                    expect
                )));
            }
        }
        let mut acc = 1i64;
        for i in (0..self.rank).rev() {
            if self.shape[i] > 1 && self.strides[i] != acc {
                return Err(bad(format!(
                    "strides {:?} are not row-major contiguous for shape {:?}",
                    self.strides(),
                    self.shape()
                )));
            }
            acc = acc.saturating_mul(self.shape[i] as i64);
        }
        if self.ptr == 0 {
            return Err(bad("null device pointer".into()));
        }
        if self.ptr % TENSOR_ALIGN != 0 {
            return Err(bad(format!(
                "device pointer {:#x} is not {TENSOR_ALIGN}-byte aligned",
                self.ptr
            )));
        }
        Ok(())
    }
}

/// A byte range of device memory the decoder owns for a step (workspace, metadata).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceRegion {
    /// Device address (256-byte aligned).
    pub ptr: u64,
    /// Bytes available.
    pub bytes: u64,
}

impl DeviceRegion {
    pub(crate) fn check(&self, name: &'static str, need: u64) -> Result<(), EngineError> {
        let bad = |problem: String| EngineError::BadTensor { name, problem };
        if need == 0 {
            return Ok(());
        }
        if self.bytes < need {
            return Err(bad(format!(
                "{} bytes given, the decoder needs {need}",
                self.bytes
            )));
        }
        if self.ptr == 0 {
            return Err(bad("null device pointer".into()));
        }
        if self.ptr % super::layout::REGION_ALIGN != 0 {
            return Err(bad(format!(
                "device pointer {:#x} is not {}-byte aligned",
                self.ptr,
                super::layout::REGION_ALIGN
            )));
        }
        Ok(())
    }
}

/// Everything one decode step reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeBuffers {
    /// `[batch, q_heads, head_dim]` in the K/V dtype (dim 0 may be larger).
    pub q: DeviceTensor,
    /// `[num_pages, kv_heads, page_size, head_dim]`.
    pub k_pool: DeviceTensor,
    /// `[num_pages, kv_heads, page_size, head_dim]`.
    pub v_pool: DeviceTensor,
    /// `[batch, max_pages]` i32 (dim 0 may be larger).
    pub block_table: DeviceTensor,
    /// `[batch]` i32 (may be longer).
    pub seq_lens: DeviceTensor,
    /// `[q_heads]` f32, for ALiBi problems only.
    pub alibi_slopes: Option<DeviceTensor>,
    /// `[batch, q_heads, head_dim]` f32 (dim 0 may be larger).
    pub out: DeviceTensor,
    /// `metadata_size()` bytes, kept across steps.
    pub metadata: DeviceRegion,
    /// `workspace_size()` bytes.
    pub workspace: DeviceRegion,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_the_problem() {
        let t = DeviceTensor::contiguous(0x1000, Elem::F16, &[2, 3, 32]);
        assert!(t.check("q", Elem::F16, &[2, 3, 32], false).is_ok());
        assert!(t.check("q", Elem::F16, &[1, 3, 32], true).is_ok());
        let e = |r: Result<(), EngineError>| r.unwrap_err().to_string();
        assert!(e(t.check("q", Elem::BF16, &[2, 3, 32], false)).contains("dtype F16, expected BF16"));
        assert!(e(t.check("q", Elem::F16, &[2, 4, 32], false)).contains("dim 1 is 3, expected 4"));
        assert!(e(t.check("q", Elem::F16, &[3, 3, 32], true)).contains("expected at least 3"));
        assert!(e(t.check("q", Elem::F16, &[2, 96], false)).contains("expected [2, 96]"));
        let s = DeviceTensor::strided(0x1000, Elem::F16, &[2, 3, 32], &[192, 1, 3]);
        assert!(e(s.check("q", Elem::F16, &[2, 3, 32], false)).contains("not row-major"));
        let n = DeviceTensor::contiguous(0, Elem::F16, &[2, 3, 32]);
        assert!(e(n.check("q", Elem::F16, &[2, 3, 32], false)).contains("null"));
        let m = DeviceTensor::contiguous(0x1002, Elem::F16, &[2, 3, 32]);
        assert!(e(m.check("q", Elem::F16, &[2, 3, 32], false)).contains("aligned"));
        let r = DeviceTensor::contiguous(0x1000, Elem::F16, &[1, 1, 1, 1, 1]);
        assert!(e(r.check("q", Elem::F16, &[1], false)).contains("rank"));
        let reg = DeviceRegion {
            ptr: 0x1000,
            bytes: 100,
        };
        assert!(reg.check("workspace", 0).is_ok());
        assert!(e(reg.check("workspace", 200)).contains("needs 200"));
        assert!(e(DeviceRegion {
            ptr: 0x1010,
            bytes: 500
        }
        .check("workspace", 200))
        .contains("aligned"));
    }
}
