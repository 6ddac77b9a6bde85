/* The rows of the CPU kernel table (kernels.def) as data, for the dispatch's setup
 * (bp_cpu_ops_build), test_cpu_table and the kernel list `backplane probe --cpu-table` prints.
 * Each array ends in a row whose path is BP_CPU_ISA_COUNT. */
#ifndef BP_CPU_KERNEL_TABLE_H
#define BP_CPU_KERNEL_TABLE_H

#include "cpu/cpu_internal.h"

/* A DECODE, PLAIN or VBMI row: the kernel (VBMI rows: fn and name only), and for DECODE rows
 * the row unit and panel dequantizer. fn_name: the function's name as the table spells it. */
typedef struct bp_cpu_decode_row {
    bp_cpu_isa path;
    bp_kind kind;
    bp_cpu_vec_kernel k;
    int row_unit;
    bp_dequant_fn dequant;
    const char *fn_name;
} bp_cpu_decode_row;

typedef struct bp_cpu_alt_row {
    bp_cpu_isa path;
    bp_kind kind;
    bp_cpu_isa from; /* the path whose DECODE row of the kind is the alternative */
    bool first;      /* the alternative runs by default */
} bp_cpu_alt_row;

typedef struct bp_cpu_path_row {
    bp_cpu_isa path;
    bp_cpu_vec_kernel generic;
    void (*gemm)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    const char *gemm_isa, *gemm_name;
    void (*gemm_q8)(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
    void (*q8_prep)(const float *x, int64_t T, int64_t cols, void *buf);
    size_t (*q8_bytes)(int64_t T, int64_t cols);
    const char *q8_name;
    uint64_t (*read_sum)(const uint8_t *p, size_t n);
} bp_cpu_path_row;

const bp_cpu_decode_row *bp_cpu_table_decode(void);
const bp_cpu_decode_row *bp_cpu_table_plain(void);
const bp_cpu_decode_row *bp_cpu_table_vbmi(void);
const bp_cpu_alt_row *bp_cpu_table_alt(void);
const bp_cpu_path_row *bp_cpu_table_path(void);

#endif
