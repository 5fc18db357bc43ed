# Unit tests of page_guard's and sample_guard's block placement (guarded_block.h) and of
# sample_guard's cost budget (sample_budget.h).
# include()d from tests/unit/CMakeLists.txt.
add_executable(test_guarded_block ${CMAKE_CURRENT_LIST_DIR}/test_guarded_block.c)
target_include_directories(test_guarded_block PRIVATE ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/src/malloc_debug)
target_link_libraries(test_guarded_block PRIVATE hs_base)
add_test(NAME unit.guarded_block COMMAND test_guarded_block)

# sample_guard's cost budget (sample_budget.h).
add_executable(test_sample_budget ${CMAKE_CURRENT_LIST_DIR}/test_sample_budget.c)
target_include_directories(test_sample_budget PRIVATE ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/src/malloc_debug)
add_test(NAME unit.sample_budget COMMAND test_sample_budget)
