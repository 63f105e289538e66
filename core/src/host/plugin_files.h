// What the host reads of plugin files without loading them: their ELF
// dynamic symbols and the libraries they need (elf_symbols.cpp), and
// whether a --backend text names a file; not installed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bp::detail {

// The functions and objects a shared library exports (its ELF dynamic
// symbols); raises bp::Error when the file cannot be read as ELF.
std::vector<std::string> exported_symbols(const std::string& path);
// The functions and objects it imports (undefined dynamic symbols), and the
// libraries it needs (DT_NEEDED, in order); the same errors.
std::vector<std::string> imported_symbols(const std::string& path);
std::vector<std::string> needed_libraries(const std::string& path);

// Whether --backend's text names a file (a '/' in it, or ending in .so)
// rather than a backend (host/plugin_loader.cpp).
bool looks_like_path(std::string_view s);

}  // namespace bp::detail
