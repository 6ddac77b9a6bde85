# Thin wrapper over CMake. The README's two commands are `./make.sh run` and `./make.sh check`:
# make.sh installs make itself on a machine that lacks it (a minimal Debian), then runs these.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run check sanitize clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

# The main job: what each kind runs on here, and the kind table.
run: deps build
	./$(BUILD)/backplane probe
	./$(BUILD)/backplane kinds

# The whole test suite.
# ctest-junit.xml: per-test results with each skip's reason, for tests/skip_summary.py in CI.
check: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --output-junit ctest-junit.xml

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBP_SANITIZE=ON -DBP_CUDA=OFF
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-asan
