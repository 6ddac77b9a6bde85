#!/usr/bin/env bash
# The whole model on OpenCL at the CLI ($1 = CLI path), PoCL here (tests/model/step_model.sh):
# verify's step rows for every KV kind; the tiny llama/qwen2/qwen3/gemma3 models with F16 and
# Q4_0 caches, 12 greedy tokens equal to the CPU reference path's and the decode step's traffic
# 1 upload / 1 submission / 1 download; the tiny gemma3 perplexity within 0.1%; Gemma 3 270M,
# 6 tokens (PoCL is a CPU implementation: the run is kept short).
# Under ASan, LeakSanitizer's thread scan follows a dynamic-TLS entry PoCL leaves with a bogus
# address (a kernel library it dlopens; seen with the gemma3 kernels: "Tracer caught signal 11",
# "DTLS 9 at 0xa70") and the process dies before any leak is looked for. use_tls=0 keeps the
# leak check but skips thread-local roots; it changes nothing outside a sanitized build.
export LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}use_tls=0
exec bash "$(dirname "$0")/model/step_model.sh" "${1:?usage: cli_opencl_model.sh path/to/backplane}" opencl OpenCL \
  "llama qwen2 qwen3 gemma3" "F16 Q4_0" 12 "gemma3" 6
