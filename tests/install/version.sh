#!/usr/bin/env bash
# One version everywhere: `backplane --version` == bp_version() from libbackplane.so == the CMake
# project version (passed by CMake from project(VERSION)), and the shared library's SONAME
# carries the ABI version. $1 = CLI, $2 = libbackplane.so, $3 = CMake project version,
# $4 = ABI version, $5 = LD_PRELOAD for a sanitizer build's library (its runtime loads first).
set -u
cli=${1:?} lib=${2:?} want=${3:?} abi=${4:?} preload=${5:-}
fail=0
got_cli=$("$cli" --version | sed -n 's/^backplane //p')
# bp_version() through the shared library, called by a program that is not ours (ctypes).
got_lib=$(LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 python3 -c 'import ctypes, sys
lib = ctypes.CDLL(sys.argv[1]); lib.bp_version.restype = ctypes.c_char_p
print(lib.bp_version().decode())' "$lib") || { echo "FAIL: could not call bp_version() in $lib"; fail=1; }
[ "$got_cli" = "$want" ] || { echo "FAIL: backplane --version says '$got_cli', CMake project version is '$want'"; fail=1; }
[ "$got_lib" = "$want" ] || { echo "FAIL: bp_version() says '$got_lib', CMake project version is '$want'"; fail=1; }
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libbackplane.so.$abi" ] || { echo "FAIL: SONAME is '$soname', expected libbackplane.so.$abi"; fail=1; }
echo "version: CLI $got_cli, bp_version() $got_lib, CMake $want, SONAME $soname"
exit $fail
