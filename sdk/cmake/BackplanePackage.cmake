# Installs Backplane as a CMake package: the exported targets Backplane::sdk,
# Backplane::core, Backplane::distributed, Backplane::conformance and Backplane::backplane, the SDK
# headers, BackplanePlugin.cmake and BackplaneConformance.cmake, the docs and
# the hostref example, so that an outside project can
#
#   find_package(Backplane CONFIG REQUIRED)
#   backplane_add_plugin(mine SOURCES mine.cpp)
#
# Included from the root CMakeLists.txt after every target exists.
include(CMakePackageConfigHelpers)

set(BACKPLANE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Backplane)
set(BACKPLANE_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/backplane)
set(BACKPLANE_BOOST_MIN_VERSION 1.74)

# The ABI version a plugin built against this install reports.
file(STRINGS ${PROJECT_SOURCE_DIR}/sdk/include/backplane/plugin.h _abi
     REGEX "^#define BP_ABI_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*BP_ABI_MAJOR ([0-9]+).*" "\\1" _abi_major "${_abi}")
string(REGEX REPLACE ".*BP_ABI_MINOR ([0-9]+).*" "\\1" _abi_minor "${_abi}")
set(BACKPLANE_ABI_VERSION "${_abi_major}.${_abi_minor}")

set_target_properties(backplane_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(backplane_core PROPERTIES EXPORT_NAME core)
set_target_properties(backplane_distributed PROPERTIES EXPORT_NAME distributed)
# Components: runtime (the program, the libraries, the plugins: package
# `backplane`) and dev (headers, CMake package, docs, examples:
# `backplane-dev`); see BackplaneCPack.cmake.
install(TARGETS backplane_sdk backplane_core backplane_distributed
  EXPORT BackplaneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT dev)

install(EXPORT BackplaneTargets
  NAMESPACE Backplane::
  FILE BackplaneTargets.cmake
  DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR}
  COMPONENT dev)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/sdk/cmake/BackplaneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/BackplaneConfig.cmake
  INSTALL_DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR}
  PATH_VARS BACKPLANE_PLUGIN_INSTALL_DIR)
# 0.x releases may change the C++ API between minors; the plugin ABI has its
# own version, checked by the loader.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/BackplaneConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
    ${PROJECT_BINARY_DIR}/BackplaneConfig.cmake
    ${PROJECT_BINARY_DIR}/BackplaneConfigVersion.cmake
    ${PROJECT_SOURCE_DIR}/sdk/cmake/BackplanePlugin.cmake
    ${PROJECT_SOURCE_DIR}/sdk/cmake/BackplaneConformance.cmake
  DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR}
  COMPONENT dev)

# What a plugin author reads and starts from, beside the headers: the
# documentation (the contract, the ABI, the guide, the CLI) and the hostref
# and asyncref example plugins' sources.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/examples/hostref
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)
# The asynchronous example, beside hostref (whose kernels it builds).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/examples/asyncref
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)
