# Runs a few conformance cases on the opencl backend twice with the program
# cache in CACHE (emptied first) and the plugin's log on: the first run must
# build and cache programs, the second must load every one from the cache.
# One seed for both: the seed picks the strided layouts, and a layout that
# coalesces to a dense run uses another program variant than one that does not.
file(REMOVE_RECURSE "${CACHE}")
set(args conformance --backend opencl --no-isolate --seed 1 --filter "op.add.*"
         --backend-option "cache=${CACHE}" --backend-option log=on)
foreach(run first second)
  execute_process(COMMAND ${BACKPLANE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${run} run exited ${rc}:\n${out}\n${err}")
  endif()
  set(${run}_log "${err}")
endforeach()
if(NOT first_log MATCHES "built and cached")
  message(FATAL_ERROR "the first run built no program:\n${first_log}")
endif()
if(second_log MATCHES "\\[opencl\\] program [^\n]* built")
  message(FATAL_ERROR "the second run built programs again:\n${second_log}")
endif()
if(NOT second_log MATCHES "loaded from the cache")
  message(FATAL_ERROR "the second run loaded nothing from the cache:\n${second_log}")
endif()
file(GLOB cached "${CACHE}/*.bin")
list(LENGTH cached n)
message(STATUS "${n} programs cached; second run:\n${second_log}")
file(REMOVE_RECURSE "${CACHE}")
