/*
 * entkv.h — C API of entkv's α-entmax sparse-decoding engine (libentkv.so).
 *
 * C99. Written by hand; must match capi/src/{lib,error,types}.rs exactly (a test in
 * capi/tests compiles this header and compares every struct size and field offset with Rust).
 *
 * Usage
 * -----
 *   entkv_bundle *bundle;  entkv_decoder *dec;  entkv_step *step;
 *   CHECK(entkv_bundle_open("kernels.entkvb", &bundle));
 *   entkv_problem p = {0};
 *   p.alpha = 1.5; p.head_dim = 32; p.page_size = 16; p.q_heads = 24; p.kv_heads = 24;
 *   p.kv_dtype = ENTKV_F16; p.method = ENTKV_AUTO;
 *   p.max_batch = 8; p.num_pages = 65536; p.max_pages = 8192;
 *   CHECK(entkv_decoder_create(bundle, 0, &p, &dec));
 *   entkv_bundle_free(bundle);                    // the decoder keeps its own reference
 *   entkv_decoder_workspace_size(dec, &ws_bytes);  // allocate once, 256-byte aligned
 *   entkv_decoder_metadata_size(dec, &md_bytes);   // allocate once, kept across steps
 *   // after prefill (K/V written to the pools):
 *   CHECK(entkv_decoder_build_metadata(dec, stream, lens, B, table, B * max_pages,
 *                                      &k_pool, md_ptr, md_bytes));
 *   // per batch shape (host copies of lengths and block table):
 *   CHECK(entkv_decoder_plan(dec, lens, B, table, B * max_pages, &step));
 *   // per decode step, on the engine's stream:
 *   CHECK(entkv_decoder_run(dec, step, stream, &buffers));   // writes out, tau, support
 *   // after K/V of the next token were written and the lengths incremented (re-plan first
 *   // if a length now exceeds what the step was planned for):
 *   CHECK(entkv_decoder_append(dec, step, stream, &buffers));
 *   entkv_step_free(step); entkv_decoder_free(dec);
 *   // where CHECK(x) prints entkv_status_name(x) and entkv_last_error() when x != ENTKV_OK.
 *
 * From PyTorch: pointers are tensor.data_ptr(), strides tensor.stride(), and the stream is
 * torch.cuda.current_stream().cuda_stream (see examples/python/entkv_decode.py).
 *
 * Conventions
 * -----------
 * - Every function that can fail returns an entkv_status; ENTKV_OK (0) is success. On failure
 *   entkv_last_error() holds a message naming the problem (thread-local), and out-handles are
 *   set to NULL.
 * - Handles are opaque; free them with their *_free function (NULL is a no-op).
 * - Queries q are raw (the kernels apply (α−1)/√d); τ in the `tau` slot is in entmax space,
 *   z_j = (α−1)·(q·k_j/√d + ALiBi bias), p_j = [z_j − τ]_+^(1/(α−1)).
 * - Device work is asynchronous on the caller's stream, uses the device's primary context
 *   (shared with the CUDA runtime and PyTorch), allocates nothing and never waits on the host
 *   (except the page-list copy of build_metadata). run/append can be captured in CUDA graphs.
 * - A decoder may be used from several threads; the calls take it by const pointer. Running
 *   two steps concurrently needs two workspaces.
 */
#ifndef ENTKV_H
#define ENTKV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------- */
/* Status codes                                                                              */
/* ---------------------------------------------------------------------------------------- */

/** Result of every fallible call. */
typedef int32_t entkv_status;

/** Success. */
#define ENTKV_OK 0
/** A required pointer argument was NULL (the message names it). */
#define ENTKV_ERR_NULL_ARGUMENT 1
/** Malformed argument: unknown enum code, string not UTF-8, unknown workspace slot, negative
 *  device ordinal. */
#define ENTKV_ERR_INVALID_ARGUMENT 2
/** Unsupported problem: α, head dim, page size, GQA group, dtype, sketch width, heads,
 *  capacity or top-k budget. */
#define ENTKV_ERR_SPEC 3
/** The bundle cannot be read or verified, or has no kernel for the problem. */
#define ENTKV_ERR_BUNDLE 4
/** No usable GPU: no driver, no device with that ordinal, a device older than the bundle's
 *  target, or a driver that fails to start. */
#define ENTKV_ERR_DEVICE 5
/** Sequence lengths or block table do not fit the decoder; empty or too large batch. */
#define ENTKV_ERR_BATCH 6
/** A device tensor or region is missing or has the wrong dtype, shape, strides, alignment,
 *  or a NULL pointer. */
#define ENTKV_ERR_TENSOR 7
/** The step was planned by another decoder. */
#define ENTKV_ERR_WRONG_STEP 8
/** A CUDA driver call, module load or kernel launch failed. */
#define ENTKV_ERR_RUNTIME 9
/** Internal inconsistency (a bug, or a bundle that contradicts itself). */
#define ENTKV_ERR_INTERNAL 10
/** A panic inside entkv was caught at the boundary (a bug). */
#define ENTKV_ERR_PANIC 11

/* ---------------------------------------------------------------------------------------- */
/* Enum codes                                                                                */
/* ---------------------------------------------------------------------------------------- */

/** Element types (entkv_tensor.dtype, entkv_problem.kv_dtype). */
#define ENTKV_F16 0
#define ENTKV_BF16 1
#define ENTKV_F32 2
#define ENTKV_I32 3

/** Decode methods (entkv_problem.method). */
/** Entmax over every page. */
#define ENTKV_DENSE 0
/** Entmax over the topk_budget_pages pages with the largest box bounds, plus the last page. */
#define ENTKV_TOPK 1
/** Entmax over the pages the Gaussian-aware rule keeps. */
#define ENTKV_GAUSSIAN 2
/** Entmax over a sketch-certified superset of the support: equal to ENTKV_DENSE. */
#define ENTKV_CERTIFIED 3
/** Per step, the faster exact method (dense or certified) by the bundle's tuned timings. */
#define ENTKV_AUTO 4
/** ENTKV_CERTIFIED after page pruning: exact too; wins where pages cluster. */
#define ENTKV_CERTIFIED_PRUNED 5

/** Flags of entkv_decoder_create_ex. */
/** Check the device's lengths and page ids in every step: each run and append starts with a
 *  small launch that copies them into the workspace clamped into range (every other launch
 *  reads the copies), so a bad value gives a wrong output instead of an out-of-bounds access,
 *  and entkv_decoder_device_id_faults names it. Needs a bundle of schema 15 or newer. */
#define ENTKV_CHECK_DEVICE_IDS 1u

/* ---------------------------------------------------------------------------------------- */
/* Opaque handles                                                                            */
/* ---------------------------------------------------------------------------------------- */

/** A verified kernel bundle. */
typedef struct entkv_bundle entkv_bundle;
/** A decoder for one problem on one GPU. */
typedef struct entkv_decoder entkv_decoder;
/** A planned step (one batch shape) with its kernels loaded. */
typedef struct entkv_step entkv_step;

/* ---------------------------------------------------------------------------------------- */
/* Plain structs                                                                             */
/* ---------------------------------------------------------------------------------------- */

/** What a decoder is created for. 56 bytes. */
typedef struct {
    double alpha;               /**< entmax α: finite, > 1 (closed forms for 2, 1.5, 4/3) */
    uint32_t head_dim;          /**< 32, 64 or 128 */
    uint32_t page_size;         /**< tokens per page: 16, 32 or 64 */
    uint32_t q_heads;           /**< query heads: kv_heads × group, group 1, 2, 3, 4 or 8 */
    uint32_t kv_heads;          /**< KV heads */
    int32_t kv_dtype;           /**< ENTKV_F16, ENTKV_BF16 (or ENTKV_F32): K, V and q */
    int32_t alibi;              /**< 0 or 1: steps take per-query-head ALiBi slopes */
    uint32_t sketch_bits;       /**< key sketch of the certified path: 4 or 8; 0 = 4 */
    int32_t method;             /**< ENTKV_DENSE … ENTKV_AUTO */
    uint32_t topk_budget_pages; /**< ENTKV_TOPK: pages kept besides the last (1 … 2^31 − 1); else ignored */
    uint32_t max_batch;         /**< most sequences in one step (≤ 65535) */
    uint32_t num_pages;         /**< pages in the K/V pools */
    uint32_t max_pages;         /**< columns of the block table (most pages per sequence) */
} entkv_problem;

/** A tensor in device memory. Strides are in elements (like torch.Tensor.stride()); every
 *  tensor must be row-major contiguous and its pointer 16-byte aligned. 80 bytes. */
typedef struct {
    uint64_t ptr;       /**< device address of element 0 (0 = none, for optional tensors) */
    int32_t dtype;      /**< ENTKV_F16 … ENTKV_I32 */
    uint32_t rank;      /**< dimensions used, ≤ 4 */
    int64_t shape[4];   /**< shape[0..rank), each ≥ 0 */
    int64_t strides[4]; /**< strides[0..rank), in elements */
} entkv_tensor;

/** Everything a step reads and writes. Leading dims marked "≥" may be larger than the step's
 *  batch (buffers sized for max_batch). 592 bytes. */
typedef struct {
    entkv_tensor q;            /**< [≥batch, q_heads, head_dim], kv_dtype */
    entkv_tensor k_pool;       /**< [num_pages, kv_heads, page_size, head_dim], kv_dtype */
    entkv_tensor v_pool;       /**< [num_pages, kv_heads, page_size, head_dim], kv_dtype */
    entkv_tensor block_table;  /**< [≥batch, max_pages] ENTKV_I32 physical page ids */
    entkv_tensor seq_lens;     /**< [≥batch] ENTKV_I32 tokens per sequence (≥ 1) */
    entkv_tensor alibi_slopes; /**< [q_heads] ENTKV_F32; ptr 0 = none (required iff alibi) */
    entkv_tensor out;          /**< [≥batch, q_heads, head_dim] ENTKV_F32 output */
    uint64_t metadata_ptr;     /**< metadata region (256-byte aligned; 0 if its size is 0) */
    uint64_t metadata_bytes;   /**< ≥ entkv_decoder_metadata_size */
    uint64_t workspace_ptr;    /**< workspace region (256-byte aligned) */
    uint64_t workspace_bytes;  /**< ≥ entkv_decoder_workspace_size */
} entkv_buffers;

/** A bad length or page id a checked step found in one sequence. */
typedef struct {
    /** The sequence. */
    uint32_t seq;
    /** Bad values in it (its length counts as one). */
    uint32_t count;
    /** Where the first is: -1 the length, else the logical page of the bad id. */
    int32_t logical_page;
    /** The bad length or page id. */
    int32_t value;
} entkv_id_fault;

/* ---------------------------------------------------------------------------------------- */
/* Library                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/** The library version, e.g. "0.1.0". Static; never NULL. */
const char *entkv_version(void);

/** The message of the last failing call on this thread ("" if none). Valid until the next
 *  failing call on this thread (copy it to keep it); never NULL. */
const char *entkv_last_error(void);

/** The name of a status code ("ENTKV_ERR_SPEC"; "ENTKV_ERR_UNKNOWN" for other values).
 *  Static; never NULL. */
const char *entkv_status_name(entkv_status status);

/* ---------------------------------------------------------------------------------------- */
/* Bundles                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/** Open and verify a bundle: a directory holding manifest.json, or a single .entkvb file.
 *  ENTKV_ERR_BUNDLE (message naming the path) when missing, corrupt or of another schema. */
entkv_status entkv_bundle_open(const char *path, entkv_bundle **out);

/** Free a bundle. Decoders created from it keep their own reference. */
void entkv_bundle_free(entkv_bundle *bundle);

/* ---------------------------------------------------------------------------------------- */
/* Decoders                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/** Create a decoder for `problem` on CUDA device `device_ordinal` (as numbered under
 *  CUDA_VISIBLE_DEVICES). The problem is checked against the bundle first (ENTKV_ERR_SPEC,
 *  ENTKV_ERR_BUNDLE, ENTKV_ERR_INVALID_ARGUMENT), then the device is opened (ENTKV_ERR_DEVICE).
 *  Kernels are loaded on first use by entkv_decoder_plan, or all at once by
 *  entkv_decoder_load_modules. */
entkv_status entkv_decoder_create(const entkv_bundle *bundle, int32_t device_ordinal,
                                  const entkv_problem *problem, entkv_decoder **out);

/** entkv_decoder_create with `flags` (0 or ENTKV_CHECK_DEVICE_IDS; other bits are
 *  ENTKV_ERR_INVALID_ARGUMENT). A bundle without the check's kernel is ENTKV_ERR_BUNDLE. */
entkv_status entkv_decoder_create_ex(const entkv_bundle *bundle, int32_t device_ordinal,
                                     const entkv_problem *problem, uint32_t flags,
                                     entkv_decoder **out);

/** Free a decoder (no call on it may be in flight). Steps it planned can still be freed. */
void entkv_decoder_free(entkv_decoder *decoder);

/** Load every kernel module the decoder's method can launch now: the driver JIT-compiles
 *  them (tenths of a second to a second each, one at a time per process; cached on disk by the
 *  driver), at start-up rather than in the first entkv_decoder_plan that needs each.
 *  `modules` (may be NULL) receives their count. */
entkv_status entkv_decoder_load_modules(const entkv_decoder *decoder, uint32_t *modules);

/** Bytes of workspace every step needs (allocate once, 256-byte aligned). */
entkv_status entkv_decoder_workspace_size(const entkv_decoder *decoder, uint64_t *bytes);

/** Bytes of page metadata the decoder keeps across steps (0 for ENTKV_DENSE). */
entkv_status entkv_decoder_metadata_size(const entkv_decoder *decoder, uint64_t *bytes);

/** Where workspace buffer `name` lives: byte offset from the workspace base and capacity in
 *  elements. After a run, per query head h of sequence b (index b·q_heads + h):
 *  "tau" (f32, entmax-space threshold), "support" (i32, tokens with p > 0); ENTKV_CERTIFIED:
 *  "kept" (i32, tokens the certified pass read); ENTKV_TOPK / ENTKV_GAUSSIAN: "sel_pages"
 *  (i32 [batch, kv_heads, max_pages], logical page ids, ascending) and "sel_count"
 *  (i32 [batch, kv_heads]). ENTKV_ERR_INVALID_ARGUMENT (listing the slots) for another name. */
entkv_status entkv_decoder_workspace_slot(const entkv_decoder *decoder, const char *name,
                                          uint64_t *offset_bytes, uint64_t *elems);

/** Plan a step for host copies of the lengths (`batch` int32) and block table
 *  (`block_table_len` = batch × max_pages int32, row-major), and load its kernels. Every length
 *  and referenced page is checked here (ENTKV_ERR_BATCH). The step serves any later step with
 *  the same batch whose lengths are no longer than these (page ids may change). Those later
 *  steps' device copies are not checked unless the decoder was made with
 *  ENTKV_CHECK_DEVICE_IDS: each length must stay ≥ 1 and every page id it references in
 *  [0, num_pages), or the kernels read (and append writes) outside the pools and the metadata. A host array
 *  may be NULL only when its length is 0. Free with entkv_step_free. */
entkv_status entkv_decoder_plan(const entkv_decoder *decoder, const int32_t *seq_lens,
                                uint32_t batch, const int32_t *block_table,
                                uint64_t block_table_len, entkv_step **out);

/** Free a step. */
void entkv_step_free(entkv_step *step);

/** The method the step runs: ENTKV_AUTO resolved to ENTKV_DENSE or ENTKV_CERTIFIED. */
entkv_status entkv_step_method(const entkv_step *step, int32_t *method);

/** Run a decode step on `cu_stream` (a CUstream of the decoder's device, e.g.
 *  torch.cuda.current_stream().cuda_stream; NULL = legacy default stream). Writes `out` and
 *  the workspace slots. Asynchronous: every buffer must stay valid until the stream reaches
 *  this point, and the device's lengths/block table must hold what the step was planned for
 *  (see entkv_decoder_plan: lengths 1 … planned, page ids in the pool).
 *  Tensors and regions are checked first (ENTKV_ERR_TENSOR); nothing is launched then. */
entkv_status entkv_decoder_run(const entkv_decoder *decoder, const entkv_step *step,
                               void *cu_stream, const entkv_buffers *buffers);

/** Update the page metadata after each sequence of the step gained one token (its K/V written
 *  to the pools, its device length incremented): rebuilds every page the new token completed.
 *  Plan the step for the new lengths. A no-op for ENTKV_DENSE. Asynchronous, like run. */
entkv_status entkv_decoder_append(const entkv_decoder *decoder, const entkv_step *step,
                                  void *cu_stream, const entkv_buffers *buffers);

/** The bad lengths and page ids the last run or append of `step` found on the device (a
 *  decoder made with ENTKV_CHECK_DEVICE_IDS; otherwise ENTKV_ERR_INVALID_ARGUMENT): `count`
 *  receives how many sequences had any, and the first min(count, capacity) of them go to
 *  `faults` (NULL only with capacity 0). Waits for `cu_stream`: a host sync, for checks between
 *  steps, never inside a captured graph. */
entkv_status entkv_decoder_device_id_faults(const entkv_decoder *decoder, const entkv_step *step,
                                            void *cu_stream, uint64_t workspace_ptr,
                                            uint64_t workspace_bytes, entkv_id_fault *faults,
                                            uint32_t capacity, uint32_t *count);

/** Build the metadata of every full page of a batch (after prefill) into the metadata region
 *  [metadata_ptr, metadata_ptr + metadata_bytes). Lengths and block table are host copies, as
 *  in entkv_decoder_plan; `k_pool` is the device key pool. Asynchronous on `cu_stream`, except
 *  that the page list is staged with a pageable host→device copy (not graph-capturable).
 *  A no-op for ENTKV_DENSE. */
entkv_status entkv_decoder_build_metadata(const entkv_decoder *decoder, void *cu_stream,
                                          const int32_t *seq_lens, uint32_t batch,
                                          const int32_t *block_table, uint64_t block_table_len,
                                          const entkv_tensor *k_pool, uint64_t metadata_ptr,
                                          uint64_t metadata_bytes);

#ifdef __cplusplus
}
#endif

#endif /* ENTKV_H */
