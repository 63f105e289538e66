# cmake -DNAME=<test> [-DEXPECT_STDOUT="a|b"] [-DNO_DEVICE_EXIT=3] [-DSKIP_IF=text]
#       -P check_on_gpu.cmake -- <program> <args>...
#
# Runs a command that needs a CUDA device. Where `nvidia-smi -L` lists a GPU
# it must pass: exit 0, and stdout holds each '|'-separated text of
# EXPECT_STDOUT; unless its output holds SKIP_IF (a library the machine
# lacks, as NCCL), then it prints "skipped: SKIP_IF" (the test's
# SKIP_REGULAR_EXPRESSION). Elsewhere it must exit NO_DEVICE_EXIT (default 3,
# the CLI's code for a backend without a device) and say "no device".
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
if(NOT NAME OR NOT cmd)
  message(FATAL_ERROR "[check_on_gpu] pass -DNAME=<test> and a command after --")
endif()
if(NOT DEFINED NO_DEVICE_EXIT)
  set(NO_DEVICE_EXIT 3)
endif()

set(gpu FALSE)
find_program(NVIDIA_SMI nvidia-smi)
if(NVIDIA_SMI)
  execute_process(COMMAND ${NVIDIA_SMI} -L
    RESULT_VARIABLE smi_code OUTPUT_VARIABLE smi_out ERROR_QUIET)
  if(smi_code EQUAL 0 AND smi_out MATCHES "GPU [0-9]+:")
    set(gpu TRUE)
  endif()
endif()

execute_process(COMMAND ${cmd} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("gpu listed by nvidia-smi: ${gpu}\nexit ${code}\n--- stdout ---\n${out}--- stderr ---\n${err}")

if(gpu AND DEFINED SKIP_IF AND NOT code EQUAL 0)
  string(FIND "${out}${err}" "${SKIP_IF}" pos)
  if(NOT pos EQUAL -1)
    message("[${NAME}] skipped: ${SKIP_IF}")
    return()
  endif()
endif()
if(gpu)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "[${NAME}] a GPU is present; expected exit 0, got ${code}")
  endif()
  if(DEFINED EXPECT_STDOUT)
    string(REPLACE "|" ";" wanted "${EXPECT_STDOUT}")
    foreach(w IN LISTS wanted)
      string(FIND "${out}" "${w}" pos)
      if(pos EQUAL -1)
        message(FATAL_ERROR "[${NAME}] stdout lacks '${w}'")
      endif()
    endforeach()
  endif()
else()
  if(NOT code EQUAL NO_DEVICE_EXIT)
    message(FATAL_ERROR "[${NAME}] no GPU; expected exit ${NO_DEVICE_EXIT} (no device), got ${code}")
  endif()
  string(FIND "${out}${err}" "no device" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "[${NAME}] no GPU; the output lacks 'no device'")
  endif()
endif()
