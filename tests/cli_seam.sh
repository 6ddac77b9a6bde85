#!/usr/bin/env bash
# `backplane probe` and `backplane verify` at the CLI. $1 is the CLI path.
# - probe --json parses, has the documented keys, lists every backends.def row plus the CPU,
#   and covers exactly the 28 weight kinds (the list is written here, independently of the code);
#   every path it reports is a backend that is compiled and enabled.
# - BACKPLANE_<NAME>=0 turns a backend off with a reason naming the variable.
# - verify passes for every backend built here (exit 0; the CPU implementations lavapipe and PoCL
#   forced on with BACKPLANE_<B>=1, since unforced they are off), its --json parses, every result
#   has the documented keys; an unknown backend or kind is an error exit.
# - Issue 17: unforced, a backend whose device is a CPU implementation is off with a reason that
#   says so, and (no GPU) every kind runs on the CPU; forced, it is on and takes every kind;
#   `probe --rows/--cols/--batch` names the backend `matvec` really runs on, under
#   BACKPLANE_VULKAN_MIN_WORK on both sides of the threshold.
# Parsed with python3 when present, else checked with grep.
set -u
cli=${1:?usage: cli_seam.sh path/to/backplane}
fail() { echo "FAIL: $*"; exit 1; }

want="F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4 NVFP4 Q1_0 Q2_0"

probe=$("$cli" probe --json --all) || fail "probe --json exited $?"
"$cli" probe >/dev/null || fail "probe (text) exited $?"
"$cli" probe --all >/dev/null || fail "probe --all exited $?"
off=$(BACKPLANE_VULKAN=0 BACKPLANE_CUDA=off BACKPLANE_OPENCL=cpu "$cli" probe --json) || fail "probe with env exited $?"

errf=$(mktemp) || fail "mktemp"
verify_json=$(BACKPLANE_VULKAN=1 BACKPLANE_OPENCL=1 "$cli" verify --json --fallbacks 2>"$errf"); rc=$?
err=$(cat "$errf"); rm -f "$errf"
[ $rc -eq 0 ] || { printf '%s\n' "$verify_json" | grep '"pass": false' | head -20; fail "verify exited $rc"; }
printf '%s' "$err" | grep -q "fallbacks: none" || fail "verify --fallbacks printed no summary (stderr: $err)"

if command -v python3 >/dev/null 2>&1; then
    printf '%s' "$probe" | WANT="$want" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
names = [b["name"] for b in d["backends"]]
assert names == ["cuda", "metal", "vulkan", "opencl", "cpu"], names
for b in d["backends"]:
    for k in ("name", "compiled", "enabled", "reason"):
        assert k in b, (b, k)
    assert isinstance(b["compiled"], bool) and isinstance(b["enabled"], bool) and b["reason"], b
    assert b["compiled"] or not b["enabled"], ("enabled but not compiled", b)
cpu = d["backends"][-1]
assert cpu["compiled"] and cpu["enabled"], cpu
displays = {b["display"]: b for b in d["backends"]}
kinds = [k["kind"] for k in d["kinds"]]
want = os.environ["WANT"].split()
assert len(kinds) == 28 and sorted(kinds) == sorted(want), ("kinds", sorted(set(kinds) ^ set(want)), len(kinds))
for k in d["kinds"]:
    for p in ("decode", "prefill"):
        path = k[p]
        assert path["backend"] and path["kernel"], (k["kind"], p, path)
        b = displays[path["backend"]]
        assert b["enabled"], (k["kind"], p, "routed to a backend that is not enabled", path)
        if path["backend"] != "CPU":
            assert path["kernel"] == k["kind"], (k["kind"], p, "kernel name is not the kind name", path)
    assert set(k["all"]) == {"cuda", "metal", "vulkan", "opencl"}, k["all"].keys()
    for name, c in k["all"].items():
        assert c["matvec"] in (None, k["kind"]), (name, k["kind"], c)
        assert not c["gemm"] or c["matvec"], (name, k["kind"], "gemm without matvec")
' || fail "probe --json content"
    printf '%s' "$off" | python3 -c '
import json, sys
d = json.load(sys.stdin)
b = {x["name"]: x for x in d["backends"]}
for name, var in (("vulkan", "BACKPLANE_VULKAN=0"), ("cuda", "BACKPLANE_CUDA=off"), ("opencl", "BACKPLANE_OPENCL=cpu")):
    assert not b[name]["enabled"], b[name]
    if b[name]["compiled"]:
        assert var in b[name]["reason"], b[name]
    else:
        assert "not compiled" in b[name]["reason"], b[name]
for k in d["kinds"]:
    assert k["decode"]["backend"] in ("CPU", "Metal"), k
' || fail "probe with backends forced off"
    # Unforced: a CPU implementation is off and says why; with no accelerator, all on the CPU.
    printf '%s' "$probe" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["shape"] == {"rows": 4096, "cols": 4096, "decode_batch": 1, "prefill_batch": 512}, d["shape"]
accel = False
for b in d["backends"][:-1]:
    if b["compiled"] and b["cpu_implementation"]:
        assert not b["enabled"] and "is a CPU implementation of" in b["reason"] and "=1 uses it anyway" in b["reason"], b
    accel = accel or b["enabled"]
if not accel:
    for k in d["kinds"]:
        assert k["decode"]["backend"] == "CPU" and k["prefill"]["backend"] == "CPU", k
print("probe: CPU implementations off;", "an accelerator is enabled" if accel else "every kind on the CPU")
' || fail "probe: CPU implementations must be off unless forced"
    forced=$(BACKPLANE_VULKAN=1 BACKPLANE_OPENCL=1 "$cli" probe --json) || fail "forced probe exited $?"
    printf '%s' "$forced" | python3 -c '
import json, sys
d = json.load(sys.stdin)
b = {x["name"]: x for x in d["backends"]}
for name in ("vulkan", "opencl"):
    if b[name]["compiled"]:
        assert b[name]["enabled"] and "forces it on" in b[name]["reason"], b[name]
first = next((x["display"] for x in d["backends"] if x["enabled"]), "CPU")
for k in d["kinds"]:
    assert k["decode"]["backend"] == first and k["prefill"]["backend"] == first, (first, k)
print("forced probe: every kind on", first)
' || fail "probe with the CPU implementations forced on"
    printf '%s' "$verify_json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["results"]
assert r, "no results"
keys = {"backend", "kind", "op", "rows", "cols", "batch", "nmse", "pass"}
for x in r:
    assert keys <= set(x), (x, keys - set(x))
    assert x["pass"] is True and x["nmse"] is not None and x["nmse"] <= x["threshold"], x
cpu = {x["kind"] for x in r if x["backend"] == "cpu"}
assert len(cpu) == 28, ("the CPU is verified on every weight kind", len(cpu))
assert {"matvec", "gemm"} <= {x["op"] for x in r}
assert any(x["rows"] == 1 for x in r) and any(x["cols"] == 67 for x in r), "odd shapes"
print("verify:", len(r), "cases,", len({x["backend"] for x in r}), "backends")
' || fail "verify --json content"
else
    for k in $want; do
        printf '%s' "$probe" | grep -q "\"kind\": \"$k\"" || fail "probe --json lacks $k"
    done
    printf '%s' "$verify_json" | grep -q '"pass": false' && fail "verify has a failing case"
fi

# probe --rows/--cols/--batch and the dispatch agree (the 8 x 256 tensors of kinds.gguf; the
# threshold rows*cols*batch = 2048 is met at 2048 and missed at 2049).
if printf '%s' "$probe" | grep -q '"name": "vulkan", "display": "Vulkan", "compiled": true' && command -v python3 >/dev/null; then
    tmpd=$(mktemp -d) || fail "mktemp"
    for mw in 2048 2049; do
        for kind in Q4_K IQ4_XS; do
            want=$(BACKPLANE_OPENCL=0 BACKPLANE_VULKAN=1 BACKPLANE_VULKAN_MIN_WORK=$mw "$cli" probe --json --rows 8 --cols 256 --batch 1 |
                python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(k["decode"]["backend"] for k in d["kinds"] if k["kind"] == sys.argv[1]))' "$kind") ||
                fail "probe --rows 8 --cols 256 for $kind"
            BACKPLANE_OPENCL=0 BACKPLANE_VULKAN=1 BACKPLANE_VULKAN_MIN_WORK=$mw "$cli" matvec tests/gguf/kinds.gguf "$kind" --strict \
                --input tests/gguf/kinds_x.f32 --output "$tmpd/y" 2>"$tmpd/err" || fail "matvec $kind: $(cat "$tmpd/err")"
            ran=$(sed -n 's/.*ran on: //p' "$tmpd/err")
            case "$ran" in "$want"*) ;; *) rm -rf "$tmpd"; fail "MIN_WORK=$mw $kind: probe says $want, matvec ran on '$ran'" ;; esac
            [ $mw = 2048 ] && [ "$want" != Vulkan ] && fail "MIN_WORK=2048 $kind: expected Vulkan, probe says $want"
            [ $mw = 2049 ] && [ "$want" != CPU ] && fail "MIN_WORK=2049 $kind: expected CPU, probe says $want"
        done
    done
    rm -rf "$tmpd"
    echo "probe --rows/--cols/--batch agrees with matvec under BACKPLANE_VULKAN_MIN_WORK"
fi

# The preference's one-line report names why the preferred backend cannot run and what runs.
quiet=(BACKPLANE_VULKAN=0 BACKPLANE_OPENCL=0) # no driver start-up where the check does not need one
perr=$(env "${quiet[@]}" BACKPLANE_BACKEND=metal "$cli" probe 2>&1 >/dev/null)
printf '%s' "$perr" | grep -q '^\[Metal: not compiled into this binary; using ' || fail "BACKPLANE_BACKEND=metal report: $perr"
env "${quiet[@]}" BACKPLANE_BACKEND=cpu "$cli" probe | grep -q 'backend preferred: cpu' || fail "probe names the preference"
# BACKPLANE_OPENCL_DEVICE picks a device by index or name substring; no match is the probe's reason.
if printf '%s' "$probe" | grep -q '"name": "opencl", "display": "OpenCL", "compiled": true' && command -v python3 >/dev/null; then
    for sel in 0 nosuchdevice 7; do
        r=$(BACKPLANE_VULKAN=0 BACKPLANE_OPENCL_DEVICE=$sel "$cli" probe --json | python3 -c 'import json,sys; print(next(b["reason"] for b in json.load(sys.stdin)["backends"] if b["name"] == "opencl"))')
        case $sel in
        0) case "$r" in *"CPU implementation"* | "probe found"*) ;; *) fail "BACKPLANE_OPENCL_DEVICE=0: $r" ;; esac ;;
        *) case "$r" in *"BACKPLANE_OPENCL_DEVICE=$sel matches none"*) ;; *) fail "BACKPLANE_OPENCL_DEVICE=$sel: $r" ;; esac ;;
        esac
    done
fi

# Errors: unknown backend, unknown kind, and a backend not built / not enabled.
"$cli" verify --backend nonesuch >/dev/null 2>&1 && fail "verify --backend nonesuch succeeded"
"$cli" verify --kind Q9_9 >/dev/null 2>&1 && fail "verify --kind Q9_9 succeeded"
BACKPLANE_VULKAN=0 "$cli" verify --backend vulkan >/dev/null 2>&1 && fail "verify of a disabled backend succeeded"
"$cli" verify --backend cpu --kind Q4_K >/dev/null || fail "verify --backend cpu --kind Q4_K failed"
# One shape of the user's choosing (gpu_check runs 14336 x 4096, t = 512 on CUDA this way).
vs=$("$cli" verify --backend cpu --kind Q4_K --rows 300 --cols 512 --batch 3) || fail "verify --rows 300 --cols 512 --batch 3"
printf '%s' "$vs" | grep -q '| cpu | Q4_K | gemm | 300 | 512 | 3 |' && printf '%s' "$vs" | grep -q '2 cases, 0 failed' ||
    fail "verify --rows/--cols/--batch ran the matvec and the GEMM: $vs"
"$cli" verify --rows 300 >/dev/null 2>&1 && fail "verify --rows without --cols succeeded"
"$cli" probe --bogus >/dev/null 2>&1 && fail "probe --bogus succeeded"
"$cli" probe --rows 0 >/dev/null 2>&1 && fail "probe --rows 0 succeeded"
"$cli" probe --rows 64 --cols 64 --batch 7 | grep -q "shape: 64 x 64 weight; decode batch 1, prefill batch 7" ||
    fail "probe text names the shape"
echo "PASS"
