/* The kernels the CPU kernel table names (kernels.def), declared once: each is defined in the
 * file of its instruction set (scalar/, avx2/, avx512/) and reached only through the table, on a
 * machine whose CPUID has that instruction set. Generated from kernels.def's rows (the
 * declarations are checked against the definitions, which include this header). */
#ifndef BP_CPU_KERNELS_H
#define BP_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bp_cpu_job;
struct bp_cpu_packed;
typedef struct bp_cpu_job bp_cpu_job;
typedef struct bp_cpu_packed bp_cpu_packed;

/* ---- scalar ---- */
void bp_cpu_quant_q8x256_scalar(const float *x, int64_t n, void *out);
void bp_cpu_quant_q8x32_scalar(const float *x, int64_t n, void *out);
void bp_scalar_gemm_generic(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
uint64_t bp_scalar_read_sum(const uint8_t *p, size_t n);
void bp_scalar_vec_generic(const bp_cpu_job *job, int64_t r0, int64_t r1);

/* ---- avx2 ---- */
void bp_avx2_dequant_lowbit_setup(void);
void bp_avx2_dq_bf16(const void *src, float *dst, int64_t n);
void bp_avx2_dq_f16(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq1_m(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq1_s(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq2_s(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq2_xs(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq2_xxs(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq3_s(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq3_xxs(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq4_nl(const void *src, float *dst, int64_t n);
void bp_avx2_dq_iq4_xs(const void *src, float *dst, int64_t n);
void bp_avx2_dq_mxfp4(const void *src, float *dst, int64_t n);
void bp_avx2_dq_nvfp4(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q1_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q2_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q2_k(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q3_k(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q4_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q4_1(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q4_k(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q5_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q5_1(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q5_k(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q6_k(const void *src, float *dst, int64_t n);
void bp_avx2_dq_q8_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_tq1_0(const void *src, float *dst, int64_t n);
void bp_avx2_dq_tq2_0(const void *src, float *dst, int64_t n);
void bp_avx2_gemm_panels(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
void bp_avx2_gemm_q8(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
size_t bp_avx2_gemm_q8_bytes(int64_t T, int64_t cols);
void bp_avx2_gemm_q8_prep(const float *x, int64_t T, int64_t cols, void *buf);
void bp_avx2_grid_lowbit_setup(void);
void bp_avx2_iq1_ternary_setup(void);
void bp_avx2_multi_bf16(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_multi_f16(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_multi_f32(const bp_cpu_job *job, int64_t r0, int64_t r1);
bool bp_avx2_pack_iq4_nl(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_mxfp4(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_nvfp4(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q1_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q4_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q4_1(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q5_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q5_1(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx2_pack_q8_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
void bp_avx2_quant_q8x256p(const float *x, int64_t n, void *out);
void bp_avx2_quant_q8x32p(const float *x, int64_t n, void *out);
uint64_t bp_avx2_read_sum(const uint8_t *p, size_t n);
void bp_avx2_vec_generic(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq1_m(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq1_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq2_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq2_xs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq2_xxs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq3_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq3_xxs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq4_nl(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq4_nlp(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_iq4_xs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_mxfp4(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_mxfp4p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_nvfp4(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_nvfp4p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q1_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q1_0p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q2_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q2_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q3_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q4_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q4_0p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q4_1(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q4_1p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q4_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q5_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q5_0p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q5_1(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q5_1p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q5_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q6_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q8_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_q8_0p(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_tq1_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx2_vec_tq2_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_cpu_quant_q8x256_avx2(const float *x, int64_t n, void *out);
void bp_cpu_quant_q8x32_avx2(const float *x, int64_t n, void *out);

/* ---- avx512 ---- */
void bp_avx512_dq_iq1_m(const void *src, float *dst, int64_t n);
void bp_avx512_dq_iq1_s(const void *src, float *dst, int64_t n);
void bp_avx512_gemm_bf16r(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
void bp_avx512_gemm_q8(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
size_t bp_avx512_gemm_q8_bytes(int64_t T, int64_t cols);
void bp_avx512_gemm_q8_prep(const float *x, int64_t T, int64_t cols, void *buf);
void bp_avx512_grid_lowbit_setup(void);
bool bp_avx512_pack4_iq4_nl(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack4_mxfp4(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack4_q1_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack4_q4_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack4_q4_1(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack4_q8_0(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack_iq4_xsi(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack_nvfp4i(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack_q5_0i(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack_q5_1i(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
bool bp_avx512_pack_q5_ki(const uint8_t *w, int64_t rows, int64_t cols, size_t row_bytes, bp_cpu_packed *out);
void bp_avx512_quad_gemm(const bp_cpu_job *job, int ith, int64_t r0, int64_t r1);
void bp_avx512_quant_bf16(const float *x, int64_t n, void *out);
void bp_avx512_quant_f32eo(const float *x, int64_t n, void *out);
void bp_avx512_quant_q8x16i(const float *x, int64_t n, void *out);
void bp_avx512_quant_q8x32q(const float *x, int64_t n, void *out);
void bp_avx512_vec_bf16(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_bf16r(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_f16(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_f32(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq1_m(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq1_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq2_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq2_xs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq2_xxs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq3_s(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq3_xxs(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq4_nlq(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq4_nlq_vb(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq4_xsi(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq4_xsi_vb(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_iq4_xsq(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_mxfp4q(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_mxfp4q_vb(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_nvfp4(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_nvfp4i(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_nvfp4i_vb(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q1_0q(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q2_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q3_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q4_0q(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q4_1q(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q4_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q5_0i(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q5_1i(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q5_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q5_ki(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q6_k(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_q8_0q(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_tq1_0(const bp_cpu_job *job, int64_t r0, int64_t r1);
void bp_avx512_vec_tq2_0(const bp_cpu_job *job, int64_t r0, int64_t r1);

#endif
