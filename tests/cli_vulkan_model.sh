#!/usr/bin/env bash
# The whole model on Vulkan at the CLI ($1 = CLI path), lavapipe here (tests/model/step_model.sh):
# verify's step rows for every KV kind; the tiny llama/qwen2/qwen3/gemma3 models with F16, Q8_0
# and Q4_0 caches, 24 greedy tokens equal to the CPU reference path's and the decode step's
# traffic 1 upload / 1 submission / 1 download; the tiny llama and gemma3 perplexities within
# 0.1%; Gemma 3 270M, 8 tokens (lavapipe runs ~4 s a token here, so the run is short).
exec bash "$(dirname "$0")/model/step_model.sh" "${1:?usage: cli_vulkan_model.sh path/to/backplane}" vulkan Vulkan \
  "llama qwen2 qwen3 gemma3" "F16 Q8_0 Q4_0" 24 "llama gemma3" 8
