//! Result records: every GPU figure the repo states comes from one of these, written to a
//! results file with the environment it was measured in (../shared/BENCH.md).

use entkv_abi::{DecodeSpec, DenseShape};
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
        }
    }
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

    #[test]
    fn date_format() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'));
    }
}
