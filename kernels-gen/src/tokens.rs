//! Where a decode's tokens live, and scoring them.
//!
//! A score pass walks *iteration indices* `c = 0, 1, …` of one (sequence, KV head). A
//! [`TokenSource`] maps an index to the token's logical position `t` in its sequence (the same
//! for a full walk; through the selected page list for a sparse one) and a position to the
//! element offset of its K/V row (`[batch, kv_heads, n, d]`, or through the block table into the
//! page pools of `entkv_abi::paged`).

use entkv_abi::{DecodeSpec, DenseTile, SPARSE_MIN_RUN};
use entkv_dsl::*;

/// How the cache is laid out and which tokens are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[batch, kv_heads, n, d]`, one length `n` for the batch, every token.
    Contiguous,
    /// Page pools, every token of each sequence.
    Paged { page_size: u32 },
    /// Page pools, the tokens of each KV head's selected pages.
    Selected { page_size: u32 },
}

/// Per-CTA view of a (sequence, KV head)'s tokens.
#[derive(Clone, Copy)]
pub struct TokenSource {
    pub layout: Layout,
    pub head_dim: u32,
    /// Iteration indices to visit (i64): `n`, the sequence length, or selected pages × P.
    pub len: Var,
    /// Tokens in the sequence (i64): validity and ALiBi positions.
    pub seq_len: Var,
    block_table: Option<Buf>,
    sel_pages: Option<Buf>,
    /// `b · max_pages` (i64), the block-table row.
    bt_row: Option<Var>,
    /// `(b · kv_heads + kvh) · max_pages` (i64), the selection row.
    sel_row: Option<Var>,
    /// `(b · kv_heads + kvh)` (i64).
    head_row: Var,
    kv_heads: Var,
    kvh: Var,
}

/// The buffers a layout needs besides K/V.
#[derive(Clone, Copy)]
pub struct PageBufs {
    pub block_table: Buf,
    pub seq_lens: Buf,
    /// Selection (`Layout::Selected` only).
    pub sel: Option<(Buf, Buf)>,
    /// `max_pages`, the block-table and selection row length.
    pub max_pages: Var,
}

impl TokenSource {
    /// `n` is the contiguous length (i64 `Var`) for `Layout::Contiguous`; `pages` the paged
    /// buffers otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        k: &mut KernelBuilder,
        layout: Layout,
        head_dim: u32,
        b: Var,
        kvh: Var,
        kv_heads: Var,
        n: Option<Var>,
        pages: Option<PageBufs>,
    ) -> TokenSource {
        let head_row = k.let_("head_row", b.i64() * kv_heads.i64() + kvh.i64());
        let mut src = TokenSource {
            layout,
            head_dim,
            len: head_row,
            seq_len: head_row,
            block_table: None,
            sel_pages: None,
            bt_row: None,
            sel_row: None,
            head_row,
            kv_heads,
            kvh,
        };
        match layout {
            Layout::Contiguous => {
                let n = n.expect("contiguous layout takes n");
                src.len = n;
                src.seq_len = n;
            }
            Layout::Paged { page_size } | Layout::Selected { page_size } => {
                let p = pages.expect("paged layouts take page buffers");
                src.block_table = Some(p.block_table);
                src.bt_row = Some(k.let_("bt_row", b.i64() * p.max_pages.i64()));
                src.seq_len = k.let_("seq_len", p.seq_lens.at(b).i64());
                src.len = src.seq_len;
                if let Layout::Selected { .. } = layout {
                    let (sel_pages, sel_count) = p.sel.expect("selected layout takes a selection");
                    src.sel_pages = Some(sel_pages);
                    src.sel_row = Some(k.let_("sel_row", head_row * p.max_pages.i64()));
                    src.len = k.let_("sel_len", sel_count.at(head_row).i64() * page_size as i64);
                }
            }
        }
        src
    }

    /// Logical position of iteration index `c` (i64; `c` must be < `len`).
    pub fn position(&self, k: &mut KernelBuilder, c: Expr) -> Var {
        match self.layout {
            Layout::Selected { page_size } => {
                let p = page_size as i64;
                let c = k.let_("c", c);
                let sel = self.sel_pages.expect("selection");
                let lp = sel.at(self.sel_row.expect("selection") + c / p).i64();
                k.let_("t", lp * p + c % p)
            }
            _ => k.let_("t", c),
        }
    }

    /// Logical page of iteration page `ip` (i64): itself for a full walk, the selection's
    /// entry for a sparse one (read only where `active`, else page 0's entry).
    pub fn logical_page(&self, k: &mut KernelBuilder, ip: Var, active: Var) -> Var {
        match self.layout {
            Layout::Selected { .. } => {
                let sel = self.sel_pages.expect("selection");
                let at = self.sel_row.expect("selection") + select(active, ip, 0i64);
                k.let_("lp_sel", sel.at(at).i64())
            }
            _ => ip,
        }
    }

    /// The iteration indices `[c_first, c_end)` split `split` of `splits` walks over a
    /// selection. The plan is sized for the longest possible selection (it is made without
    /// reading the GPU's selection counts), so the chunks this (sequence, KV head) actually has
    /// are cut into runs here: split s takes chunks `[s·r, s·r + r)`. With
    /// `r = ⌈have / splits⌉` a short selection spreads over the splits instead of piling onto
    /// the first ones; r never drops below `SPARSE_MIN_RUN` chunks (unless the plan's own runs
    /// are shorter) because a split's later chunks are pruned by the bound of its earlier ones,
    /// and one-chunk runs leave many more candidates for the finish pass (on page-coherent keys
    /// most splits hold no support at all). `r ≤ chunks_per_split`, so a run fits its split's
    /// workspace.
    pub fn selection_run(
        &self,
        k: &mut KernelBuilder,
        split: Var,
        splits: Var,
        chunks_per_split: Expr,
        chunk_len: u32,
    ) -> (Var, Var) {
        let len_chunks = (self.len + (chunk_len as i64 - 1)) / chunk_len as i64;
        let planned = splits.i64() * chunks_per_split.clone().i64();
        let have = k.let_("have", len_chunks.min(planned).i32());
        let run = (have + (splits.i32() - 1i32)) / splits.i32();
        let run = k.let_("run", run.max(chunks_per_split.min(SPARSE_MIN_RUN as i32)));
        let c_lo = k.let_("c_lo", (split.i32() * run).i64());
        (
            k.let_("c_first", c_lo * chunk_len as i64),
            k.let_("c_end", (c_lo + run.i64()).min(have.i64()) * chunk_len as i64),
        )
    }

    /// Whether iteration index `c` is a token of the sequence.
    pub fn valid(&self, c: Var, t: Var) -> Expr {
        match self.layout {
            Layout::Selected { .. } => c.lt(self.len).and(t.lt(self.seq_len)),
            _ => c.lt(self.len),
        }
    }

    /// Element offset of the min row of logical page `lp`'s metadata block (`meta_bounds`
    /// layout: `[num_pages, kv_heads, 2, d]`); the max row follows at `+ d`.
    pub fn meta_row(&self, k: &mut KernelBuilder, lp: Expr) -> Var {
        let d = self.head_dim as i64;
        let bt = self.block_table.expect("paged layout");
        let page = bt.at(self.bt_row.expect("block table row") + lp).i64();
        k.let_("meta_row", (page * self.kv_heads.i64() + self.kvh.i64()) * 2 * d)
    }

    /// Element offset of the first element of token `t`'s K/V row.
    pub fn row(&self, k: &mut KernelBuilder, t: Expr) -> Var {
        let d = self.head_dim as i64;
        match self.layout {
            Layout::Contiguous => k.let_("row", (self.head_row * self.len + t) * d),
            Layout::Paged { .. } | Layout::Selected { .. } => {
                let t = k.let_("tp", t);
                let page = self.phys_page(k, t.e());
                self.row_in_page(k, page.e(), t.e())
            }
        }
    }

    /// The pool page (i32) holding position `t` (an integer) of this sequence: its block-table
    /// entry. A paged layout only.
    pub fn phys_page(&self, k: &mut KernelBuilder, t: Expr) -> Var {
        let p = self.page_size().expect("a paged layout");
        let bt = self.block_table.expect("block table");
        // Positions are ≥ 0, so a shift divides (a signed division by p costs five 64-bit ops).
        let page = (t >> p.trailing_zeros() as i64).i64();
        k.let_("phys_page", bt.at(self.bt_row.expect("block table row") + page))
    }

    /// Element offset of position `t`'s K/V row (i64) given its pool page `page` (i32, from
    /// [`TokenSource::phys_page`]). A paged layout only.
    fn row_in_page(&self, k: &mut KernelBuilder, page: Expr, t: Expr) -> Var {
        let p = self.page_size().expect("a paged layout") as i64;
        k.let_("row", self.page_row(page.i64(), p, t & (p - 1)))
    }

    fn page_size(&self) -> Option<u32> {
        match self.layout {
            Layout::Paged { page_size } | Layout::Selected { page_size } => Some(page_size),
            Layout::Contiguous => None,
        }
    }

    /// Element offset of row `slot` (i64) of this KV head's block in pool page `page` (i64) of
    /// `p` rows: the pool is `[num_pages, kv_heads, page_size, head_dim]`.
    fn page_row(&self, page: Expr, p: i64, slot: Expr) -> Expr {
        (self.page_block(page) * p + slot) * self.head_dim as i64
    }

    /// This KV head's block of pool page `page` (an integer): `page·kv_heads + kvh` (i64), the
    /// index of its metadata and sketch blocks.
    pub fn page_block(&self, page: Expr) -> Expr {
        page.i64() * self.kv_heads.i64() + self.kvh.i64()
    }
}

/// One chunk of a selection's pages, looked up once per chunk into shared memory: the
/// logical and the physical page of each. A token's K row and position then cost a
/// shared-memory read instead of two dependent global loads per token, and the score pass
/// can look a candidate's position up again when it appends it instead of keeping every
/// token's position in registers (80 → 74 registers at 256 threads × 16 tokens: three CTAs
/// per SM instead of two).
#[derive(Clone, Copy)]
pub struct ChunkPages {
    phys: Buf,
    logical: Buf,
    /// Pages a chunk spans (`chunk_len / P`, or 1 when the chunk lies inside a page).
    pages: u32,
    page_size: u32,
}

impl TokenSource {
    /// The ALiBi term `(α−1)·slope·(t − (len − 1))` of token `t`, given the head's
    /// `slope` times (α−1) ([`slope`]); none without ALiBi (adding 0 is not free: `-0 + 0` is
    /// `+0`).
    pub(crate) fn alibi_term(&self, slope: Option<Var>, t: Var) -> Option<Expr> {
        slope.map(|s| s * (t - (self.seq_len - 1i64)).f32())
    }

    /// Shared memory for [`TokenSource::stage`]: for a selection whose chunks cover whole pages
    /// or lie inside one (`None` otherwise: a chunk of 48 tokens over pages of 32 starts
    /// inside a page, and its tokens look their pages up one by one).
    pub fn chunk_pages(&self, k: &mut KernelBuilder, chunk_len: u32) -> Option<ChunkPages> {
        let Layout::Selected { page_size } = self.layout else {
            return None;
        };
        if chunk_len % page_size != 0 && page_size % chunk_len != 0 {
            return None;
        }
        let pages = (chunk_len / page_size).max(1);
        Some(ChunkPages {
            phys: k.shared("chunk_phys", Scalar::I32, pages),
            logical: k.shared("chunk_lp", Scalar::I32, pages),
            pages,
            page_size,
        })
    }

    /// Look up the pages of the chunk starting at iteration index `c0` (< `len`). Every
    /// thread of the block calls this; it synchronises before (the previous chunk's readers
    /// are done) and after. The same lookup as [`TokenSource::fetch_logical`],
    /// [`TokenSource::fetch_physical`] and [`TokenSource::stage`] in a row, written as one
    /// strided loop, as before the lookahead existed: the walks without lookahead keep this
    /// code, whose registers and spills are known (results/2026-11-30-lookahead/
    /// ptxas-registers.txt).
    pub fn stage_at(&self, k: &mut KernelBuilder, cp: &ChunkPages, c0: Var, threads: u32) {
        let p = cp.page_size as i64;
        k.barrier();
        let tid = k.thread_idx();
        let first = k.let_("stage_first", c0 / p);
        k.for_("sp", tid.i32(), cp.pages as i32, threads as i32, |k, i| {
            let i = k.let_("stage_i", i);
            let ip = k.let_("stage_ip", first + i.i64());
            // Pages past the end are never read (a token past it reads its chunk's first page).
            k.if_((ip * p).lt(self.len), |k| {
                let sel = self.sel_pages.expect("selection");
                let lp = k.let_("stage_lp", sel.at(self.sel_row.expect("selection") + ip));
                let bt = self.block_table.expect("block table");
                let phys = k.let_(
                    "stage_phys",
                    bt.at(self.bt_row.expect("block table row") + lp.i64()),
                );
                k.store(cp.phys, i, phys);
                k.store(cp.logical, i, lp);
            });
        });
        k.barrier();
    }

    /// Registers for [`PageLookahead`]: this thread's share of a chunk's pages.
    pub fn lookahead(&self, k: &mut KernelBuilder, cp: &ChunkPages, threads: u32) -> PageLookahead {
        let slots = cp.pages.div_ceil(threads);
        let mut regs = || (0..slots).map(|_| k.let_typed("la", Scalar::I32, 0)).collect();
        PageLookahead {
            logical: regs(),
            phys: regs(),
            threads,
        }
    }

    /// Issue the loads of the logical pages (`sel_pages`) of the chunk starting at iteration
    /// index `c0` into `la`. Pages at or past `len` are left as they are (never read).
    pub fn fetch_logical(&self, k: &mut KernelBuilder, cp: &ChunkPages, la: &PageLookahead, c0: Expr) {
        let sel = self.sel_pages.expect("selection");
        let row = self.sel_row.expect("selection");
        self.each_page(k, cp, la, c0, |k, j, ip| {
            k.assign(la.logical[j], sel.at(row + ip));
        });
    }

    /// Issue the block-table loads of the pages [`TokenSource::fetch_logical`] fetched for the
    /// same `c0`.
    pub fn fetch_physical(&self, k: &mut KernelBuilder, cp: &ChunkPages, la: &PageLookahead, c0: Expr) {
        let bt = self.block_table.expect("block table");
        let row = self.bt_row.expect("block table row");
        self.each_page(k, cp, la, c0, |k, j, _| {
            k.assign(la.phys[j], bt.at(row + la.logical[j].i64()));
        });
    }

    /// Make the pages fetched into `la` the staged chunk. Every thread of the block calls
    /// this; it synchronises before (the previous chunk's readers are done) and after.
    pub fn stage(&self, k: &mut KernelBuilder, cp: &ChunkPages, la: &PageLookahead) {
        k.barrier();
        let tid = k.let_("stage_tid", k.thread_idx());
        for j in 0..la.logical.len() {
            let i = k.let_("stage_i", tid + (j as u32 * la.threads));
            k.if_(i.lt(cp.pages), |k| {
                k.store(cp.phys, i, la.phys[j]);
                k.store(cp.logical, i, la.logical[j]);
            });
        }
        k.barrier();
    }

    /// `f(k, j, ip)` for each page `ip` (i64, an index into the selection) of the chunk at `c0`
    /// that this thread's slot `j` holds and that lies before `len`.
    fn each_page(
        &self,
        k: &mut KernelBuilder,
        cp: &ChunkPages,
        la: &PageLookahead,
        c0: Expr,
        f: impl Fn(&mut KernelBuilder, usize, Var),
    ) {
        let p = cp.page_size as i64;
        let tid = k.let_("la_tid", k.thread_idx());
        let first = k.let_("la_first", c0 / p);
        for j in 0..la.logical.len() {
            let i = k.let_("la_i", tid + (j as u32 * la.threads));
            let ip = k.let_("la_ip", first + i.i64());
            k.if_(i.lt(cp.pages).and((ip * p).lt(self.len)), |k| f(k, j, ip));
        }
    }

    /// Logical position (i64) of iteration index `c`, `off = c − c0` into the chunk staged at
    /// `c0` (u32).
    pub fn staged_position(&self, k: &mut KernelBuilder, cp: &ChunkPages, c: Var, off: Var) -> Var {
        let p = cp.page_size as i64;
        let lp = cp.logical.at(cp.index(off)).i64();
        // c ≥ 0, so its remainder by the power of two P is a mask.
        k.let_("t", lp * p + (c & (p - 1)))
    }

    /// Element offset of the K/V row of iteration index `c`, `off = c − c0` into the chunk
    /// staged at `c0` (u32).
    pub fn staged_row(&self, k: &mut KernelBuilder, cp: &ChunkPages, c: Var, off: Var) -> Var {
        let p = cp.page_size as i64;
        let page = cp.phys.at(cp.index(off)).i64();
        k.let_("row", self.page_row(page, p, c & (p - 1)))
    }
}

/// The pages of the next chunk, held in registers while the current one is scored: its
/// `sel_pages` loads are issued when the chunk starts and its block-table loads after the
/// chunk's K rows arrived, so neither dependent load stalls the next chunk's start.
pub struct PageLookahead {
    logical: Vec<Var>,
    phys: Vec<Var>,
    threads: u32,
}

impl ChunkPages {
    /// The staged page of chunk offset `off`: a chunk starts on a page boundary when it spans
    /// several pages, and lies inside one page otherwise.
    fn index(&self, off: Var) -> Expr {
        if self.pages > 1 {
            off / self.page_size
        } else {
            u32c(0)
        }
    }
}

/// Query registers: `q'_h = q_h·(α−1)/√d` (f32), this lane's slice of the row, for every head
/// of the GQA group, plus the heads' ALiBi slopes pre-multiplied by (α−1).
pub struct QueryRegs {
    pub q: Vec<Vec<Var>>,
    /// A tensor-core pass's q ([`load_queries_mma`]) instead of `q`.
    pub mma: Option<MmaQuery>,
    pub alibi: Vec<Option<Var>>,
    /// Any dimension of head `g`'s q' (read from memory, for code that needs another slice
    /// than this lane's registers).
    pub full: Vec<QueryRow>,
}

/// One query head's row in memory, scaled to q' on read.
#[derive(Clone, Copy)]
pub struct QueryRow {
    q: Buf,
    row: Var,
    scale: f64,
}

impl QueryRow {
    /// `q'[dim]` (f32).
    pub fn at(&self, dim: impl IntoExpr) -> Expr {
        self.q.at(self.row + dim.into_expr(Some(Scalar::U32)).i64()).f32() * self.scale
    }

    /// `q'` of dimensions `first .. first + n` (f32) with loads of up to 16 bytes: `first` and
    /// `n` must be multiples of the load width (`min(n, 16 bytes)`), so every load is aligned.
    pub fn slice(&self, k: &mut KernelBuilder, first: impl IntoExpr, n: u32) -> Vec<Var> {
        let vec = (16 / self.q.elem.size_bytes()).min(n);
        assert!(n % vec == 0, "q' slice of {n} dimensions in loads of {vec}");
        let at = k.let_("q_at", self.row + first.into_expr(Some(Scalar::U32)).i64());
        let raw: Vec<Var> = (0..n / vec)
            .flat_map(|j| k.load_vec("qv", self.q, at + (j * vec) as i64, vec))
            .collect();
        raw.into_iter()
            .map(|x| k.let_("qs", x.f32() * self.scale))
            .collect()
    }
}

/// Lane geometry of a score pass: `lanes` lanes share a token, lane `sub` multiplies
/// dimensions `[sub·dims, (sub+1)·dims)` with `vec`-element loads.
#[derive(Clone, Copy)]
pub struct Lanes {
    pub lanes: u32,
    pub dims: u32,
    pub vec: u32,
    pub sub: Var,
    pub tgroup: Var,
    pub token_groups: u32,
}

impl Lanes {
    pub fn new(k: &mut KernelBuilder, spec: &DecodeSpec, tile: &DenseTile) -> Lanes {
        let lanes = tile.lanes_per_token;
        let dims = spec.head_dim / lanes;
        let tid = k.thread_idx();
        Lanes {
            lanes,
            dims,
            vec: dims.min(16 / spec.kv_dtype.size_bytes()),
            sub: k.let_("sub", tid.clone() % lanes),
            tgroup: k.let_("tgroup", tid / lanes),
            token_groups: tile.threads / lanes,
        }
    }
}

/// Load the group's queries (and slopes) into registers.
#[allow(clippy::too_many_arguments)]
pub fn load_queries(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    lanes: &Lanes,
    q: Buf,
    alibi: Option<Buf>,
    b: Var,
    kvh: Var,
    q_heads: Var,
) -> QueryRegs {
    let mut regs = QueryRegs {
        q: Vec::new(),
        mma: None,
        alibi: Vec::new(),
        full: Vec::new(),
    };
    for g in 0..spec.group {
        let (full, h) = query_row(k, spec, q, b, kvh, q_heads, g);
        regs.q.push(full.slice(k, lanes.sub * lanes.dims, lanes.dims));
        regs.full.push(full);
        regs.alibi.push(slope(k, spec, alibi, h));
    }
    regs
}

/// Head `g` of the group: its q row (scaled to q' on read) and its query-head index `h`.
fn query_row(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    q: Buf,
    b: Var,
    kvh: Var,
    q_heads: Var,
    g: u32,
) -> (QueryRow, Var) {
    let h = k.let_("h", kvh * spec.group + g);
    let head = k.let_("qhead", (b * q_heads + h).i64());
    let row = k.let_("q_row", head * spec.head_dim as i64);
    let scale = spec.z_scale();
    (QueryRow { q, row, scale }, h)
}

/// Query head `h`'s ALiBi slope times (α−1), when the kernel takes slopes.
pub(crate) fn slope(k: &mut KernelBuilder, spec: &DecodeSpec, alibi: Option<Buf>, h: Var) -> Option<Var> {
    let a1 = spec.alpha.value() - 1.0;
    alibi.map(|s| k.let_("slope", s.at(h) * a1))
}

/// The group's raw q (f16/bf16, unscaled) as the B operand of a warp's `m16n8k16` products
/// ([`score_chunk_mma`]): column `n` of B is head `n` of the group (zero past the group), and
/// each product's 16 rows are 16 of the d dimensions, in the order [`score_chunk_mma`] lays K
/// out: lane `(g, t)` = `(lane / 4, lane % 4)` holds dimensions `[t·d/4, (t+1)·d/4)` of head
/// `g`, four a product.
pub struct MmaQuery {
    /// B's four elements of this lane, one product (16 dimensions) each.
    pub b: Vec<[Var; 4]>,
    /// `(α−1)/√d`: a dot product of raw q times this is in entmax space.
    pub scale: f64,
}

/// [`load_queries`] for a tensor-core pass: each lane loads the d/4 dimensions of one head that
/// B needs from it ([`MmaQuery`]); the slopes as in [`load_queries`].
#[allow(clippy::too_many_arguments)]
pub fn load_queries_mma(
    k: &mut KernelBuilder,
    spec: &DecodeSpec,
    q: Buf,
    alibi: Option<Buf>,
    b: Var,
    kvh: Var,
    q_heads: Var,
) -> QueryRegs {
    let d = spec.head_dim;
    let slice = d / 4;
    let lane = k.let_("q_lane", k.lane());
    let g = k.let_("q_col", lane >> 2u32);
    let t = k.let_("q_quarter", lane & 3u32);
    // Columns past the group load the group's last head (in bounds) and are zeroed.
    let head = k.let_("q_head", g.min(spec.group - 1));
    let row = k.let_("q_row", (b * q_heads + kvh * spec.group + head).i64() * d as i64);
    let vec = slice.min(16 / q.elem.size_bytes());
    let at = k.let_("q_at", row + (t * slice).i64());
    let raw: Vec<Var> = (0..slice / vec)
        .flat_map(|j| k.load_vec("qm", q, at + (j * vec) as i64, vec))
        .collect();
    let in_group = k.let_("q_in_group", g.lt(spec.group));
    let zero = lit(q.elem, 0.0);
    let b_frags = raw
        .chunks(4)
        .map(|c| [0, 1, 2, 3].map(|i| k.let_("qb", select(in_group, c[i], zero.clone()))))
        .collect();
    let mut regs = QueryRegs {
        q: Vec::new(),
        mma: Some(MmaQuery {
            b: b_frags,
            scale: spec.z_scale(),
        }),
        alibi: Vec::new(),
        full: Vec::new(),
    };
    for g in 0..spec.group {
        let (full, h) = query_row(k, spec, q, b, kvh, q_heads, g);
        regs.full.push(full);
        regs.alibi.push(slope(k, spec, alibi, h));
    }
    regs
}

/// Offset (u32) of this lane group's token `r` in its chunk.
pub fn chunk_offset(lanes: &Lanes, r: u32) -> Expr {
    lanes.tgroup + r * lanes.token_groups
}

/// A token's entmax-space score from its scaled dot product `dot` (q'·k): plus the ALiBi term
/// `(α−1)·slope·(t − (len − 1))` when the head has a slope, −∞ when the token is not `valid`.
pub(crate) fn entmax_score(
    k: &mut KernelBuilder,
    src: &TokenSource,
    slope: Option<Var>,
    dot: Expr,
    t: Var,
    valid: Var,
) -> Var {
    let score = match src.alibi_term(slope, t) {
        Some(a) => dot + a,
        None => dot,
    };
    k.let_("z", select(valid, score, f32c(f64::NEG_INFINITY)))
}

/// This lane group's token `r` of the chunk at `c0`: its position (i64), the element offset of
/// its K/V row, and whether it is a token of the walk. An index past the walk reads a token
/// that exists (the chunk's first when its pages are staged, the sequence's first otherwise),
/// so no load leaves the sequence.
fn token_row(
    k: &mut KernelBuilder,
    lanes: &Lanes,
    src: &TokenSource,
    c0: Var,
    pages: Option<&ChunkPages>,
    r: u32,
) -> (Var, Var, Var) {
    let off = k.let_("off", chunk_offset(lanes, r));
    let c = k.let_("ci", c0 + off.i64());
    let inside = k.let_("inside", c.lt(src.len));
    let (t, row) = match pages {
        Some(cp) => {
            let c_load = k.let_("c_load", select(inside, c, c0));
            let off_load = k.let_("off_load", select(inside, off, 0u32));
            let t = src.staged_position(k, cp, c_load, off_load);
            (t, src.staged_row(k, cp, c_load, off_load))
        }
        None => {
            let c_load = k.let_("c_load", select(inside, c, 0i64));
            let t = src.position(k, c_load.e());
            (t, src.row(k, t.e()))
        }
    };
    (t, row, k.let_("valid", src.valid(c, t)))
}

/// A warp's dot products on the tensor cores ([`DenseTile::mma`], one lane a token, q from
/// [`load_queries_mma`]): the warp's 32 tokens (lane `l` owns token `l`) are scored as two
/// `m16n8k16` products per 16 dimensions: tokens 0–15 and 16–31 are the rows of two A tiles, the
/// group's heads the columns of B. Lane `(g, t)` loads dimensions `[t·d/4, (t+1)·d/4)` of tokens
/// `g`, `g + 8` (tile 0) and `16 + g`, `24 + g` (tile 1), each a 16-byte-aligned run, and feeds A
/// four of them a product: A's columns `2t, 2t+1, 2t+8, 2t+9` are its dimensions `4j … 4j+3` in
/// product `j` (the dot product does not care which dimension is which column, as long as q's
/// rows of B follow: they do, by [`MmaQuery`]). The rows' offsets come from their owners, two
/// 32-bit shuffles each; D then holds token `g` (and `g + 8`) × heads `2t, 2t+1` in lane
/// `(g, t)`, and four shuffles a head hand every lane its own token's dot product.
pub struct WarpMma {
    g: Var,
    quarter: Var,
    /// Which of the holder's D elements is this lane's token: tile (token ≥ 16), row half
    /// (token mod 16 ≥ 8); its holder for head h is lane 4·(lane mod 8) + h/2.
    tile1: Var,
    half1: Var,
    holder: Var,
    slice: u32,
}

impl WarpMma {
    pub fn new(k: &mut KernelBuilder, head_dim: u32) -> WarpMma {
        let lane = k.let_("lane", k.lane());
        let slice = head_dim / 4;
        WarpMma {
            g: k.let_("mma_g", lane >> 2u32),
            quarter: k.let_("mma_t", (lane & 3u32) * slice),
            tile1: k.let_("mma_tile1", lane.ge(16u32)),
            half1: k.let_("mma_half1", (lane & 8u32).ne_(0u32)),
            holder: k.let_("mma_holder", (lane & 7u32) * 4u32),
            slice,
        }
    }

    /// `q'·k` of this lane's token (K row at element `row`, i64; every lane of the warp calls
    /// this, each with a row in the pool) for each of `heads` heads, handed to `per_head(k, h,
    /// dot)` as soon as it is formed. With `staged` the four rows' quarters are loaded one
    /// 16-byte vector at a time, each consumed by its products before the next loads (16
    /// registers of K in flight instead of d/2: for a pass whose registers are spent elsewhere);
    /// otherwise all of them first.
    #[allow(clippy::too_many_arguments)]
    pub fn row_dots(
        &self,
        k: &mut KernelBuilder,
        keys: Buf,
        mq: &MmaQuery,
        heads: usize,
        row: Var,
        staged: bool,
        mut per_head: impl FnMut(&mut KernelBuilder, usize, Expr),
    ) {
        let vec = self.slice.min(16 / keys.elem.size_bytes());
        let row_lo = k.let_("row_lo", row.cast(Scalar::U32));
        let row_hi = k.let_("row_hi", (row >> 32i64).cast(Scalar::U32));
        // Rows g, g+8, 16+g, 24+g of this warp's 32 tokens, each this lane's quarter of d.
        let row_at = |k: &mut KernelBuilder, i: u32| {
            let from = k.let_("row_from", self.g + 8 * i);
            let lo = k.shuffle(ShuffleMode::Idx, row_lo, from);
            let hi = k.shuffle(ShuffleMode::Idx, row_hi, from);
            k.let_("row_at", (hi.i64() << 32i64 | lo.i64()) + self.quarter.i64())
        };
        let load = |k: &mut KernelBuilder, at: Var, j: u32| k.load_vec("k", keys, at + (j * vec) as i64, vec);
        // One product of tile `tl` (rows `2tl`, `2tl + 1` of `parts`) from element `base` of each
        // row's slice: A's columns 2t, 2t+1, 2t+8, 2t+9 are four consecutive dimensions.
        let product = |k: &mut KernelBuilder,
                       parts: &[Vec<Var>],
                       tl: usize,
                       base: usize,
                       b: &[Var; 4],
                       acc: &[Expr]| {
            let (lo, hi) = (&parts[2 * tl], &parts[2 * tl + 1]);
            let x = |v: &Vec<Var>, e: usize| v[base + e].e();
            let a = [
                x(lo, 0),
                x(lo, 1),
                x(hi, 0),
                x(hi, 1),
                x(lo, 2),
                x(lo, 3),
                x(hi, 2),
                x(hi, 3),
            ];
            let b: Vec<Expr> = b.iter().map(|v| v.e()).collect();
            k.mma(&a, &b, acc).iter().map(|v| v.e()).collect::<Vec<Expr>>()
        };
        // D of tiles 0 and 1.
        let mut acc: Vec<Vec<Expr>> = vec![vec![f32c(0.0); 4]; 2];
        if staged {
            let at: Vec<Var> = (0..4).map(|i| row_at(k, i)).collect();
            let mut parts: Vec<Vec<Var>> = vec![Vec::new(); 4];
            for (j, b) in mq.b.iter().enumerate() {
                // Product j takes elements 4j … 4j+3 of each row's slice.
                if (4 * j) % vec as usize == 0 {
                    for (part, &at) in parts.iter_mut().zip(&at) {
                        *part = load(k, at, (4 * j) as u32 / vec);
                    }
                }
                for (tl, acc) in acc.iter_mut().enumerate() {
                    *acc = product(k, &parts, tl, (4 * j) % vec as usize, b, acc);
                }
            }
        } else {
            let parts: Vec<Vec<Var>> = (0..4)
                .map(|i| {
                    let at = row_at(k, i);
                    (0..self.slice / vec).flat_map(|j| load(k, at, j)).collect()
                })
                .collect();
            for (tl, acc) in acc.iter_mut().enumerate() {
                for (j, b) in mq.b.iter().enumerate() {
                    *acc = product(k, &parts, tl, 4 * j, b, acc);
                }
            }
        }
        let dots: Vec<[Var; 4]> = acc
            .into_iter()
            .map(|acc| {
                let acc: Vec<Var> = acc.into_iter().map(|e| k.let_("d", e)).collect();
                [acc[0], acc[1], acc[2], acc[3]]
            })
            .collect();
        for h in 0..heads {
            let from = k.let_("dot_from", self.holder + (h as u32 / 2));
            let e = h % 2;
            let got: Vec<Var> = [dots[0][e], dots[0][2 + e], dots[1][e], dots[1][2 + e]]
                .into_iter()
                .map(|v| k.shuffle(ShuffleMode::Idx, v, from))
                .collect();
            let dot = select(
                self.tile1,
                select(self.half1, got[3], got[2]),
                select(self.half1, got[1], got[0]),
            ) * mq.scale;
            per_head(k, h, dot);
        }
    }
}

/// [`score_chunk`] on the tensor cores ([`WarpMma`]): in each round `r` a warp scores its 32
/// tokens (lane `l` owns token `l`, as in [`chunk_offset`]).
#[allow(clippy::too_many_arguments)]
pub fn score_chunk_mma(
    k: &mut KernelBuilder,
    tile: &DenseTile,
    lanes: &Lanes,
    src: &TokenSource,
    keys: Buf,
    q: &QueryRegs,
    c0: Var,
    pages: Option<&ChunkPages>,
) -> (Vec<Vec<Var>>, Vec<Var>) {
    let mq = q
        .mma
        .as_ref()
        .expect("a tensor-core pass loads q with load_queries_mma");
    let heads = q.alibi.len();
    let warp = WarpMma::new(k, src.head_dim);
    let mut z: Vec<Vec<Var>> = vec![Vec::new(); heads];
    let mut positions = Vec::new();
    for r in 0..tile.tokens_per_group {
        let (t, row, valid) = token_row(k, lanes, src, c0, pages, r);
        warp.row_dots(k, keys, mq, heads, row, false, |k, h, dot| {
            z[h].push(entmax_score(k, src, q.alibi[h], dot, t, valid));
        });
        positions.push(t);
    }
    (z, positions)
}

/// Exact entmax-space scores of one chunk of iteration indices `[c0, c0 + chunk_len)`:
/// `z[g][r]` (−∞ where invalid) and the positions (i64), with the chunk's pages from `pages`
/// when staged. All K loads of the chunk are issued before the first multiply.
#[allow(clippy::too_many_arguments)]
pub fn score_chunk(
    k: &mut KernelBuilder,
    tile: &DenseTile,
    lanes: &Lanes,
    src: &TokenSource,
    keys: Buf,
    q: &QueryRegs,
    c0: Var,
    pages: Option<&ChunkPages>,
) -> (Vec<Vec<Var>>, Vec<Var>) {
    let mut rows = Vec::new();
    for r in 0..tile.tokens_per_group {
        let (t, row, valid) = token_row(k, lanes, src, c0, pages, r);
        let lane_off = (lanes.sub * lanes.dims).i64();
        let mut kv = Vec::new();
        for part in 0..lanes.dims / lanes.vec {
            kv.extend(k.load_vec(
                "k",
                keys,
                row + lane_off.clone() + (part * lanes.vec) as i64,
                lanes.vec,
            ));
        }
        rows.push((t, valid, kv));
    }
    let mut z: Vec<Vec<Var>> = vec![Vec::new(); q.q.len()];
    let mut positions = Vec::new();
    for (t, valid, kv) in rows {
        let partial: Vec<(Reduce, Expr)> =
            q.q.iter()
                .map(|qg| {
                    let dot = kv
                        .iter()
                        .zip(qg)
                        .fold(f32c(0.0), |acc, (kx, qx)| fma(*qx, kx.f32(), acc));
                    (Reduce::Sum, dot)
                })
                .collect();
        let dots = k.warp_allreduce_width(&partial, lanes.lanes);
        for (g, dot) in dots.iter().enumerate() {
            z[g].push(entmax_score(k, src, q.alibi[g], dot.e(), t, valid));
        }
        positions.push(t);
    }
    (z, positions)
}
