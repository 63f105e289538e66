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
add_test(NAME cuda.conformance
  COMMAND ${CMAKE_COMMAND} -DBACKPLANE=$<TARGET_FILE:backplane>
          -P ${CMAKE_CURRENT_LIST_DIR}/check_conformance.cmake)
set_tests_properties(cuda.conformance PROPERTIES ENVIRONMENT "BACKPLANE_PLUGIN_PATH=")
