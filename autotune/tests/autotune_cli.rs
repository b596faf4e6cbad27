//! The `autotune` binary: arguments are refused before anything else, and without a GPU it
//! stops at once, saying what it needs, before any codegen or file is written.

use std::process::{Command, Output};

fn autotune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_autotune"))
        .args(args)
        .output()
        .unwrap()
}

fn fails_with(args: &[&str], needle: &str) {
    let o = autotune(args);
    assert!(!o.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: stderr does not mention `{needle}`:\n{err}"
    );
}

#[test]
fn bad_arguments_are_refused_on_any_machine() {
    fails_with(&["--head-dim", "32"], "--alpha");
    fails_with(
        &["--alpha", "0.5", "--head-dim", "32"],
        "alpha must be a finite number > 1",
    );
    fails_with(&["--alpha", "1.5", "--head-dim", "48"], "unsupported head dim 48");
    fails_with(
        &["--alpha", "1.5", "--head-dim", "32", "--strategy", "best"],
        "possible values: exhaustive, random, halving",
    );
    fails_with(
        &["--alpha", "1.5", "--head-dim", "32", "--kernels", "decode_flash"],
        "unknown kernel family `decode_flash`",
    );
    fails_with(
        &[
            "--alpha",
            "1.5",
            "--head-dim",
            "32",
            "--q-heads",
            "24",
            "--kv-heads",
            "7",
        ],
        "multiple of --kv-heads",
    );
}

#[test]
fn without_a_gpu_it_stops_at_once_saying_what_it_needs() {
    let Some(reason) = entkv_runtime::gpu_unavailable_reason() else {
        println!("skipping: a GPU is present (the binary would tune)");
        return;
    };
    let out = std::env::temp_dir().join(format!("entkv-autotune-nogpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let t = std::time::Instant::now();
    let o = autotune(&[
        "--alpha",
        "1.5",
        "--head-dim",
        "32",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("autotune needs a CUDA GPU"), "{err}");
    assert!(err.contains(&reason), "names the reason `{reason}`: {err}");
    assert!(
        err.contains("entkv bundle create"),
        "points to the untuned bundle: {err}"
    );
    assert!(!out.exists(), "nothing is written");
    assert!(t.elapsed().as_secs() < 5, "no codegen before the check");
}
