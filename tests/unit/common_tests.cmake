# Unit tests of src/common's stack capture and printing (backtrace.c), /proc/<pid>/maps reader
# (proc_maps.c) and ELF symbol lookup (elf_symbols.c). include()d from tests/unit/CMakeLists.txt.
find_package(Threads REQUIRED)
set(HS_COMMON_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_proc_maps ${HS_COMMON_TESTS_DIR}/test_proc_maps.c)
target_include_directories(test_proc_maps PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_proc_maps PRIVATE hs_base Threads::Threads)
add_test(NAME unit.proc_maps COMMAND test_proc_maps)

add_executable(test_elf_symbols ${HS_COMMON_TESTS_DIR}/test_elf_symbols.c)
target_include_directories(test_elf_symbols PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_elf_symbols PRIVATE hs_base Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME unit.elf_symbols COMMAND test_elf_symbols)

# test_backtrace defines malloc & co. to count allocations, and must not be built with
# -rdynamic: its own function names have to come from .symtab. It runs as a PIE and as a
# non-PIE (ET_EXEC) executable, whose load bias is 0.
add_executable(test_backtrace ${HS_COMMON_TESTS_DIR}/test_backtrace.c)
target_include_directories(test_backtrace PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_backtrace PRIVATE hs_base Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME unit.backtrace COMMAND test_backtrace)

add_executable(test_backtrace_nopie ${HS_COMMON_TESTS_DIR}/test_backtrace.c)
target_include_directories(test_backtrace_nopie PRIVATE ${HS_COMMON_TESTS_DIR})
set_target_properties(test_backtrace_nopie PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(test_backtrace_nopie PRIVATE -fno-pie)
target_link_options(test_backtrace_nopie PRIVATE -no-pie)
target_compile_definitions(test_backtrace_nopie PRIVATE HS_TEST_NO_PIE)
target_link_libraries(test_backtrace_nopie PRIVATE hs_base Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME unit.backtrace_nopie COMMAND test_backtrace_nopie)

# JIT code names from perf map files (perf_map.c).
add_executable(test_perf_map ${HS_COMMON_TESTS_DIR}/test_perf_map.c)
target_include_directories(test_perf_map PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_perf_map PRIVATE hs_tools)
add_test(NAME unit.perf_map COMMAND test_perf_map)

# The fork gate of stack capture (capture_gate.c): forks while captures are in flight.
add_executable(test_capture_gate ${HS_COMMON_TESTS_DIR}/test_capture_gate.c)
target_include_directories(test_capture_gate PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_capture_gate PRIVATE hs_base Threads::Threads)
add_test(NAME unit.capture_gate COMMAND test_capture_gate)
set_tests_properties(unit.capture_gate PROPERTIES TIMEOUT 180)

# The stack walker with cached CFA rules (cfi_unwind.c) against libunwind alone.
add_executable(test_cfi_unwind ${HS_COMMON_TESTS_DIR}/test_cfi_unwind.c)
target_include_directories(test_cfi_unwind PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_cfi_unwind PRIVATE hs_base Threads::Threads)
add_test(NAME unit.cfi_unwind COMMAND test_cfi_unwind)

# The private allocator (arena.c): growing blocks, large ones by mremap.
add_executable(test_arena ${HS_COMMON_TESTS_DIR}/test_arena.c)
target_include_directories(test_arena PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_arena PRIVATE hs_base Threads::Threads)
add_test(NAME unit.arena COMMAND test_arena)

# The arena's fault injection (HEAPSCOPE_ARENA_FAIL_AFTER): on, and off for comparison.
add_executable(test_arena_fault ${HS_COMMON_TESTS_DIR}/test_arena_fault.c)
target_include_directories(test_arena_fault PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_arena_fault PRIVATE hs_base)
add_test(NAME unit.arena_fault COMMAND test_arena_fault)
set_tests_properties(unit.arena_fault PROPERTIES ENVIRONMENT HEAPSCOPE_ARENA_FAIL_AFTER=4)
add_test(NAME unit.arena_fault_off COMMAND test_arena_fault off)

# A fault's access kind and stack from its signal context (fault_context.c).
add_executable(test_fault_context ${HS_COMMON_TESTS_DIR}/test_fault_context.c)
target_include_directories(test_fault_context PRIVATE ${HS_COMMON_TESTS_DIR})
target_compile_options(test_fault_context PRIVATE -O0 -fno-omit-frame-pointer)
target_link_libraries(test_fault_context PRIVATE hs_base Threads::Threads)
add_test(NAME unit.fault_context COMMAND test_fault_context)

# Suppression rules (suppressions.c): the parser and the wildcard matcher.
add_executable(test_suppressions ${HS_COMMON_TESTS_DIR}/test_suppressions.c)
target_include_directories(test_suppressions PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_suppressions PRIVATE hs_base)
add_test(NAME unit.suppressions COMMAND test_suppressions)

# Android frame lines taken apart (frame_line.c): the command's source lines and the shim's
# suppressions read them.
add_executable(test_frame_line ${HS_COMMON_TESTS_DIR}/test_frame_line.c)
target_include_directories(test_frame_line PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_frame_line PRIVATE hs_base)
add_test(NAME unit.frame_line COMMAND test_frame_line)

# hs_assert (hs_assert.h): a failed check's line and SIGABRT, at level 2 (every check on)
# and at level 0 (none evaluated), whatever HEAPSCOPE_ASSERT_LEVEL the build uses.
foreach(level 2 0)
  set(name test_hs_assert)
  if(level EQUAL 0)
    set(name test_hs_assert_off)
  endif()
  add_executable(${name} ${HS_COMMON_TESTS_DIR}/test_hs_assert.c)
  target_include_directories(${name} PRIVATE ${HS_COMMON_TESTS_DIR})
  target_link_libraries(${name} PRIVATE hs_base)
  target_compile_definitions(${name} PRIVATE HS_TEST_ASSERT_LEVEL=${level})
  string(REPLACE "test_" "unit." test_name ${name})
  add_test(NAME ${test_name} COMMAND ${name})
endforeach()

# The allocation-free formatter (format.c) against vsnprintf.
add_executable(test_format ${HS_COMMON_TESTS_DIR}/test_format.c)
target_include_directories(test_format PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_format PRIVATE hs_base)
add_test(NAME unit.format COMMAND test_format)

# The shared open-addressing table (hash_table.h) against a model, and the range lookups
# (range_lookup.h).
add_executable(test_hash_table ${HS_COMMON_TESTS_DIR}/test_hash_table.c)
target_include_directories(test_hash_table PRIVATE ${HS_COMMON_TESTS_DIR})
target_link_libraries(test_hash_table PRIVATE hs_base)
add_test(NAME unit.hash_table COMMAND test_hash_table)
