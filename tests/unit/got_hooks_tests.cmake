# Unit test of the profiler client's GOT redirection (src/profiler/client/got_hooks.c), with
# its small libraries: got_hooks_lib.c built with -z now -z relro (libgh_now), -z lazy
# -z norelro (libgh_lazy), -fno-plt (libgh_noplt, GLOB_DAT slots), lazily into a directory of
# its own that only the test's RUNPATH names (libgh_late, dlopen'ed by bare name), and
# against an allocator of its own (libgh_deep + libgh_altmalloc, dlopen'ed RTLD_DEEPBIND);
# got_hooks_ifunc.c runs a scan from an IFUNC resolver, in the middle of its own relocation.
# include()d from tests/unit/CMakeLists.txt.
find_package(Threads REQUIRED)
set(HS_GH_DIR ${CMAKE_CURRENT_LIST_DIR})
set(HS_GH_CLIENT_DIR ${PROJECT_SOURCE_DIR}/src/profiler/client)
# Every call stays a call through the GOT.
set(HS_GH_CFLAGS -O1 -fno-builtin)

# The module in a library of its own, as in libheapprofd.so: the object it never patches.
add_library(hs_gh_module SHARED ${HS_GH_CLIENT_DIR}/got_hooks.c ${HS_GH_DIR}/got_hooks_self.c
  ${PROJECT_SOURCE_DIR}/src/common/symbol_binding.c)
set_target_properties(hs_gh_module PROPERTIES OUTPUT_NAME gh_module C_VISIBILITY_PRESET default)
target_include_directories(hs_gh_module PRIVATE ${HS_GH_CLIENT_DIR} ${PROJECT_SOURCE_DIR}/src/common)
target_compile_options(hs_gh_module PRIVATE ${HS_GH_CFLAGS})
target_link_libraries(hs_gh_module PRIVATE Threads::Threads ${CMAKE_DL_LIBS})

function(hs_gh_lib target name)
  add_library(${target} SHARED ${HS_GH_DIR}/got_hooks_lib.c)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME gh_${name})
  target_compile_definitions(${target} PRIVATE GH_NAME=${name})
  target_compile_options(${target} PRIVATE ${HS_GH_CFLAGS})
endfunction()

hs_gh_lib(hs_gh_now now)
target_link_options(hs_gh_now PRIVATE -Wl,-z,now -Wl,-z,relro)
hs_gh_lib(hs_gh_lazy lazy)
target_link_options(hs_gh_lazy PRIVATE -Wl,-z,lazy -Wl,-z,norelro)
hs_gh_lib(hs_gh_noplt noplt)
target_compile_options(hs_gh_noplt PRIVATE -fno-plt)
target_link_options(hs_gh_noplt PRIVATE -Wl,-z,lazy -Wl,-z,relro)
hs_gh_lib(hs_gh_late late)
target_link_options(hs_gh_late PRIVATE -Wl,-z,lazy)
set_target_properties(hs_gh_late PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/gh_late)

add_library(hs_gh_altmalloc SHARED ${HS_GH_DIR}/got_hooks_alt_malloc.c)
set_target_properties(hs_gh_altmalloc PROPERTIES OUTPUT_NAME gh_altmalloc)
target_include_directories(hs_gh_altmalloc PRIVATE ${PROJECT_SOURCE_DIR}/src/common)
target_compile_options(hs_gh_altmalloc PRIVATE ${HS_GH_CFLAGS})
hs_gh_lib(hs_gh_deep deep)
target_link_options(hs_gh_deep PRIVATE -Wl,-z,now)
target_link_libraries(hs_gh_deep PRIVATE hs_gh_altmalloc)

add_library(hs_gh_ifunc SHARED ${HS_GH_DIR}/got_hooks_ifunc.c)
set_target_properties(hs_gh_ifunc PROPERTIES OUTPUT_NAME gh_ifunc)
target_compile_options(hs_gh_ifunc PRIVATE ${HS_GH_CFLAGS} -fno-plt)
target_link_options(hs_gh_ifunc PRIVATE -Wl,-z,now)
target_link_libraries(hs_gh_ifunc PRIVATE hs_gh_module)

add_executable(test_got_hooks ${HS_GH_DIR}/test_got_hooks.c)
target_include_directories(test_got_hooks PRIVATE
  ${HS_GH_DIR} ${HS_GH_CLIENT_DIR} ${PROJECT_SOURCE_DIR}/src/common)
target_compile_options(test_got_hooks PRIVATE -fno-builtin)
target_link_libraries(test_got_hooks PRIVATE
  hs_gh_module hs_gh_now hs_gh_lazy hs_gh_noplt Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_got_hooks hs_gh_late hs_gh_deep hs_gh_ifunc)
# libgh_late.so is found through this RUNPATH only (dlopen by bare name from the program).
set_target_properties(test_got_hooks PROPERTIES BUILD_RPATH "$ORIGIN/gh_late")
target_compile_definitions(test_got_hooks PRIVATE
  GH_DEEP_LIB="$<TARGET_FILE:hs_gh_deep>" GH_IFUNC_LIB="$<TARGET_FILE:hs_gh_ifunc>")
add_test(NAME unit.got_hooks COMMAND test_got_hooks)
set_tests_properties(unit.got_hooks PROPERTIES TIMEOUT 120)
