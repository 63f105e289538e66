// The loader fuzzer: mutations of a valid safetensors checkpoint fed to
// safetensors::deserialize with the sums required and optional.
#include <backplane/conformance/fuzz_checkpoint.h>
#include <backplane/nn.h>
#include <backplane/safetensors.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <ostream>
#include <random>
#include <typeinfo>

namespace bp::conformance::fuzz {

namespace st = bp::safetensors;

std::vector<std::byte> checkpoint_fuzz_base() {
  manual_seed(3);
  nn::Linear lin(4, 3);
  nn::NamedTensors in;
  for (const auto& [name, t] : lin.state_dict()) in.insert("model." + name, t);
  in.insert("model.steps", tensor({int64_t{5}}));
  return st::serialize(in, {{"train.epoch", "3"}, {"optimizer", "Adam"}});
}

std::vector<std::byte> mutate_checkpoint(const std::vector<std::byte>& good, uint64_t seed,
                                         uint64_t k) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
  std::mt19937_64 rng(seq);
  const auto pick = [&](std::size_t n) {
    return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1));
  };
  const auto byte = [&] { return std::byte{static_cast<unsigned char>(rng())}; };
  const auto at_ = [](std::size_t i) { return static_cast<std::ptrdiff_t>(i); };
  std::vector<std::byte> m = good;
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !m.empty(); ++e) {
    const std::size_t at = pick(m.size());
    switch (rng() % 7) {
      case 0:  // one bit flipped
        m[at] ^= std::byte{static_cast<unsigned char>(1u << (rng() % 8))};
        break;
      case 1:  // one byte set
        m[at] = byte();
        break;
      case 2:  // cut short
        m.resize(at);
        break;
      case 3:  // one byte inserted
        m.insert(m.begin() + at_(at), byte());
        break;
      case 4:  // a run of up to 16 bytes deleted
        m.erase(m.begin() + at_(at), m.begin() + at_(std::min(m.size(), at + 1 + pick(16))));
        break;
      case 5: {  // a run of up to 16 bytes repeated
        const std::size_t len = std::min(m.size() - at, 1 + pick(16));
        const std::vector<std::byte> run(m.begin() + at_(at), m.begin() + at_(at + len));
        m.insert(m.begin() + at_(at), run.begin(), run.end());
        break;
      }
      default: {  // a digit of the header changed, keeping the JSON's form
        const std::size_t span = std::min<std::size_t>(m.size(), 400);
        if (span <= 8) break;
        for (std::size_t tries = 0; tries < span; ++tries) {
          const std::size_t i = 8 + pick(span - 8);
          const char ch = static_cast<char>(m[i]);
          if (ch >= '0' && ch <= '9') {
            m[i] = std::byte{static_cast<unsigned char>('0' + (ch - '0' + 1 + rng() % 9) % 10)};
            break;
          }
        }
      }
    }
  }
  return m;
}

namespace {

using Clock = std::chrono::steady_clock;

// What loading `bytes` with `mode` ended in: empty for an accepted outcome,
// else the failure.
std::string check_load(const std::vector<std::byte>& bytes, const std::optional<Device>& device,
                       st::Checksums mode, bool& refused) {
  refused = false;
  const char* sums = mode == st::Checksums::Required ? "sums required" : "sums optional";
  try {
    st::deserialize(bytes, device, "fuzzed checkpoint", mode);
    if (mode == st::Checksums::Required) return std::string("a changed file loaded (") + sums + ")";
  } catch (const ValueError&) {
    refused = true;
  } catch (const std::exception& e) {
    return std::string("escaped as ") + typeid(e).name() + " (" + sums + "): " + e.what();
  } catch (...) {
    return std::string("escaped as a non-standard exception (") + sums + ")";
  }
  return {};
}

}  // namespace

CheckpointSummary run_checkpoint(const CheckpointOptions& o, std::ostream& out,
                                 std::ostream& progress) {
  const std::vector<std::byte> good = checkpoint_fuzz_base();
  CheckpointSummary s;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_note = start;
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  for (uint64_t k = o.only_case.value_or(0);; ++k) {
    if (o.only_case && k != *o.only_case) break;
    if (o.cases && s.cases >= *o.cases) break;
    if (o.seconds > 0 && elapsed() >= o.seconds) break;
    if (o.on_case_start) o.on_case_start(k);
    const std::vector<std::byte> m = mutate_checkpoint(good, o.seed, k);
    ++s.cases;
    if (m == good) {
      ++s.unchanged;
      continue;
    }
    if (o.verbose)
      out << "case " << k << ": " << m.size() << " bytes (valid file: " << good.size() << ")\n";
    for (st::Checksums mode : {st::Checksums::Required, st::Checksums::Optional}) {
      bool refused = false;
      const Clock::time_point t0 = Clock::now();
      const std::string failure = check_load(m, o.device, mode, refused);
      const double took = std::chrono::duration<double>(Clock::now() - t0).count();
      if (took > s.slowest_seconds) {
        s.slowest_seconds = took;
        s.slowest_case = k;
      }
      if (mode == st::Checksums::Required && refused) ++s.refused;
      if (mode == st::Checksums::Optional && !refused && failure.empty()) ++s.loaded_optional;
      if (!failure.empty()) {
        ++s.failed;
        std::string line = "case " + std::to_string(k) + ": " + failure;
        if (!o.replay_command.empty())
          line += "\n  replay: " + o.replay_command + " --seed " + std::to_string(o.seed) +
                  " --case " + std::to_string(k);
        out << "FAIL " << line << "\n";
        if (s.failures.size() < 20) s.failures.push_back(line);
        break;
      }
    }
    if (std::chrono::duration<double>(Clock::now() - last_note).count() >= 5) {
      last_note = Clock::now();
      progress << "[fuzz] " << s.cases << " cases, " << s.failed << " failed, " << elapsed() << " s"
               << std::endl;
    }
  }
  return s;
}

void print_summary(std::ostream& out, const CheckpointSummary& s) {
  out << "checkpoint fuzz: " << s.cases << " cases, " << s.cases - s.unchanged
      << " changed the file: " << s.refused << " refused with the sums required, "
      << s.loaded_optional << " loaded with them optional; " << s.failed << " failed\n"
      << "slowest load: " << s.slowest_seconds * 1e3 << " ms (case " << s.slowest_case << ")\n";
}

}  // namespace bp::conformance::fuzz
