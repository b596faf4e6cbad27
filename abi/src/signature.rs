//! Kernel signatures: the ordered parameter list each generated entry point takes. The
//! generator declares parameters in exactly this order (a kernels-gen test checks it) and the
//! runtime passes arguments in this order.

use crate::spec::{DType, DecodeSpec};
use serde::{Deserialize, Serialize};

/// Element type of a buffer argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Elem {
    F16,
    BF16,
    F32,
    I32,
    U32,
    I64,
}

impl Elem {
    pub fn size_bytes(self) -> u32 {
        match self {
            Elem::F16 | Elem::BF16 => 2,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::I64 => 8,
        }
    }
}

impl From<DType> for Elem {
    fn from(d: DType) -> Elem {
        match d {
            DType::F16 => Elem::F16,
            DType::BF16 => Elem::BF16,
            DType::F32 => Elem::F32,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArgKind {
    /// A device pointer; `writes` says whether the kernel writes through it.
    Buffer {
        elem: Elem,
        writes: bool,
    },
    I32,
    I64,
    F32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
}

const fn buf(name: &'static str, elem: Elem, writes: bool) -> ArgSpec {
    ArgSpec {
        name,
        kind: ArgKind::Buffer { elem, writes },
    }
}

pub fn dense_score_signature(spec: &DecodeSpec) -> Vec<ArgSpec> {
    vec![
        buf("q", spec.q_dtype.into(), false),
        buf("k", spec.kv_dtype.into(), false),
        buf("cand_z", Elem::F32, true),
        buf("cand_idx", Elem::I32, true),
        buf("cand_count", Elem::I32, true),
        buf("cand_lb", Elem::F32, true),
        ArgSpec {
            name: "n",
            kind: ArgKind::I64,
        },
    ]
}

pub fn dense_finish_signature(spec: &DecodeSpec) -> Vec<ArgSpec> {
    vec![
        buf("cand_z", Elem::F32, false),
        buf("cand_idx", Elem::I32, false),
        buf("cand_count", Elem::I32, false),
        buf("cand_lb", Elem::F32, false),
        buf("v", spec.kv_dtype.into(), false),
        buf("out", spec.out_dtype.into(), true),
        buf("tau", Elem::F32, true),
        buf("support", Elem::I32, true),
        ArgSpec {
            name: "splits",
            kind: ArgKind::I32,
        },
        ArgSpec {
            name: "n",
            kind: ArgKind::I64,
        },
    ]
}
