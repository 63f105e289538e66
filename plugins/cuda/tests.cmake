# Tests of the CUDA plugin, included by tests/CMakeLists.txt when the target
# backplane_plugin_cuda exists. They pass on a machine without a GPU (the
# plugin must load and report zero devices) and on one with a GPU.

add_executable(cuda_plugin_test ${CMAKE_CURRENT_LIST_DIR}/../../tests/cuda_plugin_test.cpp)
target_link_libraries(cuda_plugin_test PRIVATE
  Backplane::sdk GTest::gtest GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_options(cuda_plugin_test PRIVATE ${BACKPLANE_WARNINGS})
target_compile_definitions(cuda_plugin_test PRIVATE
  BACKPLANE_CUDA_PLUGIN="${CMAKE_BINARY_DIR}/lib/backplane/libbackplane_cuda.so")
add_dependencies(cuda_plugin_test backplane_plugin_cuda)
gtest_discover_tests(cuda_plugin_test
  DISCOVERY_MODE PRE_TEST
  TEST_PREFIX "cuda_plugin_test."
  PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
if(TARGET backplane_unit_tests)
  add_dependencies(backplane_unit_tests cuda_plugin_test)
endif()

# `backplane conformance --backend cuda`: exit 3 and "no device" without a
# GPU, exit 0 (every case passes) with one.
set(_check_on_gpu ${CMAKE_CURRENT_LIST_DIR}/check_on_gpu.cmake)
function(gpu_test name)
  cmake_parse_arguments(T "" "EXPECT_STDOUT;NO_DEVICE_EXIT;SKIP_IF" "COMMAND" ${ARGN})
  set(defs -DNAME=${name})
  foreach(field EXPECT_STDOUT NO_DEVICE_EXIT SKIP_IF)
    if(DEFINED T_${field})
      list(APPEND defs "-D${field}=${T_${field}}")
    endif()
  endforeach()
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} ${defs} -P ${_check_on_gpu} -- ${T_COMMAND})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "BACKPLANE_PLUGIN_PATH=")
  if(DEFINED T_SKIP_IF)
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: ${T_SKIP_IF}")
  endif()
endfunction()
gpu_test(cuda.conformance COMMAND $<TARGET_FILE:backplane> conformance --backend cuda --no-isolate)

