# Thin front end over CMake. `make test` is what CI runs.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps deps-bench configure build test demo bench fuzz install package format clean

all: build

deps:
	@scripts/deps.sh build

deps-bench: deps
	@scripts/deps.sh bench

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: deps
	$(MAKE) build
	@sh demo/run.sh $(BUILD)

bench: deps
	$(MAKE) build
	@sh bench/run.sh $(BUILD)
	@sh bench/guard.sh $(BUILD)
	@sh bench/leaks.sh $(BUILD)
	@sh bench/leak_exit.sh $(BUILD)
	@sh bench/report.sh $(BUILD)
	@sh bench/profile.sh $(BUILD)
	@sh bench/profile_overhead.sh $(BUILD)
	@sh bench/attach.sh $(BUILD)
	@python3 bench/summary.py $(BUILD)

# A quick subset of `make bench` (a minute or two), each ratio beside the committed summary in
# docs/benchmarks.md, flagging those that grew by more than 15%. Informational, never in CI.
.PHONY: bench-compare
bench-compare:
	$(MAKE) build
	@python3 bench/compare.py $(BUILD)

fuzz: deps
	$(MAKE) build
	cmake --build $(BUILD) --target fuzzers
	@sh fuzz/run.sh $(BUILD) $${FUZZ_SECONDS:-60}

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

# The Debian package, $(BUILD)/heapscope_VERSION_ARCH.deb, from its own build tree
# ($(BUILD)/deb, prefix /usr): see docs/packaging.md.
package: deps
	@scripts/package.sh $(BUILD) $(JOBS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
