// Safetensors files (the format of Hugging Face's `safetensors` package):
// 8 bytes little-endian N, N bytes of JSON header, then the tensors' bytes,
// row-major and little-endian. Files written here are read by Python's
// safetensors.torch.load_file and the other way round.
//
// Reading checks everything before it makes a tensor: the header's size
// against the file, the JSON, every entry's dtype, shape and offsets
// (in range, sized as dtype x shape, the data covered exactly, without
// holes or overlaps), the metadata's form, repeated names, bool bytes.
// A bad file is a ValueError naming the file and what is wrong in it.
//
// Integrity: every file written here carries CRC32C (Castagnoli) sums, as
// text in "__metadata__", so it stays a valid safetensors file:
//   "backplane.crc32c.tensor.<name>"  8 hex digits: the sum of the tensor's bytes
//   "backplane.crc32c.header"         8 hex digits: the sum of the N header bytes
//                                     with this value written as "00000000"
// Every load verifies them by default (Checksums::Required): a file without
// them, or a sum that differs, is a ValueError naming the tensor (or the
// header) and both sums. Checksums::Optional loads files other tools wrote
// (no sums at all: loaded, and one warning says so); a file with any sum is
// still verified whole. CRC32C detects every 1- and 2-bit error and every
// burst of up to 32 bits in a tensor; it is not a cryptographic hash and
// does not stop deliberate edits.
//
// Loading opens regular files only (FIFOs, devices and directories are
// refused at once), bounds the header (100 MB, 1,000,000 entries) and parses
// it in linear time.
#pragma once

#include <backplane/nn/module.h>
#include <backplane/tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bp::safetensors {

// "__metadata__": free-form text pairs.
using Metadata = std::map<std::string, std::string>;

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data part
};

struct Header {
  std::vector<Entry> entries;  // in the order of their data
  Metadata metadata;           // without the "backplane.crc32c.*" entries
  uint64_t data_start = 0;     // file offset of the data part: 8 + N
  bool checksummed = false;    // the file carries (and passed) the sums
};

// Whether a load insists on the sums (see the top of this file).
enum class Checksums {
  Required,  // the default: no sums is an error, as is any sum that differs
  Optional,  // files without sums (written by other tools) load, with a warning
};

// The metadata keys of the sums; the caller's metadata may not use them.
inline constexpr const char* kChecksumPrefix = "backplane.crc32c.";

// CRC32C of `bytes` (the Castagnoli polynomial 0x1EDC6F41, reflected,
// initial and final XOR 0xFFFFFFFF: crc32c("123456789") == 0xE3069283).
uint32_t crc32c(std::span<const std::byte> bytes);

// The format's name for a dtype ("F32", "BF16", "BOOL", ...) and back
// (nullopt for a name Backplane has no dtype for, such as "U16" or "F8_E4M3").
const char* dtype_name(DType dtype);
std::optional<DType> dtype_from_name(const std::string& name);

// The file's bytes for `tensors` (any device, any layout; copied to the host).
// Tensors are laid out widest dtype first, so each is aligned to its size;
// the header is padded with spaces to a multiple of 8 bytes. Two tensors
// sharing memory are refused, as Python's save_file refuses them (the file
// could not keep them shared).
std::vector<std::byte> serialize(const nn::NamedTensors& tensors, const Metadata& metadata = {});
// Checks and reads a file's bytes (the tensors' sums too, when the data is
// there); `what` names the source in errors.
Header parse_header(std::span<const std::byte> bytes, const std::string& what = "safetensors data",
                    Checksums checksums = Checksums::Required);
// Tensors on `device` (the default device when not given), in file order.
nn::NamedTensors deserialize(std::span<const std::byte> bytes,
                             std::optional<Device> device = std::nullopt,
                             const std::string& what = "safetensors data",
                             Checksums checksums = Checksums::Required);

// Writes atomically: into a temporary file beside `path`, written whole,
// fsync'ed, renamed over `path`, and the folder fsync'ed; a failed or killed
// save leaves any earlier file as it was (a killed one may leave its
// temporary "<path>.XXXXXX" behind).
void save_file(const nn::NamedTensors& tensors, const std::string& path,
               const Metadata& metadata = {});
// Maps the file and copies each tensor from the mapping to `device` once;
// `header`, when given, receives the file's header (from the same mapping).
nn::NamedTensors load_file(const std::string& path, std::optional<Device> device = std::nullopt,
                           Checksums checksums = Checksums::Required, Header* header = nullptr);
// The header alone (reads only its bytes; verifies the header's sum and that
// every tensor has one).
Header read_header(const std::string& path, Checksums checksums = Checksums::Required);

}  // namespace bp::safetensors

namespace bp::nn {

// A module's state_dict() as a safetensors file, and back through
// load_state_dict (checked as a whole; nothing changes when it fails).
void save(const Module& module, const std::string& path,
          const safetensors::Metadata& metadata = {});
LoadResult load(Module& module, const std::string& path, bool strict = true,
                safetensors::Checksums checksums = safetensors::Checksums::Required);

}  // namespace bp::nn
