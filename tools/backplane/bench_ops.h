/* backplane bench --op attention|norm|rope|act|jobs (bench_ops.c): the op layer's benchmarks. */
#ifndef BP_BENCH_OPS_H
#define BP_BENCH_OPS_H

#include <stdbool.h>

/* Whether argv asks for an op benchmark (--op NAME). */
bool bp_bench_op_requested(int argc, char **argv);
int bp_bench_ops(int argc, char **argv);

#endif
