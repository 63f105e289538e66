# Debian packages of an install, with CPack (`cpack -G DEB` in the build
# folder, or `cmake --build build --target package`):
#   backplane      the `backplane` program, libbackplane, the conformance
#                  library, the probe helper and the cpu_onednn, sim and
#                  opencl plugins (component runtime); its dependencies come
#                  from dpkg-shlibdeps (libdnnl, Boost, OpenSSL, the OpenCL
#                  loader, ...); it recommends an OpenCL ICD (PoCL gives the
#                  CPU one), without which the opencl plugin finds no device
#   backplane-dev  the headers, the CMake package, the docs and the hostref
#                  (synchronous) and asyncref (asynchronous, memory the host
#                  cannot address) examples (component dev): all a plugin author needs to
#                  build a plugin and run conformance on it, without
#                  building Backplane
# The CUDA plugin (component cuda) is left out: it links the CUDA toolkit's
# libraries, which no Debian package provides.
set(CPACK_PACKAGE_NAME backplane)
set(CPACK_PACKAGE_VENDOR "Backplane")
set(CPACK_PACKAGE_CONTACT "Backplane maintainers <backplane@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Tensor framework whose device backends are plugins")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME backplane)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
# The opencl plugin needs an OpenCL implementation (an ICD) to find a
# device; `opencl-icd` is the virtual package every Debian ICD provides.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "gnuplot-nox")  # backplane perf --plot
set(CPACK_DEBIAN_DEV_PACKAGE_NAME backplane-dev)
# The CMake package finds Boost.Program_options (options.h is public), and a
# plugin is built with CMake and a C++20 compiler.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "backplane (= ${PROJECT_VERSION}), libboost-program-options-dev (>= 1.74), cmake (>= 3.25), g++ (>= 4:12)")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "the backplane program, libbackplane and the cpu_onednn, sim and opencl plugins")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "headers, CMake package (backplane_add_plugin), docs and the hostref and asyncref examples")
# Where the packages go: build/packages unless `cpack -B DIR` names another
# folder (CPACK_OUTPUT_FILE_PREFIX would override -B, so it is not set).
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
include(CPack)
