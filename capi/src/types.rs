//! The `#[repr(C)]` structs of `include/entkv.h` and their conversion to the engine's types.

#![allow(non_camel_case_types)]

use entkv_runtime::engine::{DecodeBuffers, DeviceRegion, DeviceTensor, IdFault, MAX_RANK};
use entkv_runtime::BatchError;
use entkv_runtime::{DType, Elem, Method, Problem};

use crate::error::{Error, ENTKV_ERR_SPEC, ENTKV_ERR_TENSOR};

/// `ENTKV_F16`.
pub const ENTKV_F16: i32 = 0;
/// `ENTKV_BF16`.
pub const ENTKV_BF16: i32 = 1;
/// `ENTKV_F32`.
pub const ENTKV_F32: i32 = 2;
/// `ENTKV_I32`.
pub const ENTKV_I32: i32 = 3;

/// `ENTKV_DENSE`.
pub const ENTKV_DENSE: i32 = 0;
/// `ENTKV_TOPK`.
pub const ENTKV_TOPK: i32 = 1;
/// `ENTKV_GAUSSIAN`.
pub const ENTKV_GAUSSIAN: i32 = 2;
/// `ENTKV_CERTIFIED`.
pub const ENTKV_CERTIFIED: i32 = 3;
/// `ENTKV_AUTO`.
pub const ENTKV_AUTO: i32 = 4;
/// `ENTKV_CERTIFIED_PRUNED`.
pub const ENTKV_CERTIFIED_PRUNED: i32 = 5;

/// `ENTKV_CHECK_DEVICE_IDS`: a flag of `entkv_decoder_create_ex` (`Problem::check_device_ids`).
pub const ENTKV_CHECK_DEVICE_IDS: u32 = 1;

/// `entkv_id_fault`: the bad lengths and page ids a checked step found in one sequence.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct entkv_id_fault {
    /// The sequence.
    pub seq: u32,
    /// Bad values in it (its length counts as one).
    pub count: u32,
    /// Where the first is: −1 the length, else the logical page of the bad id.
    pub logical_page: i32,
    /// The bad length or page id.
    pub value: i32,
}

impl entkv_id_fault {
    /// The C form of an engine fault.
    pub(crate) fn of(f: &IdFault) -> entkv_id_fault {
        let (logical_page, value) = match f.first {
            BatchError::EmptySequence { len, .. } | BatchError::LongerThanPlanned { len, .. } => (-1, len),
            BatchError::PageOutOfPool { logical, page, .. } => (logical.min(i32::MAX as usize) as i32, page),
            // `IdFault::decode` makes none of these.
            BatchError::SeqLensCount { .. }
            | BatchError::BlockTableCount { .. }
            | BatchError::SequenceTooLong { .. } => (-1, 0),
        };
        entkv_id_fault {
            seq: f.seq.min(u32::MAX as usize) as u32,
            count: f.count,
            logical_page,
            value,
        }
    }
}

/// The sketch width used when `entkv_problem::sketch_bits` is 0.
pub const DEFAULT_SKETCH_BITS: u32 = entkv_abi::DEFAULT_SKETCH_BITS;

/// `entkv_problem`: what a decoder is created for (see [`Problem`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct entkv_problem {
    /// Entmax α (finite, > 1).
    pub alpha: f64,
    /// 32, 64 or 128.
    pub head_dim: u32,
    /// 16, 32 or 64.
    pub page_size: u32,
    /// Query heads: a multiple of `kv_heads` with group 1, 2, 3, 4 or 8.
    pub q_heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// `ENTKV_F16`, `ENTKV_BF16` or `ENTKV_F32`: K, V and q.
    pub kv_dtype: i32,
    /// 0 or 1: steps take per-query-head ALiBi slopes.
    pub alibi: i32,
    /// 4 or 8 (0 = 8).
    pub sketch_bits: u32,
    /// `ENTKV_DENSE` … `ENTKV_AUTO`.
    pub method: i32,
    /// Pages kept besides the last (`ENTKV_TOPK` only; ignored otherwise).
    pub topk_budget_pages: u32,
    /// Most sequences in one step.
    pub max_batch: u32,
    /// Pages in the K/V pools.
    pub num_pages: u32,
    /// Columns of the block table.
    pub max_pages: u32,
}

/// `entkv_tensor`: a device tensor (strides in elements, like torch).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct entkv_tensor {
    /// Device address of element 0 (0 = none, for optional tensors).
    pub ptr: u64,
    /// `ENTKV_F16` … `ENTKV_I32`.
    pub dtype: i32,
    /// Dimensions used (≤ 4).
    pub rank: u32,
    /// `shape[0..rank]`.
    pub shape: [i64; 4],
    /// `strides[0..rank]`, in elements.
    pub strides: [i64; 4],
}

/// `entkv_buffers`: everything a step reads and writes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct entkv_buffers {
    /// `[batch, q_heads, head_dim]`, K/V dtype.
    pub q: entkv_tensor,
    /// `[num_pages, kv_heads, page_size, head_dim]`.
    pub k_pool: entkv_tensor,
    /// `[num_pages, kv_heads, page_size, head_dim]`.
    pub v_pool: entkv_tensor,
    /// `[batch, max_pages]` i32.
    pub block_table: entkv_tensor,
    /// `[batch]` i32.
    pub seq_lens: entkv_tensor,
    /// `[q_heads]` f32; `ptr` 0 = none.
    pub alibi_slopes: entkv_tensor,
    /// `[batch, q_heads, head_dim]` f32.
    pub out: entkv_tensor,
    /// Metadata region base (256-byte aligned).
    pub metadata_ptr: u64,
    /// Metadata region size.
    pub metadata_bytes: u64,
    /// Workspace region base (256-byte aligned).
    pub workspace_ptr: u64,
    /// Workspace region size.
    pub workspace_bytes: u64,
}

/// The element type of a dtype code.
pub(crate) fn elem_from_code(code: i32, what: &str) -> Result<Elem, Error> {
    match code {
        ENTKV_F16 => Ok(Elem::F16),
        ENTKV_BF16 => Ok(Elem::BF16),
        ENTKV_F32 => Ok(Elem::F32),
        ENTKV_I32 => Ok(Elem::I32),
        _ => Err(Error::invalid(format!(
            "{what}: unknown dtype code {code} (ENTKV_F16 0, ENTKV_BF16 1, ENTKV_F32 2, ENTKV_I32 3)"
        ))),
    }
}

/// The `ENTKV_*` method code of a method.
pub(crate) fn method_code(m: &Method) -> i32 {
    match m {
        Method::Dense => ENTKV_DENSE,
        Method::TopK { .. } => ENTKV_TOPK,
        Method::Gaussian => ENTKV_GAUSSIAN,
        Method::Certified => ENTKV_CERTIFIED,
        Method::Auto => ENTKV_AUTO,
        Method::CertifiedPruned => ENTKV_CERTIFIED_PRUNED,
    }
}

impl entkv_problem {
    /// The engine's problem; unknown codes are `INVALID_ARGUMENT`, an i32 K/V dtype is `SPEC`.
    /// The values themselves are checked by the engine.
    pub(crate) fn engine_problem(&self) -> Result<Problem, Error> {
        let kv_dtype = match elem_from_code(self.kv_dtype, "problem.kv_dtype")? {
            Elem::F16 => DType::F16,
            Elem::BF16 => DType::BF16,
            Elem::F32 => DType::F32,
            other => {
                return Err(Error::new(
                    ENTKV_ERR_SPEC,
                    format!("problem.kv_dtype: {other:?} is not a K/V dtype (supported: f16, bf16, f32)"),
                ))
            }
        };
        let alibi = match self.alibi {
            0 => false,
            1 => true,
            a => return Err(Error::invalid(format!("problem.alibi must be 0 or 1, got {a}"))),
        };
        let method = match self.method {
            ENTKV_DENSE => Method::Dense,
            ENTKV_TOPK => Method::TopK {
                budget_pages: self.topk_budget_pages,
            },
            ENTKV_GAUSSIAN => Method::Gaussian,
            ENTKV_CERTIFIED => Method::Certified,
            ENTKV_AUTO => Method::Auto,
            ENTKV_CERTIFIED_PRUNED => Method::CertifiedPruned,
            m => {
                return Err(Error::invalid(format!(
                    "problem.method: unknown method code {m} (ENTKV_DENSE 0, ENTKV_TOPK 1, \
                     ENTKV_GAUSSIAN 2, ENTKV_CERTIFIED 3, ENTKV_AUTO 4, ENTKV_CERTIFIED_PRUNED 5)"
                )))
            }
        };
        Ok(Problem {
            alpha: self.alpha,
            head_dim: self.head_dim,
            page_size: self.page_size,
            q_heads: self.q_heads,
            kv_heads: self.kv_heads,
            kv_dtype,
            alibi,
            sketch_bits: if self.sketch_bits == 0 {
                DEFAULT_SKETCH_BITS
            } else {
                self.sketch_bits
            },
            method,
            max_batch: self.max_batch,
            num_pages: self.num_pages,
            max_pages: self.max_pages,
            // Not in the C ABI yet (a new field would change `entkv_problem`'s layout).
            check_device_ids: false,
        })
    }
}

impl entkv_tensor {
    /// The engine's tensor `name`; shape, strides, alignment and dtype are checked by the step.
    pub(crate) fn device_tensor(&self, name: &str) -> Result<DeviceTensor, Error> {
        let elem = elem_from_code(self.dtype, &format!("tensor `{name}`"))?;
        let rank = self.rank as usize;
        if rank > MAX_RANK {
            return Err(Error::new(
                ENTKV_ERR_TENSOR,
                format!("tensor `{name}`: rank {rank} exceeds {MAX_RANK}"),
            ));
        }
        let mut shape = [0u64; MAX_RANK];
        for (i, (dst, &dim)) in shape.iter_mut().zip(&self.shape[..rank]).enumerate() {
            *dst = u64::try_from(dim).map_err(|_| {
                Error::new(
                    ENTKV_ERR_TENSOR,
                    format!("tensor `{name}`: shape[{i}] = {dim} is negative"),
                )
            })?;
        }
        Ok(DeviceTensor::strided(
            self.ptr,
            elem,
            &shape[..rank],
            &self.strides[..rank],
        ))
    }
}

impl entkv_buffers {
    /// The engine's buffers (`alibi_slopes.ptr == 0` = none).
    pub(crate) fn decode_buffers(&self) -> Result<DecodeBuffers, Error> {
        Ok(DecodeBuffers {
            q: self.q.device_tensor("q")?,
            k_pool: self.k_pool.device_tensor("k_pool")?,
            v_pool: self.v_pool.device_tensor("v_pool")?,
            block_table: self.block_table.device_tensor("block_table")?,
            seq_lens: self.seq_lens.device_tensor("seq_lens")?,
            alibi_slopes: if self.alibi_slopes.ptr == 0 {
                None
            } else {
                Some(self.alibi_slopes.device_tensor("alibi_slopes")?)
            },
            out: self.out.device_tensor("out")?,
            metadata: DeviceRegion {
                ptr: self.metadata_ptr,
                bytes: self.metadata_bytes,
            },
            workspace: DeviceRegion {
                ptr: self.workspace_ptr,
                bytes: self.workspace_bytes,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ENTKV_ERR_INVALID_ARGUMENT;

    fn t(dtype: i32, shape: &[i64]) -> entkv_tensor {
        let mut x = entkv_tensor {
            ptr: 0x1000,
            dtype,
            rank: shape.len() as u32,
            ..Default::default()
        };
        let mut acc = 1;
        for i in (0..shape.len()).rev() {
            x.shape[i] = shape[i];
            x.strides[i] = acc;
            acc *= shape[i].max(1);
        }
        x
    }

    #[test]
    fn tensors_convert_and_bad_ones_are_named() {
        let d = t(ENTKV_F16, &[2, 3, 32]).device_tensor("q").unwrap();
        assert_eq!((d.ptr, d.elem), (0x1000, Elem::F16));
        assert_eq!(d.shape(), &[2, 3, 32]);
        assert_eq!(d.strides(), &[96, 32, 1]);
        assert_eq!(
            t(ENTKV_I32, &[]).device_tensor("x").unwrap().shape(),
            &[] as &[u64]
        );

        let e = t(ENTKV_F16, &[2, -3, 32]).device_tensor("q").unwrap_err();
        assert_eq!(e.status, ENTKV_ERR_TENSOR);
        assert!(
            e.message.contains("tensor `q`: shape[1] = -3 is negative"),
            "{}",
            e.message
        );

        let mut r5 = t(ENTKV_F32, &[1, 1, 1, 1]);
        r5.rank = 5;
        let e = r5.device_tensor("out").unwrap_err();
        assert_eq!(e.status, ENTKV_ERR_TENSOR);
        assert!(e.message.contains("`out`: rank 5 exceeds 4"), "{}", e.message);

        let e = t(7, &[1]).device_tensor("seq_lens").unwrap_err();
        assert_eq!(e.status, ENTKV_ERR_INVALID_ARGUMENT);
        assert!(
            e.message.contains("tensor `seq_lens`: unknown dtype code 7"),
            "{}",
            e.message
        );
    }

    #[test]
    fn buffers_convert_with_optional_alibi() {
        let mut b = entkv_buffers {
            q: t(ENTKV_F16, &[1, 1, 32]),
            k_pool: t(ENTKV_F16, &[4, 1, 16, 32]),
            v_pool: t(ENTKV_F16, &[4, 1, 16, 32]),
            block_table: t(ENTKV_I32, &[1, 4]),
            seq_lens: t(ENTKV_I32, &[1]),
            alibi_slopes: entkv_tensor::default(),
            out: t(ENTKV_F32, &[1, 1, 32]),
            metadata_ptr: 0x2000,
            metadata_bytes: 512,
            workspace_ptr: 0x3000,
            workspace_bytes: 1024,
        };
        let d = b.decode_buffers().unwrap();
        assert!(d.alibi_slopes.is_none());
        assert_eq!(
            d.workspace,
            DeviceRegion {
                ptr: 0x3000,
                bytes: 1024
            }
        );
        assert_eq!(
            d.metadata,
            DeviceRegion {
                ptr: 0x2000,
                bytes: 512
            }
        );
        assert_eq!(d.k_pool.shape(), &[4, 1, 16, 32]);
        b.alibi_slopes = t(ENTKV_F32, &[1]);
        assert_eq!(b.decode_buffers().unwrap().alibi_slopes.unwrap().elem, Elem::F32);
    }

    #[test]
    fn problems_convert() {
        let mut p = entkv_problem {
            alpha: 1.5,
            head_dim: 32,
            page_size: 16,
            q_heads: 4,
            kv_heads: 2,
            kv_dtype: ENTKV_BF16,
            alibi: 1,
            sketch_bits: 0,
            method: ENTKV_TOPK,
            topk_budget_pages: 7,
            max_batch: 2,
            num_pages: 10,
            max_pages: 5,
        };
        let q = p.engine_problem().unwrap();
        assert_eq!(q.method, Method::TopK { budget_pages: 7 });
        assert_eq!(
            (q.kv_dtype, q.alibi, q.sketch_bits),
            (DType::BF16, true, entkv_abi::DEFAULT_SKETCH_BITS)
        );
        assert_eq!(
            (q.q_heads, q.kv_heads, q.max_batch, q.num_pages, q.max_pages),
            (4, 2, 2, 10, 5)
        );
        p.sketch_bits = 4;
        assert_eq!(p.engine_problem().unwrap().sketch_bits, 4);
        p.alibi = 2;
        assert_eq!(p.engine_problem().unwrap_err().status, ENTKV_ERR_INVALID_ARGUMENT);
        p.alibi = 0;
        p.kv_dtype = ENTKV_I32;
        assert_eq!(p.engine_problem().unwrap_err().status, ENTKV_ERR_SPEC);
        for (code, m) in [
            (ENTKV_DENSE, Method::Dense),
            (ENTKV_GAUSSIAN, Method::Gaussian),
            (ENTKV_CERTIFIED, Method::Certified),
            (ENTKV_AUTO, Method::Auto),
            (ENTKV_CERTIFIED_PRUNED, Method::CertifiedPruned),
        ] {
            p.kv_dtype = ENTKV_F16;
            p.method = code;
            assert_eq!(p.engine_problem().unwrap().method, m);
            assert_eq!(method_code(&m), code);
        }
    }
}
