# End-to-end tests of record_allocs (the allocation recorder): md_record makes a known
# sequence of calls under the shim and asks for the records with SIGRTMAX-18.
# include()d from tests/e2e/CMakeLists.txt, which defines e2e_env.
add_executable(md_record ${CMAKE_CURRENT_LIST_DIR}/programs/md_record.c)
target_compile_options(md_record PRIVATE -O0 -g -fno-builtin)
target_link_libraries(md_record PRIVATE pthread)
add_test(NAME e2e.malloc_debug_record
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_malloc_debug_record.py -v)
set_tests_properties(e2e.malloc_debug_record PROPERTIES
  ENVIRONMENT "${e2e_env};HS_MD_RECORD=$<TARGET_FILE:md_record>" TIMEOUT 300)
