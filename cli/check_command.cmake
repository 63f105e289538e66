# Runs a command and checks its exit code and output; for CLI tests.
#
#   cmake -DEXPECT_EXIT=2 [-DEXPECT_STDOUT="a|b"] [-DEXPECT_STDERR="c"]
#         -P check_command.cmake -- <program> <args>...
#
# EXPECT_STDOUT / EXPECT_STDERR: texts separated by '|', each of which must
# appear in that stream. REJECT_STDOUT / REJECT_STDERR: a text that must not
# appear in that stream.
set(cmd "")
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "[check_command] no command after --")
endif()

execute_process(COMMAND ${cmd}
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${code}\n--- stdout ---\n${out}--- stderr ---\n${err}")

if(DEFINED EXPECT_EXIT AND NOT "${code}" STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "[check_command] expected exit ${EXPECT_EXIT}, got ${code}")
endif()
foreach(stream stdout stderr)
  string(TOUPPER "${stream}" upper)
  if(stream STREQUAL "stdout")
    set(text "${out}")
  else()
    set(text "${err}")
  endif()
  if(DEFINED EXPECT_${upper})
    string(REPLACE "|" ";" wanted "${EXPECT_${upper}}")
    foreach(w IN LISTS wanted)
      string(FIND "${text}" "${w}" pos)
      if(pos EQUAL -1)
        message(FATAL_ERROR "[check_command] ${stream} lacks '${w}'")
      endif()
    endforeach()
  endif()
endforeach()
foreach(stream stdout stderr)
  string(TOUPPER "${stream}" upper)
  if(DEFINED REJECT_${upper})
    if(stream STREQUAL "stdout")
      string(FIND "${out}" "${REJECT_${upper}}" pos)
    else()
      string(FIND "${err}" "${REJECT_${upper}}" pos)
    endif()
    if(NOT pos EQUAL -1)
      message(FATAL_ERROR "[check_command] ${stream} has '${REJECT_${upper}}'")
    endif()
  endif()
endforeach()
