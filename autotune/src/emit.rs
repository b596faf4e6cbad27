//! `entkv emit`: write the LLVM IR and PTX of every kernel module of a specialization.

use anyhow::{Context, Result};
use entkv_abi::PagedSpec;
use entkv_codegen::{compile_module_with, llvm_version, CompileOptions, Target};
use entkv_kernels::modules_for;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Serialize)]
pub struct ManifestModule {
    pub module: String,
    pub ptx_file: String,
    pub ll_file: String,
    pub entries: Vec<ManifestEntry>,
}

#[derive(Debug, Serialize)]
pub struct ManifestEntry {
    pub name: String,
    pub block_threads: u32,
    pub static_shared_bytes: u64,
    pub params: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Manifest {
    pub entkv_version: &'static str,
    pub llvm_version: String,
    pub target: String,
    pub alpha: f64,
    pub head_dim: u32,
    pub page_size: u32,
    pub specs: Vec<PagedSpec>,
    pub modules: Vec<ManifestModule>,
}

/// Compile every module of every spec and write `<module>__<spec>.{ll,ptx}` and
/// `manifest.json` into `out`.
pub fn emit(specs: &[PagedSpec], out: &Path) -> Result<Manifest> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let target = Target::default();
    let options = CompileOptions {
        keep_llvm_ir: true,
        ..Default::default()
    };
    let first = specs.first().context("no specialization to emit")?;
    let mut manifest = Manifest {
        entkv_version: env!("CARGO_PKG_VERSION"),
        llvm_version: llvm_version(),
        target: format!(
            "sm_{} (PTX {}.{})",
            target.sm,
            target.ptx_version / 10,
            target.ptx_version % 10
        ),
        alpha: first.decode.alpha.value(),
        head_dim: first.decode.head_dim,
        page_size: first.page_size,
        specs: specs.to_vec(),
        modules: Vec::new(),
    };
    for spec in specs {
        for module in modules_for(spec)? {
            let stem = format!("{}__{}", module.name, spec.sketch_tag());
            let kernels: Vec<&entkv_dsl::Kernel> = module.kernels.iter().collect();
            let compiled = compile_module_with(&stem, &kernels, &target, &options)
                .with_context(|| format!("compiling module {stem}"))?;
            let ptx_file = format!("{stem}.ptx");
            let ll_file = format!("{stem}.ll");
            std::fs::write(out.join(&ptx_file), &compiled.ptx)?;
            let ir = compiled
                .llvm_ir
                .as_deref()
                .context("compile_module_with kept no LLVM IR")?;
            std::fs::write(out.join(&ll_file), ir)?;
            manifest.modules.push(ManifestModule {
                module: module.name.to_string(),
                ptx_file,
                ll_file,
                entries: module
                    .kernels
                    .iter()
                    .map(|k| ManifestEntry {
                        name: k.name.clone(),
                        block_threads: k.block_threads,
                        static_shared_bytes: k.shared_bytes(),
                        params: k.params.iter().map(|p| p.name.clone()).collect(),
                    })
                    .collect(),
            });
        }
    }
    std::fs::write(
        out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    Ok(manifest)
}
