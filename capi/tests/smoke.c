/* Compiled against include/entkv.h and linked with libentkv.so by capi/tests/capi.rs.
 * Prints the header's struct layout (compared there with the Rust #[repr(C)] types) and
 * exercises a few calls that need no GPU. Usage: smoke MISSING_BUNDLE_PATH */
#include "entkv.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SIZE(T) printf("%s %lu\n", #T, (unsigned long)sizeof(T))
#define FIELD(T, f) \
    printf("%s.%s %lu %lu\n", #T, #f, (unsigned long)offsetof(T, f), (unsigned long)sizeof(((T *)0)->f))

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

int main(int argc, char **argv) {
    entkv_bundle *bundle = (entkv_bundle *)&failures; /* must be reset to NULL on failure */
    entkv_status s;
    uint64_t bytes = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s MISSING_BUNDLE_PATH\n", argv[0]);
        return 2;
    }

    SIZE(entkv_problem);
    FIELD(entkv_problem, alpha);
    FIELD(entkv_problem, head_dim);
    FIELD(entkv_problem, page_size);
    FIELD(entkv_problem, q_heads);
    FIELD(entkv_problem, kv_heads);
    FIELD(entkv_problem, kv_dtype);
    FIELD(entkv_problem, alibi);
    FIELD(entkv_problem, sketch_bits);
    FIELD(entkv_problem, method);
    FIELD(entkv_problem, topk_budget_pages);
    FIELD(entkv_problem, max_batch);
    FIELD(entkv_problem, num_pages);
    FIELD(entkv_problem, max_pages);
    SIZE(entkv_tensor);
    FIELD(entkv_tensor, ptr);
    FIELD(entkv_tensor, dtype);
    FIELD(entkv_tensor, rank);
    FIELD(entkv_tensor, shape);
    FIELD(entkv_tensor, strides);
    SIZE(entkv_buffers);
    FIELD(entkv_buffers, q);
    FIELD(entkv_buffers, k_pool);
    FIELD(entkv_buffers, v_pool);
    FIELD(entkv_buffers, block_table);
    FIELD(entkv_buffers, seq_lens);
    FIELD(entkv_buffers, alibi_slopes);
    FIELD(entkv_buffers, out);
    FIELD(entkv_buffers, metadata_ptr);
    FIELD(entkv_buffers, metadata_bytes);
    FIELD(entkv_buffers, workspace_ptr);
    FIELD(entkv_buffers, workspace_bytes);
    SIZE(entkv_id_fault);
    FIELD(entkv_id_fault, seq);
    FIELD(entkv_id_fault, count);
    FIELD(entkv_id_fault, logical_page);
    FIELD(entkv_id_fault, value);

    printf("version %s\n", entkv_version());
    s = entkv_bundle_open(argv[1], &bundle);
    expect(s == ENTKV_ERR_BUNDLE, "open of a missing path is ENTKV_ERR_BUNDLE");
    expect(bundle == NULL, "a failed open leaves NULL");
    expect(strstr(entkv_last_error(), argv[1]) != NULL, "the message names the path");
    printf("open %s\n", entkv_status_name(s));
    s = entkv_decoder_workspace_size(NULL, &bytes);
    expect(s == ENTKV_ERR_NULL_ARGUMENT, "NULL decoder is ENTKV_ERR_NULL_ARGUMENT");
    printf("null %s: %s\n", entkv_status_name(s), entkv_last_error());
    entkv_bundle_free(NULL);
    entkv_decoder_free(NULL);
    entkv_step_free(NULL);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
