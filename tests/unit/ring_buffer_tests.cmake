# The profiler's shared ring buffer (src/profiler/ring_buffer.c): sizes, attach checks, every
# record size, wrap-around, full buffer, wake-ups, unpublished records, dead lock holders,
# signal handlers, 4 writer threads against a reader, forked writers, hostile contents.
# include()d from tests/unit/CMakeLists.txt.
find_package(Threads REQUIRED)
add_executable(test_ring_buffer ${CMAKE_CURRENT_LIST_DIR}/test_ring_buffer.c)
target_include_directories(test_ring_buffer PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_ring_buffer PRIVATE hs_profiler_wire Threads::Threads)
add_test(NAME unit.ring_buffer COMMAND test_ring_buffer)
# 1M records through 4 writer threads take a few seconds; more under a sanitizer.
set_tests_properties(unit.ring_buffer PROPERTIES TIMEOUT 300)

# The profiler client's set of sampled addresses and the socket helpers of the handshake.
add_executable(test_sampled_set ${CMAKE_CURRENT_LIST_DIR}/test_sampled_set.c
  ${PROJECT_SOURCE_DIR}/src/profiler/client/sampled_set.c)
target_include_directories(test_sampled_set PRIVATE ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/src/profiler/client)
target_link_libraries(test_sampled_set PRIVATE hs_base Threads::Threads)
add_test(NAME unit.sampled_set COMMAND test_sampled_set)

# The daemon's stack hints in the buffer's metadata page (src/profiler/stack_hints.c).
add_executable(test_stack_hints ${CMAKE_CURRENT_LIST_DIR}/test_stack_hints.c)
target_include_directories(test_stack_hints PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_stack_hints PRIVATE hs_profiler_wire Threads::Threads)
add_test(NAME unit.stack_hints COMMAND test_stack_hints)

# The daemon's check of the client's records (src/profiler/records.c).
add_executable(test_records ${CMAKE_CURRENT_LIST_DIR}/test_records.c)
target_include_directories(test_records PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_records PRIVATE hs_profiler_wire)
add_test(NAME unit.records COMMAND test_records)
