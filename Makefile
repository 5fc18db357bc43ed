# Thin front end over CMake. `make test` is what CI runs.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)

.PHONY: all deps deps-bench configure build test sanitize demo bench fuzz install package format clean

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
	$(MAKE) sanitize

# The sanitizer leg of `make test` (docs/testing.md), each build in its own tree with every
# invariant check on (HEAPSCOPE_ASSERT_LEVEL=2) and only the targets its tests need:
#  - $(BUILD)-asan, AddressSanitizer + UBSan: the unit tests, but for those ASan cannot run
#    (ASAN_EXCLUDE: they define malloc themselves, read glibc's own heap or GOT, or run the
#    unreachable-memory collector, a clone() task on its own stack that ASan cannot follow).
#    A preloaded malloc shim cannot live in an ASan process, hence the UBSan leg below.
#  - $(BUILD)-ubsan, UBSan alone, its runtime linked statically into the preloaded shim: the
#    malloc debug e2e suites of UBSAN_E2E, with the shim preloaded as users run it.
#  - $(BUILD)-tsan, ThreadSanitizer: the ring buffer's writers against its reader, the
#    profiler's stack hints (a writer switching a slot between two threads under readers),
#    the threads of the pointer table and the free queue, and the profiler daemon's
#    background symbolizing against its dumps.
# Any report fails the test (-fno-sanitize-recover; ASan and TSan exit non-zero on a report).
ASAN_EXCLUDE = ^unit[.](backtrace|backtrace_nopie|glibc_heap|got_hooks|collector)$$
UBSAN_E2E = ^e2e[.]malloc_debug_(reports|options|tracking|stress)$$
TSAN_TESTS = ^unit[.](ring_buffer|stack_hints|pointer_table|pointer_table_regions|free_queue_threads|free_queue_rings|presymbolizer)$$
SAN_ENV = UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ASAN_OPTIONS=handle_segv=0:detect_leaks=1:suppressions=$(CURDIR)/tests/sanitizers/asan.supp \
	TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp
SAN_CONFIGURE = $(CMAKE_FLAGS) -DHEAPSCOPE_ASSERT_LEVEL=2 -DCMAKE_BUILD_TYPE=RelWithDebInfo

sanitize: deps
	cmake -S . -B $(BUILD)-asan $(SAN_CONFIGURE) -DHEAPSCOPE_SANITIZE=address
	cmake --build $(BUILD)-asan -j $(JOBS) --target unit_tests
	cd $(BUILD)-asan && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -R '^unit[.]' -E '$(ASAN_EXCLUDE)'
	cmake -S . -B $(BUILD)-ubsan $(SAN_CONFIGURE) -DHEAPSCOPE_SANITIZE=undefined
	cmake --build $(BUILD)-ubsan -j $(JOBS) --target malloc_debug malloc_debug_symbols md_bugs md_stress md_track md_track_stripped_target heapscope
	cd $(BUILD)-ubsan && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -R '$(UBSAN_E2E)'
	cmake -S . -B $(BUILD)-tsan $(SAN_CONFIGURE) -DHEAPSCOPE_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS) --target test_ring_buffer test_stack_hints test_pointer_table test_pointer_table_regions test_free_queue test_free_queue_rings test_presymbolizer
	cd $(BUILD)-tsan && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

demo: deps
	$(MAKE) build
	@sh demo/run.sh $(BUILD)

bench: deps
	$(MAKE) build
	@sh bench/run.sh $(BUILD)
	@sh bench/guard.sh $(BUILD)
	@sh bench/leaks.sh $(BUILD)
	@sh bench/leak_exit.sh $(BUILD)
	@sh bench/record_fork.sh $(BUILD)
	@sh bench/report.sh $(BUILD)
	@sh bench/symbolize.sh $(BUILD)
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
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-ubsan $(BUILD)-tsan
