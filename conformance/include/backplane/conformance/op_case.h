// Differential op cases (DV-2): an op runs on the device under test and on
// the reference device with the same random inputs, and the results must
// agree: exactly for bool and integer dtypes, within a per-dtype tolerance
// (loosened by what the backends declare) for floating ones.
//
// One OpCaseSpec per op, registered with add_op_case(), gives a case per
// dtype and input layout, named op.<name>.<dtype>.<layout>:
//   contiguous  plain dense inputs                                   DV-2
//   strided     the device under test gets views of bigger tensors:
//               stepped slices at an offset, permuted dims, expanded
//               (stride 0) dims; the reference gets dense copies     DV-2 VW-4
//   zero_d      0-d inputs                                           DV-2 VW-6
//   empty       inputs with a zero-size dim                          DV-2 VW-6
// Inputs come from the case's seed (Context::case_seed), so a failure
// replays with the same --seed. The seed gives values and sizes only: what a
// case exercises (its dtypes, whether its inputs are 0-d or empty, which of
// them broadcast) follows from its name and the sample's index, so every
// seed runs the same cases on the same kernels.
#pragma once

#include <backplane/conformance/case.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bp::conformance {

// The dtypes op cases run on: every one, the numeric ones (no bool), the
// floating ones.
inline const std::vector<DType> kOpDtypesAll(std::begin(kAllDTypes), std::end(kAllDTypes));
inline const std::vector<DType> kOpDtypesNumeric = {DType::Int32,   DType::Int64,   DType::Float32,
                                                    DType::Float64, DType::Float16, DType::BFloat16,
                                                    DType::Int8,    DType::UInt8,   DType::Int16};
inline const std::vector<DType> kOpDtypesFloat = {DType::Float32, DType::Float64, DType::Float16,
                                                  DType::BFloat16};

// A small, fully specified generator (splitmix64), so that a seed gives the
// same inputs with every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform on [lo, hi], both included.
  int64_t uniform_int(int64_t lo, int64_t hi);
  // Uniform on [lo, hi).
  double uniform(double lo, double hi);
  bool chance(double p) { return uniform(0, 1) < p; }
  // Which of the case's samples is being drawn (from 0): generators derive
  // structure (which inputs broadcast) from it, never from the seed.
  int sample_index() const { return sample_index_; }
  void set_sample_index(int index) { sample_index_ = index; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform_int(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  uint64_t state_;
  int sample_index_ = 0;
};

enum class Layout { Contiguous, Strided, ZeroD, Empty };
std::string_view to_string(Layout layout);

// The values an input is drawn from. Floating values are spread over the
// range (with an occasional exact 0 for Any); integers are small enough that
// sums and products of a few hundred stay exact.
enum class Domain {
  Any,       // floats [-2, 2), ints [-9, 9], bools 0/1
  NonZero,   // |x| in [0.5, 2) for floats, [1, 9] for ints: divisors
  Positive,  // floats [0.1, 3), ints [1, 9]: log, sqrt, pow bases
  Few,       // one of -1, 0, 1, 2 (ints, floats) so that ties and equality occur
  Small,     // floats [0, 3), ints [0, 3]: exponents
  NearOne,   // ±[0.5, 1.5) for floats, one of -2, -1, 1, 2 for ints: products
};

struct InputSpec {
  std::vector<int64_t> shape;
  std::optional<DType> dtype = std::nullopt;  // the case's dtype when absent
  Domain domain = Domain::Any;
  bool writable = false;  // written in place: never given expanded dims
  // Exact values (row-major) instead of random ones, e.g. indices; such an
  // input is never expanded either.
  std::function<std::vector<double>(Rng&, const std::vector<int64_t>& shape)> values = {};
  // Normalised by its own spread (batch, group and layer norm): never given
  // expanded dims, since equal values leave only rounding to divide by a
  // variance of nearly 0, and two backends' roundings then differ by 1/sqrt(eps).
  bool varied = false;
};

// One random draw of an op case: its inputs and the op's parameters.
struct Sample {
  std::vector<InputSpec> inputs;
  std::vector<int64_t> dims = {};   // reduction dims, or {dim} for ops along one dim
  std::vector<int64_t> shape = {};  // the result's shape, for factories
  // Terms each output element accumulates (the reduced count, matmul's k):
  // float tolerances scale with it, since backends may sum in any order.
  int64_t terms = 1;
};

// What an op case's function gets: the inputs built on one device (the
// device under test, then the reference) and the sample they came from.
struct OpArgs {
  const Sample& sample;
  std::vector<Tensor> inputs;
  DType dtype;            // the case's dtype
  TensorOptions options;  // the case's dtype on this device (for factories)
  const Tensor& operator[](std::size_t i) const { return inputs.at(i); }
  int64_t dim() const { return sample.dims.at(0); }
};

using Outputs = std::vector<Tensor>;

struct OpCaseSpec {
  std::string name;     // "add", "sum.dims"
  std::vector<Op> ops;  // the kernels it reaches; their declared tolerances apply
  std::vector<DType> dtypes;
  std::function<Sample(Rng&, Layout, DType)> sample;
  std::function<Outputs(const OpArgs&)> run;
  std::vector<Layout> layouts = {Layout::Contiguous, Layout::Strided, Layout::ZeroD, Layout::Empty};
  std::vector<std::string> spec = {};  // IDs checked besides DV-2, VW-4 and VW-6
  int samples = 3;                     // random draws per case
};

// A case per dtype and layout of `op`, in category "op".
void add_op_case(Suite& suite, OpCaseSpec op);

// The layouts of an op that takes no 0-d input (reductions over dims,
// matmul, indexing), and of one that has no value for an empty input.
inline const std::vector<Layout> kLayoutsNoZeroD = {Layout::Contiguous, Layout::Strided,
                                                    Layout::Empty};
inline const std::vector<Layout> kLayoutsNoEmpty = {Layout::Contiguous, Layout::Strided,
                                                    Layout::ZeroD};

// Sample generators for the common shapes of ops. Each honours the layout:
// ZeroD gives 0-d operands, Empty a zero-size dim; a generator that cannot
// give 0-d operands goes with kLayoutsNoZeroD.
namespace samples {
using Fn = std::function<Sample(Rng&, Layout, DType)>;
// `domains.size()` inputs whose shapes broadcast together. Sample 0: every
// input of the result's shape; sample 1: the inputs after the first
// broadcast (lower rank or size-1 dims); sample 2: input 0 broadcasts and the
// last input is 0-d.
Fn broadcasting(std::vector<Domain> domains);
// One input.
Fn unary(Domain domain = Domain::Any);
// Input 0 is written in place; input 1 broadcasts to its shape.
Fn in_place(Domain other = Domain::Any);
// One input, reduced whole (terms = its size); at most `max_numel` elements.
Fn reduce_all(Domain domain = Domain::Any, int64_t max_numel = 192);
// One input of rank >= 1 and a set of dims to reduce (some negative).
Fn reduce_dims(Domain domain = Domain::Any, bool single_dim = false, int64_t max_numel = 192);
// One input of rank >= 1 and one dim (dims = {dim}, terms = its size).
Fn along_dim(Domain domain = Domain::Any);
// [m, k] @ [k, n]; batched: [..., m, k] @ [..., k, n] with broadcast batch dims.
Fn matmul(bool batched);
// [b, m, k] @ [b, k, n].
Fn bmm();
// No input; shape = the result's shape (factories, random numbers).
Fn factory();
}  // namespace samples

}  // namespace bp::conformance
