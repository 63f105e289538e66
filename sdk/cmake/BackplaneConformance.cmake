# backplane_add_conformance_cases(<name> SOURCES <src>... [LINK <lib>...])
#
# Builds conformance cases of your own (conformance/cases_library.h) into
# lib<name>.so, which `backplane conformance --cases lib<name>.so` loads
# beside the built-in suite:
#
#   find_package(Backplane CONFIG REQUIRED)
#   backplane_add_conformance_cases(mine_cases SOURCES mine_cases.cpp)
#
#   backplane --backend ./libbackplane_mine.so conformance --cases ./libmine_cases.so
function(backplane_add_conformance_cases name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "backplane_add_conformance_cases(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_features(${name} PRIVATE cxx_std_20)
  if(TARGET Backplane::conformance)
    target_link_libraries(${name} PRIVATE Backplane::conformance ${ARG_LINK})
  else()
    target_link_libraries(${name} PRIVATE backplane_conformance ${ARG_LINK})
  endif()
endfunction()
