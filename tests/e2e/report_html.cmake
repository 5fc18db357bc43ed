# End-to-end tests of the HTML flame graph of `heapscope report` (src/report/flamegraph.c):
# tests/e2e/programs/fg_writer.c writes pages of built-in stacks, tests/e2e/test_report_html.py
# opens them in headless Chromium (/usr/bin/chromium, Debian's chromium package, which
# `make deps` installs) and checks the rendered DOM and a screenshot.
# include()d from tests/e2e/CMakeLists.txt, which defines e2e_env.
add_executable(fg_writer ${CMAKE_CURRENT_LIST_DIR}/programs/fg_writer.c
  ${PROJECT_SOURCE_DIR}/src/report/flamegraph.c)
target_include_directories(fg_writer PRIVATE
  ${PROJECT_SOURCE_DIR}/src/report ${PROJECT_SOURCE_DIR}/src/common)
target_link_libraries(fg_writer PRIVATE hs_tools hs_flamegraph_assets)

add_test(NAME e2e.report_html
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_report_html.py -v)
set_tests_properties(e2e.report_html PROPERTIES
  ENVIRONMENT "${e2e_env};HS_FG_WRITER=$<TARGET_FILE:fg_writer>" TIMEOUT 300)

# The page's script parses (node --check): a syntax error would otherwise show only as a blank
# page. Skipped, with the reason, where Node.js is not installed.
add_test(NAME e2e.report_html_js_syntax
  COMMAND sh -c "command -v node >/dev/null 2>&1 || { echo 'node not found: skipped'; exit 77; }; exec node --check \"$0\""
          ${PROJECT_SOURCE_DIR}/src/report/flamegraph.js)
set_tests_properties(e2e.report_html_js_syntax PROPERTIES SKIP_RETURN_CODE 77)
