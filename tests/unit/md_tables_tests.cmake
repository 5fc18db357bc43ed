# Unit tests of malloc debug's tables: the live-allocation table (pointer_table.c: deletion
# by backward shift, wrap-around, a model, threads). include()d from tests/unit/CMakeLists.txt.
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
target_link_libraries(test_pointer_table PRIVATE hs_md_options hs_common Threads::Threads)
add_test(NAME unit.pointer_table COMMAND test_pointer_table)
set_tests_properties(unit.pointer_table PROPERTIES TIMEOUT 120)
