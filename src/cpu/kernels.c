/* The CPU kernel table (kernels.def) as arrays of rows, and the per-path bp_cpu_ops the dispatch
 * reads, made from them by one loop (no per-file init order, no tuning overridden across files).
 * Also the activation formats' sizes. */
#include <limits.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/kernel_table.h"

/* The AVX2 and AVX512 rows name functions that exist only in x86 builds with the ISA files
 * (src/cpu/backend.cmake defines BP_CPU_X86_KERNELS there); elsewhere only SCALAR's remain. */
#define BP_CPU_IF_SCALAR(...) __VA_ARGS__
#ifdef BP_CPU_X86_KERNELS
#define BP_CPU_IF_AVX2(...) __VA_ARGS__
#define BP_CPU_IF_AVX512(...) __VA_ARGS__
#else
#define BP_CPU_IF_AVX2(...)
#define BP_CPU_IF_AVX512(...)
#endif

#define BP_CPU_NO_ROW(...)
#define VK(FN, ACT, MULTI, MAX_BATCH, PACK, NAME) \
    { .fn = FN, .act = BP_ACT_##ACT, .name = NAME, .max_batch = MAX_BATCH, .pack = PACK, .multi = MULTI }

/* Each array ends in a row with path BP_CPU_ISA_COUNT (so that none is empty). */
#define BP_CPU_PATH BP_CPU_NO_ROW
#define BP_CPU_QUANT BP_CPU_NO_ROW
#define BP_CPU_SETUP BP_CPU_NO_ROW
#define BP_CPU_BF16R BP_CPU_NO_ROW
#define BP_CPU_PLAIN BP_CPU_NO_ROW
#define BP_CPU_ALT BP_CPU_NO_ROW
#define BP_CPU_VBMI BP_CPU_NO_ROW
#define BP_CPU_DECODE(PATH, KIND, FN, ACT, MULTI, MAX_BATCH, ROW_UNIT, PACK, DEQUANT, NAME) \
    BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, BP_KIND_##KIND, VK(FN, ACT, MULTI, MAX_BATCH, PACK, NAME), ROW_UNIT, DEQUANT, #FN},)
static const bp_cpu_decode_row decode_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_DECODE
#define BP_CPU_DECODE BP_CPU_NO_ROW
#undef BP_CPU_PLAIN
#define BP_CPU_PLAIN(PATH, KIND, FN, ACT, MULTI, MAX_BATCH, NAME) \
    BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, BP_KIND_##KIND, VK(FN, ACT, MULTI, MAX_BATCH, NULL, NAME), 0, NULL, #FN},)
static const bp_cpu_decode_row plain_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_PLAIN
#define BP_CPU_PLAIN BP_CPU_NO_ROW
#undef BP_CPU_VBMI
#define BP_CPU_VBMI(PATH, KIND, FN, NAME) \
    BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, BP_KIND_##KIND, {.fn = FN, .name = NAME}, 0, NULL, #FN},)
static const bp_cpu_decode_row vbmi_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_VBMI
#define BP_CPU_VBMI BP_CPU_NO_ROW
#undef BP_CPU_ALT
#define BP_CPU_ALT(PATH, KIND, FROM, FIRST) BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, BP_KIND_##KIND, BP_CPU_ISA_##FROM, FIRST},)
static const bp_cpu_alt_row alt_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_ALT
#define BP_CPU_ALT BP_CPU_NO_ROW
#undef BP_CPU_PATH
#define BP_CPU_PATH(PATH, GENERIC, GENERIC_NAME, GEMM, GEMM_ISA, GEMM_NAME, GEMM_Q8, Q8_PREP, Q8_BYTES, Q8_NAME, READ_SUM) \
    BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, VK(GENERIC, F32, false, 0, NULL, GENERIC_NAME), GEMM, GEMM_ISA, GEMM_NAME,       \
                      GEMM_Q8, Q8_PREP, Q8_BYTES, Q8_NAME, READ_SUM},)
static const bp_cpu_path_row path_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_PATH
#define BP_CPU_PATH BP_CPU_NO_ROW
#undef BP_CPU_QUANT
#define BP_CPU_QUANT(PATH, ACT, FN) BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, BP_ACT_##ACT, FN},)
static const struct quant_row {
    bp_cpu_isa path;
    bp_cpu_act act;
    void (*fn)(const float *x, int64_t n, void *out);
} quant_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_QUANT
#define BP_CPU_QUANT BP_CPU_NO_ROW
#undef BP_CPU_SETUP
#define BP_CPU_SETUP(PATH, FN) BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, FN},)
static const struct setup_row {
    bp_cpu_isa path;
    void (*fn)(void);
} setup_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};
#undef BP_CPU_SETUP
#define BP_CPU_SETUP BP_CPU_NO_ROW
#undef BP_CPU_BF16R
#define BP_CPU_BF16R(PATH, FN, MAX_BATCH, NAME, GEMM, GEMM_NAME, QUANT) \
    BP_CPU_IF_##PATH({BP_CPU_ISA_##PATH, VK(FN, BF16, true, MAX_BATCH, NULL, NAME), GEMM, GEMM_NAME, QUANT},)
static const struct bf16r_row {
    bp_cpu_isa path;
    bp_cpu_vec_kernel vec;
    void (*gemm)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    const char *gemm_name;
    void (*quant)(const float *x, int64_t n, void *out);
} bf16r_rows[] = {
#include "cpu/kernels.def"
    {.path = BP_CPU_ISA_COUNT}};

const bp_cpu_decode_row *bp_cpu_table_decode(void) { return decode_rows; }
const bp_cpu_decode_row *bp_cpu_table_plain(void) { return plain_rows; }
const bp_cpu_decode_row *bp_cpu_table_vbmi(void) { return vbmi_rows; }
const bp_cpu_alt_row *bp_cpu_table_alt(void) { return alt_rows; }
const bp_cpu_path_row *bp_cpu_table_path(void) { return path_rows; }

/* Row r of `rows` for (path, kind); NULL when there is none. */
static const bp_cpu_decode_row *find(const bp_cpu_decode_row *rows, bp_cpu_isa path, bp_kind k) {
    for (; rows->path != BP_CPU_ISA_COUNT; rows++)
        if (rows->path == path && rows->kind == k) return rows;
    return NULL;
}

void bp_cpu_setup_tables(bp_cpu_isa isa) {
    for (const struct setup_row *s = setup_rows; s->path != BP_CPU_ISA_COUNT; s++)
        if (s->path == isa) s->fn();
}

bool bp_cpu_ops_build(bp_cpu_isa isa, bp_cpu_ops *ops, bool vbmi, bool bf16r) {
    memset(ops, 0, sizeof *ops);
    const bp_cpu_path_row *p = path_rows;
    while (p->path != BP_CPU_ISA_COUNT && p->path != isa) p++;
    if (p->path == BP_CPU_ISA_COUNT) return false;
    ops->isa_name = bp_cpu_isa_name(isa);
    ops->vec_generic = p->generic;
    ops->gemm = p->gemm, ops->gemm_isa = p->gemm_isa, ops->gemm_name = p->gemm_name;
    ops->gemm_q8 = p->gemm_q8, ops->gemm_q8_prep = p->q8_prep, ops->gemm_q8_bytes = p->q8_bytes;
    ops->gemm_q8_name = p->q8_name;
    ops->read_sum = p->read_sum;
    for (const struct quant_row *q = quant_rows; q->path != BP_CPU_ISA_COUNT; q++)
        if (q->path == isa) ops->quant[q->act] = q->fn;
    for (const struct bf16r_row *b = bf16r_rows; bf16r && b->path != BP_CPU_ISA_COUNT; b++)
        if (b->path == isa) {
            ops->vec_bf16r = b->vec;
            ops->gemm_bf16r = b->gemm, ops->gemm_bf16r_name = b->gemm_name;
            ops->quant[BP_ACT_BF16] = b->quant;
        }
    for (const bp_cpu_decode_row *r = decode_rows; r->path != BP_CPU_ISA_COUNT; r++) {
        if (r->path != isa) continue;
        ops->vec[r->kind] = r->k;
        ops->vec_row_unit[r->kind] = r->row_unit;
        ops->dequant[r->kind] = r->dequant;
    }
    for (const bp_cpu_decode_row *r = plain_rows; r->path != BP_CPU_ISA_COUNT; r++)
        if (r->path == isa) ops->vec_plain[r->kind] = r->k;
    for (const bp_cpu_alt_row *a = alt_rows; a->path != BP_CPU_ISA_COUNT; a++) {
        const bp_cpu_decode_row *from = a->path == isa ? find(decode_rows, a->from, a->kind) : NULL;
        if (!from) continue;
        ops->vec_alt[a->kind] = from->k;
        ops->alt_first[a->kind] = a->first;
    }
    for (const bp_cpu_decode_row *r = vbmi_rows; vbmi && r->path != BP_CPU_ISA_COUNT; r++)
        if (r->path == isa) {
            ops->vec_novbmi[r->kind] = ops->vec[r->kind];
            ops->vec[r->kind].fn = r->k.fn;
            ops->vec[r->kind].name = r->k.name;
        }
    return true;
}

size_t bp_cpu_act_bytes(bp_cpu_act act, int64_t cols) {
    switch (act) {
    case BP_ACT_Q8X32P: return (size_t)((cols / 32 + 7) / 8 * 8) * (32 + 2 * sizeof(float));
    case BP_ACT_Q8X32Q:
    case BP_ACT_Q8X16I: return (size_t)((cols / 32 + 7) / 8 * 8) * (32 + 4 * sizeof(float));
    case BP_ACT_Q8X32: return (size_t)(cols / 32) * sizeof(bp_q8x32);
    case BP_ACT_Q8X256:
    case BP_ACT_Q8X256P: return (size_t)(cols / 256) * sizeof(bp_q8x256);
    case BP_ACT_BF16: return bp_cpu_bf16_act_bytes(cols);
    case BP_ACT_F32EO: return bp_cpu_f32eo_act_bytes(cols);
    default: return 0;
    }
}
