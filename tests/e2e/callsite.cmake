# End-to-end test of call-site frames (tests/e2e/test_callsite.py with
# tests/e2e/programs/callsite.c): dumps, leak reports and profiles resolved by addr2line and
# Go's pprof (golang-go, a test dependency in scripts/deps.sh). include()d from
# tests/e2e/CMakeLists.txt, which defines e2e_env.
add_executable(callsite ${CMAKE_CURRENT_LIST_DIR}/programs/callsite.c)
# -O0 -g: each call its own statement, the line after it starting at its return address.
target_compile_options(callsite PRIVATE -O0 -g -fno-builtin)

add_test(NAME e2e.callsite
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_callsite.py -v)
set_tests_properties(e2e.callsite PROPERTIES
  ENVIRONMENT "${e2e_env};HS_CALLSITE=$<TARGET_FILE:callsite>" TIMEOUT 300)
