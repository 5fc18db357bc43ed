# Unit tests of the unreachable-memory detector's sweeper side (src/memunreachable: heap walker,
# roots, leak folding and grouping, result codec, text report, the whole sweep) and the walk
# micro-benchmark. include()d from tests/unit/CMakeLists.txt.
#
# The module's sources are compiled into each test directly (no dependency on the collector
# or on libmemunreachable.so), against fake heaps (test_unreachable_fake_heap.h).
find_package(Threads REQUIRED)
set(HS_MU_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})
get_filename_component(HS_MU_ROOT ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
set(HS_MU_SRC_DIR ${HS_MU_ROOT}/src/memunreachable)
set(HS_MU_SWEEP_SOURCES
  ${HS_MU_SRC_DIR}/captured_maps.c
  ${HS_MU_SRC_DIR}/heap_walker.c
  ${HS_MU_SRC_DIR}/leak_folding.c
  ${HS_MU_SRC_DIR}/leak_grouping.c
  ${HS_MU_SRC_DIR}/report_text.c
  ${HS_MU_SRC_DIR}/result_codec.c
  ${HS_MU_SRC_DIR}/roots.c
  ${HS_MU_SRC_DIR}/run_order.c
  ${HS_MU_SRC_DIR}/sweep.c)

foreach(name walker roots folding report sweep run_order)
  add_executable(test_unreachable_${name}
    ${HS_MU_TESTS_DIR}/test_unreachable_${name}.c ${HS_MU_SWEEP_SOURCES})
  target_include_directories(test_unreachable_${name} PRIVATE
    ${HS_MU_TESTS_DIR} ${HS_MU_SRC_DIR} ${HS_MU_ROOT}/include)
  target_link_libraries(test_unreachable_${name} PRIVATE hs_base Threads::Threads)
  add_test(NAME unit.unreachable_${name} COMMAND test_unreachable_${name})
  set_tests_properties(unit.unreachable_${name} PROPERTIES TIMEOUT 120)
endforeach()

# The walk micro-benchmark (not a test; run by hand: bench/unreachable_walk_bench [max blocks]).
add_executable(unreachable_walk_bench
  ${HS_MU_ROOT}/bench/unreachable_walk_bench.c ${HS_MU_SWEEP_SOURCES})
target_include_directories(unreachable_walk_bench PRIVATE ${HS_MU_SRC_DIR} ${HS_MU_ROOT}/include)
target_compile_options(unreachable_walk_bench PRIVATE -O2)
target_link_libraries(unreachable_walk_bench PRIVATE hs_base)
set_target_properties(unreachable_walk_bench PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

# The walk of glibc's own heap (no tracking: a process started without heapscope), on this
# process's real heap seen from a fork, and on hostile fake heaps.
add_executable(test_glibc_heap ${HS_MU_TESTS_DIR}/test_glibc_heap.c
  ${HS_MU_SRC_DIR}/glibc_heap.c ${HS_MU_SRC_DIR}/glibc_free_chunks.c ${HS_MU_SWEEP_SOURCES})
target_include_directories(test_glibc_heap PRIVATE
  ${HS_MU_TESTS_DIR} ${HS_MU_SRC_DIR} ${HS_MU_ROOT}/include)
target_link_libraries(test_glibc_heap PRIVATE hs_base Threads::Threads)
add_test(NAME unit.glibc_heap COMMAND test_glibc_heap)
set_tests_properties(unit.glibc_heap PROPERTIES TIMEOUT 120)
