# Unit tests of the unreachable-memory detector's thread capture (thread_capture.c) and
# capture sequence (collector.c). include()d from tests/unit/CMakeLists.txt.
#
# The modules are compiled into the tests directly rather than linked from
# hs_memunreachable_core: test_collector supplies its own hs_mu_sweep (a stub that reports
# what the sweeper received), which must not meet the real sweep.c in the link.
find_package(Threads REQUIRED)
set(HS_CAPTURE_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(HS_MU_SRC_DIR ${PROJECT_SOURCE_DIR}/src/memunreachable)

add_executable(test_thread_capture
  ${HS_CAPTURE_TESTS_DIR}/test_thread_capture.c
  ${HS_MU_SRC_DIR}/thread_capture.c)
target_include_directories(test_thread_capture PRIVATE ${HS_CAPTURE_TESTS_DIR} ${HS_MU_SRC_DIR})
target_link_libraries(test_thread_capture PRIVATE hs_base Threads::Threads)
add_test(NAME unit.thread_capture COMMAND test_thread_capture)
set_tests_properties(unit.thread_capture PROPERTIES TIMEOUT 60)

add_executable(test_collector
  ${HS_CAPTURE_TESTS_DIR}/test_collector.c
  ${HS_MU_SRC_DIR}/thread_capture.c
  ${HS_MU_SRC_DIR}/collector.c)
target_include_directories(test_collector PRIVATE ${HS_CAPTURE_TESTS_DIR} ${HS_MU_SRC_DIR})
target_link_libraries(test_collector PRIVATE hs_base Threads::Threads)
add_test(NAME unit.collector COMMAND test_collector)
set_tests_properties(unit.collector PROPERTIES TIMEOUT 60)
