# Unit tests of malloc debug's tables: the live-allocation table (pointer_table.c: deletion
# by backward shift, wrap-around, a model, threads) and free_track's queue (free_queue.c).
# include()d from tests/unit/CMakeLists.txt.
# The shim's modules are compiled in directly; shim_stubs.c defines what init.c defines.
find_package(Threads REQUIRED)
set(HS_MD_TABLES_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(HS_MD_TABLES_MD_DIR ${PROJECT_SOURCE_DIR}/src/malloc_debug)

add_executable(test_pointer_table
  ${HS_MD_TABLES_TESTS_DIR}/test_pointer_table.c
  ${HS_MD_TABLES_TESTS_DIR}/shim_stubs.c
  ${HS_MD_TABLES_MD_DIR}/pointer_table.c
  ${HS_MD_TABLES_MD_DIR}/backtrace_table.c)
target_include_directories(test_pointer_table PRIVATE
  ${HS_MD_TABLES_TESTS_DIR} ${HS_MD_TABLES_MD_DIR})
target_link_libraries(test_pointer_table PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.pointer_table COMMAND test_pointer_table)
set_tests_properties(unit.pointer_table PROPERTIES TIMEOUT 120)

# free_track's queue (free_queue.c); the test stands in for the shim's backing free and
# report frame.
add_executable(test_free_queue
  ${HS_MD_TABLES_TESTS_DIR}/test_free_queue.c
  ${HS_MD_TABLES_TESTS_DIR}/shim_stubs.c
  ${HS_MD_TABLES_MD_DIR}/free_queue.c
  ${HS_MD_TABLES_MD_DIR}/backtrace_table.c)
target_include_directories(test_free_queue PRIVATE
  ${HS_MD_TABLES_TESTS_DIR} ${HS_MD_TABLES_MD_DIR})
target_link_libraries(test_free_queue PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.free_queue COMMAND test_free_queue fifo)
add_test(NAME unit.free_queue_threads COMMAND test_free_queue threads)
set_tests_properties(unit.free_queue unit.free_queue_threads PROPERTIES TIMEOUT 120)

# free_track's per-thread rings (free_queue.c); the test defines hs_md_backing_free.
add_executable(test_free_queue_rings
  ${HS_MD_TABLES_TESTS_DIR}/test_free_queue_rings.c
  ${HS_MD_TABLES_TESTS_DIR}/shim_stubs.c
  ${HS_MD_TABLES_MD_DIR}/free_queue.c
  ${HS_MD_TABLES_MD_DIR}/report.c
  ${HS_MD_TABLES_MD_DIR}/suppress.c
  ${HS_MD_TABLES_MD_DIR}/backtrace_table.c)
target_include_directories(test_free_queue_rings PRIVATE ${HS_MD_TABLES_TESTS_DIR} ${HS_MD_TABLES_MD_DIR})
target_link_libraries(test_free_queue_rings PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.free_queue_rings COMMAND test_free_queue_rings)
set_tests_properties(unit.free_queue_rings PROPERTIES TIMEOUT 120)

# The live-allocation table (pointer_table.c): its encodings against a model, and threads.
add_executable(test_pointer_table_regions
  ${HS_MD_TABLES_TESTS_DIR}/test_pointer_table_regions.c
  ${HS_MD_TABLES_TESTS_DIR}/shim_stubs.c
  ${HS_MD_TABLES_MD_DIR}/pointer_table.c
  ${HS_MD_TABLES_MD_DIR}/backtrace_table.c)
target_include_directories(test_pointer_table_regions PRIVATE ${HS_MD_TABLES_TESTS_DIR} ${HS_MD_TABLES_MD_DIR})
target_link_libraries(test_pointer_table_regions PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.pointer_table_regions COMMAND test_pointer_table_regions)
set_tests_properties(unit.pointer_table_regions PROPERTIES TIMEOUT 120)

# The fill and guard check (byte_check.h), 64 bytes at a time.
add_executable(test_byte_check ${HS_MD_TABLES_TESTS_DIR}/test_byte_check.c)
target_include_directories(test_byte_check PRIVATE ${HS_MD_TABLES_TESTS_DIR} ${HS_MD_TABLES_MD_DIR})
add_test(NAME unit.byte_check COMMAND test_byte_check)
