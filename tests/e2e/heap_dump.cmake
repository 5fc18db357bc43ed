# End-to-end tests of malloc debug's heap dumps and get_malloc_leak_info
# (tests/e2e/test_malloc_debug_heap_dump.py with tests/e2e/programs/md_heap.c).
# include()d from tests/e2e/CMakeLists.txt, which defines e2e_env.
add_executable(md_heap ${CMAKE_CURRENT_LIST_DIR}/programs/md_heap.c)
# -O0 and no inlining: the allocating functions must appear in the backtraces by name.
target_compile_options(md_heap PRIVATE -O0 -g -fno-builtin)
target_include_directories(md_heap PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(md_heap PRIVATE pthread ${CMAKE_DL_LIBS})

add_test(NAME e2e.malloc_debug_heap_dump
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_malloc_debug_heap_dump.py -v)
set_tests_properties(e2e.malloc_debug_heap_dump PROPERTIES
  ENVIRONMENT "${e2e_env};HS_MD_HEAP=$<TARGET_FILE:md_heap>" TIMEOUT 300)
