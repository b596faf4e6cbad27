//! What a search ships: the tuned kernel bundle.
//!
//! The backend measures candidates but hands back no PTX, so the bundle is compiled here, by
//! the same code as `entkv bundle create` ([`crate::bundle_cmd::build_bundle`]): one module per
//! family holding the default tile and every distinct winner.

use super::search::TunedChoice;
use super::DeviceKey;
use crate::bundle_cmd::{build_bundle, RowPlan, SpecPlan};
use anyhow::{ensure, Result};
use entkv_abi::PagedSpec;
use entkv_bundle::{Bundle, RowSource, TunedOn};

/// The bundle of `spec`: every family's default row (bucket `any`), plus one tuned row per
/// choice (and selector, for a family that reads a selection) with the winner's tile and its
/// median (also when the winner is the default tile: it
/// is then a tuned measurement of the default). `tuned_on` is `device`.
pub fn bundle_from_choices(
    spec: &PagedSpec,
    choices: &[TunedChoice],
    device: &DeviceKey,
    created_unix_s: u64,
) -> Result<Bundle> {
    let mut plan = SpecPlan::defaults(spec);
    for c in choices {
        ensure!(
            c.median_us.is_finite() && c.median_us >= 0.0,
            "{} in bucket {}: median {} µs is not a time",
            c.family,
            c.bucket,
            c.median_us
        );
        let fp = plan
            .families
            .iter_mut()
            .find(|f| f.family == c.family)
            .expect("SpecPlan::defaults lists every family");
        fp.rows.push(RowPlan {
            bucket: c.bucket,
            selector: c.selector,
            tile: c.tile,
            source: RowSource::Tuned {
                median_us: c.median_us,
            },
        });
    }
    let tuned_on = TunedOn {
        gpu: device.gpu.clone(),
        sm: device.sm,
        driver: device.driver.clone(),
        cuda: device.cuda.clone(),
    };
    build_bundle(&[plan], Some(tuned_on), created_unix_s)
}
