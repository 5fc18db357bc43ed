# Unit tests of malloc debug's allocation recorder (src/malloc_debug/record_allocs.c).
# include()d from tests/unit/CMakeLists.txt. The module is compiled into the test directly
# (it is not a library of its own); the test defines the shim's re-entry guard hs_md_in_shim,
# which the real shim defines in init.c.
find_package(Threads REQUIRED)
set(HS_RECORD_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_record_allocs
  ${HS_RECORD_TESTS_DIR}/test_record_allocs.c
  ${PROJECT_SOURCE_DIR}/src/malloc_debug/record_allocs.c)
target_include_directories(test_record_allocs PRIVATE
  ${HS_RECORD_TESTS_DIR} ${PROJECT_SOURCE_DIR}/src/malloc_debug)
target_link_libraries(test_record_allocs PRIVATE hs_md_options hs_base Threads::Threads)
add_test(NAME unit.record_allocs COMMAND test_record_allocs)
set_tests_properties(unit.record_allocs PROPERTIES TIMEOUT 120)
