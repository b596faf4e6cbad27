//! # entkv-kernels
//!
//! Boundary: the kernels of support-aware entmax decoding, written once in the DSL and
//! specialized (α, head dim, GQA group, dtypes, tile config) by the Rust code that builds them;
//! plus the float64 CPU references they are tested against and seeded test-data generators.
//! Specialization types, signatures and launch geometry come from `entkv-abi`, which the
//! runtime shares.

pub mod certified;
pub mod certified_checks;
pub mod check;
pub mod data;
pub mod decode;
pub mod decode_checks;
pub mod entmax;
pub mod fill;
pub mod finish;
pub mod gaussian;
pub mod guard;
pub mod lead;
pub mod mma_checks;
pub mod normal;
pub mod page_meta;
pub mod paged_data;
pub mod peaked;
pub mod pipelines;
pub mod program;
pub mod prune;
pub mod prune_checks;
pub mod reference;
pub mod seed;
pub mod stream;
pub mod suite;
pub mod tokens;
pub mod topk;
pub mod warp_stream;

use entkv_abi::{DType, DecodeSpec, DenseTile, Elem, PagedSpec, SpecError};
use entkv_dsl::{DslError, Kernel, Scalar};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum KernelGenError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Dsl(#[from] DslError),
}

/// The DSL element type of a boundary dtype.
pub fn scalar_of(d: DType) -> Scalar {
    match d {
        DType::F16 => Scalar::F16,
        DType::BF16 => Scalar::BF16,
        DType::F32 => Scalar::F32,
    }
}

/// The DSL element type of a buffer element type.
pub fn scalar_of_elem(e: Elem) -> Scalar {
    match e {
        Elem::F16 => Scalar::F16,
        Elem::BF16 => Scalar::BF16,
        Elem::F32 => Scalar::F32,
        Elem::I32 => Scalar::I32,
        Elem::U32 => Scalar::U32,
        Elem::I64 => Scalar::I64,
    }
}

/// A group of kernels emitted together as one PTX module (one file).
#[derive(Debug)]
pub struct KernelModule {
    /// File stem, e.g. `decode_dense`.
    pub name: &'static str,
    pub kernels: Vec<Kernel>,
}

/// Every kernel module that exists for a specialization, with default tile configs, one module
/// (one emitted file) per kernel family: `page_meta`, `page_score` (box bound and Gaussian
/// moments), `select_topk`, `select_gaussian`, `select_certified`, `decode_certified`,
/// `decode_dense`, `decode_sparse`, `decode_softmax_topk`, and the contiguous-cache
/// `decode_contiguous`.
pub fn modules_for(spec: &PagedSpec) -> Result<Vec<KernelModule>, KernelGenError> {
    let mut out = page_meta::modules(spec)?;
    let mut score = KernelModule {
        name: "page_score",
        kernels: Vec::new(),
    };
    for m in topk::modules(spec)?.into_iter().chain(gaussian::modules(spec)?) {
        if m.name == score.name {
            score.kernels.extend(m.kernels);
        } else {
            out.push(m);
        }
    }
    out.push(score);
    // The full walk's default, and the page-pruned walk's where that one is seeded (`_seed_pw`:
    // `KernelFamily::default_rows`).
    let (mut select, mut decode) = (Vec::new(), Vec::new());
    let full = DenseTile::default_certified(spec);
    let pruned = DenseTile::default_certified_pruned(spec);
    for cert in if pruned == full {
        vec![full]
    } else {
        vec![full, pruned]
    } {
        select.push(certified::select_kernel(spec, &cert)?);
        select.extend(certified::pruned_walk_kernels(spec, &cert)?);
        select.extend(certified::tile_extra_kernels(spec, &cert)?);
        decode.push(certified::decode_kernel(spec, &cert)?);
    }
    // Kernels the two tiles share by name (those a seed does not change) are listed once.
    let mut names = std::collections::HashSet::new();
    select.retain(|k| names.insert(k.name.clone()));
    decode.retain(|k| names.insert(k.name.clone()));
    out.push(KernelModule {
        name: "select_certified",
        kernels: select,
    });
    out.push(KernelModule {
        name: "decode_certified",
        kernels: decode,
    });
    let mut dense: Vec<Kernel> = decode::paged_kernels(spec, &DenseTile::default_paged(spec), false)?.into();
    dense.extend(module_extra_kernels(entkv_abi::KernelFamily::DecodeDense, spec)?);
    out.push(KernelModule {
        name: "decode_dense",
        kernels: dense,
    });
    out.push(KernelModule {
        name: "decode_sparse",
        kernels: decode::paged_kernels(spec, &DenseTile::default_sparse(spec), true)?.into(),
    });
    out.push(dense_module(
        &spec.decode,
        &DenseTile::default_contiguous(&spec.decode),
    )?);
    Ok(out)
}

/// The contiguous-cache decode pair (score + finish) for one tile config.
pub fn dense_module(spec: &DecodeSpec, tile: &DenseTile) -> Result<KernelModule, KernelGenError> {
    Ok(KernelModule {
        name: "decode_contiguous",
        kernels: decode::contiguous_kernels(spec, tile)?.into(),
    })
}

/// The kernels a bundle module of `family` carries besides its rows' (in the order of
/// `KernelFamily::module_extra_entries`): `guard_ids` in every decode module.
pub fn module_extra_kernels(
    family: entkv_abi::KernelFamily,
    spec: &PagedSpec,
) -> Result<Vec<Kernel>, KernelGenError> {
    Ok(if family.is_decode() {
        vec![guard::guard_ids_kernel(spec)?]
    } else {
        Vec::new()
    })
}

/// The kernels of one family (a bundle's table row) for one tile, in entry order
/// (`TileConfig::entries`).
pub fn family_kernels(
    family: entkv_abi::KernelFamily,
    spec: &PagedSpec,
    tile: &entkv_abi::TileConfig,
) -> Result<Vec<Kernel>, KernelGenError> {
    use entkv_abi::{KernelFamily as F, TileConfig as T};
    tile.check(family, spec)?;
    Ok(match (family, tile) {
        (F::PageMeta, T::Meta(t)) => vec![
            page_meta::build_kernel(spec, t)?,
            page_meta::update_kernel(spec, t)?,
        ],
        (F::PageScoreBox, T::BoxScore(t)) => vec![
            topk::score::box_kernel(spec, t)?,
            topk::score::page_bounds_kernel(spec, t)?,
        ],
        (F::SelectTopk, T::SelectTopk(t)) => vec![
            topk::select::select_kernel(spec, t)?,
            prune::prune_tau_kernel(spec, t)?,
            prune::prune_mark_kernel(spec, t)?,
            prune::select_pruned_kernel(spec, t)?,
        ],
        (F::PageScoreMoments, T::Moments(t)) => vec![gaussian::moments_kernel(spec, t)?],
        (F::SelectGaussian, T::Gauss(t)) => {
            vec![gaussian::tau_kernel(spec, t)?, gaussian::select_kernel(spec, t)?]
        }
        (F::DecodeDense, T::Dense(t)) => decode::paged_kernels(spec, t, false)?.into(),
        (F::DecodeSparse, T::Dense(t)) => decode::paged_kernels(spec, t, true)?.into(),
        (F::DecodeCertified, T::Dense(t)) => {
            let mut kernels = vec![
                certified::select_kernel(spec, t)?,
                certified::decode_kernel(spec, t)?,
            ];
            kernels.extend(certified::pruned_walk_kernels(spec, t)?);
            kernels.extend(certified::tile_extra_kernels(spec, t)?);
            kernels
        }
        _ => unreachable!("TileConfig::check matched family and tile"),
    })
}
