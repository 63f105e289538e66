// Sample generators for the common shapes of ops (op_case.h).
#include <algorithm>
#include <numeric>

#include "random_inputs.h"

namespace bp::conformance::samples {

namespace {

int64_t count(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// A random shape with one dim of size 0.
std::vector<int64_t> empty_shape(Rng& rng, int min_rank = 1, int max_rank = 3) {
  std::vector<int64_t> s = random_shape(rng, std::max(min_rank, 1), max_rank, 48);
  s[static_cast<std::size_t>(rng.uniform_int(0, int64_t(s.size()) - 1))] = 0;
  return s;
}

// A shape for `layout`: 0-d in ZeroD (for an op that takes one), one with a
// zero-size dim in Empty, else a random one.
std::vector<int64_t> shape_for(Rng& rng, Layout layout, bool zero_d_ok, int64_t max_numel = 192) {
  BP_ASSERT(zero_d_ok || layout != Layout::ZeroD,
            "[conformance] an op case whose generator takes no 0-d input lists the zero_d layout");
  if (layout == Layout::ZeroD) return {};
  if (layout == Layout::Empty) return empty_shape(rng);
  return random_shape(rng, 1, 4, max_numel);
}

// A result shape with a dim of size > 1, so that an input can broadcast to it.
std::vector<int64_t> with_broadcast_room(std::vector<int64_t> shape) {
  for (int64_t d : shape)
    if (d > 1) return shape;
  for (int64_t& d : shape)
    if (d == 1) {
      d = 2;
      return shape;
    }
  shape.insert(shape.begin(), 2);
  return shape;
}

// A shape that broadcasts to `shape` and differs from it: leading dims
// dropped, dims set to 1; dims of size 0 stay (an empty result stays empty).
std::vector<int64_t> broadcast_to(Rng& rng, const std::vector<int64_t>& shape) {
  std::size_t drop = 0;
  if (!shape.empty() && rng.chance(0.5)) {
    const auto most = static_cast<std::size_t>(rng.uniform_int(0, int64_t(shape.size()) - 1));
    while (drop < most && shape[drop] != 0) ++drop;
  }
  std::vector<int64_t> s(shape.begin() + static_cast<std::ptrdiff_t>(drop), shape.end());
  for (auto& d : s)
    if (d > 1 && rng.chance(0.4)) d = 1;
  if (drop == 0)
    for (auto& d : s)
      if (d > 1) {
        d = 1;
        break;
      }
  return s;
}

// Input `i` of `n` whose shapes broadcast to `out` (with_broadcast_room),
// in sample `k`'s pattern: 0 every input `out`, 1 the inputs after the first
// broadcast, 2 input 0 broadcasts and the last input is 0-d.
std::vector<int64_t> operand_shape(Rng& rng, const std::vector<int64_t>& out, int k, std::size_t i,
                                   std::size_t n) {
  if (k == 1 && i > 0) return broadcast_to(rng, out);
  if (k == 2 && i + 1 == n && n > 1) return {};
  if (k == 2 && i == 0) return broadcast_to(rng, out);
  return out;
}

// The broadcasting pattern of a sample (operand_shape), from its index.
int pattern_of(const Rng& rng) { return rng.sample_index() % 3; }

InputSpec input(std::vector<int64_t> shape, Domain domain = Domain::Any) {
  InputSpec in;
  in.shape = std::move(shape);
  in.domain = domain;
  return in;
}

// Dims of `rank` in either spelling (2 or -1 for the last of 3).
int64_t spelled(Rng& rng, int64_t dim, int64_t rank) { return rng.chance(0.3) ? dim - rank : dim; }

}  // namespace

Fn broadcasting(std::vector<Domain> domains) {
  return [domains](Rng& rng, Layout layout, DType) {
    Sample s;
    const int k = layout == Layout::ZeroD ? 0 : pattern_of(rng);
    std::vector<int64_t> out = shape_for(rng, layout, true);
    if (k != 0) out = with_broadcast_room(out);
    for (std::size_t i = 0; i < domains.size(); ++i)
      s.inputs.push_back(input(operand_shape(rng, out, k, i, domains.size()), domains[i]));
    return s;
  };
}

Fn unary(Domain domain) {
  return [domain](Rng& rng, Layout layout, DType) {
    Sample s;
    s.inputs.push_back(input(shape_for(rng, layout, true), domain));
    return s;
  };
}

Fn in_place(Domain other) {
  return [other](Rng& rng, Layout layout, DType) {
    Sample s;
    const int k = layout == Layout::ZeroD ? 0 : pattern_of(rng);
    InputSpec self = input(shape_for(rng, layout, true));
    if (k != 0) self.shape = with_broadcast_room(self.shape);
    self.writable = true;
    s.inputs.push_back(self);
    // Sample 1: `other` broadcasts; sample 2: it is 0-d.
    s.inputs.push_back(input(operand_shape(rng, self.shape, k, 1, 2), other));
    return s;
  };
}

Fn reduce_all(Domain domain, int64_t max_numel) {
  return [domain, max_numel](Rng& rng, Layout layout, DType) {
    Sample s;
    s.inputs.push_back(input(shape_for(rng, layout, true, max_numel), domain));
    s.terms = std::max<int64_t>(1, count(s.inputs[0].shape));
    return s;
  };
}

Fn reduce_dims(Domain domain, bool single_dim, int64_t max_numel) {
  return [=](Rng& rng, Layout layout, DType) {
    Sample s;
    std::vector<int64_t> shape = shape_for(rng, layout, false, max_numel);
    const auto rank = static_cast<int64_t>(shape.size());
    std::vector<int64_t> chosen;
    if (single_dim) {
      chosen.push_back(rng.uniform_int(0, rank - 1));
    } else {
      for (int64_t d = 0; d < rank; ++d)
        if (rng.chance(0.5)) chosen.push_back(d);
      if (chosen.empty()) chosen.push_back(rng.uniform_int(0, rank - 1));
    }
    // Empty: the zero-size dim is always reduced (a result of the identity),
    // whichever dims the seed picks.
    if (layout == Layout::Empty) {
      const auto zero = std::find(shape.begin(), shape.end(), 0) - shape.begin();
      if (single_dim)
        chosen = {zero};
      else if (std::find(chosen.begin(), chosen.end(), zero) == chosen.end())
        chosen.push_back(zero);
    }
    s.terms = 1;
    for (int64_t d : chosen) {
      s.dims.push_back(spelled(rng, d, rank));
      s.terms *= std::max<int64_t>(1, shape[static_cast<std::size_t>(d)]);
    }
    s.inputs.push_back(input(shape, domain));
    return s;
  };
}

Fn along_dim(Domain domain) {
  return [domain](Rng& rng, Layout layout, DType) {
    Sample s;
    std::vector<int64_t> shape = shape_for(rng, layout, false);
    const auto rank = static_cast<int64_t>(shape.size());
    const int64_t dim = rng.uniform_int(0, rank - 1);
    s.dims = {spelled(rng, dim, rank)};
    s.terms = std::max<int64_t>(1, shape[static_cast<std::size_t>(dim)]);
    s.inputs.push_back(input(shape, domain));
    return s;
  };
}

Fn matmul(bool batched) {
  return [batched](Rng& rng, Layout layout, DType) {
    int64_t m = rng.uniform_int(1, 6), k = rng.uniform_int(1, 6), n = rng.uniform_int(1, 6);
    std::vector<int64_t> batch;
    if (batched) batch = random_shape(rng, 1, 2, 9);
    if (layout == Layout::Empty) {
      // Sample 0: m = 0, 1: k = 0 (a result of zeros), 2: n = 0 (batched: a
      // batch dim of 0).
      int64_t* dims[] = {&m, &k, &n};
      const int which = rng.sample_index() % 3;
      if (batched && which == 2)
        batch[0] = 0;
      else
        *dims[which] = 0;
    }
    // Batched: sample 0 both sides have the batch dims, sample 1 a's
    // broadcast, sample 2 b's.
    std::vector<int64_t> a = batch, b = batch;
    if (batched && rng.sample_index() % 3 == 1) a = broadcast_to(rng, batch);
    if (batched && rng.sample_index() % 3 == 2) b = broadcast_to(rng, batch);
    a.insert(a.end(), {m, k});
    b.insert(b.end(), {k, n});
    Sample s;
    s.inputs = {input(a), input(b)};
    s.terms = std::max<int64_t>(1, k);
    return s;
  };
}

Fn bmm() {
  return [](Rng& rng, Layout layout, DType) {
    int64_t dims[] = {rng.uniform_int(1, 3), rng.uniform_int(1, 5), rng.uniform_int(1, 5),
                      rng.uniform_int(1, 5)};
    if (layout == Layout::Empty) dims[rng.sample_index() % 4] = 0;
    const auto [b, m, k, n] = dims;
    Sample s;
    s.inputs = {input({b, m, k}), input({b, k, n})};
    s.terms = std::max<int64_t>(1, k);
    return s;
  };
}

Fn factory() {
  return [](Rng& rng, Layout layout, DType) {
    Sample s;
    s.shape = shape_for(rng, layout, true);
    return s;
  };
}

}  // namespace bp::conformance::samples
