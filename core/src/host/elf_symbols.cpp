// The symbols a shared library exports, read from its ELF dynamic symbol
// table (what dlsym can find), for the loader's "missing entry" message; the
// ones it imports and the libraries it needs (DT_NEEDED), for telling a
// plugin built with AddressSanitizer. The dynamic table survives `strip`,
// and its names live in the string table its section header links to.
#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "boundary.h"
#include "plugin_files.h"

namespace bp::detail {

namespace {

enum class Want { Exported, Imported, Needed };

template <class Ehdr, class Shdr, class Sym, class Dyn>
std::vector<std::string> dynamic_names(const std::vector<char>& f, Want want) {
  auto in_file = [&](uint64_t off, uint64_t size) {
    return off <= f.size() && size <= f.size() - off;
  };
  BP_CHECK(in_file(0, sizeof(Ehdr)), "truncated ELF header");
  Ehdr eh;
  std::memcpy(&eh, f.data(), sizeof eh);
  BP_CHECK(
      eh.e_shentsize == sizeof(Shdr) && in_file(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Shdr)),
      "the section headers are missing or truncated");
  auto section = [&](std::size_t i) {
    Shdr sh;
    std::memcpy(&sh, f.data() + eh.e_shoff + i * sizeof(Shdr), sizeof sh);
    return sh;
  };
  std::vector<std::string> out;
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    const Shdr sym = section(i);
    if (want == Want::Needed && sym.sh_type == SHT_DYNAMIC && sym.sh_link < eh.e_shnum) {
      const Shdr str = section(sym.sh_link);
      BP_CHECK(in_file(sym.sh_offset, sym.sh_size) && in_file(str.sh_offset, str.sh_size),
               "the dynamic section is truncated");
      for (uint64_t off = 0; off + sizeof(Dyn) <= sym.sh_size; off += sizeof(Dyn)) {
        Dyn d;
        std::memcpy(&d, f.data() + sym.sh_offset + off, sizeof d);
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag != DT_NEEDED || d.d_un.d_val >= str.sh_size) continue;
        const char* name = f.data() + str.sh_offset + d.d_un.d_val;
        out.emplace_back(name, strnlen(name, str.sh_size - d.d_un.d_val));
      }
      continue;
    }
    if (want == Want::Needed || sym.sh_type != SHT_DYNSYM || sym.sh_link >= eh.e_shnum) continue;
    const Shdr str = section(sym.sh_link);
    BP_CHECK(in_file(sym.sh_offset, sym.sh_size) && in_file(str.sh_offset, str.sh_size),
             "the dynamic symbol table is truncated");
    for (uint64_t off = 0; off + sizeof(Sym) <= sym.sh_size; off += sizeof(Sym)) {
      Sym s;
      std::memcpy(&s, f.data() + sym.sh_offset + off, sizeof s);
      const unsigned bind = s.st_info >> 4, type = s.st_info & 0xf;
      const unsigned vis = s.st_other & 0x3;
      // SHN_ABS: a symbol version's name (ZLIB_1.2.0), not a symbol.
      if ((s.st_shndx == SHN_UNDEF) != (want == Want::Imported) || s.st_shndx == SHN_ABS ||
          (bind != STB_GLOBAL && bind != STB_WEAK) || (type != STT_FUNC && type != STT_OBJECT) ||
          (want == Want::Exported && vis != STV_DEFAULT && vis != STV_PROTECTED) ||
          s.st_name >= str.sh_size)
        continue;
      const char* name = f.data() + str.sh_offset + s.st_name;
      out.emplace_back(name, strnlen(name, str.sh_size - s.st_name));
    }
  }
  return out;
}

std::vector<std::string> elf_names(const std::string& path, Want want) {
  std::ifstream in(path, std::ios::binary);
  BP_CHECK(in.good(), "cannot open ", path);
  const std::vector<char> f{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  BP_CHECK(f.size() > EI_CLASS && std::memcmp(f.data(), ELFMAG, SELFMAG) == 0, path,
           " is not an ELF file");
  std::vector<std::string> names =
      f[EI_CLASS] == ELFCLASS64
          ? dynamic_names<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym, Elf64_Dyn>(f, want)
          : dynamic_names<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym, Elf32_Dyn>(f, want);
  if (want != Want::Needed) std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> exported_symbols(const std::string& path) {
  return elf_names(path, Want::Exported);
}

std::vector<std::string> imported_symbols(const std::string& path) {
  return elf_names(path, Want::Imported);
}

std::vector<std::string> needed_libraries(const std::string& path) {
  return elf_names(path, Want::Needed);
}

}  // namespace bp::detail
