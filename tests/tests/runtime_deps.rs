//! Boundary checks: `entkv-runtime` (and the C ABI over it, `entkv-capi`) "loads PTX with cudarc and launches kernels on the caller's
//! stream; no LLVM, no DSL dependency". Its normal (non-dev, non-build) dependency tree must not
//! contain LLVM bindings or the DSL/codegen crates, so engines can embed it cheaply. And
//! `entkv-bundle` (the bundle format the runtime reads) is pure data: no LLVM, no DSL, no codegen,
//! and no CUDA either.

use std::path::Path;
use std::process::Command;

const FORBIDDEN: [&str; 4] = ["inkwell", "llvm-sys", "entkv-dsl", "entkv-codegen"];

/// The normal dependency tree of `package`, `--prefix none` (one package per line).
fn normal_tree(package: &str) -> String {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .output()
        .expect("failed to run `cargo tree`");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`cargo tree -p {package}` failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().any(|l| l.starts_with(&format!("{package} "))),
        "unexpected `cargo tree` output:\n{stdout}"
    );
    stdout
}

#[test]
fn runtime_and_c_abi_have_no_llvm_or_dsl_dependency() {
    // The C ABI (`libentkv.so`) is what Python/C++ engines load: it must stay as light.
    for package in ["entkv-runtime", "entkv-capi"] {
        let tree = normal_tree(package);
        let offending = offending_lines(&tree, &FORBIDDEN);
        assert!(
            offending.is_empty(),
            "{package} must not depend on {FORBIDDEN:?}, but its tree contains:\n{}",
            offending.join("\n")
        );
    }
}

#[test]
fn bundle_has_no_llvm_dsl_or_cuda_dependency() {
    let forbidden = [FORBIDDEN.as_slice(), &["cudarc"]].concat();
    let tree = normal_tree("entkv-bundle");
    let offending = offending_lines(&tree, &forbidden);
    assert!(
        offending.is_empty(),
        "entkv-bundle must not depend on {forbidden:?}, but its tree contains:\n{}",
        offending.join("\n")
    );
}

/// Lines of `cargo tree --prefix none` output whose package is in `forbidden`.
fn offending_lines<'t>(tree: &'t str, forbidden: &[&str]) -> Vec<&'t str> {
    tree.lines()
        .filter(|line| {
            // The first token of a `--prefix none` line is the package name.
            let name = line.split_whitespace().next().unwrap_or("");
            forbidden.iter().any(|f| name.starts_with(f))
        })
        .collect()
}

#[test]
fn filter_catches_forbidden_packages() {
    let tree = "entkv-runtime v0.1.0 (/w/runtime)\ncudarc v0.19.10\nentkv-dsl v0.1.0 (/w/dsl)\n\
                inkwell v0.11.0\nllvm-sys v191.0.0\nentkv-codegen v0.1.0 (/w/codegen)\n";
    assert_eq!(
        offending_lines(tree, &FORBIDDEN),
        [
            "entkv-dsl v0.1.0 (/w/dsl)",
            "inkwell v0.11.0",
            "llvm-sys v191.0.0",
            "entkv-codegen v0.1.0 (/w/codegen)"
        ]
    );
    assert!(offending_lines("entkv-runtime v0.1.0 (/w/runtime)\ncudarc v0.19.10\n", &FORBIDDEN).is_empty());
    assert_eq!(
        offending_lines("cudarc v0.19.10\n", &["cudarc"]),
        ["cudarc v0.19.10"]
    );
}
