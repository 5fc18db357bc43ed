# heapscope leaks -p on a process started without heapscope: a program that loads
# libmemunreachable.so itself (standing in for the injector) and runs with nothing preloaded.
add_executable(mu_injected programs/mu_injected.c)
target_compile_options(mu_injected PRIVATE -O0 -g)
target_link_libraries(mu_injected PRIVATE pthread ${CMAKE_DL_LIBS})
add_dependencies(mu_injected memunreachable)
add_test(NAME e2e.memunreachable_injected
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_memunreachable_injected.py -v)
set_tests_properties(e2e.memunreachable_injected PROPERTIES
  ENVIRONMENT "${e2e_env};HS_MU_INJECTED=$<TARGET_FILE:mu_injected>;HS_MEMUNREACHABLE=$<TARGET_FILE:memunreachable>"
  TIMEOUT 300)
