//! Certified-exact decode in the interpreter: equal to full-cache float64 entmax on every input.

use entkv_abi::{DType, DecodeSpec, DenseTile, PagedSpec};
use entkv_kernels::certified_checks::{checks, CertifiedCheck};
use entkv_kernels::paged_data::{KeyData, PagedCase};
use entkv_kernels::suite::{interp_failures, KernelCheck};

#[test]
fn certified_decode_is_exact() {
    let failed = interp_failures(checks());
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// Run the certified checks (plain and page-pruned) of `cases` at `tile` on a one-SM GPU (several
/// chunks and splits); each case is `(keys, sequence lengths, KV heads, seed)`.
fn run_small_tile_cases(spec: PagedSpec, tile: DenseTile, cases: Vec<(KeyData, Vec<u32>, u32, u64)>) {
    let mut checks: Vec<Box<dyn KernelCheck>> = Vec::new();
    for (data, seq_lens, kv_heads, seed) in cases {
        for pruned in [false, true] {
            checks.push(Box::new(CertifiedCheck {
                case: PagedCase {
                    spec,
                    kv_heads,
                    seq_lens: seq_lens.clone(),
                    seed,
                    data,
                    spare_pages: 2,
                },
                tile,
                sm_count: 1,
                pruned,
            }));
        }
    }
    let failed = interp_failures(checks);
    assert!(failed.is_empty(), "failed: {failed:#?}");
}

/// A 64-thread tile of `lanes` lanes a token and `tokens` tokens a lane group, with no register
/// cap, on `spec`'s default certified tile otherwise.
fn small_tile(spec: &PagedSpec, lanes: u32, tokens: u32) -> DenseTile {
    DenseTile {
        threads: 64,
        lanes_per_token: lanes,
        tokens_per_group: tokens,
        score_min_blocks: 1,
        finish_threads: 64,
        finish_capacity: 64,
        ..DenseTile::default_certified(spec)
    }
}

/// A chunk with more pages than the CTA has threads (64 threads, 32 tokens a lane group: 128
/// pages of 16), so the page terms take two rounds of one lane a page. Interpreter only: the
/// tile holds 256 sketch words a lane, more than a GPU tile would.
#[test]
fn certified_page_terms_in_several_rounds() {
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
    run_small_tile_cases(spec, tile, vec![(KeyData::Normal, vec![5000, 37], 2, 7)]);
}

/// 4-bit sketches stream per warp (`warp_stream`) and queue their rescorings: a segment longer
/// than two warps' worth is tightened only once it has doubled. Tied keys keep every token a
/// candidate, so warp segments reach hundreds and the rescoring queue fills every chunk.
#[test]
fn certified_warp_segments_longer_than_a_warp() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    run_small_tile_cases(
        spec,
        small_tile(&spec, 1, 2),
        vec![
            (KeyData::Ties, vec![1500, 37], 1, 11),
            (KeyData::Normal, vec![3000, 200], 1, 11),
        ],
    );
}

/// Two lanes a token on a 4-bit sketch, with token counts a lane group that divide a page and
/// that do not (4 and 3 of 16): the walk loads each token of the next chunk right after scoring
/// the current one. Partly filled last pages, one-page sequences.
#[test]
fn certified_two_lanes_a_token() {
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 64, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
    for tokens_per_group in [4, 3] {
        run_small_tile_cases(
            spec,
            small_tile(&spec, 2, tokens_per_group),
            vec![
                (KeyData::Normal, vec![1000, 9, 16], 2, 5),
                (KeyData::Ties, vec![333], 1, 6),
            ],
        );
    }
}

/// A head's splits share their threshold bounds through `head_bound`, which a workspace may
/// hold anything in between steps: `certified_init` resets it. A step run after one that left
/// every head's bound at +10³⁰ (which would rule every token out) is still exact; without the
/// reset it is not.
#[test]
fn certified_init_resets_stale_head_bounds() {
    use entkv_dsl::interp::HostBuffer;
    let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16, false, 4).unwrap();
    let check = CertifiedCheck {
        case: PagedCase {
            spec,
            kv_heads: 2,
            seq_lens: vec![2000, 700],
            seed: 21,
            data: KeyData::Normal,
            spare_pages: 2,
        },
        tile: DenseTile {
            share_bound: true,
            ..small_tile(&spec, 1, 2)
        },
        sm_count: 1,
        pruned: false,
    };
    let stale = |mut p: entkv_kernels::program::Program| {
        let n = p.get("head_bound").len();
        p.buffer("head_bound", HostBuffer::I32(vec![1e30f32.to_bits() as i32; n]));
        p
    };
    let mut p = stale(check.program().unwrap());
    assert!(
        p.calls
            .iter()
            .filter(|c| c.kernel.name.starts_with("certified_init"))
            .count()
            >= 1
    );
    p.run_interp().unwrap();
    let o = check.verify(&p);
    assert!(o.passed, "with the reset: {}", o.detail);

    let mut p = stale(check.program().unwrap());
    p.calls.retain(|c| !c.kernel.name.starts_with("certified_init"));
    p.run_interp().unwrap();
    assert!(
        !check.verify(&p).passed,
        "without the reset the stale bound must break the output"
    );
}
