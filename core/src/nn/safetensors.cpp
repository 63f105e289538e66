// Safetensors files: the header's checks, the bytes of tensors on any
// device, atomic saving and mapped loading.
#include <backplane/autograd.h>
#include <backplane/error.h>
#include <backplane/ops.h>
#include <backplane/safetensors.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <boost/crc.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "../internal.h"

namespace bp::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this build would need to swap bytes");

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 100'000'000;    // as the Rust reader's MAX_HEADER_SIZE
constexpr std::size_t kMaxEntries = 1'000'000;  // tensors and metadata entries, each
const std::string kHeaderSumKey = std::string(kChecksumPrefix) + "header";
const std::string kTensorSumPrefix = std::string(kChecksumPrefix) + "tensor.";
// How the header sum's entry appears in a header Backplane wrote (compact
// JSON); its 8 hex digits follow.
const std::string kHeaderSumText = "\"" + kHeaderSumKey + "\":\"";
constexpr const char* kZeroSum = "00000000";

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

std::optional<uint32_t> parse_hex8(const std::string& text) {
  if (text.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : text) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

// The sum of a header's text with its header sum's digits read as zeros;
// nullopt when the entry is not found exactly once in compact form.
std::optional<uint32_t> header_sum_of(std::string text) {
  const std::size_t at = text.find(kHeaderSumText);
  if (at == std::string::npos || text.find(kHeaderSumText, at + 1) != std::string::npos)
    return std::nullopt;
  const std::size_t digits = at + kHeaderSumText.size();
  if (digits + 9 > text.size() || text[digits + 8] != '"') return std::nullopt;
  text.replace(digits, 8, kZeroSum);
  return crc32c(std::as_bytes(std::span(text.data(), text.size())));
}

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {
    {DType::Bool, "BOOL"},   {DType::UInt8, "U8"},      {DType::Int8, "I8"},
    {DType::Int16, "I16"},   {DType::Int32, "I32"},     {DType::Int64, "I64"},
    {DType::Float16, "F16"}, {DType::BFloat16, "BF16"}, {DType::Float32, "F32"},
    {DType::Float64, "F64"},
};

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  detail::raise<ValueError>("[safetensors] ", what, ": ", why);
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

// numel * itemsize, or nullopt past 2^63.
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, DType dtype) {
  unsigned __int128 n = itemsize(dtype);
  for (int64_t s : shape) {
    n *= static_cast<uint64_t>(s);
    if (n > static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
  }
  return static_cast<uint64_t>(n);
}

// The header's names at the top level (each once) and its entry count.
struct KeyCheck : nlohmann::json_sax<json> {
  explicit KeyCheck(const std::string& w) : what(w) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (++keys > 2 * kMaxEntries + 8)
      bad(what, detail::concat("the header has more than ", kMaxEntries, " entries, the limit"));
    if (depth == 1 && !seen.insert(k).second && repeated.empty()) repeated = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    bad(what, std::string("the header is not valid JSON: ") + e.what());
  }
  const std::string& what;
  std::set<std::string> seen;
  std::string repeated;
  std::size_t keys = 0;
  int depth = 0;
};

Header parse_checked(std::span<const std::byte> head, uint64_t total, const std::string& what,
                     Checksums checksums);

// The header of a file of `total` bytes whose first bytes are `head`; every
// malformed input ends as a ValueError.
Header parse(std::span<const std::byte> head, uint64_t total, const std::string& what,
             Checksums checksums) {
  try {
    return parse_checked(head, total, what, checksums);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    bad(what, std::string("the header cannot be read: ") + e.what());
  }
}

Header parse_checked(std::span<const std::byte> head, uint64_t total, const std::string& what,
                     Checksums checksums) {
  if (total < 8)
    bad(what,
        detail::concat("the file has ", total, " bytes, fewer than the 8 of the header size"));
  const uint64_t n = read_u64_le(head.data());
  if (n > kMaxHeader)
    bad(what,
        detail::concat("the header size is ", n, " bytes, more than the limit of ", kMaxHeader));
  if (n > total - 8)
    bad(what, detail::concat("the header size is ", n, " bytes but only ", total - 8,
                             " follow it (is the file truncated?)"));
  if (head.size() < 8 + n) bad(what, "internal: the header was not read whole");
  const char* text = reinterpret_cast<const char*>(head.data() + 8);
  if (n == 0 || text[0] != '{')
    bad(what, "the header is not a JSON object (it must begin with '{')");

  // Two linear passes: a SAX pass for the entry count and repeated names
  // (nlohmann's parse callback is quadratic in an object's size), then the DOM.
  KeyCheck check(what);
  json j;
  try {
    if (!json::sax_parse(text, text + n, &check)) bad(what, "the header is not valid JSON");
    j = json::parse(text, text + n);
  } catch (const json::exception& e) {
    bad(what, std::string("the header is not valid JSON: ") + e.what());
  }
  const std::set<std::string>& seen = check.seen;
  const std::string& repeated = check.repeated;
  if (!repeated.empty()) bad(what, "the header names '" + repeated + "' twice");
  if (!j.is_object()) bad(what, "the header is not a JSON object");

  if (j.size() > kMaxEntries + 1)
    bad(what, detail::concat("the header lists ", j.size() - 1, " tensors, more than the limit of ",
                             kMaxEntries));

  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = total - h.data_start;
  std::optional<uint32_t> header_sum;
  std::map<std::string, uint32_t> tensor_sums;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad(what, "__metadata__ must be an object of strings");
      if (v.size() > kMaxEntries)
        bad(what, detail::concat("__metadata__ has ", v.size(), " entries, more than the limit of ",
                                 kMaxEntries));
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) bad(what, "__metadata__ value of '" + k + "' is not a string");
        if (k.rfind(kChecksumPrefix, 0) != 0) {
          h.metadata[k] = s.get<std::string>();
          continue;
        }
        const std::optional<uint32_t> sum = parse_hex8(s.get<std::string>());
        if (!sum)
          bad(what, "__metadata__ '" + k + "' is '" + s.get<std::string>() + "', not 8 hex digits");
        if (k == kHeaderSumKey)
          header_sum = sum;
        else if (k.rfind(kTensorSumPrefix, 0) == 0)
          tensor_sums[k.substr(kTensorSumPrefix.size())] = *sum;
        else
          bad(what, "__metadata__ has the unknown checksum entry '" + k + "'");
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) bad(what, where + " is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) bad(what, where + " has no \"" + field + "\"");
    if (!v["dtype"].is_string()) bad(what, where + ": \"dtype\" is not a string");
    Entry e;
    e.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    const std::optional<DType> d = dtype_from_name(dt);
    if (!d) bad(what, where + " has dtype " + dt + ", which Backplane does not have");
    e.dtype = *d;
    if (!v["shape"].is_array()) bad(what, where + ": \"shape\" is not an array");
    if (v["shape"].size() > static_cast<std::size_t>(kMaxDims))
      bad(what, detail::concat(where, " has ", v["shape"].size(),
                               " dims; Backplane tensors have at most ", kMaxDims));
    for (auto& s : v["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0)
        bad(what, where + ": \"shape\" holds " + s.dump() + ", not a size >= 0");
      e.shape.push_back(s.get<int64_t>());
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      bad(what, where + ": \"data_offsets\" must be two integers >= 0, got " + off.dump());
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      bad(what, detail::concat(where, ": data_offsets [", e.begin, ", ", e.end,
                               "] are not within the data part of ", data_size, " bytes"));
    const std::optional<uint64_t> size = byte_size(e.shape, e.dtype);
    if (!size || *size != e.end - e.begin)
      bad(what, detail::concat(where, ": ", dt, " of shape ", IntArrayRef(e.shape), " needs ",
                               size ? std::to_string(*size) : std::string("more than 2^63"),
                               " bytes, data_offsets give ", e.end - e.begin));
    h.entries.push_back(std::move(e));
  }
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : h.entries) {
    if (e.begin < at)
      bad(what, detail::concat("tensor '", e.name, "' overlaps the tensor before it (at byte ",
                               e.begin, ")"));
    if (e.begin > at)
      bad(what, detail::concat("bytes ", at, " to ", e.begin, " of the data belong to no tensor"));
    at = e.end;
  }
  if (at != data_size)
    bad(what, detail::concat("the data part has ", data_size, " bytes but the tensors cover ", at));
  // The sums: all or none (Optional), all (Required).
  if (!header_sum && tensor_sums.empty()) {
    if (checksums == Checksums::Required)
      bad(what,
          "it carries no CRC32C checksums, which every file Backplane writes has (was it written "
          "by "
          "another tool? load it with checksums optional to accept it unverified)");
  } else {
    if (!header_sum)
      bad(what, "it has tensor checksums but no '" + kHeaderSumKey + "' (the header was edited)");
    const std::optional<uint32_t> computed = header_sum_of(std::string(text, text + n));
    if (!computed)
      bad(what, "its '" + kHeaderSumKey +
                    "' entry is not in the form Backplane writes (the header was edited)");
    if (*computed != *header_sum)
      bad(what, "the header's CRC32C is " + hex8(*computed) + " but " + hex8(*header_sum) +
                    " was stored: the header (names, shapes, offsets or metadata) is damaged");
    for (const auto& [name, sum] : tensor_sums)
      if (!seen.count(name) || name == "__metadata__")
        bad(what, "there is a checksum for tensor '" + name + "', which the file does not have");
    for (const Entry& e : h.entries)
      if (!tensor_sums.count(e.name)) bad(what, "tensor '" + e.name + "' has no checksum");
    h.checksummed = true;
  }
  // The tensors' sums and bool bytes, where the data was given (read_header
  // reads the header alone).
  if (head.size() >= total) {
    const std::byte* data = head.data() + h.data_start;
    if (h.checksummed)
      for (const Entry& e : h.entries) {
        const uint32_t stored = tensor_sums.at(e.name);
        const uint32_t computed = crc32c({data + e.begin, data + e.end});
        if (computed != stored)
          bad(what, "tensor '" + e.name + "' has CRC32C " + hex8(computed) + " but " +
                        hex8(stored) + " was stored: its data is damaged");
      }
    for (const Entry& e : h.entries) {
      if (e.dtype != DType::Bool) continue;
      for (uint64_t i = e.begin; i < e.end; ++i)
        if (std::to_integer<uint8_t>(data[i]) > 1)
          bad(what, "BOOL tensor '" + e.name + "' holds a byte other than 0 and 1");
    }
  }
  return h;
}

// The tensors of a checked header (parse has seen the whole file).
nn::NamedTensors make_tensors(const Header& h, const std::byte* data,
                              std::optional<Device> device) {
  const Device dev = device.value_or(default_device());
  nn::NamedTensors out;
  for (const Entry& e : h.entries)
    out.insert(e.name, from_blob(data + e.begin, e.dtype, IntArrayRef(e.shape), dev));
  return out;
}

std::string errno_text() { return std::strerror(errno); }

// Said once per load of a file without sums (Checksums::Optional).
void warn_unverified(const std::string& what) {
  warn("[safetensors] " + what +
       " carries no CRC32C checksums (another tool wrote it): loaded unverified");
}

// fsync of the folder holding `path`, so that a rename into it is durable.
bool sync_folder(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // some file systems cannot sync a folder
  ::close(fd);
  return ok;
}

// The process's umask, read without changing it (umask(2) would, for every thread).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  return 022;
}

// A read-only mapping of a whole file.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    // O_NONBLOCK: a FIFO given by mistake is refused below, not waited on.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) bad("'" + path + "'", "cannot open it: " + errno_text());
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path, "cannot stat it: " + errno_text());
    if (!S_ISREG(st.st_mode)) fail(path, "it is not a regular file");
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(path, "cannot map it: " + errno_text());
    data_ = static_cast<const std::byte*>(p);
  }
  ~Mapping() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  // The destructor does not run for a constructor that throws: close first.
  [[noreturn]] void fail(const std::string& path, const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    bad("'" + path + "'", why);
  }

  int fd_ = -1;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

const char* dtype_name(DType dtype) {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.name;
  detail::raise<TypeError>("[safetensors] dtype ", dtype, " has no safetensors name");
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.dtype;
  return std::nullopt;
}

std::vector<std::byte> serialize(const nn::NamedTensors& tensors, const Metadata& metadata) {
  for (const auto& [key, value] : metadata)
    BP_CHECK(key.rfind(kChecksumPrefix, 0) != 0, "[safetensors] metadata key '", key,
             "' is kept for the sums ('", kChecksumPrefix, "*'); use another name");
  std::vector<std::pair<std::string, Tensor>> items(tensors.begin(), tensors.end());
  for (std::size_t i = 0; i < items.size(); ++i) {
    BP_CHECK(items[i].second.defined(), "[safetensors] tensor '", items[i].first, "' is undefined");
    BP_CHECK(items[i].first != "__metadata__", "[safetensors] '__metadata__' is not a tensor name");
    for (std::size_t k = 0; k < i; ++k)
      BP_CHECK(!items[i].second.shares_storage(items[k].second) || items[i].second.numel() == 0,
               "[safetensors] '", items[k].first, "' and '", items[i].first,
               "' share memory, which a file cannot keep; save one of them, or a clone");
  }
  // Widest first, so every tensor starts at a multiple of its element size.
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return a.second.itemsize() > b.second.itemsize();
  });
  json header = json::object();
  uint64_t at = 0;
  for (const auto& [name, t] : items) {
    const uint64_t n = static_cast<uint64_t>(t.numel()) * t.itemsize();
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end())},
                    {"data_offsets", {at, at + n}}};
    at += n;
  }
  // The sums are 8 hex digits each: the header's length is known before
  // they are, so the data goes straight to its place.
  json meta = metadata;
  meta[kHeaderSumKey] = kZeroSum;
  for (const auto& [name, t] : items) meta[kTensorSumPrefix + name] = kZeroSum;
  header["__metadata__"] = meta;
  const auto padded = [](std::string text) {
    text.append((8 - text.size() % 8) % 8, ' ');
    return text;
  };
  const std::size_t header_size = padded(header.dump()).size();
  std::vector<std::byte> out(8 + header_size + at);
  std::byte* data = out.data() + 8 + header_size;
  NoGradGuard no_grad;
  for (const auto& [name, t] : items) {
    const uint64_t begin = header[name]["data_offsets"][0].get<uint64_t>();
    const uint64_t end = header[name]["data_offsets"][1].get<uint64_t>();
    detail::read_bytes(t.detach().contiguous(), data + begin);
    header["__metadata__"][kTensorSumPrefix + name] = hex8(crc32c({data + begin, data + end}));
  }
  std::string text = padded(header.dump());
  BP_ASSERT(text.size() == header_size, "[safetensors] the header changed size with its sums");
  const std::optional<uint32_t> sum = header_sum_of(text);
  BP_ASSERT(sum.has_value(), "[safetensors] the header sum's entry is not found");
  const std::size_t digits = text.find(kHeaderSumText) + kHeaderSumText.size();
  text.replace(digits, 8, hex8(*sum));
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

uint32_t crc32c(std::span<const std::byte> bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

Header parse_header(std::span<const std::byte> bytes, const std::string& what,
                    Checksums checksums) {
  return parse(bytes, bytes.size(), what, checksums);
}

nn::NamedTensors deserialize(std::span<const std::byte> bytes, std::optional<Device> device,
                             const std::string& what, Checksums checksums) {
  const Header h = parse(bytes, bytes.size(), what, checksums);
  if (!h.checksummed) warn_unverified(what);
  return make_tensors(h, bytes.data() + h.data_start, device);
}

void save_file(const nn::NamedTensors& tensors, const std::string& path, const Metadata& metadata) {
  const std::vector<std::byte> bytes = serialize(tensors, metadata);
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) bad("'" + path + "'", "cannot create a file beside it: " + errno_text());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      bad("'" + path + "'", "cannot write it: " + why);
    }
    done += static_cast<std::size_t>(w);
  }
  // mkstemp makes the file 0600; a saved file gets the mode any new file gets.
  const bool done_ok = ::fchmod(fd, 0666 & ~current_umask()) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!done_ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    bad("'" + path + "'", "cannot write it: " + why);
  }
  if (!sync_folder(path)) bad("'" + path + "'", "cannot sync the folder it is in: " + errno_text());
}

nn::NamedTensors load_file(const std::string& path, std::optional<Device> device,
                           Checksums checksums, Header* header) {
  const Mapping m(path);
  const std::string what = "'" + path + "'";
  Header h = parse(m.bytes(), m.bytes().size(), what, checksums);
  if (!h.checksummed) warn_unverified(what);
  nn::NamedTensors out = make_tensors(h, m.bytes().data() + h.data_start, device);
  if (header) *header = std::move(h);
  return out;
}

Header read_header(const std::string& path, Checksums checksums) {
  const Mapping m(path);  // only the header's pages are touched
  const uint64_t total = m.bytes().size();
  // The header alone: its size, then its N bytes.
  const uint64_t n = total >= 8 ? read_u64_le(m.bytes().data()) : 0;
  const std::size_t head =
      static_cast<std::size_t>(n <= total - std::min<uint64_t>(total, 8) ? 8 + n : total);
  return parse(m.bytes().first(std::min<std::size_t>(head, total)), total, "'" + path + "'",
               checksums);
}

}  // namespace bp::safetensors

namespace bp::nn {

void save(const Module& module, const std::string& path, const safetensors::Metadata& metadata) {
  safetensors::save_file(module.state_dict(), path, metadata);
}

LoadResult load(Module& module, const std::string& path, bool strict,
                safetensors::Checksums checksums) {
  return module.load_state_dict(safetensors::load_file(path, std::nullopt, checksums), strict);
}

}  // namespace bp::nn
