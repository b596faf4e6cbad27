//! Specialization parameters: the compile-time facts a kernel is generated for.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SpecError {
    #[error("alpha must be a finite number > 1, got {0}")]
    BadAlpha(f64),
    #[error("unsupported head dim {0} (supported: 32, 64, 128)")]
    BadHeadDim(u32),
    #[error("unsupported page size {0} (supported: 16, 32, 64)")]
    BadPageSize(u32),
    #[error("unsupported GQA group size {0} (supported: 1, 2, 3, 4, 8)")]
    BadGroup(u32),
    #[error("unsupported dtype `{0}` (supported: f16, bf16, f32)")]
    BadDType(String),
    #[error("unsupported sketch width {0} bits (supported: 4, 8)")]
    BadSketchBits(u32),
    #[error("bad shape: {0}")]
    BadShape(String),
    #[error("invalid tile config for {kernel}: {reason}")]
    BadTile { kernel: &'static str, reason: String },
    #[error(transparent)]
    Batch(#[from] crate::paged::BatchError),
}

/// The entmax α, with the values that have closed forms kept exact so kernels can specialise
/// `[z - τ]_+^β` to a product (β = 1, 2, 3) instead of `exp2(β·log2(·))`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Alpha {
    /// α = 2 (sparsemax), β = 1.
    Two,
    /// α = 3/2, β = 2.
    ThreeHalves,
    /// α = 4/3, β = 3.
    FourThirds,
    /// Any other α > 1; powers go through exp2/log2.
    Other(f64),
}

impl Alpha {
    /// Classify α; values within 1e-9 of 2, 3/2 or 4/3 take the exact forms.
    pub fn new(alpha: f64) -> Result<Alpha, SpecError> {
        if !alpha.is_finite() || alpha <= 1.0 {
            return Err(SpecError::BadAlpha(alpha));
        }
        let near = |v: f64| (alpha - v).abs() < 1e-9;
        Ok(if near(2.0) {
            Alpha::Two
        } else if near(1.5) {
            Alpha::ThreeHalves
        } else if near(4.0 / 3.0) {
            Alpha::FourThirds
        } else {
            Alpha::Other(alpha)
        })
    }
    pub fn value(self) -> f64 {
        match self {
            Alpha::Two => 2.0,
            Alpha::ThreeHalves => 1.5,
            Alpha::FourThirds => 4.0 / 3.0,
            Alpha::Other(a) => a,
        }
    }
    /// β = 1/(α − 1), the exponent of the entmax weights.
    pub fn beta(self) -> f64 {
        1.0 / (self.value() - 1.0)
    }
    /// The integer exponent when β is 1, 2 or 3.
    pub fn integer_beta(self) -> Option<u32> {
        match self {
            Alpha::Two => Some(1),
            Alpha::ThreeHalves => Some(2),
            Alpha::FourThirds => Some(3),
            Alpha::Other(_) => None,
        }
    }
    /// Short tag for file and entry names: `a2`, `a1p5`, `a4o3`, `a1p25`.
    pub fn tag(self) -> String {
        match self {
            Alpha::Two => "a2".into(),
            Alpha::ThreeHalves => "a1p5".into(),
            Alpha::FourThirds => "a4o3".into(),
            Alpha::Other(a) => {
                let s = format!("{a}");
                format!("a{}", s.replace('.', "p").replace('-', "m"))
            }
        }
    }
}

impl fmt::Display for Alpha {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value())
    }
}

/// Element types of tensors that cross the kernel boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    F16,
    BF16,
    F32,
}

impl DType {
    pub fn size_bytes(self) -> u32 {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
        }
    }
    pub fn parse(s: &str) -> Result<DType, SpecError> {
        match s.to_ascii_lowercase().as_str() {
            "f16" | "fp16" | "half" | "float16" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::BF16),
            "f32" | "fp32" | "float" | "float32" => Ok(DType::F32),
            _ => Err(SpecError::BadDType(s.to_string())),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub const SUPPORTED_HEAD_DIMS: [u32; 3] = [32, 64, 128];
pub const SUPPORTED_PAGE_SIZES: [u32; 3] = [16, 32, 64];
pub const SUPPORTED_GROUPS: [u32; 5] = [1, 2, 3, 4, 8];

pub fn check_head_dim(d: u32) -> Result<u32, SpecError> {
    if SUPPORTED_HEAD_DIMS.contains(&d) {
        Ok(d)
    } else {
        Err(SpecError::BadHeadDim(d))
    }
}

pub fn check_page_size(p: u32) -> Result<u32, SpecError> {
    if SUPPORTED_PAGE_SIZES.contains(&p) {
        Ok(p)
    } else {
        Err(SpecError::BadPageSize(p))
    }
}

pub fn check_group(g: u32) -> Result<u32, SpecError> {
    if SUPPORTED_GROUPS.contains(&g) {
        Ok(g)
    } else {
        Err(SpecError::BadGroup(g))
    }
}

/// What the decode kernels are specialised for. Shapes that vary per call (batch, heads,
/// context length) are *not* here: they are kernel arguments or grid dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecodeSpec {
    pub alpha: Alpha,
    pub head_dim: u32,
    /// Query heads per KV head (GQA ratio). One CTA of the score pass serves a whole group, so
    /// K is read once per group.
    pub group: u32,
    pub kv_dtype: DType,
    pub q_dtype: DType,
    pub out_dtype: DType,
}

impl DecodeSpec {
    pub fn new(alpha: f64, head_dim: u32, group: u32, kv_dtype: DType) -> Result<Self, SpecError> {
        Ok(DecodeSpec {
            alpha: Alpha::new(alpha)?,
            head_dim: check_head_dim(head_dim)?,
            group: check_group(group)?,
            kv_dtype,
            q_dtype: kv_dtype,
            out_dtype: DType::F32,
        })
    }
    /// `a1p5_d32_g1_f16q-f16kv-f32o`: the part of entry names that identifies the spec.
    pub fn tag(&self) -> String {
        format!(
            "{}_d{}_g{}_{}q_{}kv_{}o",
            self.alpha.tag(),
            self.head_dim,
            self.group,
            self.q_dtype,
            self.kv_dtype,
            self.out_dtype
        )
    }
    /// Scale applied to q so that `z = q'·k` is the entmax-space score `(α−1)·q·k/√d`.
    pub fn z_scale(&self) -> f64 {
        (self.alpha.value() - 1.0) / (self.head_dim as f64).sqrt()
    }
}
