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

fn run_ok(args: &[&std::ffi::OsStr]) -> String {
    let o = entkv().args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn bundle_verbs_create_verify_pack_unpack_inspect() {
    let root = tmp_dir("bundle");
    let (dir, file, back) = (root.join("b"), root.join("b.entkvb"), root.join("back"));
    let s = |x: &'static str| std::ffi::OsStr::new(x);
    let out = run_ok(&[
        s("bundle"),
        s("create"),
        s("--alpha"),
        s("1.5"),
        s("--head-dim"),
        s("32"),
        s("--page-size"),
        s("16"),
        s("--out"),
        dir.as_os_str(),
    ]);
    assert!(out.contains("8 artifact(s)"), "{out}");
    assert!(run_ok(&[s("bundle"), s("verify"), dir.as_os_str()]).starts_with("OK "));
    run_ok(&[s("bundle"), s("pack"), dir.as_os_str(), file.as_os_str()]);
    run_ok(&[s("bundle"), s("unpack"), file.as_os_str(), back.as_os_str()]);
    assert!(run_ok(&[s("bundle"), s("verify"), file.as_os_str()]).starts_with("OK "));
    let table = run_ok(&[s("bundle"), s("inspect"), back.as_os_str()]);
    assert!(
        table.contains("decode_certified") && table.contains("default"),
        "{table}"
    );
    let json = run_ok(&[s("bundle"), s("inspect"), s("--json"), file.as_os_str()]);
    let m: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(m["schema_version"], entkv_bundle::SCHEMA_VERSION);
    assert_eq!(m["table"].as_array().unwrap().len(), 8);

    // One flipped byte of one PTX file: verify fails naming the file and the checksums.
    let victim = m["artifacts"][2]["file"].as_str().unwrap();
    let p = back.join(victim);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&p, bytes).unwrap();
    let b = back.to_str().unwrap();
    fails_with(
        &["bundle", "verify", b],
        &format!("artifact `{victim}` fails its checksum"),
    );
    fails_with(
        &["bundle", "pack", b, root.join("x.entkvb").to_str().unwrap()],
        "checksum",
    );
    fails_with(
        &["bundle", "verify", root.join("none").to_str().unwrap()],
        "No such file",
    );
    fails_with(
        &[
            "bundle",
            "create",
            "--alpha",
            "1.5",
            "--head-dim",
            "48",
            "--out",
            b,
        ],
        "unsupported head dim 48",
    );
    std::fs::remove_dir_all(&root).unwrap();
}
