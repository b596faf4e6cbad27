//! Certified-exact decode in the interpreter: equal to full-cache float64 entmax on every input.

use entkv_kernels::certified_checks::checks;
use entkv_kernels::suite::interp_failures;

#[test]
fn certified_decode_is_exact() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// A chunk with more pages than the CTA has threads (64 threads, 32 tokens a lane group: 128
/// pages of 16), so the page terms take two rounds of one lane a page. Interpreter only: the
/// tile holds 256 sketch words a lane, more than a GPU tile would.
#[test]
fn certified_page_terms_in_several_rounds() {
    use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
    use entkv_kernels::certified_checks::CertifiedCheck;
    use entkv_kernels::paged_data::{KeyData, PagedCase};
    use entkv_kernels::suite::KernelCheck;
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 8).unwrap();
    let tile = DenseTile {
        threads: 64,
        tokens_per_group: 32,
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..DenseTile::default_certified(&spec)
    };
    assert!(tile.chunk_len() / 16 > tile.threads, "two rounds of page terms");
    let checks: Vec<Box<dyn KernelCheck>> = [false, true]
        .into_iter()
        .map(|pruned| {
            Box::new(CertifiedCheck {
                case: PagedCase {
                    spec,
                    kv_heads: 2,
                    seq_lens: vec![5000, 37],
                    seed: 7,
                    data: KeyData::Normal,
                    spare_pages: 2,
                },
                tile,
                sm_count: 1,
                pruned,
            }) as Box<dyn KernelCheck>
        })
        .collect();
    let failed = interp_failures(checks);
    assert!(failed.is_empty(), "failed: {failed:#?}");
}
