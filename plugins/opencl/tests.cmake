# Tests of the OpenCL plugin, included by tests/CMakeLists.txt when the
# target backplane_plugin_opencl exists. They need an OpenCL device:
# quickstart.sh installs PoCL, whose CPU device is one.

add_executable(opencl_plugin_test ${PROJECT_SOURCE_DIR}/tests/opencl_plugin_test.cpp)
target_link_libraries(opencl_plugin_test PRIVATE backplane_opencl_impl GTest::gtest GTest::gtest_main)
target_compile_options(opencl_plugin_test PRIVATE ${BACKPLANE_WARNINGS})
gtest_discover_tests(opencl_plugin_test
  DISCOVERY_MODE PRE_TEST
  TEST_PREFIX "opencl_plugin_test.")
if(TARGET backplane_unit_tests)
  add_dependencies(backplane_unit_tests opencl_plugin_test)
endif()

# The whole suite, every profile at once: certified for `full` or it fails.
backplane_suite_test(conformance.opencl opencl --profile full)
# Under ASan the suite runs in one process (backplane_suite_test), whose
# exit-time leak check would report what PoCL and its LLVM keep.
set(_opencl_env "BACKPLANE_PLUGIN_PATH=")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
  list(APPEND _opencl_env "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan-pocl.supp")
  set_tests_properties(conformance.opencl.isolated PROPERTIES ENVIRONMENT "${_opencl_env}")
endif()
set_tests_properties(conformance.opencl PROPERTIES
  ENVIRONMENT "${_opencl_env}" TIMEOUT 1500 PASS_REGULAR_EXPRESSION "opencl is certified for profile full")

# No OpenCL platform (the ICD loader pointed at an empty folder): zero
# devices, and the reason.
command_test(opencl.no_platform $<TARGET_FILE:backplane> EXIT 0
  STDOUT "opencl|0 devices|no OpenCL platform"
  ARGS devices --backend opencl)
set_tests_properties(opencl.no_platform PROPERTIES
  ENVIRONMENT "BACKPLANE_PLUGIN_PATH=;OCL_ICD_VENDORS=${CMAKE_CURRENT_BINARY_DIR}/no-icds")

# The program cache: a first run builds and stores programs, a second run
# with the same cache folder loads them all and builds none.
add_test(NAME opencl.program_cache
  COMMAND ${CMAKE_COMMAND} -DBACKPLANE=$<TARGET_FILE:backplane>
          -DCACHE=${CMAKE_CURRENT_BINARY_DIR}/opencl-cache-test
          -P ${PROJECT_SOURCE_DIR}/plugins/opencl/check_program_cache.cmake)
set_tests_properties(opencl.program_cache PROPERTIES ENVIRONMENT "BACKPLANE_PLUGIN_PATH=")

# The threads case and the stream/event cases alone, for the ThreadSanitizer
# job (label `threads`): concurrent ops, streams and events on real queues.
add_test(NAME conformance.threads.opencl
  COMMAND backplane conformance --backend opencl --filter AG-15)
add_test(NAME conformance.streams.opencl
  COMMAND backplane conformance --backend opencl --filter "streams.*")
set_tests_properties(conformance.threads.opencl conformance.streams.opencl PROPERTIES
  ENVIRONMENT "BACKPLANE_PLUGIN_PATH=" LABELS threads)
