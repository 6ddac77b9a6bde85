/* Invariants of the kind table (include/backplane_kinds.def) and the argument checks of the reference
 * operations: every bad input returns its bp_status with a non-empty message, writes nothing
 * to the output, and never aborts. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The 28 weight kinds the foundation issue names, spelled as GGUF spells them. */
static const char *const issue_weight_kinds[] = {
    "F32",    "F16",   "BF16",   "Q4_0",    "Q4_1",   "Q5_0",    "Q5_1",  "Q8_0",  "Q2_K",  "Q3_K",
    "Q4_K",   "Q5_K",  "Q6_K",   "IQ2_XXS", "IQ2_XS", "IQ2_S",   "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M",
    "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0",   "MXFP4",  "NVFP4",   "Q1_0",  "Q2_0",
};
enum { N_ISSUE = (int)(sizeof issue_weight_kinds / sizeof issue_weight_kinds[0]) };

static void table_invariants(void) {
    const int n = bp_kind_table_size();
    int weights = 0;
    CHECK(n > 0 && bp_kind_at(-1) == NULL && bp_kind_at(n) == NULL, "bp_kind_at out of range must be NULL");
    for (int i = 0; i < n; i++) {
        const bp_kind_info *k = bp_kind_at(i);
        CHECK(k && k->name && k->name[0], "row %d has no name", i);
        if (!k || !k->name) continue;
        if (i > 0) CHECK(bp_kind_at(i - 1)->gguf_id < k->gguf_id, "%s: ids not strictly ascending (unique)", k->name);
        for (int j = 0; j < i; j++) CHECK(strcmp(bp_kind_at(j)->name, k->name) != 0, "%s: name twice", k->name);
        CHECK((uint32_t)k->kind == k->gguf_id, "%s: enum value %d != GGUF id %u", k->name, (int)k->kind, k->gguf_id);
        /* bp_ref_dot dequantizes one block into a 256-float stack buffer. */
        CHECK(k->block_elems >= 1 && k->block_elems <= 256, "%s: block of %u elements", k->name, k->block_elems);
        CHECK(k->block_bytes >= 1, "%s: block of %u bytes", k->name, k->block_bytes);
        CHECK(k->bits_per_weight == 8.0 * k->block_bytes / k->block_elems, "%s: bits_per_weight %g != 8*%u/%u",
              k->name, k->bits_per_weight, k->block_bytes, k->block_elems);
        CHECK(k->bits_per_weight > 1.0 && k->bits_per_weight <= 64.0, "%s: %g bits per weight", k->name,
              k->bits_per_weight);
        CHECK(bp_kind_lookup(k->gguf_id) == k, "%s: bp_kind_lookup(%u) does not return its row", k->name, k->gguf_id);
        CHECK(bp_kind_by_name(k->name) == k, "%s: bp_kind_by_name does not return its row", k->name);
        size_t rb = 0;
        CHECK_OK(bp_kind_row_bytes(k->kind, 3 * (int64_t)k->block_elems, &rb));
        CHECK(rb == 3u * k->block_bytes, "%s: row of 3 blocks is %zu bytes", k->name, rb);
        if (k->role == BP_ROLE_W) {
            weights++;
            int in_issue = 0;
            for (int j = 0; j < N_ISSUE; j++) in_issue += !strcmp(issue_weight_kinds[j], k->name);
            CHECK(in_issue == 1, "%s: a weight kind the issue does not name", k->name);
        }
        CHECK(k->role == BP_ROLE_W || k->role == BP_ROLE_A || k->role == BP_ROLE_D, "%s: bad role", k->name);
    }
    CHECK(weights == 28, "%d weight kinds, want 28", weights);
    for (int j = 0; j < N_ISSUE; j++) {
        const bp_kind_info *k = bp_kind_by_name(issue_weight_kinds[j]);
        CHECK(k && k->role == BP_ROLE_W, "issue kind %s missing or not a weight kind", issue_weight_kinds[j]);
    }
    const char *acts[] = {"Q8_0", "Q8_1", "Q8_K"};
    for (int j = 0; j < 3; j++) CHECK(bp_kind_by_name(acts[j]) != NULL, "activation kind %s missing", acts[j]);
    const bp_kind_info *q81 = bp_kind_by_name("Q8_1");
    CHECK(q81 && q81->block_bytes == 36 && q81->role == BP_ROLE_A, "Q8_1 must be a 36-byte activation kind");
}

/* Expect status `want` with a message; clears the error first so a stale message cannot pass. */
#define EXPECT_FAIL(want, call)                                                                     \
    do {                                                                                            \
        bp_clear_error();                                                                           \
        bp_status s_ = (call);                                                                      \
        CHECK(s_ == (want) && bp_last_error()[0], "%s -> %s (want %s), message '%s'", #call,       \
              bp_status_name(s_), bp_status_name(want), bp_last_error());                          \
    } while (0)

static void unknown_kinds(void) {
    const uint32_t bad_ids[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 63, 64, 65, 1000, UINT32_MAX, (uint32_t)INT_MAX + 1u};
    float out[4] = {0}, x[4] = {0};
    unsigned char buf[64] = {0};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        const uint32_t id = bad_ids[i];
        bp_clear_error();
        CHECK(bp_kind_lookup(id) == NULL && bp_last_error()[0], "bp_kind_lookup(%u) must fail with a message", id);
        /* ids past INT_MAX would be a negative enum: convert through int as a caller's cast does */
        const bp_kind k = (bp_kind)(int)id;
        size_t rb;
        EXPECT_FAIL(BP_E_KIND, bp_kind_row_bytes(k, 1, &rb));
        EXPECT_FAIL(BP_E_KIND, bp_dequantize(k, buf, sizeof buf, out, 1));
        EXPECT_FAIL(BP_E_KIND, bp_quantize(k, x, 1, buf, sizeof buf));
        EXPECT_FAIL(BP_E_KIND, bp_ref_dot(k, buf, sizeof buf, x, 1, out));
        EXPECT_FAIL(BP_E_KIND, bp_ref_matvec(k, buf, sizeof buf, 1, 1, x, out));
        EXPECT_FAIL(BP_E_KIND, bp_ref_gemm(k, buf, sizeof buf, 1, 1, x, 1, out));
    }
    const char *bad_names[] = {"q4_0", "Q4_0 ", "", "Q4_2", "IQ4"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        bp_clear_error();
        CHECK(bp_kind_by_name(bad_names[i]) == NULL && bp_last_error()[0], "bp_kind_by_name('%s') must fail",
              bad_names[i]);
    }
    bp_clear_error();
    CHECK(bp_kind_by_name(NULL) == NULL && bp_last_error()[0], "bp_kind_by_name(NULL) must fail");
}

/* Per kind: bad row length, NULL and short buffers; the output must stay untouched. */
static void bad_arguments(const bp_kind_info *k) {
    const bp_kind kk = k->kind;
    const int64_t be = k->block_elems, n = 2 * be;
    const size_t need = 2u * k->block_bytes;
    unsigned char *blocks = calloc(need, 1), *qout = malloc(need);
    float *x = calloc((size_t)n, sizeof *x), *out = malloc((size_t)n * sizeof *out);
    if (!blocks || !qout || !x || !out) abort();
    memset(out, 0x5A, (size_t)n * sizeof *out);
    memset(qout, 0x5A, need);
    size_t rb;
    float dot;

    if (be > 1) { /* a row that is not a whole number of blocks */
        EXPECT_FAIL(BP_E_SHAPE, bp_kind_row_bytes(kk, be + 1, &rb));
        EXPECT_FAIL(BP_E_SHAPE, bp_dequantize(kk, blocks, need, out, be + 1));
        EXPECT_FAIL(BP_E_SHAPE, bp_ref_dot(kk, blocks, need, x, be - 1, &dot));
        EXPECT_FAIL(BP_E_SHAPE, bp_ref_matvec(kk, blocks, need, 1, be / 2 + 1, x, out));
        EXPECT_FAIL(BP_E_SHAPE, bp_ref_gemm(kk, blocks, need, 1, be + 1, x, 1, out));
        if (k->can_quantize) EXPECT_FAIL(BP_E_SHAPE, bp_quantize(kk, x, be + 1, qout, need));
    }
    EXPECT_FAIL(BP_E_SHAPE, bp_kind_row_bytes(kk, -be, &rb));
    /* The longest row: its byte size overflows size_t only where a block is over 2 bytes per
     * element (F32, I32, I64, F64); elsewhere it is a valid (huge) size. */
    if ((uint64_t)(INT64_MAX / be) > SIZE_MAX / k->block_bytes)
        EXPECT_FAIL(BP_E_SHAPE, bp_kind_row_bytes(kk, INT64_MAX / be * be, &rb));
    else
        CHECK_OK(bp_kind_row_bytes(kk, INT64_MAX / be * be, &rb));
    EXPECT_FAIL(BP_E_INVAL, bp_kind_row_bytes(kk, n, NULL));
    EXPECT_FAIL(BP_E_SHAPE, bp_dequantize(kk, blocks, need, out, -be));
    EXPECT_FAIL(BP_E_INVAL, bp_dequantize(kk, NULL, need, out, n));
    EXPECT_FAIL(BP_E_INVAL, bp_dequantize(kk, blocks, need - 1, out, n)); /* short by one byte */
    EXPECT_FAIL(BP_E_INVAL, bp_dequantize(kk, blocks, need, NULL, n));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_dot(kk, NULL, need, x, n, &dot));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_dot(kk, blocks, need - 1, x, n, &dot));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_dot(kk, blocks, need, NULL, n, &dot));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_dot(kk, blocks, need, x, n, NULL));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_matvec(kk, NULL, need, 2, be, x, out));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_matvec(kk, blocks, need - 1, 2, be, x, out));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_matvec(kk, blocks, need, 2, be, NULL, out));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_matvec(kk, blocks, need, 2, be, x, NULL));
    EXPECT_FAIL(BP_E_SHAPE, bp_ref_matvec(kk, blocks, need, -1, be, x, out));
    EXPECT_FAIL(BP_E_SHAPE, bp_ref_gemm(kk, blocks, need, 1, be, x, -1, out));
    EXPECT_FAIL(BP_E_INVAL, bp_ref_gemm(kk, blocks, need, 3, be, x, 1, out)); /* 3 rows in 2 rows' bytes */
    /* INT64_MAX rows of block_bytes each overflow a 64-bit size_t only past 2 bytes a row. */
    EXPECT_FAIL(k->block_bytes > 2 && SIZE_MAX == UINT64_MAX ? BP_E_SHAPE : BP_E_INVAL, bp_ref_gemm(kk, blocks, need, INT64_MAX, be, x, 1, out));
    if (k->can_quantize) {
        EXPECT_FAIL(BP_E_INVAL, bp_quantize(kk, NULL, n, qout, need));
        EXPECT_FAIL(BP_E_INVAL, bp_quantize(kk, x, n, NULL, need));
        EXPECT_FAIL(BP_E_INVAL, bp_quantize(kk, x, n, qout, need - 1));
        EXPECT_FAIL(BP_E_SHAPE, bp_quantize(kk, x, -be, qout, need));
    } else {
        EXPECT_FAIL(BP_E_KIND, bp_quantize(kk, x, n, qout, need));
    }
    int touched = 0;
    for (size_t i = 0; i < (size_t)n * sizeof *out; i++) touched |= ((unsigned char *)out)[i] != 0x5A;
    for (size_t i = 0; i < need; i++) touched |= qout[i] != 0x5A;
    CHECK(!touched, "%s: a failing call wrote to its output", k->name);

    /* and the good call on the same buffers works (the failures above were the arguments) */
    CHECK_OK(bp_dequantize(kk, blocks, need, out, n));
    CHECK_OK(bp_ref_gemm(kk, blocks, need, 2, be, x, 1, out));
    free(blocks);
    free(qout);
    free(x);
    free(out);
}

int main(void) {
    table_invariants();
    unknown_kinds();
    for (int i = 0; i < bp_kind_table_size(); i++) bad_arguments(bp_kind_at(i));
    return bp_test_finish();
}
