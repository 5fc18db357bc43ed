# make bench-compare's reading of the committed summary and its flags (bench/compare.py): no
# benchmark is run, nothing is timed.
add_test(NAME e2e.bench_compare
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_compare.py -v)
set_tests_properties(e2e.bench_compare PROPERTIES TIMEOUT 60)
