# backplane_add_plugin(<name> SOURCES <src>... [LINK <lib>...])
#
# Builds a Backplane backend plugin: a MODULE library named
# libbackplane_<name>.so, compiled as C++20 with hidden visibility (only the
# entry symbol bp_plugin_init is exported), linked against the SDK headers only, placed in
# <build>/lib/backplane/ and installed to <prefix>/lib/backplane/.
# The in-tree plugins use this exact function, as an out-of-tree author does.
include_guard(GLOBAL)
# CMAKE_INSTALL_LIBDIR for the install rule, in projects that did not include it.
include(GNUInstallDirs)

function(backplane_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "backplane_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT name MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "backplane_add_plugin(${name}): the name must match [a-z0-9_]+")
  endif()
  set(target backplane_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE Backplane::sdk ${ARG_LINK})
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME backplane_${name}
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib/backplane")
  # Hidden visibility does not cover template instantiations that the
  # standard library declares with default visibility; a version script
  # keeps the export list to the one entry point.
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}.version")
    file(WRITE "${script}" "{ global: bp_plugin_init; local: *; };\n")
    target_link_options(${target} PRIVATE "-Wl,--version-script=${script}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${script}")
  endif()
  if(NOT BACKPLANE_PLUGIN_NO_INSTALL)
    # BACKPLANE_PLUGIN_INSTALL_COMPONENT, when set, names the install
    # component (a package of its own, with CPack).
    if(BACKPLANE_PLUGIN_INSTALL_COMPONENT)
      install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/backplane
              COMPONENT ${BACKPLANE_PLUGIN_INSTALL_COMPONENT})
    else()
      install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/backplane)
    endif()
  endif()
endfunction()
