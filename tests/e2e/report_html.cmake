# End-to-end tests of the HTML flame graph of `heapscope report` (src/report/flamegraph.c):
# tests/e2e/programs/fg_writer.c writes pages of built-in stacks, tests/e2e/test_report_html.py
# opens them in headless Chromium (/usr/bin/chromium, Debian's chromium package, which
# `make deps` installs) and checks the rendered DOM and a screenshot.
# include()d from tests/e2e/CMakeLists.txt, which defines e2e_env.
add_executable(fg_writer ${CMAKE_CURRENT_LIST_DIR}/programs/fg_writer.c
  ${PROJECT_SOURCE_DIR}/src/report/flamegraph.c)
target_include_directories(fg_writer PRIVATE
  ${PROJECT_SOURCE_DIR}/src/report ${PROJECT_SOURCE_DIR}/src/common)
target_link_libraries(fg_writer PRIVATE hs_common)

add_test(NAME e2e.report_html
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_report_html.py -v)
set_tests_properties(e2e.report_html PROPERTIES
  ENVIRONMENT "${e2e_env};HS_FG_WRITER=$<TARGET_FILE:fg_writer>" TIMEOUT 300)
