# The two README commands live here. Both install their Debian packages first.
#   make run   — the main job (see README)
#   make test  — build everything and run every test suite (ctest: CUnit, minitest, e2e)
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)

.PHONY: all deps build run sim test test-asan format format-check clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash scripts/run.sh $(BUILD) $(ARGS)

# The simulator on the default scenario: summary table and per-second timeline.
sim: build
	$(BUILD)/sim/pp-sim run scenarios/step-mix.yaml --timeline

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The C unit suites again, under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DPP_SANITIZE=ON
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure -L unit -j $(JOBS)

format: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target format

format-check: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target format-check

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
