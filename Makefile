# Thin wrapper over CMake. `make run` and `make check` are the README's two commands.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run check sanitize clean

all: build

deps:
	bash scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j$(JOBS)

# The main job: Gemma 3 270M Q4_K_M end to end (scripts/install-gemma.sh installs the file once,
# outside the repository): a greedy continuation of a default prompt, its tokens/s, the paths.
PROMPT ?= The three most important inventions of the twentieth century are
run: deps build
	./$(BUILD)/backplane run "$$(bash scripts/install-gemma.sh)" -p "$(PROMPT)" -n 64

# The whole test suite.
check: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBP_SANITIZE=ON -DBP_CUDA=OFF
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-asan
