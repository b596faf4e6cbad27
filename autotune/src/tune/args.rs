//! The `autotune` command line, checked into [`SearchOpts`] before anything runs, and the run
//! it drives: records, search, bundle, summary.

use super::log::{default_cache_dir, RecordStore, StoreConfig};
use super::output::bundle_from_choices;
use super::report::{stats_line, table_text, TuneSummary};
use super::search::{buckets_for, run_search, SearchOpts, DEFAULT_CONTEXTS};
use super::strategy::Strategy;
use super::{DataKind, MeasureBackend};
use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use entkv_abi::{check_head_dim, Alpha, DType, DecodeSpec, KernelFamily, PagedSpec, SUPPORTED_GROUPS};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `autotune --alpha A --head-dim D [...]`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "autotune",
    version,
    about = "Tune entkv's kernels for this GPU and write a kernel bundle",
    long_about = "Tune every kernel family of one specialization on the GPU this runs on: each \
                  candidate tile is checked analytically, compiled, loaded (spills rejected), \
                  verified against the reference and timed; the winners per context bucket go \
                  into a kernel bundle the runtime loads. Needs a CUDA GPU."
)]
pub struct Cli {
    /// Entmax α (> 1).
    #[arg(long, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Head dimension (32, 64 or 128).
    #[arg(long, value_parser = parse_head_dim)]
    pub head_dim: u32,
    /// Tokens per KV-cache page (16, 32 or 64).
    #[arg(long, default_value_t = 16)]
    pub page_size: u32,
    /// K/V storage type (f16, bf16).
    #[arg(long, default_value = "f16")]
    pub kv_dtype: String,
    /// Query heads of the tuning workload.
    #[arg(long, default_value_t = 24)]
    pub q_heads: u32,
    /// KV heads of the tuning workload (the GQA group is q-heads / kv-heads).
    #[arg(long, default_value_t = 24)]
    pub kv_heads: u32,
    /// Sequences per decode step of the tuning workload.
    #[arg(long, default_value_t = 8)]
    pub batch: u32,
    /// Representative context lengths, one bucket each (edges at the geometric midpoints);
    /// `k` and `M` suffixes are powers of two. Default: 8k,32k,128k,1M.
    #[arg(long, value_delimiter = ',', value_parser = parse_tokens)]
    pub contexts: Vec<u64>,
    /// Kernel families to tune (comma-separated; default: all). The others keep their default.
    #[arg(long, value_delimiter = ',', value_parser = parse_family)]
    pub kernels: Vec<KernelFamily>,
    /// How candidates are chosen and timed.
    #[arg(long, value_enum, default_value_t = Strategy::Exhaustive)]
    pub strategy: Strategy,
    /// Seed of the random strategy.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most candidates evaluated per family and bucket, the default included.
    #[arg(long)]
    pub max_evals: Option<usize>,
    /// Seconds after which no new evaluation starts; the bundle is still written (unfinished
    /// buckets ship the default).
    #[arg(long, value_parser = parse_seconds)]
    pub time_budget: Option<Duration>,
    /// Skip the refinement: one step of coordinate descent around each dense-tile family's
    /// first-round best (up to 12 more candidates per family and bucket).
    #[arg(long)]
    pub no_refine: bool,
    /// Processes that JIT-compile candidates into the driver's cache in parallel (the driver
    /// compiles one module at a time per process); 0 compiles in this process. Default: one a
    /// core, at most 16.
    #[arg(long)]
    pub jit_workers: Option<usize>,
    /// Continue the run recorded in the log without repeating finished measurements.
    #[arg(long)]
    pub resume: bool,
    /// Bundle directory (default: `out/bundle-<spec tag>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout (no progress bar, no table).
    #[arg(long)]
    pub json: bool,
    /// Keys the candidates are timed on: normal (BENCH.md `paper`) or peaked.
    #[arg(long, default_value = "normal", value_parser = parse_data)]
    pub data: DataKind,
    /// Record log (JSONL; default: `<out>/tune-log.jsonl`).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Cache directory (default: $XDG_CACHE_HOME/entkv or ~/.cache/entkv).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Neither read nor write the cache (measure everything again).
    #[arg(long)]
    pub no_cache: bool,
    /// Bits per dimension of the certified path's key sketch (4 or 8).
    #[arg(long, default_value_t = entkv_abi::DEFAULT_SKETCH_BITS)]
    pub sketch_bits: u32,
    /// Kernels take per-head ALiBi slopes.
    #[arg(long)]
    pub alibi: bool,
    /// Timing repetitions per candidate (halving starts with a quarter of them).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Repetitions of the final interleaved re-timing of the leaders and the default.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub final_reps: u32,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let a: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number"))?;
    Alpha::new(a).map_err(|e| e.to_string())?;
    Ok(a)
}

fn parse_head_dim(s: &str) -> Result<u32, String> {
    let d: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number"))?;
    check_head_dim(d).map_err(|e| e.to_string())
}

/// `32768`, `32k`, `1M` (k = 1024, M = 1048576).
pub fn parse_tokens(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1u64 << 20),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a context length (e.g. 32768, 32k, 1M)"))?;
    match n.checked_mul(mult) {
        Some(v) if (1..=entkv_abi::MAX_SEQUENCE_TOKENS).contains(&v) => Ok(v),
        _ => Err(format!(
            "context length `{s}` must be in 1..=2^30 tokens (a sequence's most, MAX_SEQUENCE_TOKENS)"
        )),
    }
}

fn parse_family(s: &str) -> Result<KernelFamily, String> {
    let t = s.trim();
    KernelFamily::ALL
        .into_iter()
        .find(|f| f.name() == t)
        .ok_or_else(|| {
            let names: Vec<&str> = KernelFamily::ALL.iter().map(|f| f.name()).collect();
            format!("unknown kernel family `{t}` (families: {})", names.join(", "))
        })
}

fn parse_data(s: &str) -> Result<DataKind, String> {
    match s.trim() {
        "normal" => Ok(DataKind::Normal),
        // Caches of a bucket's size are generated on the device (iid normal, BENCH.md `paper`);
        // `peaked` keys come from a host generator and are part of every candidate's check.
        "peaked" => Err(
            "timing runs on device-generated iid normal keys (BENCH.md `paper`); \
                         `peaked` keys are already part of every candidate's verification"
                .into(),
        ),
        _ => Err(format!("unknown data kind `{s}` (normal)")),
    }
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Duration::try_from_secs_f64(v)
            .map_err(|_| format!("`{s}` seconds is longer than a time budget can be")),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

impl Cli {
    /// The specialization (group = q-heads / kv-heads).
    pub fn spec(&self) -> Result<PagedSpec> {
        ensure!(
            self.q_heads >= 1 && self.kv_heads >= 1 && self.q_heads % self.kv_heads == 0,
            "--q-heads {} must be a positive multiple of --kv-heads {} (the GQA group is their ratio)",
            self.q_heads,
            self.kv_heads
        );
        let group = self.q_heads / self.kv_heads;
        if !SUPPORTED_GROUPS.contains(&group) {
            bail!(
                "--q-heads {} / --kv-heads {} is a GQA group of {group} (supported: {SUPPORTED_GROUPS:?})",
                self.q_heads,
                self.kv_heads
            );
        }
        let kv = DType::parse(&self.kv_dtype)?;
        ensure!(
            kv != DType::F32,
            "--kv-dtype f32 is not a KV-cache type (f16 or bf16)"
        );
        Ok(PagedSpec::new(
            DecodeSpec::new(self.alpha, self.head_dim, group, kv)?,
            self.page_size,
            self.alibi,
            self.sketch_bits,
        )?)
    }

    /// Everything checked and defaulted: what [`run_search`] needs.
    pub fn search_opts(&self) -> Result<SearchOpts> {
        let spec = self.spec()?;
        ensure!(self.batch >= 1, "--batch must be at least 1");
        let contexts = if self.contexts.is_empty() {
            DEFAULT_CONTEXTS.to_vec()
        } else {
            self.contexts.clone()
        };
        let mut families = Vec::new();
        for f in &self.kernels {
            if !families.contains(f) {
                families.push(*f);
            }
        }
        if families.is_empty() {
            families = KernelFamily::ALL.to_vec();
        }
        // What the spec rules out (an α outside the Gaussian solver's range, …) is said here,
        // before the GPU is opened, not after.
        for &family in &families {
            family.default_tile(&spec).check(family, &spec).with_context(|| {
                format!(
                    "{family} cannot be built for {} (--kernels tunes the other families)",
                    spec.sketch_tag()
                )
            })?;
        }
        Ok(SearchOpts {
            batch: self.batch,
            q_heads: self.q_heads,
            kv_heads: self.kv_heads,
            buckets: buckets_for(&contexts)?,
            families,
            strategy: self.strategy,
            seed: self.seed,
            max_evals: self.max_evals,
            time_budget: self.time_budget,
            refine: !self.no_refine,
            data: self.data,
            reps: self.reps,
            final_reps: self.final_reps,
            progress: !self.json,
            ..SearchOpts::new(spec)
        })
    }

    /// `--out`, or `out/bundle-<spec sketch tag>`.
    pub fn out_dir(&self, spec: &PagedSpec) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| PathBuf::from("out").join(format!("bundle-{}", spec.sketch_tag())))
    }

    /// Where records go: `--log` (default `<out>/tune-log.jsonl`), the cache directory unless
    /// `--no-cache`.
    pub fn store_config(&self, out: &Path) -> StoreConfig {
        StoreConfig {
            log: Some(self.log.clone().unwrap_or_else(|| out.join("tune-log.jsonl"))),
            resume: self.resume,
            cache_dir: if self.no_cache {
                None
            } else {
                self.cache_dir.clone().or_else(default_cache_dir)
            },
        }
    }
}

/// A finished run: what was written and the summary.
pub struct RunReport {
    pub summary: TuneSummary,
    /// The human-readable end of the run: the table and the statistics.
    pub text: String,
}

/// Run `cli` on `backend`: open the records, search, write the bundle (`--out`) and
/// `tune-summary.json` next to it. `note` gets lines for stderr as they happen (record files
/// read, warnings about them). The caller checks that a GPU is there before opening one.
pub fn run(
    cli: &Cli,
    backend: &mut dyn MeasureBackend,
    created_unix_s: u64,
    note: &mut dyn FnMut(&str),
) -> Result<RunReport> {
    let opts = cli.search_opts()?;
    let out = cli.out_dir(&opts.spec);
    let cfg = cli.store_config(&out);
    let device = backend.device();
    let mut store = RecordStore::open(&cfg, &device)?;
    for line in &store.opened {
        note(line);
    }
    for w in &store.warnings {
        note(&format!("warning: {w}"));
    }
    let outcome = run_search(&opts, backend, &mut store)?;
    let bundle = bundle_from_choices(&opts.spec, &outcome.choices(), &device, created_unix_s)
        .context("building the tuned bundle")?;
    bundle
        .write_dir(&out)
        .with_context(|| format!("writing bundle directory {}", out.display()))?;
    let summary = TuneSummary::new(&opts, &outcome, &out, cfg.log.as_deref());
    let path = out.join("tune-summary.json");
    let mut json = serde_json::to_vec_pretty(&summary)?;
    json.push(b'\n');
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    let text = format!(
        "{}\n{}\nbundle {} ({})\n",
        table_text(&outcome),
        stats_line(&outcome.stats),
        out.display(),
        crate::bundle_cmd::summary(&bundle)
    );
    Ok(RunReport { summary, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use entkv_bundle::Bucket;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("autotune").chain(args.iter().copied()))
    }

    fn err(args: &[&str]) -> String {
        match parse(args) {
            Ok(cli) => format!("{:#}", cli.search_opts().expect_err("should be refused")),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults() {
        let cli = parse(&["--alpha", "1.5", "--head-dim", "32"]).unwrap();
        let o = cli.search_opts().unwrap();
        assert_eq!(o.spec.sketch_tag(), "a1p5_d32_g1_f16q_f16kv_f32o_p16_nb_s4");
        assert_eq!((o.batch, o.q_heads, o.kv_heads), (8, 24, 24));
        assert_eq!(o.families, KernelFamily::ALL.to_vec());
        assert_eq!(o.strategy, Strategy::Exhaustive);
        assert_eq!(o.data, DataKind::Normal);
        let ctx: Vec<u64> = o.buckets.iter().map(|b| b.context).collect();
        assert_eq!(ctx, vec![8192, 32768, 131072, 1 << 20]);
        assert_eq!(o.buckets[0].bucket, Bucket::Tokens { lo: 1, hi: 16384 });
        assert!(o.progress);
        let out = cli.out_dir(&o.spec);
        assert_eq!(out, Path::new("out/bundle-a1p5_d32_g1_f16q_f16kv_f32o_p16_nb_s4"));
        let st = cli.store_config(&out);
        assert_eq!(st.log.unwrap(), out.join("tune-log.jsonl"));
        assert!(!st.resume);
    }

    #[test]
    fn every_option() {
        let cli = parse(&[
            "--alpha",
            "2",
            "--head-dim",
            "64",
            "--page-size",
            "32",
            "--kv-dtype",
            "bf16",
            "--q-heads",
            "32",
            "--kv-heads",
            "8",
            "--batch",
            "4",
            "--contexts",
            "4k,1M,64k",
            "--kernels",
            "decode_dense,select_topk",
            "--strategy",
            "halving",
            "--seed",
            "7",
            "--max-evals",
            "5",
            "--time-budget",
            "90",
            "--resume",
            "--no-refine",
            "--out",
            "/tmp/b",
            "--json",
            "--data",
            "normal",
            "--log",
            "/tmp/l.jsonl",
            "--no-cache",
            "--sketch-bits",
            "4",
            "--alibi",
            "--reps",
            "20",
            "--final-reps",
            "60",
        ])
        .unwrap();
        let o = cli.search_opts().unwrap();
        assert_eq!(o.spec.decode.group, 4);
        assert!(o.spec.alibi && o.spec.sketch_bits == 4 && o.spec.page_size == 32);
        assert_eq!(
            o.families,
            vec![KernelFamily::DecodeDense, KernelFamily::SelectTopk]
        );
        let ctx: Vec<u64> = o.buckets.iter().map(|b| b.context).collect();
        assert_eq!(ctx, vec![4096, 65536, 1 << 20]);
        assert_eq!((o.strategy, o.seed, o.max_evals), (Strategy::Halving, 7, Some(5)));
        assert_eq!(o.time_budget, Some(Duration::from_secs(90)));
        assert!(!o.refine);
        assert_eq!(
            (o.data, o.reps, o.final_reps, o.progress),
            (DataKind::Normal, 20, 60, false)
        );
        let e = err(&["--alpha", "20", "--head-dim", "32"]);
        assert!(e.contains("select_gaussian") && e.contains("α"), "{e}");
        let e = err(&["--alpha", "1.5", "--head-dim", "32", "--time-budget", "2e19"]);
        assert!(e.contains("longer than a time budget"), "{e}");
        let e = err(&["--alpha", "1.5", "--head-dim", "32", "--time-budget", "0"]);
        assert!(e.contains("not a positive number"), "{e}");
        // Timing data is generated on the device; peaked keys are verification data only.
        let e = err(&["--alpha", "1.5", "--head-dim", "32", "--data", "peaked"]);
        assert!(e.contains("verification"), "{e}");
        let st = cli.store_config(Path::new("/tmp/b"));
        assert!(st.resume && st.cache_dir.is_none());
        assert_eq!(st.log.unwrap(), Path::new("/tmp/l.jsonl"));
        let cli = parse(&["--alpha", "1.5", "--head-dim", "32", "--cache-dir", "/c"]).unwrap();
        assert_eq!(
            cli.store_config(Path::new("o")).cache_dir.unwrap(),
            Path::new("/c")
        );
    }

    #[test]
    fn bad_arguments_are_refused_with_a_clear_message() {
        for (args, needle) in [
            (&["--head-dim", "32"][..], "--alpha"),
            (&["--alpha", "1.5"][..], "--head-dim"),
            (
                &["--alpha", "1.0", "--head-dim", "32"][..],
                "alpha must be a finite number > 1",
            ),
            (&["--alpha", "0.5", "--head-dim", "32"][..], "alpha must be"),
            (&["--alpha", "x", "--head-dim", "32"][..], "not a number"),
            (
                &["--alpha", "1.5", "--head-dim", "48"][..],
                "unsupported head dim 48",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--strategy", "greedy"][..],
                "possible values: exhaustive, random, halving",
            ),
            (
                &[
                    "--alpha",
                    "1.5",
                    "--head-dim",
                    "32",
                    "--kernels",
                    "decode_dense,flash",
                ][..],
                "unknown kernel family `flash`",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--contexts", "32q"][..],
                "not a context length",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--contexts", "1025M"][..],
                "2^30",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--data", "uniform"][..],
                "unknown data kind",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--time-budget=0"][..],
                "positive number of seconds",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--reps", "0"][..],
                "--reps",
            ),
            (
                &[
                    "--alpha",
                    "1.5",
                    "--head-dim",
                    "32",
                    "--q-heads",
                    "24",
                    "--kv-heads",
                    "5",
                ][..],
                "multiple of --kv-heads",
            ),
            (
                &[
                    "--alpha",
                    "1.5",
                    "--head-dim",
                    "32",
                    "--q-heads",
                    "40",
                    "--kv-heads",
                    "8",
                ][..],
                "GQA group of 5",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--page-size", "24"][..],
                "unsupported page size 24",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--kv-dtype", "f8"][..],
                "unsupported dtype",
            ),
            (
                &["--alpha", "1.5", "--head-dim", "32", "--sketch-bits", "2"][..],
                "sketch width 2",
            ),
        ] {
            let e = err(args);
            assert!(e.contains(needle), "{args:?}: `{e}` does not mention `{needle}`");
        }
    }
}
