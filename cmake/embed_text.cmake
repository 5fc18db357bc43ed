# embed_text.cmake: writes OUTPUT, a C source defining `const char NAME[]`, the bytes of the
# text file INPUT followed by a NUL, so that a page's script and style sheet can be edited,
# linted and diffed as the files they are and still be compiled in (no xxd needed).
# Usage: cmake -DINPUT=file -DOUTPUT=file.c -DNAME=c_name -DHEADER=header.h -P embed_text.cmake
# The text goes inside an HTML <script> or <style> element: a closing tag of either in it
# would end the element early, so it is refused here.
foreach(var INPUT OUTPUT NAME HEADER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_text.cmake: ${var} is not set")
  endif()
endforeach()

file(READ "${INPUT}" text)
string(TOLOWER "${text}" lower)
if(lower MATCHES "</(script|style)")
  message(FATAL_ERROR "${INPUT}: contains </${CMAKE_MATCH_1}, which would end the page's element")
endif()

file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 sixteen) # CMake's regex has no {16}
string(REGEX REPLACE "(${sixteen})" "\\1\n    " bytes "${bytes}")
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${input_name} by cmake/embed_text.cmake at build time: edit that file. */\n"
  "#include \"${HEADER}\"\n\n"
  "const char ${NAME}[] = {\n    ${bytes}0x00};\n")
# Only a changed text rewrites the source (and rebuilds what links it).
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
