# Unit tests of the pprof profile builder, writer and reader (src/common/pprof.c).
# include()d from tests/unit/CMakeLists.txt.
set(HS_PPROF_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_pprof ${HS_PPROF_TESTS_DIR}/test_pprof.c)
target_include_directories(test_pprof PRIVATE ${HS_PPROF_TESTS_DIR})
target_link_libraries(test_pprof PRIVATE hs_tools)
add_test(NAME unit.pprof COMMAND test_pprof)
# The zip-bomb case inflates 1 GiB; everything else takes well under a second.
set_tests_properties(unit.pprof PROPERTIES TIMEOUT 120)
