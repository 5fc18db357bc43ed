# Unit tests of the profiler daemon's heap tracker and profile writer
# (src/profiler/daemon/heap_tracker.c, profile_writer.c). include()d from
# tests/unit/CMakeLists.txt.
set(HS_TRACKER_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

# Allocation failures are injected into the tracker through its malloc, calloc and realloc
# calls (the test defines __wrap_malloc & co.).
add_executable(test_heap_tracker ${HS_TRACKER_TESTS_DIR}/test_heap_tracker.c)
target_include_directories(test_heap_tracker PRIVATE ${HS_TRACKER_TESTS_DIR})
target_link_libraries(test_heap_tracker PRIVATE hs_profiler_daemon)
target_link_options(test_heap_tracker PRIVATE
  -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
add_test(NAME unit.heap_tracker COMMAND test_heap_tracker)
set_tests_properties(unit.heap_tracker PROPERTIES TIMEOUT 120)

# Symbolizes its own functions: not built with -rdynamic, so their names come from .symtab;
# debuginfod is never consulted by the symbolizer, the empty URL list makes sure of it.
add_executable(test_profile_writer ${HS_TRACKER_TESTS_DIR}/test_profile_writer.c)
target_include_directories(test_profile_writer PRIVATE ${HS_TRACKER_TESTS_DIR})
target_link_libraries(test_profile_writer PRIVATE hs_profiler_daemon hs_report)
add_test(NAME unit.profile_writer COMMAND test_profile_writer)
set_tests_properties(unit.profile_writer PROPERTIES TIMEOUT 120 ENVIRONMENT "DEBUGINFOD_URLS=")

# The daemon's background symbolizing (src/profiler/daemon/presymbolizer.c): its own mappings;
# also run under ThreadSanitizer (make sanitize).
add_executable(test_presymbolizer ${HS_TRACKER_TESTS_DIR}/test_presymbolizer.c)
target_include_directories(test_presymbolizer PRIVATE ${HS_TRACKER_TESTS_DIR})
target_link_libraries(test_presymbolizer PRIVATE hs_profiler_daemon)
add_test(NAME unit.presymbolizer COMMAND test_presymbolizer)
set_tests_properties(unit.presymbolizer PROPERTIES TIMEOUT 300 ENVIRONMENT "DEBUGINFOD_URLS=")
