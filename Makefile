# Thin wrapper over CMake. The README's two commands are `./make.sh run` and `./make.sh check`:
# make.sh installs make itself on a machine that lacks it (a minimal Debian), then runs these.
BUILD ?= build
JOBS ?= $(shell nproc)
# Warnings as errors: CI (.ci/run) sets WERROR=ON; off by default for users' compilers.
WERROR ?= OFF

.PHONY: all deps build run check sanitize reliability gencheck tsan valgrind fuzz clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DBP_WERROR=$(WERROR)
	cmake --build $(BUILD) -j$(JOBS)

# The main job: Gemma 3 270M Q4_K_M end to end (scripts/install-gemma.sh installs the file once,
# outside the repository): a greedy continuation of a default prompt, its tokens/s, the paths.
PROMPT ?= The three most important inventions of the twentieth century are
run: deps build
	./$(BUILD)/backplane run "$$(bash scripts/install-gemma.sh)" -p "$(PROMPT)" -n 64

# The whole test suite. The skip summary lists every skipped test with its reason and fails
# when a test that must run here skipped (tests/skip_summary.py, tests/skip_allowed.txt).
check: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --output-junit $(CURDIR)/$(BUILD)/ctest-junit.xml
	python3 tests/skip_summary.py $(BUILD)/ctest-junit.xml "make check"

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included). The
# CUDA backend's host code (cuda_device.c, cuda_dispatch.c) is built sanitized too; its kernels as PTX only (no SASS:
# they are not what is checked here, and PTX skips the slow ptxas step). Without a GPU the CUDA
# tests check the device-free parts and skip the rest loudly. protect_shadow_gap=0: the CUDA
# driver maps memory where ASan reserves its shadow gap, so cudart fails to initialize under
# ASan on a machine with a GPU unless the gap is left unprotected.
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBP_SANITIZE=ON -DBP_WERROR=$(WERROR) -DBP_CUDA_ARCHS=none
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0 ctest --test-dir build-asan --output-on-failure -j$(JOBS) \
	    --output-junit $(CURDIR)/build-asan/ctest-junit.xml
	python3 tests/skip_summary.py build-asan/ctest-junit.xml "make sanitize"

# ---- the reliability campaign (README "Reliability"); CI runs `make reliability` ----------
reliability: gencheck tsan valgrind

# The committed vectors, tables and test files are what their generator scripts make.
gencheck: deps
	bash tests/check_generators.sh

# ThreadSanitizer over the tests that run threads: 8 callers on every backend (test_threads),
# the CPU pool (test_cpu_kernels), fallbacks and lost devices under concurrency
# (test_seam_fallback, test_seam_route).
TSAN_TESTS = test_threads test_cpu_kernels test_seam_fallback test_seam_route
tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBP_TSAN=ON -DBP_WERROR=$(WERROR) -DBP_CUDA=OFF
	cmake --build build-tsan -j$(JOBS) --target $(TSAN_TESTS)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" BP_TEST_QUICK=1 ctest --test-dir build-tsan \
	    --output-on-failure -j$(JOBS) -R '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$' \
	    --output-junit $(CURDIR)/build-tsan/ctest-junit.xml
	python3 tests/skip_summary.py build-tsan/ctest-junit.xml "make tsan"

# valgrind memcheck over the CPU-only suite (reduced sizes), on the `make build` binaries.
valgrind: deps build
	JOBS=$(JOBS) bash tests/valgrind.sh $(BUILD)

# The long fuzz (not CI): the GGUF reader for 10 million executions and the CLI's argument
# parsing for 2 million, libFuzzer + ASan/UBSan (clang). FUZZ_RUNS overrides the first figure.
fuzz:
	bash tests/fuzz/run.sh $(FUZZ_RUNS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
