# Unit tests of the sort (src/common/sort.c), the heap snapshot and get_malloc_leak_info
# (src/malloc_debug/heap_snapshot.c, leak_info.c) and the heap dump file
# (src/malloc_debug/heap_dump.c). include()d from tests/unit/CMakeLists.txt.
#
# The shim's modules are compiled into the tests directly, with the real pointer and
# backtrace tables; shim_stubs.c defines what init.c defines in the shim.
find_package(Threads REQUIRED)
set(HS_HEAP_DUMP_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(HS_HEAP_DUMP_MD_DIR ${PROJECT_SOURCE_DIR}/src/malloc_debug)

add_executable(test_sort ${HS_HEAP_DUMP_TESTS_DIR}/test_sort.c)
target_include_directories(test_sort PRIVATE ${HS_HEAP_DUMP_TESTS_DIR})
target_link_libraries(test_sort PRIVATE hs_base)
add_test(NAME unit.sort COMMAND test_sort)
set_tests_properties(unit.sort PROPERTIES TIMEOUT 120)

add_executable(test_heap_snapshot
  ${HS_HEAP_DUMP_TESTS_DIR}/test_heap_snapshot.c
  ${HS_HEAP_DUMP_TESTS_DIR}/shim_stubs.c
  ${HS_HEAP_DUMP_MD_DIR}/heap_snapshot.c
  ${HS_HEAP_DUMP_MD_DIR}/leak_info.c
  ${HS_HEAP_DUMP_MD_DIR}/pointer_table.c
  ${HS_HEAP_DUMP_MD_DIR}/backtrace_table.c)
target_include_directories(test_heap_snapshot PRIVATE
  ${HS_HEAP_DUMP_TESTS_DIR} ${HS_HEAP_DUMP_MD_DIR} ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_heap_snapshot PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.heap_snapshot COMMAND test_heap_snapshot)
set_tests_properties(unit.heap_snapshot PROPERTIES TIMEOUT 120)

# Not built with -rdynamic: the test's own function names must come from .symtab, as in a
# normal program.
add_executable(test_heap_dump
  ${HS_HEAP_DUMP_TESTS_DIR}/test_heap_dump.c
  ${HS_HEAP_DUMP_TESTS_DIR}/shim_stubs.c
  ${HS_HEAP_DUMP_MD_DIR}/heap_dump.c
  ${HS_HEAP_DUMP_MD_DIR}/heap_snapshot.c
  ${HS_HEAP_DUMP_MD_DIR}/pointer_table.c
  ${HS_HEAP_DUMP_MD_DIR}/backtrace_table.c)
target_include_directories(test_heap_dump PRIVATE ${HS_HEAP_DUMP_TESTS_DIR} ${HS_HEAP_DUMP_MD_DIR})
target_compile_options(test_heap_dump PRIVATE -O0)
target_link_libraries(test_heap_dump PRIVATE
  hs_md_options hs_base Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME unit.heap_dump COMMAND test_heap_dump)
set_tests_properties(unit.heap_dump PROPERTIES TIMEOUT 120)

# The backtrace table's per-thread reference cache (backtrace_table.c).
add_executable(test_backtrace_cache
  ${HS_HEAP_DUMP_TESTS_DIR}/test_backtrace_cache.c
  ${HS_HEAP_DUMP_TESTS_DIR}/shim_stubs.c
  ${HS_HEAP_DUMP_MD_DIR}/backtrace_table.c)
target_include_directories(test_backtrace_cache PRIVATE ${HS_HEAP_DUMP_TESTS_DIR} ${HS_HEAP_DUMP_MD_DIR})
target_link_libraries(test_backtrace_cache PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.backtrace_cache COMMAND test_backtrace_cache)
set_tests_properties(unit.backtrace_cache PROPERTIES TIMEOUT 120)
