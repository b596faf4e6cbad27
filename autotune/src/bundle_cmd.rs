//! `entkv bundle …`: build an untuned kernel bundle, verify, inspect, pack and unpack bundles
//! (format: docs/bundle.md, crate `entkv-bundle`).

use crate::spec_args::SpecArgs;
use anyhow::{ensure, Context, Result};
use clap::Subcommand;
use entkv_abi::{KernelFamily, PagedSpec, Selector, TileConfig};
use entkv_bundle::{Bucket, Bundle, BundleMeta, BundleWriter, RowSource, TableRow, TunedOn};
use entkv_codegen::{compile_module, llvm_version, Target};
use std::path::{Path, PathBuf};

/// The `entkv bundle` verbs.
#[derive(Subcommand, Debug)]
pub enum BundleCmd {
    /// Compile every kernel family of the given specializations with its default tile and
    /// write an untuned bundle (no GPU needed).
    Create {
        #[command(flatten)]
        spec: SpecArgs,
        /// Output: a directory, or with --single-file a `.entkvb` file.
        #[arg(long)]
        out: PathBuf,
        /// Write the single-file form instead of a directory.
        #[arg(long)]
        single_file: bool,
    },
    /// Open a bundle (directory or .entkvb), run every check, and print a summary; exits
    /// non-zero naming the problem when a check fails.
    Verify {
        /// Bundle directory or .entkvb file.
        path: PathBuf,
    },
    /// Print a bundle's manifest header and lookup table.
    Inspect {
        /// Bundle directory or .entkvb file.
        path: PathBuf,
        /// Print the whole manifest as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Convert a bundle directory into a single .entkvb file (verifying both).
    Pack {
        /// Bundle directory.
        dir: PathBuf,
        /// Output .entkvb file.
        file: PathBuf,
    },
    /// Convert a single .entkvb file into a bundle directory (verifying both).
    Unpack {
        /// Input .entkvb file.
        file: PathBuf,
        /// Output directory.
        dir: PathBuf,
    },
}

/// Run one `entkv bundle` verb.
pub fn run(cmd: BundleCmd) -> Result<()> {
    match cmd {
        BundleCmd::Create {
            spec,
            out,
            single_file,
        } => {
            let specs = spec.specs()?;
            let bundle = create_default_bundle(&specs, created_now()?)?;
            if single_file {
                bundle
                    .write_file(&out)
                    .with_context(|| format!("writing bundle file {}", out.display()))?;
            } else {
                bundle
                    .write_dir(&out)
                    .with_context(|| format!("writing bundle directory {}", out.display()))?;
            }
            println!("{}", out.display());
            println!("{}", summary(&bundle));
            print!("{}", table_text(&bundle));
        }
        BundleCmd::Verify { path } => {
            let bundle = open(&path)?;
            println!("OK {}: {}", path.display(), summary(&bundle));
        }
        BundleCmd::Inspect { path, json } => {
            let bundle = open(&path)?;
            if json {
                println!("{}", serde_json::to_string_pretty(bundle.manifest())?);
            } else {
                print!("{}", header_text(&bundle));
                print!("{}", table_text(&bundle));
            }
        }
        BundleCmd::Pack { dir, file } => {
            ensure!(
                dir.is_dir(),
                "{} is not a directory (`pack` takes a bundle directory and writes a .entkvb file)",
                dir.display()
            );
            let bundle = open(&dir)?;
            bundle
                .write_file(&file)
                .with_context(|| format!("writing bundle file {}", file.display()))?;
            ensure!(
                open(&file)? == bundle,
                "{} does not read back equal to {}",
                file.display(),
                dir.display()
            );
            println!(
                "packed {} -> {}: {}",
                dir.display(),
                file.display(),
                summary(&bundle)
            );
        }
        BundleCmd::Unpack { file, dir } => {
            ensure!(
                file.is_file(),
                "{} is not a file (`unpack` takes a .entkvb file and writes a bundle directory)",
                file.display()
            );
            let bundle = open(&file)?;
            bundle
                .write_dir(&dir)
                .with_context(|| format!("writing bundle directory {}", dir.display()))?;
            ensure!(
                open(&dir)? == bundle,
                "{} does not read back equal to {}",
                dir.display(),
                file.display()
            );
            println!(
                "unpacked {} -> {}: {}",
                file.display(),
                dir.display(),
                summary(&bundle)
            );
        }
    }
    Ok(())
}

/// Open and verify a bundle, naming it in the error.
fn open(path: &Path) -> Result<Bundle> {
    Bundle::open(path).with_context(|| format!("cannot open bundle {}", path.display()))
}

/// `SOURCE_DATE_EPOCH` when set (reproducible bundles), else the current time.
pub fn created_now() -> Result<u64> {
    if let Ok(s) = std::env::var("SOURCE_DATE_EPOCH") {
        return s
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH `{s}` is not a number of seconds"));
    }
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_secs())
}

/// One table row to build: a context bucket, its tile, and whether it is the family's default
/// or a tuned winner.
#[derive(Clone, Debug, PartialEq)]
pub struct RowPlan {
    pub bucket: Bucket,
    /// The selector a tuned row of a family that reads a selection was tuned on.
    pub selector: Option<Selector>,
    pub tile: TileConfig,
    pub source: RowSource,
}

/// The rows of one family at one spec. Its module, `<family>__<spec sketch_tag>.ptx`, holds the
/// entries of every distinct tile of the rows (entry names embed the tile tag, so they never
/// collide).
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyPlan {
    pub family: KernelFamily,
    pub rows: Vec<RowPlan>,
}

/// What to build for one specialization.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecPlan {
    pub spec: PagedSpec,
    pub families: Vec<FamilyPlan>,
}

impl SpecPlan {
    /// Every [`KernelFamily`] with its [`RowSource::Default`] rows, bucket [`Bucket::Any`]: one
    /// of its default tile for every walk, and one for each walk that tile cannot serve
    /// ([`KernelFamily::default_rows`]).
    pub fn defaults(spec: &PagedSpec) -> SpecPlan {
        SpecPlan {
            spec: *spec,
            families: KernelFamily::ALL
                .into_iter()
                .map(|family| FamilyPlan {
                    family,
                    rows: family
                        .default_rows(spec)
                        .into_iter()
                        .map(|(selector, tile)| RowPlan {
                            bucket: Bucket::Any,
                            selector,
                            tile,
                            source: RowSource::Default,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// The untuned bundle of `specs`: for every spec and every [`KernelFamily`], the family's
/// default tiles compiled into `<family>__<spec sketch_tag>.ptx` and its [`RowSource::Default`]
/// rows ([`SpecPlan::defaults`]). Specs repeated (same `sketch_tag`) are built once.
pub fn create_default_bundle(specs: &[PagedSpec], created_unix_s: u64) -> Result<Bundle> {
    let plans: Vec<SpecPlan> = specs.iter().map(SpecPlan::defaults).collect();
    build_bundle(&plans, None, created_unix_s)
}

/// Compile and write the bundle of `plans` (the shared path of `entkv bundle create` and the
/// autotuner): per spec and family, one module with the PTX of every distinct tile of its rows,
/// then the rows, checked by [`BundleWriter::finish`]. Specs repeated (same `sketch_tag`) are
/// built once, from their first plan.
pub fn build_bundle(plans: &[SpecPlan], tuned_on: Option<TunedOn>, created_unix_s: u64) -> Result<Bundle> {
    ensure!(!plans.is_empty(), "no specialization to bundle");
    let target = Target::default();
    let mut w = BundleWriter::new(BundleMeta {
        entkv_version: env!("CARGO_PKG_VERSION").to_string(),
        llvm_version: llvm_version(),
        target_sm: target.sm,
        ptx_version: format!("{}.{}", target.ptx_version / 10, target.ptx_version % 10),
        tuned_on,
        created_unix_s,
    });
    let mut done = Vec::new();
    for plan in plans {
        let spec = &plan.spec;
        let tag = spec.sketch_tag();
        if done.contains(&tag) {
            continue;
        }
        w.add_spec(*spec);
        for fp in &plan.families {
            add_family(&mut w, spec, fp, &target)?;
        }
        done.push(tag);
    }
    Ok(w.finish()?)
}

/// Generate and compile one family's module (every distinct tile of its rows) and add it and
/// the rows to `w`.
fn add_family(w: &mut BundleWriter, spec: &PagedSpec, fp: &FamilyPlan, target: &Target) -> Result<()> {
    let (family, tag) = (fp.family, spec.sketch_tag());
    let mut tiles: Vec<TileConfig> = Vec::new();
    for r in &fp.rows {
        if !tiles.contains(&r.tile) {
            tiles.push(r.tile);
        }
    }
    let mut kernels = Vec::new();
    let mut block_threads = Vec::new();
    for tile in &tiles {
        let entries = tile
            .entries(family, spec)
            .with_context(|| format!("tile {} of {family} at {tag}", tile.tag()))?;
        let ks = entkv_kernels::family_kernels(family, spec, tile)
            .with_context(|| format!("generating {family} at {tag} (tile {})", tile.tag()))?;
        let names: Vec<String> = ks.iter().map(|k| k.name.clone()).collect();
        ensure!(
            names == entries,
            "{family} at {tag}: the generated kernels are {names:?}, but the ABI names the entries {entries:?}"
        );
        block_threads.push(ks[0].block_threads);
        kernels.extend(ks);
    }
    // Once a module: the step's optional device-side id check in a decode module.
    kernels.extend(entkv_kernels::module_extra_kernels(family, spec)?);
    let names: Vec<String> = kernels.iter().map(|k| k.name.clone()).collect();
    let stem = format!("{}__{}", family.name(), tag);
    let refs: Vec<&entkv_dsl::Kernel> = kernels.iter().collect();
    let compiled =
        compile_module(&stem, &refs, target).with_context(|| format!("compiling module {stem}"))?;
    ensure!(
        compiled.entries == names,
        "module {stem}: codegen reports entries {:?}, expected {names:?}",
        compiled.entries
    );
    let module = format!("{stem}.ptx");
    w.add_module(&module, compiled.ptx, names)?;
    for r in &fp.rows {
        let i = tiles
            .iter()
            .position(|t| *t == r.tile)
            .expect("every row's tile was collected");
        w.add_row(TableRow {
            family,
            spec: tag.clone(),
            bucket: r.bucket,
            selector: r.selector,
            tile: r.tile,
            module: module.clone(),
            entries: r.tile.entries(family, spec)?,
            // Informational: launch geometry comes from the entkv-abi plans for the tile.
            block_threads: block_threads[i],
            source: r.source,
        });
    }
    Ok(())
}

/// One line: specs, artifacts, rows, target, provenance.
pub fn summary(bundle: &Bundle) -> String {
    let m = bundle.manifest();
    let bytes: u64 = m.artifacts.iter().map(|a| a.bytes).sum();
    format!(
        "schema {}, {} spec(s), {} artifact(s) ({bytes} bytes of PTX), {} table row(s); sm_{}, PTX {}, LLVM {}, entkv {}, {}",
        m.schema_version,
        m.specs.len(),
        m.artifacts.len(),
        m.table.len(),
        m.target_sm,
        m.ptx_version,
        m.llvm_version,
        m.entkv_version,
        match &m.tuned_on {
            None => "untuned".to_string(),
            Some(t) => format!("tuned on {}", t.gpu),
        }
    )
}

/// The manifest's header fields, one per line.
pub fn header_text(bundle: &Bundle) -> String {
    let m = bundle.manifest();
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<16}{v}\n"));
    line("schema_version", m.schema_version.to_string());
    line("entkv_version", m.entkv_version.clone());
    line("llvm_version", m.llvm_version.clone());
    line("target", format!("sm_{}, PTX {}", m.target_sm, m.ptx_version));
    line(
        "tuned_on",
        match &m.tuned_on {
            None => "- (untuned)".into(),
            Some(t) => format!("{} (sm_{}, driver {}, CUDA {})", t.gpu, t.sm, t.driver, t.cuda),
        },
    );
    line(
        "created",
        format!("{} (unix {})", m.created_utc, m.created_unix_s),
    );
    for spec in &m.specs {
        line("spec", spec.sketch_tag());
    }
    for a in &m.artifacts {
        line(
            "artifact",
            format!(
                "{} ({} bytes, {} entries, sha256 {})",
                a.file,
                a.bytes,
                a.entries.len(),
                a.sha256
            ),
        );
    }
    s
}

/// The lookup table, one aligned row per line.
pub fn table_text(bundle: &Bundle) -> String {
    let head = ["family", "spec", "bucket", "tile", "source", "entries"];
    let rows: Vec<[String; 6]> = bundle
        .rows()
        .iter()
        .map(|r| {
            [
                r.family.label(r.selector),
                r.spec.clone(),
                r.bucket.to_string(),
                r.tile.tag(),
                r.source.to_string(),
                r.entries.join(", "),
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut push = |cells: [&str; 6]| {
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    push(head);
    for r in &rows {
        push([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]);
    }
    out
}
