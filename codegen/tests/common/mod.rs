//! Shared checks for the codegen tests: compile, assert the PTX invariants every kernel must
//! satisfy, and assemble with ptxas (skipped when ptxas is missing, unless
//! `ENTKV_REQUIRE_PTXAS=1`).
#![allow(dead_code)]

use entkv_codegen::ptxas::{self, PtxasReport};
use entkv_codegen::{compile_module_with, CompileOptions, CompiledModule, Target};
use entkv_dsl::Kernel;

pub struct Checked {
    pub module: CompiledModule,
    /// `None` when ptxas is not available (and not required).
    pub report: Option<PtxasReport>,
}

impl Checked {
    pub fn ptx(&self) -> &str {
        &self.module.ptx
    }
    /// The optimised LLVM IR (kept by [`check`]).
    pub fn ir(&self) -> &str {
        self.module.llvm_ir.as_deref().expect("check keeps the LLVM IR")
    }
    /// The LLVM IR as lowered (kept by [`check`]).
    pub fn ir_unoptimized(&self) -> &str {
        self.module
            .llvm_ir_unoptimized
            .as_deref()
            .expect("check keeps the LLVM IR")
    }
    /// The PTX text of one entry (from `.entry name(` to the next `.entry` or the end).
    pub fn entry(&self, name: &str) -> &str {
        entry_text(&self.module.ptx, name)
    }
}

pub fn entry_text<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no `.entry {name}(` in PTX:\n{ptx}"));
    let rest = &ptx[start..];
    let end = rest[1..].find(".entry ").map(|e| e + 1).unwrap_or(rest.len());
    &rest[..end]
}

/// Lines of PTX that are instructions (not comments, directives or labels).
pub fn instructions(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('.') && !l.ends_with(':'))
}

/// Does some instruction start with `prefix` (e.g. `ld.global.nc.v4`)?
pub fn has_insn(ptx: &str, prefix: &str) -> bool {
    instructions(ptx).any(|l| {
        // Strip a predicate guard `@%p1 ` if present.
        let l = if l.starts_with('@') {
            l.split_once(' ').map(|x| x.1).unwrap_or(l)
        } else {
            l
        };
        l.starts_with(prefix)
    })
}

pub fn assert_insn(ptx: &str, prefix: &str) {
    assert!(has_insn(ptx, prefix), "no `{prefix}` instruction in PTX:\n{ptx}");
}

pub fn assert_no_insn(ptx: &str, prefix: &str) {
    assert!(
        !has_insn(ptx, prefix),
        "unexpected `{prefix}` instruction in PTX:\n{ptx}"
    );
}

pub fn ptxas_required() -> bool {
    std::env::var("ENTKV_REQUIRE_PTXAS")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// Compile `kernels` into one module and check everything every kernel must satisfy.
pub fn check(kernels: &[&Kernel]) -> Checked {
    let name = format!("test_{}", kernels[0].name);
    let options = CompileOptions {
        keep_llvm_ir: true,
        ..Default::default()
    };
    let module = compile_module_with(&name, kernels, &Target::default(), &options)
        .unwrap_or_else(|e| panic!("codegen failed: {e}"));
    let ptx = &module.ptx;
    if std::env::var("ENTKV_DUMP_PTX").is_ok() {
        let ir = module.llvm_ir.as_deref().unwrap_or_default();
        eprintln!("==== {name} LLVM IR (optimised) ====\n{ir}");
        eprintln!("==== {name} PTX ====\n{ptx}");
    }
    assert!(ptx.contains(".version 8.0"), "{ptx}");
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert!(ptx.contains(".address_size 64"), "{ptx}");
    assert!(!ptx.contains(".extern"), "extern in PTX:\n{ptx}");
    assert_no_insn(ptx, "call");
    assert_eq!(
        module.entries,
        kernels.iter().map(|k| k.name.clone()).collect::<Vec<_>>()
    );
    for k in kernels {
        let e = entry_text(ptx, &k.name);
        let maxntid = format!(".maxntid {}, 1, 1", k.block_threads);
        assert!(e.contains(&maxntid), "no `{maxntid}` for {}:\n{e}", k.name);
        match k.min_blocks_per_sm {
            Some(m) => assert!(e.contains(&format!(".minnctapersm {m}")), "{e}"),
            None => assert!(!e.contains(".minnctapersm"), "{e}"),
        }
        assert!(ptx.contains(&format!(".visible .entry {}(", k.name)), "{ptx}");
    }

    let report = match ptxas::find_ptxas() {
        None if ptxas_required() => panic!("ENTKV_REQUIRE_PTXAS=1 but {}", ptxas::PtxasError::NotFound),
        None => {
            eprintln!("skipping: {}", ptxas::PtxasError::NotFound);
            None
        }
        Some(exe) => {
            let r = ptxas::assemble_with(&exe, ptx, 90)
                .unwrap_or_else(|e| panic!("ptxas rejected the PTX: {e}\n{ptx}"));
            for k in kernels {
                let f = r
                    .function(&k.name)
                    .unwrap_or_else(|| panic!("ptxas did not report {}:\n{}", k.name, r.raw));
                assert!(f.is_entry, "{}", r.raw);
                assert_eq!(f.spills(), 0, "{} spills:\n{}", k.name, r.raw);
                assert_eq!(
                    f.stack_frame_bytes, 0,
                    "{} uses a stack frame:\n{}",
                    k.name, r.raw
                );
                // Arrays are 16-byte aligned; unused ones may be optimised away.
                let most = k.shared_bytes() + 16 * k.shared.len() as u64;
                assert!(f.shared_bytes <= most, "{}:\n{}", k.name, r.raw);
                assert!(f.registers > 0 && f.registers <= 255, "{}", r.raw);
            }
            Some(r)
        }
    };
    Checked { module, report }
}
