//! The `autotune` binary: arguments are refused before anything else, and without a GPU it
//! stops at once, saying what it needs, before any codegen or file is written. `entkv` under
//! the name `autotune` (a link, so that one binary travels to a GPU machine) is the same.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binaries that run as `autotune`: its own, and a link named `autotune` to `entkv` (made
/// once per test process: the tests run in parallel threads).
fn autotune_binaries() -> Vec<PathBuf> {
    static LINK: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let link = LINK.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("entkv-autotune-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("autotune");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_entkv"), &link).unwrap();
        link
    });
    vec![PathBuf::from(env!("CARGO_BIN_EXE_autotune")), link.clone()]
}

fn autotune(args: &[&str]) -> Vec<Output> {
    autotune_binaries()
        .iter()
        .map(|bin| Command::new(bin).args(args).output().unwrap())
        .collect()
}

fn fails_with(args: &[&str], needle: &str) {
    for o in autotune(args) {
        assert!(!o.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(needle),
            "{args:?}: stderr does not mention `{needle}`:\n{err}"
        );
    }
}

#[test]
fn entkv_under_the_name_autotune_is_autotune() {
    let help: Vec<String> = autotune(&["--help"])
        .iter()
        .map(|o| {
            assert!(o.status.success());
            String::from_utf8_lossy(&o.stdout).into_owned()
        })
        .collect();
    assert!(help[0].contains("Tune every kernel family"), "{}", help[0]);
    assert_eq!(help[0], help[1], "the link prints autotune's help");
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
    for o in autotune(&[
        "--alpha",
        "1.5",
        "--head-dim",
        "32",
        "--out",
        out.to_str().unwrap(),
    ]) {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("autotune needs a CUDA GPU"), "{err}");
        assert!(err.contains(&reason), "names the reason `{reason}`: {err}");
        assert!(
            err.contains("entkv bundle create"),
            "points to the untuned bundle: {err}"
        );
    }
    assert!(!out.exists(), "nothing is written");
    assert!(t.elapsed().as_secs() < 10, "no codegen before the check");
}

/// Worker mode (`jit_pool`): the environment variable, not the arguments, selects it; the
/// worker answers one line per PTX path read from stdin, and one that cannot open its GPU
/// exits 1 saying why (its parent then compiles the modules itself).
#[test]
fn a_jit_worker_answers_each_path_or_says_why_it_cannot() {
    use std::io::Write;
    use std::process::Stdio;
    let worker = |ordinal: &str, input: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_autotune"))
            .env(entkv_autotune::jit_pool::WORKER_ENV, ordinal)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The worker may exit before reading (no GPU): a broken pipe is part of the test.
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait_with_output().unwrap()
    };
    let o = worker("x", "");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a GPU ordinal"));
    let missing = std::env::temp_dir().join(format!("entkv-no-such-{}.ptx", std::process::id()));
    let o = worker("0", &format!("{}\n", missing.display()));
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    if entkv_runtime::gpu_unavailable_reason().is_some() {
        assert_eq!(o.status.code(), Some(1));
        assert!(err.contains("opening GPU 0"), "{err}");
        assert!(out.is_empty());
    } else {
        assert_eq!(o.status.code(), Some(0), "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(&missing.display().to_string()),
            "{out}"
        );
    }
    // Without the variable an argument is parsed as a tuning command line.
    for o in autotune(&[missing.to_str().unwrap()]) {
        assert_eq!(o.status.code(), Some(2), "clap's usage error");
    }
}

/// The parent side: a pool whose workers cannot do their job (no GPU here, or PTX that does not
/// compile on one) reports every failure and returns; nothing hangs, nothing panics. A second
/// batch on the same pool (workers gone or still running) does the same.
#[test]
fn a_jit_pool_reports_what_its_workers_could_not_do() {
    use entkv_autotune::jit_pool::{serve_if_worker, JitPool};
    if std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|v| v.trim() == "1") {
        println!("skipping: CUDA_CACHE_DISABLE=1 turns the pool off");
        return;
    }
    let serves = serve_if_worker(); // not a worker: the environment lacks the variable
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_autotune"));
    let mut pool = JitPool::with_executable(serves, exe, 0, 3).expect("a pool of 3");
    assert_eq!(pool.workers(), 3);
    let junk = [".version 8.0\n.target sm_90\nthis is not PTX\n"; 5];
    for batch in 0..2 {
        let r = pool.warm(&junk);
        assert_eq!(r.modules, 5);
        assert!(!r.failed.is_empty(), "batch {batch}: failures are reported");
        if entkv_runtime::gpu_unavailable_reason().is_none() {
            // On a GPU every module comes back as an answer naming the JIT error.
            assert_eq!(r.failed.len(), 5, "{:?}", r.failed);
            assert!(
                r.failed.iter().all(|f| f.starts_with("error: ")),
                "{:?}",
                r.failed
            );
        }
    }
    drop(pool); // closes the workers' stdin and waits for them
}
