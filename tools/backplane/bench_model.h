/* backplane bench MODEL.gguf (bench_model.c): a whole model's pp/tg tokens/s, llama-bench's shape. */
#ifndef BP_BENCH_MODEL_H
#define BP_BENCH_MODEL_H

#include <stdbool.h>

/* Whether argv asks for the model form: --model, or an argument ending in .gguf. */
bool bp_bench_model_requested(int argc, char **argv);
int bp_bench_model(int argc, char **argv);

#endif
