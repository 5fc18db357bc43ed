# The profiler's Poisson sampler (src/profiler/client/sampler.c): unbiased totals, exact mode,
# the distribution of the draws. include()d from tests/unit/CMakeLists.txt.
add_executable(test_sampler test_sampler.c ${PROJECT_SOURCE_DIR}/src/profiler/client/sampler.c)
target_include_directories(test_sampler PRIVATE
  ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/src/profiler/client)
target_link_libraries(test_sampler PRIVATE m)
add_test(NAME unit.sampler COMMAND test_sampler)

# The profiling session's option table, shared by heapprofd and `heapscope profile`.
add_executable(test_session_options ${CMAKE_CURRENT_LIST_DIR}/test_session_options.c)
target_include_directories(test_session_options PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_session_options PRIVATE hs_session_options)
add_test(NAME unit.session_options COMMAND test_session_options)
