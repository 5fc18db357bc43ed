# Unit test of the profiler's unwinder of copied stacks (src/profiler/daemon/unwinder.c), with its
# fixture: unwinder_fixture.c built with -O2 -fomit-frame-pointer as libuwfix.so (linked) and
# libuwfix_dl.so (only dlopen()ed). The test runs as a PIE and as a non-PIE (ET_EXEC)
# executable. include()d from tests/unit/CMakeLists.txt.
find_package(Threads REQUIRED)
set(HS_UNW_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

# Fixed optimization, no frame pointers (like Debian's libc); every call stays a call.
set(HS_UWFIX_CFLAGS -O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls)

add_library(hs_uwfix SHARED ${HS_UNW_TESTS_DIR}/unwinder_fixture.c)
set_target_properties(hs_uwfix PROPERTIES OUTPUT_NAME uwfix)
target_compile_options(hs_uwfix PRIVATE ${HS_UWFIX_CFLAGS})

add_library(hs_uwfix_dl MODULE ${HS_UNW_TESTS_DIR}/unwinder_fixture.c)
set_target_properties(hs_uwfix_dl PROPERTIES OUTPUT_NAME uwfix_dl)
target_compile_options(hs_uwfix_dl PRIVATE ${HS_UWFIX_CFLAGS})

foreach(variant pie nopie)
  set(t test_unwinder_${variant})
  add_executable(${t} ${HS_UNW_TESTS_DIR}/test_unwinder.c)
  target_include_directories(${t} PRIVATE ${HS_UNW_TESTS_DIR})
  target_link_libraries(${t} PRIVATE hs_profiler_unwinder hs_uwfix Threads::Threads
    ${CMAKE_DL_LIBS})
  add_dependencies(${t} hs_uwfix_dl)
  target_compile_definitions(${t} PRIVATE HS_UWFIX_DL="$<TARGET_FILE:hs_uwfix_dl>")
  if(variant STREQUAL nopie)
    set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${t} PRIVATE -fno-pie)
    target_link_options(${t} PRIVATE -no-pie)
  endif()
  add_test(NAME unit.unwinder_${variant} COMMAND ${t})
  set_tests_properties(unit.unwinder_${variant} PROPERTIES TIMEOUT 120)
endforeach()

# The client's half of a sample (registers + stack copy) unwound by the daemon's half.
add_executable(test_stack_copy ${HS_UNW_TESTS_DIR}/test_stack_copy.c)
target_include_directories(test_stack_copy PRIVATE ${HS_UNW_TESTS_DIR})
target_compile_options(test_stack_copy PRIVATE -O0 -g)
target_link_libraries(test_stack_copy PRIVATE hs_profiler_sampling hs_profiler_unwinder
  Threads::Threads)
add_test(NAME unit.stack_copy COMMAND test_stack_copy)
