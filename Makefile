# Thin wrapper over CMake. `make run` and `make check` are the README's two commands.
BUILD ?= build
JOBS ?= $(shell nproc)
# Warnings as errors: CI (.ci/run) sets WERROR=ON; off by default for users' compilers.
WERROR ?= OFF

.PHONY: all deps build run check sanitize clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DBP_WERROR=$(WERROR)
	cmake --build $(BUILD) -j$(JOBS)

# The main job: what each kind runs on here, and the kind table.
run: deps build
	./$(BUILD)/backplane probe
	./$(BUILD)/backplane kinds

# The whole test suite.
check: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer. The CUDA backend's host code
# (cuda_device.c, cuda_dispatch.c) is built sanitized too; its kernels as PTX only (no SASS:
# they are not what is checked here, and PTX skips the slow ptxas step). Without a GPU the CUDA
# tests check the device-free parts and skip the rest loudly. protect_shadow_gap=0: the CUDA
# driver maps memory where ASan reserves its shadow gap, so cudart fails to initialize under
# ASan on a machine with a GPU unless the gap is left unprotected.
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBP_SANITIZE=ON -DBP_WERROR=$(WERROR) -DBP_CUDA_ARCHS=none
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0 ctest --test-dir build-asan --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-asan
