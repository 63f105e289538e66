# The README's C++ example must be the program tests/readme_example.cpp holds
# between its README-BEGIN and README-END markers, so that the example users
# copy is the one CTest builds and runs.
#   cmake -DREADME=README.md -DPROGRAM=tests/readme_example.cpp -P check_readme_example.cmake
file(READ "${PROGRAM}" program)
string(FIND "${program}" "// README-BEGIN\n" begin)
string(FIND "${program}" "// README-END\n" end)
if(begin EQUAL -1 OR end EQUAL -1)
  message(FATAL_ERROR "[readme_example] ${PROGRAM} lacks its README-BEGIN/README-END markers")
endif()
math(EXPR begin "${begin} + 16")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${program}" ${begin} ${length} code)
file(READ "${README}" readme)
string(FIND "${readme}" "```cpp\n${code}```\n" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "[readme_example] README.md has no ```cpp block equal to the program in "
                      "${PROGRAM}; copy it from there")
endif()
