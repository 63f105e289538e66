# cmake -DBACKPLANE=<path to the backplane program> -P check_conformance.cmake
#
# Runs `backplane conformance --backend cuda`. Where `nvidia-smi -L` lists a
# GPU the run must pass (exit 0); elsewhere it must exit 3 and say "no device".
if(NOT BACKPLANE)
  message(FATAL_ERROR "[cuda.conformance] pass -DBACKPLANE=<path to backplane>")
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

execute_process(COMMAND ${BACKPLANE} conformance --backend cuda
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("gpu listed by nvidia-smi: ${gpu}\nexit ${code}\n--- stdout ---\n${out}--- stderr ---\n${err}")

if(gpu)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "[cuda.conformance] a GPU is present; expected exit 0, got ${code}")
  endif()
else()
  if(NOT code EQUAL 3)
    message(FATAL_ERROR "[cuda.conformance] no GPU; expected exit 3 (no device), got ${code}")
  endif()
  string(FIND "${out}${err}" "no device" pos)
  if(pos EQUAL -1)
    message(FATAL_ERROR "[cuda.conformance] no GPU; the output lacks 'no device'")
  endif()
endif()
