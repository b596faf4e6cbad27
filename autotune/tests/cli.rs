//! The `entkv` and `autotune` binaries: arguments, outputs and errors.

use std::process::Command;

fn entkv() -> Command {
    Command::new(env!("CARGO_BIN_EXE_entkv"))
}

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("entkv-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn emit_writes_ll_ptx_and_manifest() {
    let out = tmp_dir("emit");
    let st = entkv()
        .args([
            "emit",
            "--alpha",
            "1.5",
            "--head-dim",
            "32",
            "--page-size",
            "16",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let modules = manifest["modules"].as_array().unwrap();
    assert!(!modules.is_empty());
    for m in modules {
        let ptx = std::fs::read_to_string(out.join(m["ptx_file"].as_str().unwrap())).unwrap();
        let ll = std::fs::read_to_string(out.join(m["ll_file"].as_str().unwrap())).unwrap();
        for e in m["entries"].as_array().unwrap() {
            let name = e["name"].as_str().unwrap();
            assert!(ptx.contains(&format!(".entry {name}")), "{name} missing from PTX");
            assert!(ll.contains(&format!("@{name}(")), "{name} missing from LLVM IR");
        }
    }
    assert_eq!(manifest["llvm_version"], "19.1.7");
    std::fs::remove_dir_all(&out).unwrap();
}

fn fails_with(args: &[&str], needle: &str) {
    let o = entkv().args(args).output().unwrap();
    assert!(!o.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: stderr does not mention `{needle}`:\n{err}"
    );
}

#[test]
fn emit_rejects_bad_specializations() {
    let out = tmp_dir("bad");
    let o = out.to_str().unwrap();
    fails_with(
        &["emit", "--alpha", "1.0", "--head-dim", "32", "--out", o],
        "alpha must be a finite number > 1",
    );
    fails_with(
        &["emit", "--alpha", "nan", "--head-dim", "32", "--out", o],
        "alpha must be",
    );
    fails_with(
        &["emit", "--alpha", "1.5", "--head-dim", "48", "--out", o],
        "unsupported head dim 48",
    );
    fails_with(
        &[
            "emit",
            "--alpha",
            "1.5",
            "--head-dim",
            "32",
            "--page-size",
            "24",
            "--out",
            o,
        ],
        "unsupported page size 24",
    );
    fails_with(
        &[
            "emit",
            "--alpha",
            "1.5",
            "--head-dim",
            "32",
            "--group",
            "5",
            "--out",
            o,
        ],
        "GQA group size 5",
    );
    fails_with(
        &[
            "emit",
            "--alpha",
            "1.5",
            "--head-dim",
            "32",
            "--kv-dtype",
            "f8",
            "--out",
            o,
        ],
        "unsupported dtype",
    );
    assert!(!out.exists(), "nothing is written for a rejected specialization");
}

#[test]
fn gpu_check_without_gpu_says_why() {
    if entkv_runtime::gpu_unavailable_reason().is_none() {
        println!("skipping: a GPU is present");
        return;
    }
    fails_with(&["gpu-check"], "no usable GPU");
}

#[test]
fn autotune_validates_then_says_it_is_not_there_yet() {
    let bin = env!("CARGO_BIN_EXE_autotune");
    let o = Command::new(bin)
        .args(["--alpha", "0.5", "--head-dim", "32"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("alpha must be"));
    let o = Command::new(bin)
        .args(["--alpha", "1.5", "--head-dim", "32"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not implemented yet"));
}
