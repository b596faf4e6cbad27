//! Boundary check: `entkv-runtime` "loads PTX with cudarc and launches kernels on the caller's
//! stream; no LLVM, no DSL dependency". Its normal (non-dev, non-build) dependency tree must not
//! contain LLVM bindings or the DSL/codegen crates, so engines can embed it cheaply.

use std::path::Path;
use std::process::Command;

const FORBIDDEN: [&str; 4] = ["inkwell", "llvm-sys", "entkv-dsl", "entkv-codegen"];

#[test]
fn runtime_has_no_llvm_or_dsl_dependency() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["tree", "-p", "entkv-runtime", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("failed to run `cargo tree`");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "`cargo tree -p entkv-runtime` failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("entkv-runtime ")),
        "unexpected `cargo tree` output:\n{stdout}"
    );
    let offending = offending_lines(&stdout);
    assert!(
        offending.is_empty(),
        "entkv-runtime must not depend on {FORBIDDEN:?}, but its tree contains:\n{}",
        offending.join("\n")
    );
}

/// Lines of `cargo tree --prefix none` output whose package is forbidden.
fn offending_lines(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter(|line| {
            // The first token of a `--prefix none` line is the package name.
            let name = line.split_whitespace().next().unwrap_or("");
            FORBIDDEN.iter().any(|f| name.starts_with(f))
        })
        .collect()
}

#[test]
fn filter_catches_forbidden_packages() {
    let tree = "entkv-runtime v0.1.0 (/w/runtime)\ncudarc v0.19.10\nentkv-dsl v0.1.0 (/w/dsl)\n\
                inkwell v0.11.0\nllvm-sys v191.0.0\nentkv-codegen v0.1.0 (/w/codegen)\n";
    assert_eq!(
        offending_lines(tree),
        [
            "entkv-dsl v0.1.0 (/w/dsl)",
            "inkwell v0.11.0",
            "llvm-sys v191.0.0",
            "entkv-codegen v0.1.0 (/w/codegen)"
        ]
    );
    assert!(offending_lines("entkv-runtime v0.1.0 (/w/runtime)\ncudarc v0.19.10\n").is_empty());
}
