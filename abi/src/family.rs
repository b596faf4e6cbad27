//! Kernel families: the unit a bundle's lookup table maps to a tile config and a PTX module.
//! A family is one stage of a decode pipeline (its entries always run together with one tile);
//! [`TileConfig`] says which tile it takes and [`TileConfig::entries`] its entry names.

use crate::gaussian::{gauss_entry_names, page_score_moments_entry, GaussTile, MomentsTile};
use crate::meta::{meta_entry_names, MetaTile};
use crate::pipeline::{
    certified_entry_names, certified_init_entry, certified_rest_entry, certified_selected_entry,
};
use crate::topk::{
    page_bounds_entry, page_score_box_entry, prune_mark_entry, prune_tau_entry, select_pruned_entry,
    select_topk_entry, BoxScoreTile, SelectTopkTile,
};
use crate::{paged_decode_entry_names, DecodeKind, DenseTile, PagedSpec, SpecError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One stage of a decode pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelFamily {
    /// `page_meta_build` + `page_meta_update` (bounds, moments, sketch).
    PageMeta,
    /// `page_score_box`: box upper bounds of every full page (top-k); `page_bounds`: rigorous
    /// upper and lower box bounds (certified-exact with page pruning).
    PageScoreBox,
    /// `select_topk`: the budget's best pages plus the last; `prune_tau` + `prune_mark` +
    /// `select_pruned`:
    /// the pages a certified threshold bound cannot rule out, plus the last.
    SelectTopk,
    /// `page_score_moments`: the Gaussian model's per-page μ, σ.
    PageScoreMoments,
    /// `gauss_tau` + `select_gaussian`.
    SelectGaussian,
    /// `decode_dense_{score,finish}`: entmax over every page.
    DecodeDense,
    /// `decode_sparse_{score,finish}`: entmax over the selected pages.
    DecodeSparse,
    /// `select_certified` + `decode_certified`: sketch-certified exact decode (and
    /// `select_certified_sel` / `select_certified_rest`, its score pass after page pruning).
    DecodeCertified,
}

impl KernelFamily {
    pub const ALL: [KernelFamily; 8] = [
        KernelFamily::PageMeta,
        KernelFamily::PageScoreBox,
        KernelFamily::SelectTopk,
        KernelFamily::PageScoreMoments,
        KernelFamily::SelectGaussian,
        KernelFamily::DecodeDense,
        KernelFamily::DecodeSparse,
        KernelFamily::DecodeCertified,
    ];

    /// `page_meta`, `decode_dense`, … (file stems and table keys).
    pub fn name(self) -> &'static str {
        match self {
            KernelFamily::PageMeta => "page_meta",
            KernelFamily::PageScoreBox => "page_score_box",
            KernelFamily::SelectTopk => "select_topk",
            KernelFamily::PageScoreMoments => "page_score_moments",
            KernelFamily::SelectGaussian => "select_gaussian",
            KernelFamily::DecodeDense => "decode_dense",
            KernelFamily::DecodeSparse => "decode_sparse",
            KernelFamily::DecodeCertified => "decode_certified",
        }
    }

    /// Whether this family decodes (its modules also carry `guard_ids`, `crate::guard`).
    pub fn is_decode(self) -> bool {
        matches!(
            self,
            KernelFamily::DecodeDense | KernelFamily::DecodeSparse | KernelFamily::DecodeCertified
        )
    }

    /// Entries a bundle module of this family defines besides its rows' entries: `guard_ids`
    /// in every decode module (`crate::guard`).
    pub fn module_extra_entries(self, spec: &PagedSpec) -> Vec<String> {
        if self.is_decode() {
            vec![crate::guard_ids_entry(spec)]
        } else {
            Vec::new()
        }
    }

    /// The selectors whose selections this family reads (tuned and resolved per selector); empty
    /// for the families that read every page or make the selection.
    pub fn selectors(self) -> &'static [Selector] {
        match self {
            KernelFamily::DecodeSparse => &[Selector::Topk, Selector::Gaussian],
            KernelFamily::DecodeCertified => &[Selector::Pruned],
            _ => &[],
        }
    }

    /// The selector keys of this family's tuned rows: one per selector it reads, and `None` for
    /// a family that also (or only) runs without a selection (the certified full walk).
    pub fn selector_keys(self) -> Vec<Option<Selector>> {
        let reads: Vec<Option<Selector>> = self.selectors().iter().copied().map(Some).collect();
        if reads.is_empty() || self == KernelFamily::DecodeCertified {
            std::iter::once(None).chain(reads).collect()
        } else {
            reads
        }
    }

    /// `decode_dense`, or `decode_sparse (topk)` for rows kept for one selector (tables, logs).
    pub fn label(self, selector: Option<Selector>) -> String {
        match selector {
            Some(s) => format!("{self} ({s})"),
            None => self.to_string(),
        }
    }

    /// The untuned tile of this family's walk fed by `selector`: [`KernelFamily::default_tile`],
    /// except that the page-pruned certified walk takes [`DenseTile::default_certified_pruned`]
    /// (seeded with the pruned walk's passes, `_seed_pw`, where the full walk's default is seeded,
    /// and the same tile otherwise).
    pub fn default_tile_for(self, spec: &PagedSpec, selector: Option<Selector>) -> TileConfig {
        match (self, selector) {
            (KernelFamily::DecodeCertified, Some(Selector::Pruned)) => {
                TileConfig::Dense(DenseTile::default_certified_pruned(spec))
            }
            _ => self.default_tile(spec),
        }
    }

    /// The selectors of this family whose walks `tile` cannot serve ([`TileConfig::serves`]):
    /// the page-pruned walk of a seeded certified tile without `pruned_walk`, none otherwise.
    pub fn selectors_unserved_by(self, tile: &TileConfig) -> Vec<Selector> {
        self.selectors()
            .iter()
            .copied()
            .filter(|s| !tile.serves(Some(*s)))
            .collect()
    }

    /// The default rows of this family at `spec`: [`KernelFamily::rows_with`] its default tile.
    pub fn default_rows(self, spec: &PagedSpec) -> Vec<(Option<Selector>, TileConfig)> {
        self.rows_with(spec, self.default_tile(spec))
    }

    /// Rows (selector, tile) that make `tile` this family's tile for every walk (selector
    /// `None`), with [`KernelFamily::default_tile_for`] the walks it cannot serve.
    pub fn rows_with(self, spec: &PagedSpec, tile: TileConfig) -> Vec<(Option<Selector>, TileConfig)> {
        std::iter::once((None, tile))
            .chain(
                self.selectors_unserved_by(&tile)
                    .into_iter()
                    .map(|s| (Some(s), self.default_tile_for(spec, Some(s)))),
            )
            .collect()
    }

    /// The untuned tile of this family for `spec` (for the certified decode, its full walk's:
    /// see [`KernelFamily::default_rows`]).
    pub fn default_tile(self, spec: &PagedSpec) -> TileConfig {
        match self {
            KernelFamily::PageMeta => TileConfig::Meta(MetaTile::default_for(spec)),
            KernelFamily::PageScoreBox => TileConfig::BoxScore(BoxScoreTile::default_for(spec)),
            KernelFamily::SelectTopk => TileConfig::SelectTopk(SelectTopkTile::default_for(spec)),
            KernelFamily::PageScoreMoments => TileConfig::Moments(MomentsTile::default_for(spec)),
            KernelFamily::SelectGaussian => TileConfig::Gauss(GaussTile::default_for(spec)),
            KernelFamily::DecodeDense => TileConfig::Dense(DenseTile::default_paged(spec)),
            KernelFamily::DecodeSparse => TileConfig::Dense(DenseTile::default_sparse(spec)),
            KernelFamily::DecodeCertified => TileConfig::Dense(DenseTile::default_certified(spec)),
        }
    }
}

impl fmt::Display for KernelFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The page selector feeding a stage that reads a selection. Its density sets the best tile:
/// on `paper` keys top-k keeps a quarter of the pages, the Gaussian selector 86% at 32k and 14%
/// at 1M, and one `decode_sparse` tile for both made one of them slower (results/2026-11-30-refine,
/// results/2026-11-30-jit-pool). So a family that reads a selection is tuned, and its bundle
/// rows may be kept, per selector. The certified decode runs both over every page (no
/// selector) and over the pages certified pruning keeps ([`Selector::Pruned`]): on page-coherent
/// keys a handful of pages, walked best by large CTAs, while the full walk on iid keys won with
/// one-warp CTAs, which ran the pruned `peaked` step 40% slower (results/2026-12-02-head-bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selector {
    /// `select_topk`: the budget's best pages by box bound.
    Topk,
    /// `select_gaussian`: the pages the Gaussian model's threshold keeps.
    Gaussian,
    /// `prune_mark`/`select_pruned`: the pages certified page pruning keeps.
    Pruned,
}

impl Selector {
    /// `topk`, `gaussian` (table keys and logs).
    pub fn name(self) -> &'static str {
        match self {
            Selector::Topk => "topk",
            Selector::Gaussian => "gaussian",
            Selector::Pruned => "pruned",
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tile of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TileConfig {
    Meta(MetaTile),
    BoxScore(BoxScoreTile),
    SelectTopk(SelectTopkTile),
    Moments(MomentsTile),
    Gauss(GaussTile),
    Dense(DenseTile),
}

impl TileConfig {
    pub fn tag(&self) -> String {
        match self {
            TileConfig::Meta(t) => t.tag(),
            TileConfig::BoxScore(t) => t.tag(),
            TileConfig::SelectTopk(t) => t.tag(),
            TileConfig::Moments(t) => t.tag(),
            TileConfig::Gauss(t) => t.tag(),
            TileConfig::Dense(t) => t.tag(),
        }
    }

    /// Whether this is the kind of tile `family` takes, and valid for `spec`.
    pub fn check(&self, family: KernelFamily, spec: &PagedSpec) -> Result<(), SpecError> {
        use KernelFamily as F;
        match (family, self) {
            (F::PageMeta, TileConfig::Meta(t)) => t.check(spec),
            (F::PageScoreBox, TileConfig::BoxScore(t)) => t.check(spec),
            (F::SelectTopk, TileConfig::SelectTopk(t)) => t.check(spec),
            (F::PageScoreMoments, TileConfig::Moments(t)) => t.check(spec),
            (F::SelectGaussian, TileConfig::Gauss(t)) => t.check(spec),
            (F::DecodeDense, TileConfig::Dense(t)) => t.check_for(spec, DecodeKind::Dense),
            (F::DecodeSparse, TileConfig::Dense(t)) => t.check_for(spec, DecodeKind::Sparse),
            (F::DecodeCertified, TileConfig::Dense(t)) => t.check_for(spec, DecodeKind::Certified),
            _ => Err(SpecError::BadShape(format!(
                "family `{family}` does not take a tile like {}",
                self.tag()
            ))),
        }
    }

    /// Whether this tile may serve the rows of `selector`: a seeded certified pass
    /// ([`crate::DenseTile::seed`]) is a full walk, not the page-pruned walk's, unless it has
    /// [`crate::DenseTile::pruned_walk`] (`crate::pipeline::decode_calls` refuses it there).
    pub fn serves(&self, selector: Option<Selector>) -> bool {
        !(selector == Some(Selector::Pruned)
            && matches!(self, TileConfig::Dense(t) if !t.serves_pruned_walk()))
    }

    /// Entry names of `family` with this tile: its own pipeline's in launch order, then those
    /// page pruning adds (`page_bounds`, `prune_tau`, `prune_mark`, `select_pruned`,
    /// `select_certified_sel`/`_rest`).
    pub fn entries(&self, family: KernelFamily, spec: &PagedSpec) -> Result<Vec<String>, SpecError> {
        self.check(family, spec)?;
        use KernelFamily as F;
        Ok(match (family, self) {
            (F::PageMeta, TileConfig::Meta(t)) => {
                let (b, u) = meta_entry_names(spec, t);
                vec![b, u]
            }
            (F::PageScoreBox, TileConfig::BoxScore(t)) => {
                vec![page_score_box_entry(spec, t), page_bounds_entry(spec, t)]
            }
            (F::SelectTopk, TileConfig::SelectTopk(t)) => {
                vec![
                    select_topk_entry(spec, t),
                    prune_tau_entry(spec, t),
                    prune_mark_entry(spec, t),
                    select_pruned_entry(spec, t),
                ]
            }
            (F::PageScoreMoments, TileConfig::Moments(t)) => vec![page_score_moments_entry(spec, t)],
            (F::SelectGaussian, TileConfig::Gauss(t)) => {
                let (a, b) = gauss_entry_names(spec, t);
                vec![a, b]
            }
            (F::DecodeDense, TileConfig::Dense(t)) => {
                let (s, f) = paged_decode_entry_names(spec, t, false);
                vec![s, f]
            }
            (F::DecodeSparse, TileConfig::Dense(t)) => {
                let (s, f) = paged_decode_entry_names(spec, t, true);
                vec![s, f]
            }
            (F::DecodeCertified, TileConfig::Dense(t)) => {
                let (s, f) = certified_entry_names(spec, t);
                let mut e = vec![s, f];
                if t.serves_pruned_walk() {
                    e.extend([certified_selected_entry(spec, t), certified_rest_entry(spec, t)]);
                }
                if t.seed {
                    // The estimate starts the shared bounds (no `certified_init`); launched
                    // around the pass, listed last.
                    e.extend(crate::seed::seed_entry_names(spec, t));
                    if t.pruned_walk {
                        e.push(crate::seed::seed_pruned_scores_entry(spec, t));
                    }
                } else if t.share_bound {
                    // Launched first (it resets the heads' shared bounds), listed last.
                    e.push(certified_init_entry(spec, t));
                }
                e
            }
            _ => unreachable!("checked above"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, DecodeSpec};

    #[test]
    fn every_family_default_tile_is_valid_and_named() {
        for g in [1, 4] {
            let spec =
                PagedSpec::new(DecodeSpec::new(1.5, 32, g, DType::F16).unwrap(), 16, false, 8).unwrap();
            let mut all = Vec::new();
            for f in KernelFamily::ALL {
                let e = f.default_tile(&spec).entries(f, &spec).unwrap();
                assert!(!e.is_empty());
                all.extend(e);
            }
            let n = all.len();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), n, "entry names are unique across families");
        }
    }

    /// Every family's default rows (each selector's walk included) are valid for every
    /// supported spec, f32 caches too: a default the spec refuses would fail only at codegen
    /// (f32 keys once took `mma` defaults at GQA 2 and wide rows).
    #[test]
    fn default_rows_are_valid_for_every_spec() {
        for d in crate::SUPPORTED_HEAD_DIMS {
            for g in crate::SUPPORTED_GROUPS {
                for kv in [DType::F16, DType::BF16, DType::F32] {
                    for (p, alibi, bits) in [(16, false, 4), (32, true, 8), (64, false, 8)] {
                        let spec =
                            PagedSpec::new(DecodeSpec::new(1.5, d, g, kv).unwrap(), p, alibi, bits).unwrap();
                        for f in KernelFamily::ALL {
                            for (selector, tile) in f.default_rows(&spec) {
                                tile.entries(f, &spec).unwrap_or_else(|e| {
                                    panic!("{f} {selector:?} at {}: {e}", spec.sketch_tag())
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// Head-bound sharing is a tile of the certified pass over 4-bit sketches at GQA ≤ 4: its
    /// entries gain `certified_init` and the `_h` tag; anywhere else it is refused by name.
    #[test]
    fn shared_head_bounds_only_where_the_warp_stream_runs() {
        let spec = |g: u32, bits: u32| {
            PagedSpec::new(DecodeSpec::new(1.5, 32, g, DType::F16).unwrap(), 16, false, bits).unwrap()
        };
        let shared = |t: TileConfig| match t {
            TileConfig::Dense(d) => TileConfig::Dense(DenseTile {
                share_bound: true,
                ..d
            }),
            t => t,
        };
        let s4 = spec(1, 4);
        let f = KernelFamily::DecodeCertified;
        let plain = f.default_tile(&s4).entries(f, &s4).unwrap();
        assert!(!plain.iter().any(|e| e.starts_with("certified_init")));
        let e = shared(f.default_tile(&s4)).entries(f, &s4).unwrap();
        assert_eq!(e.len(), plain.len() + 1);
        assert!(e.last().unwrap().starts_with("certified_init") && e.last().unwrap().ends_with("_h"));
        assert!(e[0].ends_with("_h"), "{}", e[0]);
        for (family, s) in [
            (KernelFamily::DecodeDense, s4),
            (KernelFamily::DecodeSparse, s4),
            (f, spec(1, 8)),
            (f, spec(8, 4)),
        ] {
            let err = shared(family.default_tile(&s))
                .check(family, &s)
                .unwrap_err()
                .to_string();
            assert!(err.contains("share_bound"), "{err}");
        }
        // The decode plan refuses it too, for a dense decode.
        let shape = crate::PagedShape {
            batch: 1,
            kv_heads: 1,
            max_pages: 4,
            num_pages: 4,
        };
        let TileConfig::Dense(t) = shared(KernelFamily::DecodeDense.default_tile(&s4)) else {
            unreachable!()
        };
        let err = crate::pipeline::decode_calls(crate::DecodeKind::Dense, &s4, &t, &shape, 64, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("share_bound"), "{err}");
    }

    /// The page lookahead is a tile of the sparse pass where it is not always on (bf16, GQA,
    /// ALiBi): its entries carry `_la`; the dense and certified passes refuse it by name, and
    /// so does a spec where it is always on.
    #[test]
    fn page_lookahead_only_on_the_sparse_pass_where_it_is_a_knob() {
        let ahead = |t: TileConfig| match t {
            TileConfig::Dense(d) => TileConfig::Dense(DenseTile { lookahead: true, ..d }),
            t => t,
        };
        let gqa = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::BF16).unwrap(), 16, false, 4).unwrap();
        let paper = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
        let alibi = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, true, 4).unwrap();
        let f = KernelFamily::DecodeSparse;
        for s in [gqa, alibi] {
            let e = ahead(f.default_tile(&s)).entries(f, &s).unwrap();
            assert!(e.iter().all(|e| e.ends_with("_la")), "{e:?}");
        }
        for (family, s, why) in [
            (KernelFamily::DecodeDense, gqa, "sparse score pass"),
            (KernelFamily::DecodeCertified, gqa, "sparse score pass"),
            (f, paper, "already on"),
        ] {
            let err = ahead(family.default_tile(&s))
                .check(family, &s)
                .unwrap_err()
                .to_string();
            assert!(err.contains("lookahead") && err.contains(why), "{err}");
        }
    }

    /// Every family has one default row for all its walks, except the certified decode where
    /// its full walk's default is seeded (`wide`: d·G = 512, 4-bit sketches): there the
    /// page-pruned walk gets a row of its own (`_seed_pw`). Each row's tile serves its walk.
    #[test]
    fn default_rows_per_walk() {
        let wide = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 4).unwrap();
        let paper = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 4).unwrap();
        let wide8 = PagedSpec::new(DecodeSpec::new(1.5, 128, 4, DType::BF16).unwrap(), 32, false, 8).unwrap();
        for s in [wide, paper, wide8] {
            for f in KernelFamily::ALL {
                let rows = f.default_rows(&s);
                assert_eq!(rows[0], (None, f.default_tile(&s)));
                for (sel, t) in &rows {
                    t.check(f, &s).unwrap();
                    assert!(t.serves(*sel));
                }
                for sel in f.selector_keys() {
                    assert!(f.default_tile_for(&s, sel).serves(sel));
                }
                let seeded = f == KernelFamily::DecodeCertified && s == wide;
                assert_eq!(
                    rows.len(),
                    if seeded { 2 } else { 1 },
                    "{f} at {}",
                    s.sketch_tag()
                );
            }
        }
        let f = KernelFamily::DecodeCertified;
        let (TileConfig::Dense(full), TileConfig::Dense(pruned)) = (
            f.default_tile(&wide),
            f.default_tile_for(&wide, Some(Selector::Pruned)),
        ) else {
            unreachable!()
        };
        // Both seeded; the pruned walk's with that walk's passes (`_seed_pw`).
        assert!(full.seed && !full.pruned_walk && pruned.seed && pruned.pruned_walk);
        assert!(!full.serves_pruned_walk() && pruned.serves_pruned_walk());
        // On the tensor cores at two tokens a lane the full walk; one the pruned walk.
        assert!(full.mma && full.tokens_per_group == 2);
        assert_eq!(
            DenseTile {
                pruned_walk: true,
                tokens_per_group: 1,
                ..full
            },
            pruned
        );
    }

    /// A seeded tile (`crate::seed`) needs shared bounds; its entries end with the three seed
    /// kernels (no `certified_init`); its step runs the pass and finish twice, the second time
    /// gated (1) and from `repair_bound`; it serves the full walk only.
    #[test]
    fn seeded_certified_plan() {
        use crate::pipeline::{decode_calls, ArgRef, DecodeKind};
        let s4 = PagedSpec::new(DecodeSpec::new(1.5, 32, 2, DType::F16).unwrap(), 16, false, 4).unwrap();
        let f = KernelFamily::DecodeCertified;
        let TileConfig::Dense(def) = f.default_tile(&s4) else {
            unreachable!()
        };
        let unshared = DenseTile { seed: true, ..def };
        let err = TileConfig::Dense(unshared).check(f, &s4).unwrap_err().to_string();
        assert!(err.contains("seed") && err.contains("share_bound"), "{err}");
        let seeded = DenseTile {
            share_bound: true,
            seed: true,
            ..def
        };
        let tile = TileConfig::Dense(seeded);
        let e = tile.entries(f, &s4).unwrap();
        assert!(!e.iter().any(|e| e.starts_with("certified_init")));
        let tail: Vec<&str> = e[e.len() - 3..]
            .iter()
            .map(|e| e.split("__").next().unwrap())
            .collect();
        assert_eq!(
            tail,
            ["certified_seed_scores", "certified_seed", "certified_verify"]
        );
        assert!(e.iter().all(|e| e.ends_with("_h_seed")), "{e:?}");
        // The pass, its finish and the seed's three: no page-pruned walk's passes.
        assert_eq!(e.len(), 5, "{e:?}");
        assert!(tile.serves(None) && !tile.serves(Some(Selector::Pruned)));
        assert!(f.default_tile(&s4).serves(Some(Selector::Pruned)));

        let shape = crate::PagedShape {
            batch: 2,
            kv_heads: 3,
            max_pages: 100,
            num_pages: 200,
        };
        let plan = decode_calls(DecodeKind::Certified, &s4, &seeded, &shape, 1600, 4).unwrap();
        let kinds: Vec<&str> = plan
            .calls
            .iter()
            .map(|c| c.entry.split("__").next().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "certified_seed_scores",
                "certified_seed",
                "select_certified",
                "decode_certified",
                "certified_verify",
                "select_certified",
                "decode_certified"
            ]
        );
        let gate = |args: &[ArgRef]| {
            let at = args.iter().position(|a| *a == ArgRef::buf("repair")).unwrap();
            args[at + 1].clone()
        };
        for (first, second) in [(2, 5), (3, 6)] {
            assert_eq!(gate(&plan.calls[first].args), ArgRef::I32(0));
            assert_eq!(gate(&plan.calls[second].args), ArgRef::I32(1));
            assert_eq!(plan.calls[first].args.len(), plan.calls[second].args.len());
        }
        assert!(plan.calls[2].args.contains(&ArgRef::buf("head_bound")));
        assert!(plan.calls[5].args.contains(&ArgRef::buf("repair_bound")));
        assert!(!plan.calls[5].args.contains(&ArgRef::buf("head_bound")));
        // 1600 tokens: 25 samples a head; 2 × 3 × 2 heads; 2 × 3 pairs.
        let len = |name: &str| plan.buffers.iter().find(|b| b.name == name).unwrap().len;
        assert_eq!(len("seed_z"), 12 * 25);
        assert_eq!((len("seed"), len("repair_bound"), len("repair")), (12, 12, 6));
        assert_eq!(plan.calls[0].geometry.grid, [1, 3, 2]);
        assert_eq!(plan.calls[1].geometry.grid, [6, 2, 1]);
        let err = decode_calls(DecodeKind::CertifiedSelected, &s4, &seeded, &shape, 1600, 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains("seed"), "{err}");
    }

    #[test]
    fn wrong_tile_kind_is_refused() {
        let spec = PagedSpec::new(DecodeSpec::new(1.5, 32, 1, DType::F16).unwrap(), 16, false, 8).unwrap();
        let t = KernelFamily::PageMeta.default_tile(&spec);
        assert!(t.entries(KernelFamily::DecodeDense, &spec).is_err());
    }
}
