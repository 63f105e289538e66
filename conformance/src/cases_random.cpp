// Random numbers (CR-6): rand is uniform on [0, 1) and randn standard
// normal; a seed fixes the values; the stream is counter based, so split
// requests equal one request and every backend draws the reference CPU
// backend's numbers. Moments are checked with bounds of about five
// standard errors over 10k samples.
#include <backplane/conformance.h>

#include <cmath>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "construction";

// CR-6: uniform on [0, 1), mean 1/2 and variance 1/12 over 10k values.
void rand_distribution(const Context& ctx) {
  manual_seed(1234);
  for (DType d : {DType::Float32, DType::Float64}) {
    std::vector<double> v = rand({10000}, ctx.options(d)).to_vector<double>();
    double sum = 0, sq = 0;
    for (double x : v) {
      BP_EXPECT(x >= 0 && x < 1, "rand gave ", x, " for ", d);
      sum += x;
      sq += x * x;
    }
    const double mean = sum / v.size(), var = sq / v.size() - mean * mean;
    BP_EXPECT(std::fabs(mean - 0.5) < 0.02, "mean ", mean, " for ", d);
    BP_EXPECT(std::fabs(var - 1.0 / 12) < 0.01, "variance ", var, " for ", d);
  }
}

void randn_distribution(const Context& ctx) {
  manual_seed(99);
  for (DType d : {DType::Float32, DType::Float64}) {
    std::vector<double> v = randn({10000}, ctx.options(d)).to_vector<double>();
    double sum = 0, sq = 0;
    for (double x : v) {
      BP_EXPECT(std::isfinite(x), "randn gave ", x);
      sum += x;
      sq += x * x;
    }
    const double mean = sum / v.size(), sd = std::sqrt(sq / v.size() - mean * mean);
    BP_EXPECT(std::fabs(mean) < 0.05, "mean ", mean, " for ", d);
    BP_EXPECT(std::fabs(sd - 1) < 0.05, "standard deviation ", sd, " for ", d);
  }
  BP_EXPECT_THROWS(rand({2}, ctx.options(DType::Int64)), TypeError);
}

// CR-6: the same seed gives the same values; another seed others.
void random_seeded(const Context& ctx) {
  for (auto* gen : {&rand, &randn}) {
    manual_seed(7);
    std::vector<float> a = gen({64}, ctx.options()).to_vector<float>();
    manual_seed(7);
    std::vector<float> b = gen({64}, ctx.options()).to_vector<float>();
    manual_seed(8);
    std::vector<float> c = gen({64}, ctx.options()).to_vector<float>();
    BP_EXPECT(a == b, "the same seed must give the same values");
    BP_EXPECT(a != c, "different seeds gave the same 64 values");
  }
}

// CR-6: counter based: two requests of 4 are one request of 8, and each
// request advances the offset by its element count.
void random_counter_based(const Context& ctx) {
  for (auto* gen : {&rand, &randn}) {
    manual_seed(2024);
    std::vector<float> first = gen({4}, ctx.options()).to_vector<float>();
    BP_EXPECT_EQ(generator_state().offset, 4u);
    std::vector<float> second = gen({2, 2}, ctx.options()).to_vector<float>();
    BP_EXPECT_EQ(generator_state().offset, 8u);
    manual_seed(2024);
    std::vector<float> whole = gen({8}, ctx.options()).to_vector<float>();
    first.insert(first.end(), second.begin(), second.end());
    BP_EXPECT_EQ(first, whole);
  }
  // A saved state replays the stream from where it was.
  manual_seed(5);
  (void)rand({3}, ctx.options());
  GeneratorState s = generator_state();
  std::vector<float> a = rand({5}, ctx.options()).to_vector<float>();
  set_generator_state(s);
  BP_EXPECT_EQ(rand({5}, ctx.options()).to_vector<float>(), a);
}

// CR-6: every backend draws the reference CPU backend's numbers.
void random_matches_reference(const Context& ctx) {
  const Device ref = reference_device();
  for (DType d : {DType::Float32, DType::Float64}) {
    manual_seed(31337);
    std::vector<double> mine = rand({257}, ctx.options(d)).to_vector<double>();
    manual_seed(31337);
    std::vector<double> theirs = rand({257}, TensorOptions(d).device(ref)).to_vector<double>();
    BP_EXPECT_EQ(mine, theirs, "rand must be bit-identical to the reference, for ", d);
    manual_seed(31337);
    Tensor n = randn({257}, ctx.options(d));
    manual_seed(31337);
    std::vector<double> ref_n = randn({257}, TensorOptions(d).device(ref)).to_vector<double>();
    BP_EXPECT_CLOSE(n, 1e-6, 1e-7, ref_n);
  }
}

}  // namespace

void add_random_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("construction.") + name, std::move(ids), kCategory, fn});
  };
  add("rand.uniform", {"CR-6"}, rand_distribution);
  add("randn.normal", {"CR-6"}, randn_distribution);
  add("random.seeded", {"CR-6"}, random_seeded);
  add("random.counter_based", {"CR-6"}, random_counter_based);
  add("random.matches_reference", {"CR-6", "DV-2"}, random_matches_reference);
}

}  // namespace bp::conformance
