# Checks that every rule ID cited in the tree is defined in the contract
# (docs/semantics.md): run with `cmake -P`, no other dependency.
#
#   cmake -DROOT=<repo> [-DCONTRACT=docs/semantics.md]
#         [-DPATHS=core,conformance,...] [-DEXCLUDE=tests/fixtures,...]
#         -P tests/check_semantic_ids.cmake
#
# ROOT      the tree to check (default: this script's parent folder).
# CONTRACT  the file that defines the IDs, relative to ROOT or absolute.
# PATHS     folders and files to scan, relative to ROOT, separated by commas
#           or semicolons (default: core, conformance, cli, tests, plugins,
#           sdk, docs, README.md). The contract's own citations are checked
#           when it lies under one of them.
# EXCLUDE   folders or files, relative to ROOT, not to scan (default:
#           tests/fixtures/semantic_ids, whose undefined ID is on purpose).
#
# A citation is any match of \b(CR|IP|VW|CP|AG|DV|SP|NN)-[0-9]+\b in a text
# file (by extension, below) outside build/, build-*/ and hidden folders. A
# definition is a contract line that starts with "- **", the ID and a space:
#   - **IP-6 Overlap.** Writing into a tensor ...
# A line that starts like a list item or heading with an ID but not in that
# form is reported as malformed, and an ID defined twice as a duplicate.
# Exit status: 0 when every cited ID is defined, non-zero otherwise, with one
# "path:line: ID ..." line per offending citation.

cmake_minimum_required(VERSION 3.20)

set(_prefixes "CR|IP|VW|CP|AG|DV|SP|NN")
set(_id "(${_prefixes})-[0-9]+")
# \b before the ID: start of text or a non-word character (CMake's regex has
# no \b). The greedy [0-9]+ and a check of the next character give \b after.
set(_cite "(^|[^A-Za-z0-9_])(${_id})")
set(_text_ext
  c cc cpp cxx h hh hpp hxx inl inc cu cuh cl py sh cmake in txt md json yml yaml toml)

if(NOT DEFINED ROOT)
  get_filename_component(ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()
get_filename_component(ROOT "${ROOT}" ABSOLUTE)
if(NOT DEFINED CONTRACT)
  set(CONTRACT "docs/semantics.md")
endif()
if(NOT DEFINED PATHS)
  set(PATHS "core,conformance,cli,tests,plugins,sdk,docs,README.md")
endif()
if(NOT DEFINED EXCLUDE)
  set(EXCLUDE "tests/fixtures/semantic_ids")
endif()
string(REPLACE "," ";" PATHS "${PATHS}")
string(REPLACE "," ";" EXCLUDE "${EXCLUDE}")
get_filename_component(_contract "${CONTRACT}" ABSOLUTE BASE_DIR "${ROOT}")
file(RELATIVE_PATH _contract_rel "${ROOT}" "${_contract}")
if(NOT EXISTS "${_contract}")
  message(FATAL_ERROR "[semantic_ids] the contract ${_contract} does not exist")
endif()

# --- definitions ------------------------------------------------------------
file(READ "${_contract}" _text)
# Characters that would split or escape CMake list items cannot be part of
# an ID: blank them so that the file becomes a list of lines.
string(REGEX REPLACE "[][;\\\\\r]" " " _text "${_text}")
string(REPLACE "\n" " ;" _lines "${_text}")
set(_defined "")
set(_problems "")
set(_n 0)
foreach(_line IN LISTS _lines)
  math(EXPR _n "${_n} + 1")
  if(_line MATCHES "^- \\*\\*(${_id}) ")
    set(_def "${CMAKE_MATCH_1}")
    if("${_def}" IN_LIST _defined)
      list(APPEND _problems "${_contract_rel}:${_n}: ${_def} is defined twice")
    endif()
    list(APPEND _defined "${_def}")
  elseif(_line MATCHES "^ ?([-*+]|#+) +[*_`]*(${_id})([^0-9A-Za-z_]|$)")
    list(APPEND _problems
      "${_contract_rel}:${_n}: ${CMAKE_MATCH_2} looks like a definition but is not \"- **${CMAKE_MATCH_2} Title.** ...\"")
  endif()
endforeach()
list(LENGTH _defined _defined_count)
if(_defined_count EQUAL 0)
  message(FATAL_ERROR "[semantic_ids] ${_contract_rel} defines no rule ID "
    "(a definition is a line starting \"- **IP-1 Title.**\")")
endif()

# --- citations --------------------------------------------------------------
set(_files "")
foreach(_p IN LISTS PATHS)
  if(IS_DIRECTORY "${ROOT}/${_p}")
    set(_globs "")
    foreach(_e IN LISTS _text_ext)
      list(APPEND _globs "${ROOT}/${_p}/*.${_e}")
    endforeach()
    file(GLOB_RECURSE _found LIST_DIRECTORIES false ${_globs})
    list(APPEND _files ${_found})
  elseif(EXISTS "${ROOT}/${_p}")
    list(APPEND _files "${ROOT}/${_p}")
  else()
    message(FATAL_ERROR "[semantic_ids] ${ROOT}/${_p} does not exist")
  endif()
endforeach()
list(REMOVE_DUPLICATES _files)
list(SORT _files)

set(_undefined_ids "")
set(_scanned 0)
set(_citations 0)
foreach(_file IN LISTS _files)
  file(RELATIVE_PATH _rel "${ROOT}" "${_file}")
  if(_rel MATCHES "(^|/)(build|build[-_][^/]*|\\.[^/]*)/")
    continue()
  endif()
  set(_skip FALSE)
  foreach(_x IN LISTS EXCLUDE)
    if(_rel STREQUAL _x OR _rel MATCHES "^${_x}/")
      set(_skip TRUE)
    endif()
  endforeach()
  if(_skip)
    continue()
  endif()
  math(EXPR _scanned "${_scanned} + 1")
  file(READ "${_file}" _rest)
  set(_line 1)
  # Walk the matches left to right; the line number grows by the newlines
  # skipped over.
  while(_rest MATCHES "${_cite}")
    set(_m "${CMAKE_MATCH_0}")
    string(LENGTH "${CMAKE_MATCH_1}" _lead)  # the character before, maybe "\n"
    set(_cited "${CMAKE_MATCH_2}")
    # The first occurrence of the matched text is the leftmost match.
    string(FIND "${_rest}" "${_m}" _at)
    string(LENGTH "${_m}" _len)
    math(EXPR _at "${_at} + ${_lead}")
    math(EXPR _len "${_len} - ${_lead}")
    string(SUBSTRING "${_rest}" 0 ${_at} _before)
    string(REGEX REPLACE "[^\n]" "" _newlines "${_before}")
    string(LENGTH "${_newlines}" _nl)
    math(EXPR _line "${_line} + ${_nl}")
    math(EXPR _end "${_at} + ${_len}")
    string(SUBSTRING "${_rest}" ${_end} 1 _next)
    if(NOT _next MATCHES "^[A-Za-z_]$")
      math(EXPR _citations "${_citations} + 1")
      if(NOT "${_cited}" IN_LIST _defined)
        list(APPEND _problems "${_rel}:${_line}: ${_cited} is not defined in ${_contract_rel}")
        list(APPEND _undefined_ids "${_cited}")
      endif()
    endif()
    # Go on from the ID's last digit (no newline), so that it counts as the
    # word character before whatever follows.
    math(EXPR _end "${_end} - 1")
    string(SUBSTRING "${_rest}" ${_end} -1 _rest)
  endwhile()
endforeach()

list(REMOVE_DUPLICATES _undefined_ids)
list(LENGTH _problems _problem_count)
if(_problem_count GREATER 0)
  # One plain "path:line: ..." line each (NOTICE: stderr, unformatted).
  foreach(_p IN LISTS _problems)
    message(NOTICE "${_p}")
  endforeach()
  list(JOIN _undefined_ids ", " _ids)
  if(_ids STREQUAL "")
    set(_ids "none")
  endif()
  message(NOTICE "[semantic_ids] undefined IDs: ${_ids}")
  message(FATAL_ERROR
    "[semantic_ids] ${_problem_count} problem(s) with rule IDs. Define each rule "
    "in ${_contract_rel} as a line \"- **ID Title.** ...\", or fix the citation.")
endif()
message(STATUS "[semantic_ids] ${_citations} citations in ${_scanned} files; "
  "every cited ID is among the ${_defined_count} defined in ${_contract_rel}")
