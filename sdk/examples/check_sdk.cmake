# cmake -DSTEP=install|hostref|asyncref|new_plugin|core_consumer|deb -DBUILD_DIR=<build>
#       -DWORK=<scratch dir> -DEXAMPLES=<sdk/examples> -DCMAKE_CMD=<cmake>
#       -P check_sdk.cmake
#
# One step of the SDK tests (sdk/examples/CMakeLists.txt). `install` puts
# BUILD_DIR under WORK/prefix; the others build a project against that
# prefix, as a user would, and run the installed `backplane` on the result.
foreach(var STEP BUILD_DIR WORK EXAMPLES CMAKE_CMD)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "[sdk.test] pass -D${var}=...")
  endif()
endforeach()
set(prefix ${WORK}/prefix)
set(backplane ${prefix}/bin/backplane)

# run(<name> EXPECT <code> [CONTAINS <text>...] COMMAND <cmd>...): runs the
# command, prints its output, checks the exit code and that each text appears.
function(run name)
  cmake_parse_arguments(R "" "EXPECT;WORKING_DIRECTORY" "CONTAINS;COMMAND" ${ARGN})
  if(NOT R_WORKING_DIRECTORY)
    set(R_WORKING_DIRECTORY ${WORK})
  endif()
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY ${R_WORKING_DIRECTORY}
    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP t1 "%s")
  math(EXPR secs "${t1} - ${t0}")
  message("=== ${name}: exit ${code} in ${secs} s\n${out}${err}")
  if(NOT "${code}" STREQUAL "${R_EXPECT}")
    message(FATAL_ERROR "[sdk.${STEP}] ${name}: expected exit ${R_EXPECT}, got ${code}")
  endif()
  foreach(text IN LISTS R_CONTAINS)
    string(FIND "${out}${err}" "${text}" pos)
    if(pos EQUAL -1)
      message(FATAL_ERROR "[sdk.${STEP}] ${name}: the output lacks '${text}'")
    endif()
  endforeach()
endfunction()

# configure_and_build(<source dir> <build dir>): against the installed prefix.
function(configure_and_build src bin)
  file(REMOVE_RECURSE ${bin})
  run("configure ${src}" EXPECT 0 COMMAND ${CMAKE_CMD} -S ${src} -B ${bin}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
  run("build ${src}" EXPECT 0 COMMAND ${CMAKE_CMD} --build ${bin} -j 2)
endfunction()

if(STEP STREQUAL "install")
  # Only the prefix: sdk.deb, which needs no prefix, may be running beside
  # this step in WORK/deb (each other step cleans its own directories).
  file(REMOVE_RECURSE ${prefix})
  file(MAKE_DIRECTORY ${WORK})
  run("install" EXPECT 0 COMMAND ${CMAKE_CMD} --install ${BUILD_DIR} --prefix ${prefix})
  foreach(f bin/backplane lib/libbackplane.so include/backplane/plugin.h
            include/backplane/sdk/plugin.hpp include/backplane/sdk/philox.hpp
            include/backplane/sdk/checks.hpp include/backplane/sdk/loops.hpp
            include/backplane/sdk/deferred.hpp
            include/backplane/tensor.h include/backplane/backplane.h
            lib/backplane/libbackplane_cpu_onednn.so lib/backplane/libbackplane_sim.so
            lib/cmake/Backplane/BackplaneConfig.cmake
            lib/cmake/Backplane/BackplaneConfigVersion.cmake
            lib/cmake/Backplane/BackplaneTargets.cmake
            lib/cmake/Backplane/BackplanePlugin.cmake
            lib/cmake/Backplane/BackplaneConformance.cmake
            lib/libbackplane_conformance.so include/backplane/conformance.h
            include/backplane/conformance/cases_library.h
            share/doc/Backplane/plugin-guide.md share/doc/Backplane/semantics.md
            share/doc/Backplane/README.md share/doc/Backplane/examples/hostref/plugin.cpp
            share/doc/Backplane/examples/hostref/CMakeLists.txt
            share/doc/Backplane/examples/asyncref/plugin.cpp
            share/doc/Backplane/examples/asyncref/CMakeLists.txt)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "[sdk.install] the install lacks ${f}")
    endif()
  endforeach()
  # Found beside the installed libbackplane, not in the build tree.
  run("installed devices" EXPECT 0
      CONTAINS "${prefix}/lib/backplane/libbackplane_cpu_onednn.so" "sim" "not host-addressable"
      COMMAND ${backplane} devices)

elseif(STEP STREQUAL "hostref")
  configure_and_build(${EXAMPLES}/hostref ${WORK}/hostref-build)
  set(so ${WORK}/hostref-build/lib/backplane/libbackplane_hostref.so)
  set(cases ${WORK}/hostref-build/libhostref_cases.so)
  run("hostref conformance" EXPECT 0 CONTAINS "0 failed, 0 unsupported"
      "cases of ${cases}: 2" "passed      hostref.lerp.values" "passed      hostref.lerp.strided"
      COMMAND ${backplane} --backend ${so} conformance --json ${WORK}/hostref.json
              --cases ${cases} --verbose)
  # Its own cases on a backend without hostref::lerp: unsupported, by name.
  run("hostref cases on sim" EXPECT 0 CONTAINS "hostref.lerp.values" "hostref::lerp"
      COMMAND ${backplane} --backend sim conformance --cases ${cases} --filter "hostref.*" -v)

elseif(STEP STREQUAL "asyncref")
  # From the installed copy, as a plugin author finds it (it builds hostref's
  # kernels from the folder beside it).
  set(src ${prefix}/share/doc/Backplane/examples/asyncref)
  configure_and_build(${src} ${WORK}/asyncref-build)
  set(so ${WORK}/asyncref-build/lib/backplane/libbackplane_asyncref.so)
  run("asyncref devices" EXPECT 0 CONTAINS "asyncref" "not host-addressable"
      COMMAND ${backplane} --backend ${so} devices)
  run("asyncref conformance" EXPECT 0 CONTAINS "asyncref is certified for profile core"
      " 0 failed" "passed      streams.wait_after_long_job"
      COMMAND ${backplane} --backend ${so} conformance --verbose)

elseif(STEP STREQUAL "new_plugin")
  set(dir ${WORK}/demo)
  file(REMOVE_RECURSE ${dir})
  run("new-plugin" EXPECT 0 CONTAINS "${dir}/CMakeLists.txt"
      COMMAND ${backplane} new-plugin demo --dir ${dir})
  # A second time the folder is not empty: refused, nothing touched.
  file(READ ${dir}/plugin.cpp before)
  run("new-plugin again" EXPECT 2 CONTAINS "not empty"
      COMMAND ${backplane} new-plugin demo --dir ${dir})
  file(READ ${dir}/plugin.cpp after)
  if(NOT before STREQUAL after)
    message(FATAL_ERROR "[sdk.new_plugin] a refused new-plugin changed ${dir}/plugin.cpp")
  endif()
  configure_and_build(${dir} ${dir}/build)
  set(so ${dir}/build/lib/backplane/libbackplane_demo.so)
  run("demo devices" EXPECT 0 CONTAINS "demo" "loaded"
      COMMAND ${backplane} --backend ${so} devices)
  # Nothing fails, and a fresh plugin is not certified: exit 1, saying why.
  run("demo conformance" EXPECT 1 CONTAINS " 0 failed" "Unsupported"
      "demo is NOT certified for profile core" "required kernels missing"
      COMMAND ${backplane} --backend ${so} conformance)

elseif(STEP STREQUAL "core_consumer")
  set(src ${WORK}/consumer)
  file(REMOVE_RECURSE ${src})
  file(WRITE ${src}/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(Backplane 0.1 CONFIG REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE Backplane::core)
]=])
  file(WRITE ${src}/main.cpp [=[
#include <backplane/backplane.h>
#include <iostream>
int main() {
  bp::Tensor t = bp::ones({2, 3});
  std::cout << "sum " << bp::sum(t).item<double>() << " on " << bp::default_device() << "\n";
}
]=])
  configure_and_build(${src} ${src}/build)
  run("consumer" EXPECT 0 CONTAINS "sum 6 on cpu_onednn:0" COMMAND ${src}/build/consumer)

elseif(STEP STREQUAL "deb")
  # The Debian packages (BackplaneCPack.cmake), as a plugin author gets
  # them: their dependencies, and a plugin built from the scaffold against
  # their contents alone (unpacked with dpkg -x, so that this machine's /usr
  # is left alone), certified-or-not by the packaged program.
  find_program(CPACK_CMD cpack HINTS ${CMAKE_CMD}/..)
  find_program(DPKG_DEB dpkg-deb)
  if(NOT CPACK_CMD OR NOT DPKG_DEB)
    message("[sdk.deb] cpack or dpkg-deb not found: skipped")
    return()
  endif()
  file(REMOVE_RECURSE ${WORK}/deb)
  file(MAKE_DIRECTORY ${WORK}/deb)
  run("cpack" EXPECT 0 COMMAND ${CPACK_CMD} -G DEB --config ${BUILD_DIR}/CPackConfig.cmake
      -B ${WORK}/deb)
  # `cpack -B DIR` puts the packages in DIR, not in the build folder.
  file(GLOB runtime ${WORK}/deb/backplane_*.deb)
  file(GLOB dev ${WORK}/deb/backplane-dev_*.deb)
  if(NOT runtime OR NOT dev)
    message(FATAL_ERROR "[sdk.deb] cpack -B ${WORK}/deb made no backplane and backplane-dev packages there")
  endif()
  run("runtime recommends" EXPECT 0 CONTAINS "opencl-icd"
      COMMAND ${DPKG_DEB} -f ${runtime} Recommends)
  run("runtime description" EXPECT 0 CONTAINS "opencl"
      COMMAND ${DPKG_DEB} -f ${runtime} Description)
  run("runtime depends" EXPECT 0 CONTAINS "libdnnl2" "libboost-program-options1.74.0" "libssl3"
      COMMAND ${DPKG_DEB} -f ${runtime} Depends)
  run("dev depends" EXPECT 0 CONTAINS "backplane (= " "libboost-program-options-dev" "cmake"
      COMMAND ${DPKG_DEB} -f ${dev} Depends)
  run("runtime contents" EXPECT 0 CONTAINS "./usr/bin/backplane" "./usr/lib/libbackplane.so.0"
      "./usr/lib/backplane/libbackplane_cpu_onednn.so" "./usr/lib/backplane/libbackplane_opencl.so"
      "./usr/libexec/backplane/backplane-probe"
      COMMAND ${DPKG_DEB} -c ${runtime})
  set(root ${WORK}/deb/root)
  run("unpack runtime" EXPECT 0 COMMAND ${DPKG_DEB} -x ${runtime} ${root})
  run("unpack dev" EXPECT 0 COMMAND ${DPKG_DEB} -x ${dev} ${root})
  set(packaged ${root}/usr/bin/backplane)
  run("packaged devices" EXPECT 0 CONTAINS "${root}/usr/lib/backplane/libbackplane_cpu_onednn.so"
      COMMAND ${packaged} devices)
  set(dir ${WORK}/deb/demo)
  run("new-plugin" EXPECT 0 COMMAND ${packaged} new-plugin demo --dir ${dir})
  file(REMOVE_RECURSE ${dir}/build)
  run("configure demo" EXPECT 0 COMMAND ${CMAKE_CMD} -S ${dir} -B ${dir}/build
      -DCMAKE_PREFIX_PATH=${root}/usr -DCMAKE_BUILD_TYPE=Release)
  run("build demo" EXPECT 0 COMMAND ${CMAKE_CMD} --build ${dir}/build -j 2)
  run("demo conformance" EXPECT 1 CONTAINS " 0 failed" "demo is NOT certified for profile core"
      COMMAND ${packaged} --backend ${dir}/build/lib/backplane/libbackplane_demo.so conformance)

else()
  message(FATAL_ERROR "[sdk.test] unknown STEP '${STEP}'")
endif()
