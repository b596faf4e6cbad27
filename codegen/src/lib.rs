//! # entkv-codegen
//!
//! Boundary: DSL IR → LLVM IR → PTX for sm_90. This is the only crate of the workspace that
//! links LLVM (through inkwell, LLVM 19, statically linked); every LLVM-version-specific spelling
//! (kernel marking, launch bounds, NVVM intrinsic names, target strings) lives in
//! [`nvptx_compat`], so a move to a newer LLVM is a one-file change.
//!
//! - [`compile_module`]: validate kernels, lower them ([`lower`]) into one LLVM module, verify,
//!   optimise ([`Pipeline`]: LLVM's `default<O3>` less the passes that do nothing for these
//!   kernels, same PTX) and emit PTX text. [`compile_module_with`] takes [`CompileOptions`],
//!   e.g. to keep the LLVM IR text as well.
//! - [`ptxas`]: find and run NVIDIA's `ptxas` (no LLVM involved) to assemble the PTX and read its
//!   per-kernel resource report (registers, spills, shared memory).
//!
//! ```no_run
//! use entkv_dsl::*;
//! let mut k = KernelBuilder::new("scale", 128);
//! let x = k.buffer("x", Scalar::F32, Access::ReadWrite);
//! let i = k.let_("i", k.global_thread_id());
//! k.store(x, i, x.at(i) * 2.0f32);
//! let kernel = k.finish().unwrap();
//! let m = entkv_codegen::compile_module("m", &[&kernel], &Default::default()).unwrap();
//! assert!(m.ptx.contains(".entry scale"));
//! ```

pub mod lower;
pub mod nvptx_compat;
pub mod ptxas;

use entkv_dsl::ir::Stmt;
use entkv_dsl::{DslError, Kernel};
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::collections::HashSet;
use std::sync::Once;

/// What to generate code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Compute capability as a number: 90 for sm_90 (H100/H200).
    pub sm: u32,
    /// PTX ISA version as a number: 80 for `.version 8.0`.
    pub ptx_version: u32,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            sm: 90,
            ptx_version: 80,
        }
    }
}

/// The LLVM optimisation pipeline run before PTX emission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pipeline {
    /// [`nvptx_compat::lean_o3_pipeline`]: `default<O3>` without the passes that do not change
    /// the PTX of entkv's kernels. Same PTX as [`Pipeline::O3`] in a third less optimisation
    /// time (a tenth of it for `page_meta`).
    #[default]
    LeanO3,
    /// LLVM's own `default<O3>` (the reference the lean pipeline is checked against).
    O3,
}

impl Pipeline {
    /// The pass pipeline text for `LLVMRunPasses`.
    pub fn passes(self) -> String {
        match self {
            Pipeline::LeanO3 => nvptx_compat::lean_o3_pipeline(),
            Pipeline::O3 => "default<O3>".to_string(),
        }
    }
}

/// How to compile a module, beyond the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// The optimisation pipeline ([`Pipeline::LeanO3`] unless asked otherwise).
    pub pipeline: Pipeline,
    /// Also return the LLVM IR text, as lowered and as optimised
    /// ([`CompiledModule::llvm_ir_unoptimized`], [`CompiledModule::llvm_ir`]). Off by default:
    /// printing a large module costs about a tenth of its compile time, and only `entkv emit`
    /// and debugging want the text.
    pub keep_llvm_ir: bool,
}

/// The result of compiling one module (one or more kernels).
#[derive(Clone, Debug)]
pub struct CompiledModule {
    pub name: String,
    /// Kernel entry names, in the order given (equal to each `Kernel::name`).
    pub entries: Vec<String>,
    /// LLVM IR after optimisation ([`CompileOptions::pipeline`]); `Some` only with
    /// [`CompileOptions::keep_llvm_ir`].
    pub llvm_ir: Option<String>,
    /// LLVM IR as lowered, before optimisation (useful when debugging the lowering); `Some` only
    /// with [`CompileOptions::keep_llvm_ir`].
    pub llvm_ir_unoptimized: Option<String>,
    /// PTX text.
    pub ptx: String,
}

#[derive(thiserror::Error, Debug)]
pub enum CodegenError {
    /// A kernel failed [`entkv_dsl::validate::validate`].
    #[error("invalid kernel: {0}")]
    InvalidKernel(#[from] DslError),
    /// The set of kernels cannot form one module (no kernels, duplicate or non-PTX names).
    #[error("invalid module `{module}`: {message}")]
    InvalidModule { module: String, message: String },
    /// The target is not supported (e.g. below sm_70, where `shfl.sync` does not exist).
    #[error("unsupported target: {0}")]
    Target(String),
    /// The LLVM module verifier rejected the lowered (or optimised) IR: a codegen bug.
    #[error("LLVM verifier rejected module `{module}` ({stage}): {message}")]
    Verify {
        module: String,
        stage: &'static str,
        message: String,
    },
    /// An NVVM/LLVM intrinsic is unknown to the linked LLVM (renamed in a new version?).
    #[error("the linked LLVM does not know intrinsic `{0}` (see nvptx_compat)")]
    MissingIntrinsic(String),
    /// The inkwell builder refused an instruction: a codegen bug.
    #[error("LLVM builder error: {0}")]
    Builder(String),
    #[error("LLVM optimisation pipeline failed: {0}")]
    Optimize(String),
    #[error("PTX emission failed: {0}")]
    Emit(String),
    /// The PTX references an external function (e.g. a libm call): NVPTX has no libm and ptxas
    /// would fail with "Unresolved extern function".
    #[error("PTX of module `{module}` references external symbols: {symbols:?}")]
    UnresolvedExtern { module: String, symbols: Vec<String> },
}

impl From<inkwell::builder::BuilderError> for CodegenError {
    fn from(e: inkwell::builder::BuilderError) -> Self {
        CodegenError::Builder(e.to_string())
    }
}

/// Version of the linked LLVM, e.g. `"19.1.7"`.
pub fn llvm_version() -> String {
    let (a, b, c) = inkwell::support::get_llvm_version();
    format!("{a}.{b}.{c}")
}

fn init_nvptx() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        LlvmTarget::initialize_nvptx(&InitializationConfig::default());
        nvptx_compat::parse_llvm_options();
    });
}

fn target_machine(target: &Target) -> Result<TargetMachine, CodegenError> {
    if target.sm < nvptx_compat::MIN_SM {
        return Err(CodegenError::Target(format!(
            "sm_{} is below sm_{} (full-warp shfl.sync/vote.sync need sm_70+)",
            target.sm,
            nvptx_compat::MIN_SM
        )));
    }
    init_nvptx();
    let triple = TargetTriple::create(nvptx_compat::TRIPLE);
    let t = LlvmTarget::from_triple(&triple).map_err(|e| CodegenError::Target(e.to_string()))?;
    t.create_target_machine(
        &triple,
        &nvptx_compat::cpu(target.sm),
        &nvptx_compat::features(target.ptx_version),
        OptimizationLevel::Aggressive,
        RelocMode::Default,
        CodeModel::Default,
    )
    .ok_or_else(|| {
        CodegenError::Target(format!(
            "LLVM could not create an NVPTX target machine for sm_{} / ptx{}",
            target.sm, target.ptx_version
        ))
    })
}

/// A PTX identifier: `[A-Za-z][A-Za-z0-9_$]*` or `[_$%][A-Za-z0-9_$]+`. Kernel names become
/// `.entry` names verbatim, so they must be valid as they are.
pub fn is_ptx_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let rest_ok = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    if first.is_ascii_alphabetic() {
        rest_ok(&name[1..])
    } else if matches!(first, '_' | '$' | '%') {
        name.len() > 1 && rest_ok(&name[1..])
    } else {
        false
    }
}

/// Whether a block contains a tensor-core [`Stmt::Mma`] (anywhere, nested blocks too).
fn uses_mma(block: &[Stmt]) -> bool {
    block.iter().any(|s| match s {
        Stmt::Mma { .. } => true,
        Stmt::If {
            then_body, else_body, ..
        } => uses_mma(then_body) || uses_mma(else_body),
        Stmt::For { body, .. } | Stmt::While { body, .. } => uses_mma(body),
        _ => false,
    })
}

/// Compile `kernels` into one PTX module for `target`, with the default [`CompileOptions`]
/// (PTX only, no LLVM IR text).
///
/// Every kernel is validated first; then lowered ([`lower::lower_kernel`]), the module is
/// verified, optimised ([`Pipeline::LeanO3`]) and emitted as PTX.
pub fn compile_module(
    module_name: &str,
    kernels: &[&Kernel],
    target: &Target,
) -> Result<CompiledModule, CodegenError> {
    compile_module_with(module_name, kernels, target, &CompileOptions::default())
}

/// [`compile_module`] with explicit [`CompileOptions`].
pub fn compile_module_with(
    module_name: &str,
    kernels: &[&Kernel],
    target: &Target,
    options: &CompileOptions,
) -> Result<CompiledModule, CodegenError> {
    let invalid = |message: String| CodegenError::InvalidModule {
        module: module_name.to_string(),
        message,
    };
    if kernels.is_empty() {
        return Err(invalid("no kernels".into()));
    }
    let mut names = HashSet::new();
    for k in kernels {
        entkv_dsl::validate::validate(k)?;
        if !is_ptx_identifier(&k.name) {
            return Err(invalid(format!(
                "kernel name `{}` is not a PTX identifier",
                k.name
            )));
        }
        if target.sm < nvptx_compat::MMA_MIN_SM && uses_mma(&k.body) {
            return Err(CodegenError::Target(format!(
                "kernel `{}` uses tensor-core mma, which needs sm_{} (target sm_{})",
                k.name,
                nvptx_compat::MMA_MIN_SM,
                target.sm
            )));
        }
        if !names.insert(k.name.as_str()) {
            return Err(invalid(format!("two kernels are named `{}`", k.name)));
        }
    }

    let tm = target_machine(target)?;
    let ctx = Context::create();
    let module = ctx.create_module(module_name);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());

    for k in kernels {
        lower::lower_kernel(&ctx, &module, k)?;
    }
    let print = |keep: bool| keep.then(|| module.print_to_string().to_string());
    let llvm_ir_unoptimized = print(options.keep_llvm_ir);
    let verify = |stage: &'static str| {
        module.verify().map_err(|e| CodegenError::Verify {
            module: module_name.to_string(),
            stage,
            message: e.to_string(),
        })
    };
    verify("before optimisation")?;

    module
        .run_passes(&options.pipeline.passes(), &tm, PassBuilderOptions::create())
        .map_err(|e| CodegenError::Optimize(e.to_string()))?;
    verify("after optimisation")?;
    let llvm_ir = print(options.keep_llvm_ir);

    let buf = tm
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| CodegenError::Emit(e.to_string()))?;
    let ptx = String::from_utf8_lossy(buf.as_slice())
        .trim_end_matches('\0')
        .to_string();

    // LLVM only warns (on stderr) about an unknown CPU or PTX feature and falls back to its
    // defaults; make that an error.
    for want in [
        format!(".version {}.{}", target.ptx_version / 10, target.ptx_version % 10),
        format!(".target sm_{}", target.sm),
    ] {
        if !ptx.lines().any(|l| l.trim() == want) {
            return Err(CodegenError::Target(format!(
                "LLVM {} did not emit `{want}` (unsupported sm/PTX version?)",
                llvm_version()
            )));
        }
    }

    let externs: Vec<String> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with(".extern"))
        .map(|l| l.trim().to_string())
        .collect();
    if !externs.is_empty() {
        return Err(CodegenError::UnresolvedExtern {
            module: module_name.to_string(),
            symbols: externs,
        });
    }

    Ok(CompiledModule {
        name: module_name.to_string(),
        entries: kernels.iter().map(|k| k.name.clone()).collect(),
        llvm_ir,
        llvm_ir_unoptimized,
        ptx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_19() {
        assert!(llvm_version().starts_with("19."), "{}", llvm_version());
    }

    #[test]
    fn identifiers() {
        assert!(is_ptx_identifier("decode_attn_64"));
        assert!(is_ptx_identifier("_k"));
        assert!(!is_ptx_identifier("_"));
        assert!(!is_ptx_identifier("9k"));
        assert!(!is_ptx_identifier("a.b"));
        assert!(!is_ptx_identifier(""));
    }
}
