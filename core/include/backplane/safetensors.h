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
  Metadata metadata;
  uint64_t data_start = 0;  // file offset of the data part: 8 + N
};

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
// Checks and reads a file's bytes; `what` names the source in errors.
Header parse_header(std::span<const std::byte> bytes, const std::string& what = "safetensors data");
// Tensors on `device` (the default device when not given), in file order.
nn::NamedTensors deserialize(std::span<const std::byte> bytes, std::optional<Device> device = std::nullopt,
                             const std::string& what = "safetensors data");

// Writes atomically: into a temporary file beside `path`, renamed over it
// once complete, so a failed save leaves any earlier file as it was.
void save_file(const nn::NamedTensors& tensors, const std::string& path, const Metadata& metadata = {});
// Maps the file and copies each tensor from the mapping to `device` once.
nn::NamedTensors load_file(const std::string& path, std::optional<Device> device = std::nullopt);
// The header alone (reads only its bytes).
Header read_header(const std::string& path);

}  // namespace bp::safetensors

namespace bp::nn {

// A module's state_dict() as a safetensors file, and back through
// load_state_dict (checked as a whole; nothing changes when it fails).
void save(const Module& module, const std::string& path, const safetensors::Metadata& metadata = {});
LoadResult load(Module& module, const std::string& path, bool strict = true);

}  // namespace bp::nn
