# The ptrace injector of `heapscope profile -p` / `heapscope leaks -p` (src/cli/process_inject.c),
# on children of the test. include()d from tests/unit/CMakeLists.txt.
add_library(inject_probe MODULE ${CMAKE_CURRENT_LIST_DIR}/inject_probe.c)
add_executable(test_process_inject ${CMAKE_CURRENT_LIST_DIR}/test_process_inject.c
  ${PROJECT_SOURCE_DIR}/src/cli/process_inject.c ${PROJECT_SOURCE_DIR}/src/cli/target_process.c)
target_include_directories(test_process_inject PRIVATE ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/src/cli ${PROJECT_SOURCE_DIR}/src/malloc_debug)
target_link_libraries(test_process_inject PRIVATE hs_base pthread ${CMAKE_DL_LIBS})
# A malloc replacement that holds a lock in every call, and a program that only allocates:
# the injector must not stop a thread inside such an allocator.
add_library(inject_allocator MODULE ${CMAKE_CURRENT_LIST_DIR}/inject_allocator.c)
add_executable(inject_busy_alloc ${CMAKE_CURRENT_LIST_DIR}/inject_busy_alloc.c)
add_test(NAME unit.process_inject COMMAND test_process_inject $<TARGET_FILE:inject_probe>
  $<TARGET_FILE:inject_allocator> $<TARGET_FILE:inject_busy_alloc>)
