//! Result records: every GPU figure the repo states comes from one of these, written to a
//! results file with the environment it was measured in (../shared/BENCH.md).

use entkv_abi::{DecodeSpec, DenseShape, PagedSpec};
use serde::{Deserialize, Serialize};

/// Where and when a measurement was taken.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Environment {
    /// UTC date and time, RFC 3339.
    pub date: String,
    pub commit: String,
    pub gpu: String,
    pub driver: String,
    pub llvm: String,
    pub entkv_version: String,
}

impl Environment {
    pub fn detect(gpu: Option<&entkv_runtime::Gpu>, commit: &str) -> Environment {
        Environment {
            date: utc_now(),
            commit: commit.to_string(),
            gpu: gpu
                .map(|g| g.info().name.clone())
                .unwrap_or_else(|| "none".into()),
            driver: gpu
                .map(|g| g.info().driver_version.clone())
                .unwrap_or_else(|| "none".into()),
            llvm: entkv_codegen::llvm_version(),
            entkv_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// One timed method on one workload (BENCH.md's results row).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimingRecord {
    pub date: String,
    pub commit: String,
    pub gpu: String,
    pub driver: String,
    pub workload: String,
    pub method: String,
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub alpha: f64,
    pub kv_dtype: String,
    pub n: u64,
    pub iters: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub p90_ms: f64,
    /// Bytes the method must move (each input read once, each output written once).
    pub bytes: u64,
    /// `bytes` over the measured copy ceiling.
    pub floor_ms: f64,
    /// `median_ms / floor_ms` (absent from records written before it was stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_floor: Option<f64>,
    /// Fraction of the cache the step kept ([`StepSizes::page_fraction`] for the page selectors,
    /// [`StepSizes::token_fraction`] — tokens, not pages — for certified-exact, 1 for dense);
    /// absent where the run did not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_kept: Option<f64>,
    /// The smallest and the largest fraction of its own pages that one (sequence, KV head)
    /// kept, for the page selectors; absent elsewhere and from records written before it was
    /// stored. A wide range means unequal walks: the sparse decode drains on the longest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_kept_range: Option<[f64; 2]>,
    /// Bits per dimension of the certified path's key sketch, where the record is of a paged
    /// step (absent from records written before it was stored: those ran 4-bit sketches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sketch_bits: Option<u32>,
    /// How each timed run began: `lead` (behind a busy kernel, so the region's launches were
    /// queued when its clock started: `crate::device::StepTimer`) or `idle` (an idle stream: the
    /// time includes the host's latency of launching the first kernel). Absent from records
    /// written before it was stored (2026-12-06): those started idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// The seed of the step's inputs where it was not `entkv bench`'s default
    /// ([`crate::bench_cmd::DEFAULT_DATA_SEED`]): `--data-seed`. Absent otherwise, and from
    /// records written before it was stored (those used the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_seed: Option<u64>,
    /// Whether the step ran with the device-side id check (`entkv bench --check-device-ids`).
    /// Absent when it did not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_device_ids: bool,
}

impl TimingRecord {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: &Environment,
        workload: &str,
        method: &str,
        shape: &DenseShape,
        spec: &DecodeSpec,
        times_ms: &[f64],
        bytes: u64,
        ceiling_bytes_per_s: f64,
    ) -> TimingRecord {
        let (median_ms, min_ms, p90_ms) = summarize(times_ms);
        TimingRecord {
            date: env.date.clone(),
            commit: env.commit.clone(),
            gpu: env.gpu.clone(),
            driver: env.driver.clone(),
            workload: workload.into(),
            method: method.into(),
            batch: shape.batch,
            q_heads: shape.q_heads(spec),
            kv_heads: shape.kv_heads,
            head_dim: spec.head_dim,
            alpha: spec.alpha.value(),
            kv_dtype: spec.kv_dtype.to_string(),
            n: shape.n,
            iters: times_ms.len(),
            median_ms,
            min_ms,
            p90_ms,
            bytes,
            floor_ms: bytes as f64 / ceiling_bytes_per_s * 1e3,
            x_floor: Some(median_ms / (bytes as f64 / ceiling_bytes_per_s * 1e3)),
            pages_kept: None,
            pages_kept_range: None,
            sketch_bits: None,
            // Every timer leads (`time_ms`, the tuner) but `entkv bench --idle-start`, which
            // sets its own.
            start: Some("lead".into()),
            data_seed: None,
            check_device_ids: false,
        }
    }
}

/// One aligned line per record: BENCH.md's columns (median/min/p90, kept, bytes, floor, time
/// over floor).
pub fn records_table(records: &[TimingRecord]) -> String {
    let head = [
        "workload",
        "method",
        "n",
        "median ms",
        "min ms",
        "p90 ms",
        "kept",
        "kept a head",
        "bytes GB",
        "floor ms",
        "x floor",
    ]
    .map(String::from);
    let rows: Vec<[String; 11]> = records
        .iter()
        .map(|t| {
            [
                t.workload.clone(),
                t.method.clone(),
                t.n.to_string(),
                format!("{:.4}", t.median_ms),
                format!("{:.4}", t.min_ms),
                format!("{:.4}", t.p90_ms),
                t.pages_kept.map_or("-".into(), |k| format!("{:.4}%", 100.0 * k)),
                t.pages_kept_range.map_or("-".into(), |[lo, hi]| {
                    format!("{:.1}–{:.1}%", 100.0 * lo, 100.0 * hi)
                }),
                format!("{:.3}", t.bytes as f64 / 1e9),
                format!("{:.4}", t.floor_ms),
                format!("{:.2}", t.median_ms / t.floor_ms),
            ]
        })
        .collect();
    crate::verify_cmd::aligned(&head, &rows)
}

/// The sizes of one decode step that the byte model reads: `batch` sequences of `n` tokens,
/// `kv_heads` KV heads shared by `q_heads` query heads, pages of `page_size` tokens, and the
/// element sizes of K/V, q and the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSizes {
    pub batch: u64,
    pub q_heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub page_size: u64,
    pub n: u64,
    pub kv_elem: u64,
    pub q_elem: u64,
    pub out_elem: u64,
    pub sketch_bits: u64,
    /// Sketch bytes a token: its codes, and its range word on a per-token grid (4 bits).
    pub sketch_token_bytes: u64,
    /// Whether the certified pass reads each page's min and max for its sketch grid (8 bits;
    /// a per-token grid carries its own).
    pub sketch_page_bounds: bool,
    /// Bytes of the page box sketch a (page, KV head) that page pruning reads (`meta_box`:
    /// both code rows and their range words, in whole 32-byte sectors).
    pub box_sketch_bytes: u64,
}

impl StepSizes {
    /// A step of `spec` over `batch` sequences of `n` tokens with `kv_heads` KV heads.
    pub fn of(spec: &PagedSpec, batch: u32, kv_heads: u32, n: u64) -> StepSizes {
        let d = &spec.decode;
        StepSizes {
            batch: batch as u64,
            q_heads: kv_heads as u64 * d.group as u64,
            kv_heads: kv_heads as u64,
            head_dim: d.head_dim as u64,
            page_size: spec.page_size as u64,
            n,
            kv_elem: d.kv_dtype.size_bytes() as u64,
            q_elem: d.q_dtype.size_bytes() as u64,
            out_elem: d.out_dtype.size_bytes() as u64,
            sketch_bits: spec.sketch_bits as u64,
            sketch_token_bytes: spec.sketch_bytes_per_token() as u64,
            sketch_page_bounds: !spec.sketch_token_grid(),
            box_sketch_bytes: spec.box_read_bytes() as u64,
        }
    }

    /// Pages per sequence (the last may be partial).
    pub fn pages(&self) -> u64 {
        self.n.div_ceil(self.page_size)
    }

    /// (sequence, KV head) pairs: the granularity at which K, V and metadata are stored and
    /// selections are shared (a GQA group reads them once).
    fn kv_rows(&self) -> u64 {
        self.batch * self.kv_heads
    }

    /// Pages scored per step over all (sequence, KV head) pairs: every page but the last,
    /// which selectors never score and always attend (its metadata may be partial or stale).
    pub fn scored_pages(&self) -> u64 {
        self.kv_rows() * (self.pages() - 1)
    }

    /// Bytes of one K or V row (one token of one KV head).
    pub fn row(&self) -> u64 {
        self.head_dim * self.kv_elem
    }

    /// q read and the output written, once per query head.
    pub fn io(&self) -> u64 {
        self.batch * self.q_heads * self.head_dim * (self.q_elem + self.out_elem)
    }

    /// Tokens in `selected_pages` pages summed over (sequence, KV head) pairs: every selection
    /// holds its sequence's last page, which holds `n − (pages − 1)·P` tokens.
    pub fn tokens_in(&self, selected_pages: u64) -> u64 {
        (selected_pages * self.page_size)
            .saturating_sub(self.kv_rows() * (self.pages() * self.page_size - self.n))
    }

    /// One (sequence, KV head)'s `sel_count` as a fraction of its sequence's pages.
    pub fn head_page_fraction(&self, selected_pages: u64) -> f64 {
        selected_pages as f64 / self.pages() as f64
    }

    /// `selected_pages` (summed `sel_count`) as a fraction of all pages.
    pub fn page_fraction(&self, selected_pages: u64) -> f64 {
        selected_pages as f64 / (self.kv_rows() * self.pages()) as f64
    }

    /// `kept_rows` (summed over query heads, as certified-exact's `kept` slot counts them) as a
    /// fraction of all tokens of all query heads.
    pub fn token_fraction(&self, kept_rows: u64) -> f64 {
        kept_rows as f64 / (self.batch * self.q_heads * self.n) as f64
    }
}

/// The byte model: what one decode step of each method must move (../shared/BENCH.md,
/// "Floors": each input read once, each output written once). Every method also reads q and
/// writes the output ([`StepSizes::io`]). The counts come from what the step reports after it
/// ran: `support_rows` (the `support` slot summed over query heads: V is read only there, the
/// entmax zeros are never read), `selected_pages` (`sel_count` summed over (sequence, KV head)),
/// `kept_rows` (certified-exact's `kept` slot summed over query heads). Rows counted per query
/// head are an upper bound on what a GQA group must read (the union); exact without GQA.
/// One function per method, so a floor always means the same thing: `bench_cmd` and the report
/// read them from here.
pub mod step_bytes {
    use super::StepSizes;

    /// Dense entmax: K of every token once, V at the support.
    pub fn dense(s: &StepSizes, support_rows: u64) -> u64 {
        s.kv_rows() * s.n * s.row() + support_rows * s.row() + s.io()
    }

    /// Entmax top-k: both box bounds (the min and the max row) of every scored page, K of the
    /// selected pages, V at the support. The sign trick uses one bound per dimension, but which
    /// one follows the sign of q_i, and DRAM moves 32-byte sectors of 16 f16 dimensions: a
    /// sector of the min row could be skipped only if all its 16 signs picked the max (and a
    /// GQA group's heads need both anyway), so both rows are read. (Before 2026-11-30 this
    /// counted one row, which no kernel of this layout can reach.)
    pub fn topk(s: &StepSizes, selected_pages: u64, support_rows: u64) -> u64 {
        box_bounds(s) + selected(s, selected_pages, support_rows)
    }

    /// Gaussian-aware entmax: the moments (mean and standard deviation per dimension) of every
    /// scored page, K of the selected pages, V at the support.
    pub fn gaussian(s: &StepSizes, selected_pages: u64, support_rows: u64) -> u64 {
        s.scored_pages() * 2 * s.row() + selected(s, selected_pages, support_rows)
    }

    /// The min and max rows of every scored page.
    fn box_bounds(s: &StepSizes) -> u64 {
        s.scored_pages() * 2 * s.row()
    }

    /// Certified-exact: the sketch of every scored page's tokens and, on the 8-bit per-page
    /// grid, both bounds of the page (min and max give the sketch's step), the last page's K
    /// (scored exactly), K of the kept rows (rescored exactly), V at the support.
    pub fn certified(s: &StepSizes, kept_rows: u64, support_rows: u64) -> u64 {
        certified_over(s, s.scored_pages(), kept_rows, support_rows)
    }

    /// Certified-exact after page pruning: the page box sketch of every scored page (the
    /// pruning pass), then what [`certified`] moves for the selected full pages only (on the
    /// 8-bit grid their bounds too: the score pass reads them for the sketch's step).
    pub fn certified_pruned(s: &StepSizes, selected_pages: u64, kept_rows: u64, support_rows: u64) -> u64 {
        let selected_full = selected_pages.saturating_sub(s.kv_rows());
        s.scored_pages() * s.box_sketch_bytes + certified_over(s, selected_full, kept_rows, support_rows)
    }

    /// The certified score pass over `full_pages` sketched pages (sketch, and both bounds of
    /// each on a per-page grid), the last page's K, K of the kept rows, V at the support, q
    /// and the output.
    fn certified_over(s: &StepSizes, full_pages: u64, kept_rows: u64, support_rows: u64) -> u64 {
        let sketch = full_pages * s.page_size * s.sketch_token_bytes;
        let bounds = if s.sketch_page_bounds {
            full_pages * 2 * s.row()
        } else {
            0
        };
        let last_page = s.kv_rows() * (s.n - (s.pages() - 1) * s.page_size) * s.row();
        sketch + bounds + last_page + (kept_rows + support_rows) * s.row() + s.io()
    }

    /// Softmax top-k (Quest): the same box bounds as top-k, K and V of every selected token
    /// (softmax has no zeros).
    pub fn softmax_topk(s: &StepSizes, selected_pages: u64) -> u64 {
        box_bounds(s) + 2 * s.tokens_in(selected_pages) * s.row() + s.io()
    }

    /// K of the selected pages, V at the support, q and the output.
    fn selected(s: &StepSizes, selected_pages: u64, support_rows: u64) -> u64 {
        s.tokens_in(selected_pages) * s.row() + support_rows * s.row() + s.io()
    }
}

/// The floor of `bytes`: the time to move them at the measured copy rate (BENCH.md).
pub fn floor_ms(bytes: u64) -> f64 {
    bytes as f64 / crate::gpucheck::CEILING_BYTES_PER_S * 1e3
}

/// (median, min, p90) of a sample; NaNs for an empty one.
pub fn summarize(times: &[f64]) -> (f64, f64, f64) {
    if times.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    (at(0.5), t[0], at(0.9))
}

/// Current UTC time as RFC 3339 (no external time crate needed for this).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if mo <= 2 { 1 } else { 0 };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_statistics() {
        let (med, min, p90) = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((med, min, p90), (3.0, 1.0, 5.0));
        assert!(summarize(&[]).0.is_nan());
    }

    /// GQA 2, a partial last page: batch 2, 4 query / 2 KV heads, d 32, P 16, n 40 (pages of
    /// 16, 16, 8 tokens), f16 q and K/V, f32 output, 8-bit sketch.
    fn small() -> StepSizes {
        let spec = PagedSpec::new(
            DecodeSpec::new(1.5, 32, 2, entkv_abi::DType::F16).unwrap(),
            16,
            false,
            8,
        )
        .unwrap();
        StepSizes::of(&spec, 2, 2, 40)
    }

    #[test]
    fn step_sizes_by_hand() {
        let s = small();
        assert_eq!((s.q_heads, s.kv_elem, s.q_elem, s.out_elem), (4, 2, 2, 4));
        assert_eq!(s.pages(), 3);
        assert_eq!(s.scored_pages(), 2 * 2 * 2);
        assert_eq!(s.row(), 64);
        assert_eq!(s.io(), 2 * 4 * 32 * (2 + 4));
        // One scored page and the 8-token last page per (sequence, KV head).
        assert_eq!(s.tokens_in(8), 4 * (16 + 8));
        assert_eq!(s.page_fraction(8), 8.0 / 12.0);
        assert_eq!(s.token_fraction(16), 16.0 / (2.0 * 4.0 * 40.0));
    }

    #[test]
    fn byte_model_by_hand() {
        let s = small();
        let (io, support) = (1536, 10);
        // K: 4 (sequence, KV head) rows × 40 tokens × 64 B; V: 10 rows.
        assert_eq!(step_bytes::dense(&s, support), 4 * 40 * 64 + 10 * 64 + io);
        // 8 scored pages × both rows of 32 f16 bounds; K of 4 × 24 tokens.
        assert_eq!(step_bytes::topk(&s, 8, support), 8 * 128 + 96 * 64 + 10 * 64 + io);
        assert_eq!(step_bytes::topk(&s, 8, support), 9344);
        // Mean and standard deviation: as many bytes as the bounds.
        assert_eq!(
            step_bytes::gaussian(&s, 8, support),
            8 * 128 + 96 * 64 + 10 * 64 + io
        );
        // Sketch 8 pages × 16 tokens × 32 B; both bounds; last pages 4 × 8 rows; 12 kept rows.
        assert_eq!(
            step_bytes::certified(&s, 12, support),
            8 * 16 * 32 + 8 * 128 + 4 * 8 * 64 + 12 * 64 + 10 * 64 + io
        );
        assert_eq!(step_bytes::certified(&s, 12, support), 10112);
        // 4 bits: 16 B of codes and a 4-byte range word a token, no page bounds.
        let spec4 = PagedSpec::new(
            DecodeSpec::new(1.5, 32, 2, entkv_abi::DType::F16).unwrap(),
            16,
            false,
            4,
        )
        .unwrap();
        let s4 = StepSizes::of(&spec4, 2, 2, 40);
        assert_eq!(
            step_bytes::certified(&s4, 12, support),
            8 * 16 * 20 + 4 * 8 * 64 + 12 * 64 + 10 * 64 + io
        );
        // Pruning: 8 scored pages × one 64-byte page box sketch block, then the certified pass
        // over the 4 selected full pages.
        assert_eq!(s4.box_sketch_bytes, 64);
        assert_eq!(
            step_bytes::certified_pruned(&s4, 4 + 4, 12, support),
            8 * 64 + 4 * 16 * 20 + 4 * 8 * 64 + 12 * 64 + 10 * 64 + io
        );
        // K and V of every selected token.
        assert_eq!(step_bytes::softmax_topk(&s, 8), 8 * 128 + 2 * 96 * 64 + io);
    }

    /// The figures docs/perf-notes.md and BENCH.md state for `paper` at 1M: K alone 12.9 GB
    /// (3.01 ms), K and V of every page 25.8 GB (6.0 ms).
    #[test]
    fn byte_model_paper_floors() {
        let spec = PagedSpec::new(
            DecodeSpec::new(1.5, 32, 1, entkv_abi::DType::F16).unwrap(),
            16,
            false,
            8,
        )
        .unwrap();
        let s = StepSizes::of(&spec, 8, 24, 1 << 20);
        let dense = step_bytes::dense(&s, 0);
        assert!((dense as f64 / 1e9 - 12.88).abs() < 0.01, "{dense}");
        assert!((floor_ms(dense) - 3.01).abs() < 0.005, "{}", floor_ms(dense));
        // Every page selected: K and V of the whole cache, plus the bounds and q/out.
        let kv = step_bytes::softmax_topk(&s, 8 * 24 * s.pages()) - s.scored_pages() * 2 * s.row() - s.io();
        assert!((kv as f64 / 1e9 - 25.77).abs() < 0.01, "{kv}");
        assert!((floor_ms(kv) - 6.02).abs() < 0.005, "{}", floor_ms(kv));
        assert_eq!(s.page_fraction(8 * 24 * s.pages()), 1.0);
    }

    #[test]
    fn date_format() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'));
    }
}
