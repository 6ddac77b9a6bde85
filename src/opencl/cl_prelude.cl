/* OpenCL C 1.2 prelude of the embedded program (src/opencl/embed_cl.cmake puts it first, then
 * src/kinds/iq_tables.h, src/cuda/cuda_kind_math.h and cl_kernels.cl, each with its #include
 * lines removed). It maps the C subset cuda_kind_math.h is written in onto OpenCL C, so the
 * OpenCL kernels run the very per-kind arithmetic the CUDA kernels and the host test
 * (tests/test_cuda_host_math.c) use: one fact, one place.
 *
 * - the <stdint.h> names: OpenCL C has fixed-width built-in types of the same sizes (char is
 *   signed, long is 64-bit on every OpenCL device);
 * - BP_TABLE: the IQ grids become __constant program-scope arrays;
 * - memcpy: the header's only use is the float <-> bits reinterpretation in bp_cu_bits_f32
 *   (memcpy(&f, &u, sizeof f)), which is as_float in OpenCL C;
 * - the libm names of the header's host branch (quantize helpers; unused by our kernels but
 *   compiled) map to the OpenCL built-ins.
 * BP_HD stays the header's own `static inline` (OpenCL C 1.2 allows both). */
typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
typedef uint uint32_t;
typedef int int32_t;
typedef ulong uint64_t;
typedef long int64_t;
#define BP_TABLE(type, name, count) __constant type name[count]
#define memcpy(dst, src, n) (*(dst) = as_float(*(src)))
#define nearbyintf(v) rint(v)
#define fmaxf(a, b) fmax((a), (b))
#define fabsf(a) fabs(a)

/* The kind table (include/backplane_kinds.def, concatenated next) as compile-time block sizes,
 * BP_CL_BB_<NAME>, so the per-block copy has a constant length (the compiler unrolls it) and
 * the block size is read from the one kind table, not restated. Closed by cl_kinds_end.cl. */
#define BP_KIND(NAME, ID, BE, BB, ROLE, Q) BP_CL_BB_##NAME = BB,
enum bp_cl_block_bytes {
