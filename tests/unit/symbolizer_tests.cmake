# Unit test of src/common's symbolizer (symbolizer.c, elfutils), with its fixtures: the same
# source (symbolizer_fixture.c) built as a DSO the test links, as a non-PIE (ET_EXEC)
# executable and as a PIE linked with -z noseparate-code, the first two with their debug info
# split off into FILE.debug (objcopy --only-keep-debug, strip, objcopy --add-gnu-debuglink)
# so that static functions and file:line can only come from the separate debug file.
# include()d from tests/unit/CMakeLists.txt.
set(HS_SYM_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

# Fixed optimization so that inlining and line tables do not depend on the build type.
set(HS_SYMFIX_CFLAGS -O2 -g -fno-omit-frame-pointer)

# Splits the debug info of a fixture target into <file>.debug, next to it.
function(hs_symfix_split_debug target)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_OBJCOPY} --only-keep-debug $<TARGET_FILE:${target}>
            $<TARGET_FILE:${target}>.debug
    COMMAND ${CMAKE_STRIP} --strip-debug --strip-unneeded $<TARGET_FILE:${target}>
    COMMAND ${CMAKE_OBJCOPY} --add-gnu-debuglink=$<TARGET_FILE:${target}>.debug
            $<TARGET_FILE:${target}>
    VERBATIM)
endfunction()

add_library(hs_symfix SHARED ${HS_SYM_TESTS_DIR}/symbolizer_fixture.c)
set_target_properties(hs_symfix PROPERTIES OUTPUT_NAME symfix)
target_compile_options(hs_symfix PRIVATE ${HS_SYMFIX_CFLAGS})
target_link_options(hs_symfix PRIVATE -Wl,--build-id -Wl,-z,separate-code)
hs_symfix_split_debug(hs_symfix)

add_executable(hs_symfix_exe_nopie ${HS_SYM_TESTS_DIR}/symbolizer_fixture.c
                                   ${HS_SYM_TESTS_DIR}/symbolizer_fixture_main.c)
set_target_properties(hs_symfix_exe_nopie PROPERTIES POSITION_INDEPENDENT_CODE OFF)
target_compile_options(hs_symfix_exe_nopie PRIVATE ${HS_SYMFIX_CFLAGS} -fno-pie)
target_link_options(hs_symfix_exe_nopie PRIVATE -no-pie -Wl,--build-id -Wl,-z,separate-code)
hs_symfix_split_debug(hs_symfix_exe_nopie)

add_executable(hs_symfix_exe_pie ${HS_SYM_TESTS_DIR}/symbolizer_fixture.c
                                 ${HS_SYM_TESTS_DIR}/symbolizer_fixture_main.c)
target_compile_options(hs_symfix_exe_pie PRIVATE ${HS_SYMFIX_CFLAGS} -fpie)
target_link_options(hs_symfix_exe_pie PRIVATE -pie -Wl,--build-id -Wl,-z,noseparate-code)

add_executable(test_symbolizer ${HS_SYM_TESTS_DIR}/test_symbolizer.c)
target_include_directories(test_symbolizer PRIVATE ${HS_SYM_TESTS_DIR})
target_link_libraries(test_symbolizer PRIVATE hs_tools hs_symfix ${CMAKE_DL_LIBS})
add_dependencies(test_symbolizer hs_symfix_exe_nopie hs_symfix_exe_pie)
target_compile_definitions(test_symbolizer PRIVATE
  HS_SYMFIX_LIB="$<TARGET_FILE:hs_symfix>"
  HS_SYMFIX_EXE_NOPIE="$<TARGET_FILE:hs_symfix_exe_nopie>"
  HS_SYMFIX_EXE_PIE="$<TARGET_FILE:hs_symfix_exe_pie>"
  HS_SYMFIX_SRC="${HS_SYM_TESTS_DIR}/symbolizer_fixture.c")
add_test(NAME unit.symbolizer COMMAND test_symbolizer)
# debuginfod must never be consulted: point it at an unroutable address (a lookup would hang
# until the timeout) and check in the test that libdebuginfod never got loaded.
set_tests_properties(unit.symbolizer PROPERTIES TIMEOUT 120
  ENVIRONMENT "DEBUGINFOD_URLS=http://192.0.2.1:8002/;DEBUGINFOD_TIMEOUT=60")
