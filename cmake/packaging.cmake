# packaging.cmake: the Debian package, built by CPack's DEB generator from what `make install`
# installs. Included for the build tree that scripts/package.sh (`make package`) configures:
# prefix /usr, so that GNUInstallDirs puts the libraries under the multiarch directory
# (lib/x86_64-linux-gnu) and the paths compiled into the command and written into the man
# pages and the systemd unit are the installed ones. docs/packaging.md says why one package.

if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "the Debian package installs under /usr: configure with "
    "-DCMAKE_INSTALL_PREFIX=/usr (scripts/package.sh does)")
endif()
# CPack finds the ELF files with file(1) and computes Depends with dpkg-shlibdeps; without
# them it would silently build a package that depends on nothing.
find_program(HS_DPKG_SHLIBDEPS dpkg-shlibdeps REQUIRED)
find_program(HS_FILE_COMMAND file REQUIRED)
find_program(HS_DPKG dpkg REQUIRED)

set(HEAPSCOPE_PACKAGE_MAINTAINER
  "heapscope maintainers <maintainers@users.noreply.a-seed-9c5b82ae.example>"
  CACHE STRING "The Maintainer field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME heapscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_CONTACT "${HEAPSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "native-memory tools for Linux programs: malloc debug, leak detector, heap profiler")
# The Description field's long part (CPack puts the summary above it and indents each line).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Android's native-memory tools brought to Linux/glibc, for unmodified C and C++
programs: malloc debug (guards, fills, use-after-free and leak tracking, heap
dumps) as a preloaded library, libmemunreachable (unreachable memory in a live
process, milliseconds of pause), the heapprofd sampling heap profiler (pprof
output, attaches to running processes) and a report tool (symbolized text,
flame graphs). Includes the C headers, the pkg-config file, man pages, bash
completion and the profiler daemon's systemd units (not enabled).")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
execute_process(COMMAND ${HS_DPKG} --print-architecture
  OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE OUTPUT_STRIP_TRAILING_WHITESPACE)
# Depends: what the shared libraries and programs link against, from dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion")
# Debian ships stripped binaries; the debug information is not needed to run the tools.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/dist/debian/postinst
  ${PROJECT_SOURCE_DIR}/dist/debian/prerm
  ${PROJECT_SOURCE_DIR}/dist/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The install tree only: no source package.
set(CPACK_SOURCE_GENERATOR "")

include(CPack)
