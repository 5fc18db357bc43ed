# The profiler's Poisson sampler (src/profiler/sampler.c): unbiased totals, exact mode, the
# distribution of the draws. include()d from tests/unit/CMakeLists.txt.
add_executable(test_sampler test_sampler.c ${PROJECT_SOURCE_DIR}/src/profiler/sampler.c)
target_include_directories(test_sampler PRIVATE
  ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/src/profiler)
target_link_libraries(test_sampler PRIVATE m)
add_test(NAME unit.sampler COMMAND test_sampler)
