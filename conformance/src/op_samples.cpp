// Sample generators for the common shapes of ops (op_case.h).
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

// A shape for `layout`: in EmptyOr0d a 0-d shape (when the op takes one) or
// an empty one, else a random one.
std::vector<int64_t> shape_for(Rng& rng, Layout layout, bool zero_d_ok, int64_t max_numel = 192) {
  if (layout == Layout::EmptyOr0d) {
    if (zero_d_ok && rng.chance(0.5)) return {};
    return empty_shape(rng);
  }
  return random_shape(rng, 1, 4, max_numel);
}

// A shape that broadcasts to `shape`: leading dims dropped, dims set to 1.
std::vector<int64_t> broadcastable(Rng& rng, const std::vector<int64_t>& shape) {
  if (shape.empty() || rng.chance(0.4)) return shape;
  const auto drop = rng.uniform_int(0, int64_t(shape.size()) - 1);
  std::vector<int64_t> s(shape.begin() + drop, shape.end());
  for (auto& d : s)
    if (rng.chance(0.3)) d = 1;
  return s;
}

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
    std::vector<int64_t> out;
    int kind = 3;
    if (layout == Layout::EmptyOr0d) {
      kind = static_cast<int>(rng.uniform_int(0, 2));
      out = kind == 0 ? std::vector<int64_t>{} : kind == 1 ? random_shape(rng, 1, 3, 48)
                                                            : empty_shape(rng);
    } else {
      out = random_shape(rng, 1, 4, 192);
    }
    for (std::size_t i = 0; i < domains.size(); ++i) {
      std::vector<int64_t> shape = broadcastable(rng, out);
      if (kind == 1 && (i == 0 || rng.chance(0.4))) shape = {};
      s.inputs.push_back(input(shape, domains[i]));
    }
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
    InputSpec self = input(shape_for(rng, layout, true));
    self.writable = true;
    s.inputs.push_back(self);
    s.inputs.push_back(input(broadcastable(rng, self.shape), other));
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
    if (layout == Layout::EmptyOr0d) {
      int64_t* dims[] = {&m, &k, &n};
      const auto which = rng.uniform_int(0, batched ? 3 : 2);
      if (which == 3)
        batch[0] = 0;
      else
        *dims[which] = 0;
    }
    std::vector<int64_t> a = batched ? broadcastable(rng, batch) : std::vector<int64_t>{};
    std::vector<int64_t> b = batched ? broadcastable(rng, batch) : std::vector<int64_t>{};
    if (batched && rng.chance(0.5)) (rng.chance(0.5) ? a : b) = batch;  // one side full
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
    if (layout == Layout::EmptyOr0d) dims[rng.uniform_int(0, 3)] = 0;
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
