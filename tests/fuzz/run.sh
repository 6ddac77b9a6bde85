#!/usr/bin/env bash
# The long fuzz (`make fuzz`; not part of CI): libFuzzer + ASan/UBSan (clang 14).
#   fuzz_gguf  the GGUF reader and writer (gguf_walk.h), RUNS executions (default 10 million),
#              seeds tests/fuzz/corpus, working corpus tests/fuzz/corpus-work (not committed)
#   fuzz_cli   the CLI's argument parsing, RUNS/5 executions, dictionary tests/fuzz/cli.dict
#   fuzz_tokenizer  the tokenizers, RUNS/50 executions, when the vocabularies are here
#   fuzz_sampler, fuzz_json  the sampler and the CLI's JSON writers, RUNS/10 executions each
# Crashers go to tests/gguf/crashers/ (replayed by test_gguf_crashers on every ctest run) and
# tests/fuzz/crashers-cli/. Prints one line per target: executions, seconds, coverage (edges,
# features), corpus size, crashes -- the figures the README's reliability section quotes.
# -close_fd_mask=3 for the CLI: its usage messages would fill the log (1 GB in 1.4M runs);
# libFuzzer keeps its own stderr and points the sanitizers' reports at it.
set -u
cd "$(dirname "$0")/../.."
runs=${1:-10000000}
cmake -S . -B build-fuzz -DBP_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBP_VULKAN=OFF -DBP_CUDA=OFF -DBP_OPENCL=OFF >/dev/null || exit 1
cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target fuzz_gguf fuzz_cli >/dev/null || exit 1
mkdir -p tests/fuzz/corpus-work tests/fuzz/corpus-cli-work tests/fuzz/crashers-cli
fail=0
fuzz() {  # name, runs, log, args...
    local name=$1 n=$2 log=$3; shift 3
    local t0=$(date +%s) before after
    before=$(ls "$crashdir" | wc -l)
    build-fuzz/$name -runs="$n" -print_final_stats=1 "$@" >"$log" 2>&1
    local rc=$?
    after=$(ls "$crashdir" | wc -l)
    local cov=$(grep -a -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1)
    local execs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "$name: ${execs:-?} executions in $(( $(date +%s) - t0 )) s, $cov, $((after - before)) new crashers (exit $rc)"
    [ "$rc" = 0 ] || { fail=1; grep -a -A30 'ERROR:' "$log" | head -40; }
}
crashdir=tests/gguf/crashers
fuzz fuzz_gguf "$runs" /tmp/fuzz_gguf.log -max_len=8192 -timeout=10 -malloc_limit_mb=16 \
    -artifact_prefix=tests/gguf/crashers/ tests/fuzz/corpus-work tests/fuzz/corpus
crashdir=tests/fuzz/crashers-cli
fuzz fuzz_cli $((runs / 5)) /tmp/fuzz_cli.log -max_len=512 -timeout=10 -close_fd_mask=3 -dict=tests/fuzz/cli.dict \
    -artifact_prefix=tests/fuzz/crashers-cli/ tests/fuzz/corpus-cli-work
# The sampler (random settings and logits, NaN/Inf included) and the CLI's JSON writers (random
# bytes in, one valid JSON string out): RUNS/10 executions each, crashers in tests/fuzz/crashers-misc/.
cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target fuzz_sampler fuzz_json >/dev/null || exit 1
mkdir -p tests/fuzz/corpus-sampler-work tests/fuzz/corpus-json-work tests/fuzz/crashers-misc
crashdir=tests/fuzz/crashers-misc
fuzz fuzz_sampler $((runs / 10)) /tmp/fuzz_sampler.log -max_len=1100 -timeout=10 \
    -artifact_prefix=tests/fuzz/crashers-misc/ tests/fuzz/corpus-sampler-work
fuzz fuzz_json $((runs / 10)) /tmp/fuzz_json.log -max_len=4096 -timeout=10 \
    -artifact_prefix=tests/fuzz/crashers-misc/ tests/fuzz/corpus-json-work
# The tokenizers (tests/fuzz/fuzz_tokenizer.c, the `tok` engineer's target) when the vocabularies
# are here (scripts/fetch-vocab.sh): RUNS/50 executions, each text through 5 vocabularies.
vocab=${BACKPLANE_VOCAB_DIR:-$HOME/.cache/backplane/vocab}
if ls "$vocab"/*.gguf >/dev/null 2>&1; then
    cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target fuzz_tokenizer >/dev/null || exit 1
    mkdir -p tests/fuzz/corpus-tok-work tests/fuzz/crashers-tok
    crashdir=tests/fuzz/crashers-tok
    fuzz fuzz_tokenizer $((runs / 50)) /tmp/fuzz_tok.log -max_len=1024 -timeout=10 -close_fd_mask=1 \
        -artifact_prefix=tests/fuzz/crashers-tok/ tests/fuzz/corpus-tok-work
else
    echo "fuzz_tokenizer: not run: no vocabularies in $vocab (scripts/fetch-vocab.sh)"
fi
exit $fail
