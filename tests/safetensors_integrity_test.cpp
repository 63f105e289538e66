// Safetensors integrity: the CRC32C sums Backplane writes into every file
// catch every flipped bit and every edit; files without sums need the
// opt-out; loads refuse special files at once and bound the header; a
// fuzz run over mutations of a valid file ends every one in a ValueError.
#include <backplane/backplane.h>
#include <backplane/conformance/fuzz_checkpoint.h>
#include <backplane/nn/checkpoint.h>
#include <backplane/safetensors.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using bp::DType;
using bp::Tensor;
namespace st = bp::safetensors;
using bp::testing::TempDir;

std::string message_of(const std::function<void()>& f) {
  return bp::testing::message_of<bp::ValueError>(f);
}

std::vector<std::byte> as_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

void write(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// A small file with two dtypes and metadata, as Backplane writes it.
std::vector<std::byte> good_file() {
  bp::nn::NamedTensors in;
  in.insert("w", bp::arange(6, DType::Float32).view({2, 3}));
  in.insert("n", bp::tensor({int64_t{-7}, int64_t{9}}));
  in.insert("b", bp::tensor({true, false}));
  return st::serialize(in, {{"train.lr", "0.001"}});
}

TEST(SafetensorsIntegrity, Crc32cHasTheCastagnoliCheckValues) {
  // The check value of the CRC catalogue and two vectors of RFC 3720 (iSCSI), B.4.
  EXPECT_EQ(st::crc32c(as_bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(st::crc32c(std::vector<std::byte>(32, std::byte{0})), 0x8A9136AAu);
  EXPECT_EQ(st::crc32c(std::vector<std::byte>(32, std::byte{0xFF})), 0x62A8AB43u);
}

TEST(SafetensorsIntegrity, SumsAreWrittenAndVerified) {
  const std::vector<std::byte> good = good_file();
  const st::Header h = st::parse_header(good);
  EXPECT_TRUE(h.checksummed);
  EXPECT_EQ(h.metadata, (st::Metadata{{"train.lr", "0.001"}}))
      << "the sums are not the caller's metadata";
  const std::string text(reinterpret_cast<const char*>(good.data()) + 8, h.data_start - 8);
  for (const char* key : {"\"backplane.crc32c.header\":\"", "\"backplane.crc32c.tensor.w\":\"",
                          "\"backplane.crc32c.tensor.n\":\"", "\"backplane.crc32c.tensor.b\":\""})
    EXPECT_NE(text.find(key), std::string::npos) << key;
  EXPECT_EQ(st::deserialize(good)["w"].to_vector<float>(), std::vector<float>({0, 1, 2, 3, 4, 5}));
  // The stored sum of "n" is the CRC32C of its 16 bytes.
  const Tensor n = bp::tensor({int64_t{-7}, int64_t{9}});
  std::vector<std::byte> raw(16);
  std::memcpy(raw.data(), n.to_vector<int64_t>().data(), 16);
  char want[9];
  std::snprintf(want, sizeof want, "%08x", st::crc32c(raw));
  EXPECT_NE(text.find(std::string("\"backplane.crc32c.tensor.n\":\"") + want + "\""),
            std::string::npos);
  // The caller may not write the sums' keys.
  EXPECT_NE(message_of([] {
              st::serialize({}, {{"backplane.crc32c.header", "0"}});
            }).find("metadata key 'backplane.crc32c.header' is kept for the sums"),
            std::string::npos);
}

TEST(SafetensorsIntegrity, EveryFlippedBitIsRefused) {
  const std::vector<std::byte> good = good_file();
  const uint64_t data_start = st::parse_header(good).data_start;
  int refused = 0, named = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<std::byte> bad = good;
      bad[i] ^= std::byte{static_cast<unsigned char>(1u << bit)};
      const std::string m = message_of([&] { st::deserialize(bad); });
      refused += m != "(no ValueError)";
      // A flip in the data names the tensor and both sums.
      if (i >= data_start && m.find("has CRC32C ") != std::string::npos &&
          m.find(" was stored") != std::string::npos)
        ++named;
    }
  EXPECT_EQ(refused, static_cast<int>(good.size() * 8));
  EXPECT_EQ(named, static_cast<int>((good.size() - data_start) * 8));
  // Which tensor: a flip in w's first byte.
  std::vector<std::byte> bad = good;
  bad[data_start + 16] ^= std::byte{1};  // w follows the 16 bytes of n (widest first)
  EXPECT_NE(message_of([&] { st::deserialize(bad); }).find("tensor 'w' has CRC32C"),
            std::string::npos);
}

TEST(SafetensorsIntegrity, AnEditedHeaderIsRefused) {
  std::vector<std::byte> bytes = good_file();
  std::string all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::size_t at = all.find("0.001");
  ASSERT_NE(at, std::string::npos);
  all.replace(at, 5, "1e300");  // same length: only the sum can tell
  const std::string m = message_of([&] { st::deserialize(as_bytes(all)); });
  EXPECT_NE(m.find("the header's CRC32C is "), std::string::npos) << m;
  EXPECT_NE(m.find("is damaged"), std::string::npos) << m;
  // A removed tensor sum, and an added one for no tensor, are refused too.
  std::string none =
      std::string(reinterpret_cast<const char*>(good_file().data()), good_file().size());
  const std::size_t k = none.find("backplane.crc32c.tensor.w");
  none.replace(k, 25, "backplane.crc32c.tensor.q");
  EXPECT_NE(message_of([&] { st::deserialize(as_bytes(none)); }).find("CRC32C"), std::string::npos);
}

TEST(SafetensorsIntegrity, FilesWithoutSumsNeedTheOptOutAndAreNamedOnce) {
  TempDir dir;
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  std::vector<std::byte> bytes(8 + header.size() + 8);
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  const std::string path = dir / "other.safetensors";
  write(path, bytes);
  const std::string m = message_of([&] { st::load_file(path); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("': it carries no CRC32C checksums"), std::string::npos) << m;
  std::vector<std::string> warnings;
  bp::set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  const auto t = st::load_file(path, std::nullopt, st::Checksums::Optional);
  bp::set_warning_handler([](const std::string& w) { std::cerr << "[warning] " << w << "\n"; });
  EXPECT_EQ(t.size(), 2u);
  ASSERT_EQ(warnings.size(), 1u) << "said once, not per tensor";
  EXPECT_NE(warnings[0].find("carries no CRC32C checksums"), std::string::npos);
  EXPECT_NE(warnings[0].find("loaded unverified"), std::string::npos);
  // The opt-out does not turn off the sums a file has.
  std::vector<std::byte> bad = good_file();
  bad.back() ^= std::byte{4};
  EXPECT_NE(message_of([&] {
              st::deserialize(bad, std::nullopt, "x", st::Checksums::Optional);
            }).find("has CRC32C"),
            std::string::npos);
}

TEST(SafetensorsIntegrity, SpecialFilesAreRefusedAtOnce) {
  TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nothing writes to the FIFO: a load that opened it for reading would wait for ever.
  EXPECT_NE(message_of([&] { st::load_file(fifo); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(message_of([&] { st::read_header(fifo); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(message_of([&] { bp::nn::read_checkpoint(fifo); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(message_of([&] { st::load_file("/dev/zero"); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(message_of([&] { st::load_file(dir / ""); }).find("not a regular file"),
            std::string::npos);
}

// A header listing many empty tensors is parsed in linear time: 200,000
// load, and past the entry limit the count is refused while parsing.
TEST(SafetensorsIntegrity, ManyEntriesLoadOrAreRefused) {
  std::string header = "{";
  for (int i = 0; i < 200000; ++i)
    header +=
        "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},";
  header.back() = '}';
  std::vector<std::byte> bytes(8 + header.size());
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  EXPECT_EQ(st::deserialize(bytes, std::nullopt, "many", st::Checksums::Optional).size(), 200000u);
  EXPECT_NE(message_of([&] { st::deserialize(bytes); }).find("carries no CRC32C checksums"),
            std::string::npos);
}

// Mutations of a valid file (bit flips, bytes set, cuts, insertions, deleted
// and repeated runs, digits changed in the header), a fixed number from a
// fixed seed, by the loader fuzzer `backplane fuzz --target checkpoint` runs:
// every one that changes the bytes is a ValueError, never another exception;
// with the sums optional, none escapes either.
TEST(SafetensorsIntegrity, FuzzedFilesEndInAValueError) {
  namespace fz = bp::conformance::fuzz;
  fz::CheckpointOptions o;
  o.seed = 20261202;
  o.cases = 3000;
  std::ostringstream out, progress;
  const fz::CheckpointSummary s = fz::run_checkpoint(o, out, progress);
  EXPECT_EQ(s.cases, 3000u);
  EXPECT_GT(s.cases - s.unchanged, 2900u);
  EXPECT_EQ(s.refused, s.cases - s.unchanged) << "a changed file loaded with its sums required\n"
                                              << out.str();
  EXPECT_EQ(s.failed, 0u) << out.str();
}

// A case is drawn from (seed, case number) alone: a replay sees the same
// bytes, and cases differ from each other.
TEST(SafetensorsIntegrity, FuzzCasesReplay) {
  namespace fz = bp::conformance::fuzz;
  const std::vector<std::byte> good = fz::checkpoint_fuzz_base();
  EXPECT_EQ(fz::mutate_checkpoint(good, 7, 41), fz::mutate_checkpoint(good, 7, 41));
  int differ = 0;
  for (uint64_t k = 0; k < 20; ++k)
    differ += fz::mutate_checkpoint(good, 7, k) != fz::mutate_checkpoint(good, 8, k);
  EXPECT_GE(differ, 15);
}

}  // namespace
