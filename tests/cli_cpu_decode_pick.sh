#!/usr/bin/env bash
# The choice between a kind's two batch-1 CPU kernels (AVX-512 and the AVX2 one it replaced,
# src/cpu/cpu.c): BACKPLANE_CPU_DECODE=avx2|avx512 pins it, and both `probe` and the kernel a
# run reports follow the pin; unset, a fixed default per kind; =time, timed at first use; a kind with one
# kernel has no choice (JSON null); a bad value is a warning on stderr, never an error.
# Needs an AVX-512 machine (the alternatives exist only on that path): elsewhere SKIP (77).
# $1 = CLI path; python3 for the JSON.
set -u
cli=${1:?usage: cli_cpu_decode_pick.sh path/to/backplane}
fail=0
decode() { # decode() ENV... -- KIND: "kernel<TAB>choice" of KIND's decode path
    local kind=${*: -1}
    env "${@:1:$#-2}" "$cli" probe --json --rows 64 --cols 256 |
        python3 -c 'import json,sys; d=json.load(sys.stdin); p=next(k["decode"] for k in d["kinds"] if k["kind"]==sys.argv[1]); print("%s\t%s" % (p["kernel"], p["choice"]))' "$kind"
}
auto=$(decode BACKPLANE_CPU_DECODE=auto -- Q4_K) || { echo "FAIL: probe --json exited $?"; exit 1; }
case $auto in
*$'\t'None) echo "SKIP: Q4_K has one decode kernel on this machine or build (no AVX-512): $auto" >&2; exit 77 ;;
esac
# Unpinned: a fixed default per kind, the same in every process (IQ3_S: the AVX2 kernel).
case $auto in *"the default for this kind ("*"), the same in every process"*) ;; *) echo "FAIL: unpinned choice not the fixed default: $auto"; fail=1 ;; esac
iq3=$(decode -- IQ3_S)
case $iq3 in "CPU avx2 IQ3_S"*"the default for this kind"*) ;; *) echo "FAIL: IQ3_S decode by default: $iq3"; fail=1 ;; esac
# BACKPLANE_CPU_DECODE=time times both at first use; a sanitizer build does not time
# (src/cpu/cpu.c: instrumented timings say nothing) and says so.
timed=$(decode BACKPLANE_CPU_DECODE=time -- Q4_K)
case $timed in *"timed at first use"* | *"sanitizer build"*) ;; *) echo "FAIL: BACKPLANE_CPU_DECODE=time not described as timed: $timed"; fail=1 ;; esac
for k in Q4_K IQ2_XXS; do
    for pin in avx2 avx512; do
        got=$(decode BACKPLANE_CPU_DECODE=$pin -- $k)
        case $got in
        "CPU $pin $k"*"pinned by BACKPLANE_CPU_DECODE=$pin"*) ;;
        *) echo "FAIL: BACKPLANE_CPU_DECODE=$pin, $k decode: $got"; fail=1 ;;
        esac
        # The run itself takes the pinned kernel (the path the weight reports after a call).
        ran=$(BACKPLANE_CPU_DECODE=$pin "$cli" bench --kind $k --rows 64 --cols 256 --batch 1 --reps 3 --cold-mib 1 |
            grep "^| $k " | awk -F'|' '{print $(NF-1)}')
        case $ran in " CPU $pin $k"*) ;; *) echo "FAIL: bench with BACKPLANE_CPU_DECODE=$pin ran '$ran'"; fail=1 ;; esac
    done
done
one=$(decode -- Q4_0)
case $one in *$'\t'None) ;; *) echo "FAIL: Q4_0 has one decode kernel, yet a choice: $one"; fail=1 ;; esac
err=$(BACKPLANE_CPU_DECODE=bogus "$cli" probe 2>&1 >/dev/null) || { echo "FAIL: a bad BACKPLANE_CPU_DECODE made probe fail"; fail=1; }
case $err in *"BACKPLANE_CPU_DECODE=bogus is not"*) ;; *) echo "FAIL: no warning for a bad value: $err"; fail=1 ;; esac
[ $fail = 0 ] && echo "decode pick: pinned both ways for Q4_K and IQ2_XXS, a fixed default otherwise, timed on request"
exit $fail
