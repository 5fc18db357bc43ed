# End-to-end tests of page_guard and sample_guard: md_guard's heap bugs caught at the
# faulting access, clean programs (md_guard clean, md_stress, python3) left alone, programs
# with their own SIGSEGV handlers. include()d from tests/e2e/CMakeLists.txt (e2e_env).
add_executable(md_guard ${CMAKE_CURRENT_LIST_DIR}/programs/md_guard.c)
target_compile_options(md_guard PRIVATE -O0 -g -fno-builtin -Wno-use-after-free
  -Wno-free-nonheap-object -Wno-array-bounds -Wno-stringop-overflow -Wno-alloc-size-larger-than)
target_link_libraries(md_guard PRIVATE pthread)
add_library(md_guard_pre MODULE ${CMAKE_CURRENT_LIST_DIR}/programs/md_guard_pre.c)
add_test(NAME e2e.malloc_debug_guard
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_malloc_debug_guard.py -v)
set_tests_properties(e2e.malloc_debug_guard PROPERTIES
  ENVIRONMENT "${e2e_env};HS_MD_GUARD=$<TARGET_FILE:md_guard>;HS_MD_GUARD_PRE=$<TARGET_FILE:md_guard_pre>"
  TIMEOUT 300)
