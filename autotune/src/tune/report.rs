//! The end of a run, for people (a table) and for programs (`tune-summary.json`, `--json`).

use super::log::Status;
use super::search::{BucketResult, RunStats, SearchOpts, SearchOutcome};
use super::strategy::Strategy;
use super::{DataKind, DeviceKey};
use serde::Serialize;
use std::path::Path;

/// One family and bucket of the summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub family: String,
    /// The selector whose selections the row was tuned on (families that read one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    pub bucket: String,
    pub context: u64,
    pub chosen: Option<String>,
    pub chosen_is_default: bool,
    pub median_us: Option<f64>,
    pub default_tile: String,
    pub default_median_us: Option<f64>,
    /// Default median over the chosen tile's.
    pub speedup: Option<f64>,
    pub complete: bool,
    pub space_valid: usize,
    pub space_invalid: usize,
    pub planned: usize,
    pub counts: super::search::StatusCounts,
}

impl SummaryRow {
    fn of(r: &BucketResult) -> SummaryRow {
        SummaryRow {
            family: r.family.name().to_string(),
            selector: r.workload.selector.map(|s| s.name().to_string()),
            bucket: r.bucket.bucket.to_string(),
            context: r.bucket.context,
            chosen: r.chosen.as_ref().map(|c| c.tag.clone()),
            chosen_is_default: r.chosen.as_ref().is_some_and(|c| c.is_default),
            median_us: r.chosen.as_ref().map(|c| c.median_us),
            default_tile: r.default_tag.clone(),
            default_median_us: r.default_median_us,
            speedup: r.speedup(),
            complete: r.complete,
            space_valid: r.space_valid,
            space_invalid: r.space_invalid,
            planned: r.planned,
            counts: r.counts,
        }
    }
}

/// `tune-summary.json`: what was tuned, where, how, and what was chosen.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneSummary {
    pub spec: String,
    pub device: DeviceKey,
    pub entkv_version: String,
    pub llvm_version: String,
    pub strategy: Strategy,
    pub seed: u64,
    pub max_evals: Option<usize>,
    pub time_budget_s: Option<f64>,
    pub data: DataKind,
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub reps: u32,
    pub final_reps: u32,
    pub tolerance: f64,
    pub bundle: String,
    pub log: Option<String>,
    pub stats: RunStats,
    pub results: Vec<SummaryRow>,
}

impl TuneSummary {
    pub fn new(opts: &SearchOpts, outcome: &SearchOutcome, bundle: &Path, log: Option<&Path>) -> TuneSummary {
        TuneSummary {
            spec: outcome.spec.clone(),
            device: outcome.device.clone(),
            entkv_version: opts.versions.entkv.clone(),
            llvm_version: opts.versions.llvm.clone(),
            strategy: outcome.strategy,
            seed: opts.seed,
            max_evals: opts.max_evals,
            time_budget_s: opts.time_budget.map(|d| d.as_secs_f64()),
            data: opts.data,
            batch: opts.batch,
            q_heads: opts.q_heads,
            kv_heads: opts.kv_heads,
            reps: opts.reps,
            final_reps: opts.final_reps,
            tolerance: opts.tolerance,
            bundle: bundle.display().to_string(),
            log: log.map(|p| p.display().to_string()),
            stats: outcome.stats.clone(),
            results: outcome.results.iter().map(SummaryRow::of).collect(),
        }
    }
}

/// The results as an aligned table: per family and bucket the chosen tile, its median, the
/// default's, the speedup and the status counts (ok/invalid/compile error/spills/launch
/// error/wrong result).
pub fn table_text(outcome: &SearchOutcome) -> String {
    let head = [
        "family",
        "tokens",
        "chosen tile",
        "median us",
        "default us",
        "speedup",
        "ok/inv/cerr/spill/launch/wrong",
        "note",
    ];
    let us = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    let rows: Vec<[String; 8]> = outcome
        .results
        .iter()
        .map(|r| {
            let counts: Vec<String> = Status::ALL.iter().map(|&s| r.counts.get(s).to_string()).collect();
            let note = match (&r.chosen, r.complete) {
                (None, _) => "not measured (time budget)".to_string(),
                (Some(_), false) => "unfinished: default".to_string(),
                (Some(c), true) if c.is_default => "default".to_string(),
                (Some(_), true) => String::new(),
            };
            [
                r.label(),
                r.bucket.context.to_string(),
                r.chosen.as_ref().map_or("-".to_string(), |c| c.tag.clone()),
                us(r.chosen.as_ref().map(|c| c.median_us)),
                us(r.default_median_us),
                r.speedup().map_or("-".to_string(), |s| format!("{s:.3}x")),
                counts.join("/"),
                note,
            ]
        })
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            l.push_str(&format!("{c:<w$}  ", w = width[i]));
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(head.to_vec());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

/// One line: where the records came from and what the backend was asked.
pub fn stats_line(s: &RunStats) -> String {
    format!(
        "{} record(s) measured, {} reused from the cache, {} from the resumed log; backend calls: {} prepare, {} verify, {} time; {:.1} s{}",
        s.measured,
        s.cached,
        s.resumed,
        s.prepare_calls,
        s.verify_calls,
        s.time_calls,
        s.elapsed_s,
        if s.budget_exhausted {
            " (time budget exhausted: unfinished buckets ship the default)"
        } else {
            ""
        }
    )
}
