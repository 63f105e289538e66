// Safetensors files: a file written by Python's safetensors package
// (tests/fixtures/reference.safetensors, made by the script beside it) read
// here; files written here read back, and by Python when it has the package;
// every malformed header refused with a clear error; saving is atomic.
#include <backplane/backplane.h>
#include <backplane/safetensors.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using bp::DType;
using bp::Tensor;
namespace st = bp::safetensors;
namespace fs = std::filesystem;

// The message of the ValueError f throws (a test failure when it throws none).
std::string message_of(const std::function<void()>& f) {
  return bp::testing::message_of<bp::ValueError>(f);
}

using TempDir = bp::testing::TempDir;

// A file's bytes: the 8-byte size, the header text, then `data`.
std::vector<std::byte> file_bytes(const std::string& header, const std::vector<uint8_t>& data = {},
                                  std::optional<uint64_t> size = std::nullopt) {
  std::vector<std::byte> out(8 + header.size() + data.size());
  const uint64_t n = size.value_or(header.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

// Hand-made files carry no sums: their structure is what is checked here.
std::string error_of(const std::vector<std::byte>& bytes) {
  return message_of(
      [&] { st::deserialize(bytes, std::nullopt, "safetensors data", st::Checksums::Optional); });
}

// Reads a hand-made file (no sums).
bp::nn::NamedTensors read_unverified(const std::vector<std::byte>& bytes) {
  return st::deserialize(bytes, std::nullopt, "safetensors data", st::Checksums::Optional);
}

TEST(Safetensors, ReadsAFileWrittenByPython) {
  const std::string path =
      std::string(BACKPLANE_SOURCE_DIR) + "/tests/fixtures/reference.safetensors";
  // Python writes no sums: refused by default, read with the opt-out.
  EXPECT_NE(message_of([&] { st::load_file(path); }).find("carries no CRC32C checksums"),
            std::string::npos);
  const bp::nn::NamedTensors t = st::load_file(path, std::nullopt, st::Checksums::Optional);
  ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(t["f32"].dtype(), DType::Float32);
  EXPECT_EQ(t["f32"].to_vector<double>(), std::vector<double>({-1.0, -0.5, 0.0, 0.5, 1.0, 1.5}));
  EXPECT_EQ(t["f32"].sizes().size(), 2u);
  EXPECT_EQ(t["f64"].dim(), 0);
  EXPECT_EQ(t["f64"].item<double>(), M_PI);
  EXPECT_EQ(t["i64"].to_vector<int64_t>(),
            std::vector<int64_t>({-(int64_t{1} << 40), -1, 0, (int64_t{1} << 40) + 3}));
  EXPECT_EQ(t["i32"].to_vector<int64_t>(), std::vector<int64_t>({-5, 6, -7, 8}));
  EXPECT_EQ(t["i16"].dtype(), DType::Int16);
  EXPECT_EQ(t["i16"].to_vector<int64_t>(), std::vector<int64_t>({-300, 0, 300}));
  EXPECT_EQ(t["i8"].to_vector<int64_t>(), std::vector<int64_t>({-128, 0, 127}));
  EXPECT_EQ(t["u8"].to_vector<int64_t>(), std::vector<int64_t>({0, 128, 255}));
  EXPECT_EQ(t["bool"].to_vector<bool>(), std::vector<bool>({true, false, false, true}));
  EXPECT_EQ(t["f16"].dtype(), DType::Float16);
  EXPECT_EQ(t["f16"].to_vector<double>(), std::vector<double>({0.5, -2.0, 65504.0}));
  EXPECT_EQ(t["bf16"].dtype(), DType::BFloat16);
  EXPECT_EQ(t["bf16"].to_vector<double>(), std::vector<double>({1.5, -3.0}));
  EXPECT_EQ(t["empty"].numel(), 0);
  EXPECT_EQ(t["empty"].size(1), 4);
  EXPECT_EQ(t["block.0.weight"].to_vector<double>(), std::vector<double>({1, 2, 3, 4}));
  const st::Header h = st::read_header(path, st::Checksums::Optional);
  EXPECT_FALSE(h.checksummed);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.metadata.at("source"), "safetensors_reference.py");
}

TEST(Safetensors, RoundTripKeepsDtypeShapeAndValues) {
  TempDir dir;
  bp::nn::NamedTensors in;
  in.insert("a",
            bp::arange(12, DType::Float32).view({3, 4}).t());  // not contiguous: saved row-major
  in.insert("b", bp::tensor({true, false, true}));
  in.insert("c", bp::tensor({int64_t{-3}, int64_t{1} << 50}));
  in.insert("d", bp::tensor({1.5, -2.25}).to(DType::BFloat16));
  in.insert("e", bp::scalar_tensor(7, DType::Int8));
  in.insert("f", bp::zeros({2, 0, 3}, DType::Float64));
  st::save_file(in, dir / "x.safetensors", {{"epoch", "3"}});
  const auto out = st::load_file(dir / "x.safetensors");
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.contains(name)) << name;
    EXPECT_TRUE(bp::equal(out[name], t.contiguous())) << name;
    EXPECT_TRUE(out[name].is_contiguous());
  }
  EXPECT_EQ(st::read_header(dir / "x.safetensors").metadata.at("epoch"), "3");
}

TEST(Safetensors, LayoutFollowsTheFormat) {
  bp::nn::NamedTensors in;
  in.insert("small", bp::tensor({int8_t{1}, int8_t{2}, int8_t{3}}, DType::Int8));
  in.insert("wide", bp::tensor({1.0, 2.0}, DType::Float64));  // after int8 in the list
  const std::vector<std::byte> bytes = st::serialize(in);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "the header is padded to 8 bytes";
  EXPECT_EQ(static_cast<char>(bytes[8]), '{');
  const st::Header h = st::parse_header(bytes);
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].name, "wide") << "widest dtype first, so each tensor is aligned";
  EXPECT_EQ(h.entries[0].begin, 0u);
  EXPECT_EQ(h.entries[1].begin, 16u);
  double first = 0;
  std::memcpy(&first, bytes.data() + h.data_start, 8);  // little-endian float64
  EXPECT_EQ(first, 1.0);
  EXPECT_EQ(std::to_integer<int>(bytes[h.data_start + 16]), 1);
}

TEST(Safetensors, MalformedFilesAreRefusedWithTheReason) {
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::vector<uint8_t> eight(8, 0);
  EXPECT_NO_THROW(read_unverified(file_bytes(ok, eight)));
  EXPECT_NE(error_of(std::vector<std::byte>(5)).find("fewer than the 8"), std::string::npos);
  EXPECT_NE(error_of(file_bytes(ok, eight, uint64_t{1} << 40)).find("more than the limit"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(ok, eight, ok.size() + 9)).find("truncated"), std::string::npos);
  EXPECT_NE(error_of(file_bytes(ok, {0, 0, 0})).find("not within the data part of 3 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(ok, std::vector<uint8_t>(12, 0))).find("cover 8"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes("[1,2]")).find("must begin with '{'"), std::string::npos);
  EXPECT_NE(error_of(file_bytes("{\"x\":")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(
      error_of(file_bytes(R"({"x":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})", {0, 0}))
          .find("dtype U16, which Backplane does not have"),
      std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                {0, 0, 0, 0}))
                .find("not a size >= 0"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight))
                .find("needs 12 bytes, data_offsets give 8"),
            std::string::npos);
  EXPECT_NE(
      error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight))
          .find("not within the data part"),
      std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight))
                .find("bytes 0 to 4 of the data belong to no tensor"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                eight))
                .find("overlaps"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                eight))
                .find("names 'x' twice"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"__metadata__":{"n":1}})")).find("is not a string"),
            std::string::npos);
  EXPECT_NE(error_of(file_bytes(R"({"x":{"dtype":"F32","shape":[2]}})", eight))
                .find("no \"data_offsets\""),
            std::string::npos);
  EXPECT_NE(
      error_of(file_bytes(R"({"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", {1, 2}))
          .find("other than 0 and 1"),
      std::string::npos);
  EXPECT_NE(
      error_of(
          file_bytes(R"({"x":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
                     {0, 0, 0, 0}))
          .find("9 dims; Backplane tensors have at most 8"),
      std::string::npos);
  // Trailing spaces in the header are allowed (Python pads with them).
  EXPECT_NO_THROW(read_unverified(file_bytes(ok + "   ", eight)));
}

TEST(Safetensors, EveryCutOfAGoodFileIsRefused) {
  bp::nn::NamedTensors in;
  in.insert("w", bp::ones({4, 4}));
  const std::vector<std::byte> good = st::serialize(in);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    const std::vector<std::byte> part(good.begin(),
                                      good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(error_of(part), "(no ValueError)") << "cut at " << cut;
  }
}

TEST(Safetensors, SavingIsAtomicAndRefusesSharedMemory) {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  bp::nn::NamedTensors first;
  first.insert("w", bp::ones({2}));
  st::save_file(first, path);
  bp::nn::NamedTensors shared;
  const Tensor base = bp::zeros({4});
  shared.insert("a", base);
  shared.insert("b", base.narrow(0, 1, 2));
  EXPECT_NE(message_of([&] { st::save_file(shared, path); }).find("'a' and 'b' share memory"),
            std::string::npos);
  EXPECT_TRUE(bp::equal(st::load_file(path)["w"], bp::ones({2}))) << "the earlier file is intact";
  EXPECT_EQ(
      std::distance(fs::directory_iterator(fs::path(path).parent_path()), fs::directory_iterator()),
      1)
      << "no temporary file is left behind";
  EXPECT_NE(message_of([&] {
              st::save_file(first, dir / "no/such/dir/m.safetensors");
            }).find("cannot create a file beside it"),
            std::string::npos);
  EXPECT_NE(message_of([&] { st::load_file(dir / "missing.safetensors"); }).find("cannot open it"),
            std::string::npos);
  // A write that fails at the rename (the target is a directory) removes its temporary file.
  fs::create_directory(dir / "taken");
  EXPECT_NE(message_of([&] { st::save_file(first, dir / "taken"); }).find("cannot write it"),
            std::string::npos);
  EXPECT_EQ(
      std::distance(fs::directory_iterator(fs::path(path).parent_path()), fs::directory_iterator()),
      2)
      << "only model.safetensors and the directory";
  EXPECT_NE(message_of([&] { st::load_file(dir / "taken"); }).find("not a regular file"),
            std::string::npos);
}

TEST(Safetensors, ModuleSaveAndLoad) {
  TempDir dir;
  bp::nn::Sequential a(bp::nn::Linear(3, 4), bp::nn::BatchNorm2d(4));
  bp::nn::save(a, dir / "a.safetensors");
  bp::nn::Sequential b(bp::nn::Linear(3, 4), bp::nn::BatchNorm2d(4));
  bp::nn::load(b, dir / "a.safetensors");
  for (const auto& [name, t] : a.state_dict())
    EXPECT_TRUE(bp::equal(t, b.state_dict()[name])) << name;
  // Into a module whose last layer differs: refused, and the first layer,
  // which matches, is not loaded either.
  bp::nn::Sequential c(bp::nn::Linear(3, 4), bp::nn::BatchNorm2d(5));
  const Tensor before = c.state_dict()["0.weight"].clone();
  EXPECT_NE(message_of([&] {
              bp::nn::load(c, dir / "a.safetensors");
            }).find("size mismatch for 1.weight"),
            std::string::npos);
  EXPECT_TRUE(bp::equal(c.state_dict()["0.weight"], before));
  EXPECT_FALSE(bp::equal(c.state_dict()["0.weight"], a.state_dict()["0.weight"]));
}

// Python reads what Backplane writes, when this machine's Python has the
// safetensors package and numpy ($BACKPLANE_PYTHON, else python3).
TEST(Safetensors, PythonReadsOurFile) {
  const char* env = std::getenv("BACKPLANE_PYTHON");
  const std::string python = env && *env ? env : "python3";
  if (std::system((python + " -c 'import safetensors, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " lacks the safetensors package (pip install safetensors), or numpy";
  TempDir dir;
  bp::nn::NamedTensors in;
  in.insert("x", bp::arange(6, DType::Float32).view({2, 3}) * 0.5);
  in.insert("n", bp::tensor({int64_t{-7}, int64_t{9}}));
  in.insert("h", bp::tensor({1.5, 2.0}).to(DType::Float16));
  st::save_file(in, dir / "ours.safetensors", {{"by", "backplane"}});
  const std::string script = dir / "check.py";
  std::ofstream(script)
      << "import sys, numpy as np\n"
         "from safetensors import safe_open\n"
         "with safe_open(sys.argv[1], 'np') as f:\n"
         "    m = f.metadata()\n"
         "    assert m.pop('by') == 'backplane', m\n"
         "    assert sorted(m) == ['backplane.crc32c.header', 'backplane.crc32c.tensor.h',\n"
         "                         'backplane.crc32c.tensor.n', 'backplane.crc32c.tensor.x'], m\n"
         "    x, n, h = f.get_tensor('x'), f.get_tensor('n'), f.get_tensor('h')\n"
         "assert x.dtype == np.float32 and x.shape == (2, 3), x\n"
         "assert (x.reshape(-1) == np.arange(6) * 0.5).all(), x\n"
         "assert n.dtype == np.int64 and list(n) == [-7, 9], n\n"
         "assert h.dtype == np.float16 and list(h) == [1.5, 2.0], h\n";
  EXPECT_EQ(std::system((python + " " + script + " " + (dir / "ours.safetensors")).c_str()), 0);
}

}  // namespace
