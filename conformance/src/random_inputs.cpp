// Random values, shapes and layouts for the op cases.
//
// A strided input is a view of a bigger tensor: its base is allocated with
// its dims permuted, then permuted back, cut with stepped slices starting
// past a margin (a storage offset), and some dims of size > 1 are expanded
// from size 1 (stride 0). The expected strides are worked out here and
// compared with the view's, so a layout is exactly the one described in a
// failure message.
#include "random_inputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "case_util.h"

namespace bp::conformance {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % range);
}

double Rng::uniform(double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::string_view to_string(Layout layout) {
  switch (layout) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Strided:
      return "strided";
    case Layout::ZeroD:
      return "zero_d";
    case Layout::Empty:
      return "empty";
  }
  return "?";
}

namespace {

double sign(Rng& rng) { return rng.chance(0.5) ? 1.0 : -1.0; }

double random_int(Rng& rng, Domain domain) {
  switch (domain) {
    case Domain::Any:
      return static_cast<double>(rng.uniform_int(-9, 9));
    case Domain::NonZero:
      return sign(rng) * static_cast<double>(rng.uniform_int(1, 9));
    case Domain::Positive:
      return static_cast<double>(rng.uniform_int(1, 9));
    case Domain::Few:
      return rng.pick(std::vector<double>{-1, 0, 1, 2});
    case Domain::Small:
      return static_cast<double>(rng.uniform_int(0, 3));
    case Domain::NearOne:
      return rng.pick(std::vector<double>{-2, -1, 1, 2});
  }
  return 0;
}

double random_float(Rng& rng, Domain domain) {
  switch (domain) {
    case Domain::Any:
      return rng.chance(0.05) ? 0.0 : rng.uniform(-2, 2);
    case Domain::NonZero:
      return sign(rng) * rng.uniform(0.5, 2);
    case Domain::Positive:
      return rng.uniform(0.1, 3);
    case Domain::Few:
      return rng.pick(std::vector<double>{-1, -0.5, 0, 0.5, 1, 2});
    case Domain::Small:
      return rng.uniform(0, 3);
    case Domain::NearOne:
      return sign(rng) * rng.uniform(0.5, 1.5);
  }
  return 0;
}

// What the recipe of a strided input chose for each logical dim.
struct Recipe {
  std::vector<int64_t> step, front, back;
  std::vector<bool> expanded;
  std::vector<int> perm;  // storage dim k holds logical dim perm[k]
};

Recipe random_recipe(Rng& rng, const std::vector<int64_t>& shape, bool may_expand) {
  const std::size_t rank = shape.size();
  Recipe r;
  r.step.assign(rank, 1);
  r.front.assign(rank, 0);
  r.back.assign(rank, 0);
  r.expanded.assign(rank, false);
  r.perm.resize(rank);
  std::iota(r.perm.begin(), r.perm.end(), 0);
  bool trivial = true;
  for (std::size_t d = 0; d < rank; ++d) {
    if (may_expand && shape[d] > 1 && rng.chance(0.2)) {
      r.expanded[d] = true;
      trivial = false;
      continue;
    }
    r.step[d] = rng.pick(std::vector<int64_t>{1, 1, 2, 3});
    r.front[d] = rng.pick(std::vector<int64_t>{0, 0, 1, 2});
    r.back[d] = rng.uniform_int(0, 1);
    trivial = trivial && r.step[d] == 1 && r.front[d] == 0;
  }
  if (rank > 1 && rng.chance(0.5)) {
    for (std::size_t i = rank - 1; i > 0; --i)
      std::swap(r.perm[i], r.perm[static_cast<std::size_t>(rng.uniform_int(0, int64_t(i)))]);
    for (std::size_t k = 0; k < rank; ++k) trivial = trivial && r.perm[k] == int(k);
  }
  if (trivial && rank > 0) r.front[0] = 1;  // at least a storage offset (0-d: strided_tensor)
  return r;
}

std::string describe(const Tensor& t) {
  std::ostringstream os;
  os << t.dtype() << " " << t.sizes();
  if (!t.is_contiguous() || t.storage_offset() != 0)
    os << " strides " << t.strides() << " offset " << t.storage_offset();
  return os.str();
}

std::vector<double> broadcast_values(const std::vector<double>& values,
                                     const std::vector<int64_t>& from,
                                     const std::vector<int64_t>& to) {
  std::vector<int64_t> strides(from.size(), 0);
  int64_t s = 1;
  for (std::size_t d = from.size(); d-- > 0;) {
    strides[d] = from[d] == 1 ? 0 : s;
    s *= from[d];
  }
  return gather(values, to, strides, 0);
}

// The device under test's view for `recipe`, holding `values` (row-major,
// of `pre_expand` shape) at the positions the view reads.
Tensor strided_tensor(const Context& ctx, Rng& rng, const InputSpec& spec, DType dtype,
                      const Recipe& r, const std::vector<int64_t>& pre_expand,
                      const std::vector<double>& values) {
  const std::vector<int64_t>& shape = spec.shape;
  const std::size_t rank = shape.size();
  if (rank == 0) {  // a 0-d view at an offset: base[front]
    const int64_t front = 1 + rng.uniform_int(0, 2);
    std::vector<double> base = random_values(rng, spec.domain, dtype, front + 2);
    base[static_cast<std::size_t>(front)] = values[0];
    return from_vector(base, {front + 2}, ctx.options(dtype)).select(0, front);
  }
  std::vector<int64_t> span(rank), extent(rank), alloc(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    span[d] = pre_expand[d] == 0 ? 0 : (pre_expand[d] - 1) * r.step[d] + 1;
    extent[d] = r.expanded[d] ? 1 : r.front[d] + span[d] + r.back[d];
  }
  for (std::size_t k = 0; k < rank; ++k) alloc[k] = extent[static_cast<std::size_t>(r.perm[k])];
  std::vector<int64_t> alloc_strides(rank), strides(rank), inverse(rank);
  int64_t numel = 1;
  for (std::size_t k = rank; k-- > 0;) {
    alloc_strides[k] = numel;
    numel *= alloc[k];
  }
  int64_t offset = 0;
  for (std::size_t k = 0; k < rank; ++k) {
    const auto d = static_cast<std::size_t>(r.perm[k]);
    inverse[d] = static_cast<int64_t>(k);
    strides[d] = alloc_strides[k] * r.step[d];
    offset += r.front[d] * alloc_strides[k];
  }
  std::vector<double> base = random_values(rng, spec.domain, dtype, numel);
  if (numel > 0) {
    const std::vector<int64_t> pos = positions(pre_expand, strides, offset);
    for (std::size_t i = 0; i < pos.size(); ++i) base[static_cast<std::size_t>(pos[i])] = values[i];
  }
  Tensor v =
      from_vector(base, IntArrayRef(alloc), ctx.options(dtype)).permute(IntArrayRef(inverse));
  for (std::size_t d = 0; d < rank; ++d)
    if (!r.expanded[d] && (r.step[d] != 1 || r.front[d] != 0 || r.back[d] != 0))
      v = v.slice(static_cast<int64_t>(d), r.front[d], r.front[d] + span[d], r.step[d]);
  if (pre_expand != shape) v = v.expand(IntArrayRef(shape));
  // The recipe's arithmetic and the core's views must describe one layout.
  bool same = std::vector<int64_t>(v.sizes().begin(), v.sizes().end()) == shape &&
              (v.numel() == 0 || v.storage_offset() == offset);
  for (std::size_t d = 0; same && d < rank && v.numel() > 0; ++d)
    same = shape[d] <= 1 || v.stride(static_cast<int64_t>(d)) == (r.expanded[d] ? 0 : strides[d]);
  if (!same)
    throw CaseFailure("[conformance] the view built for a strided input has shape " +
                      detail::format(v.sizes()) + ", strides " + detail::format(v.strides()) +
                      ", offset " + std::to_string(v.storage_offset()) + "; expected " +
                      detail::format(shape) + ", " + detail::format(strides) + ", " +
                      std::to_string(offset));
  return v;
}

}  // namespace

std::vector<double> random_values(Rng& rng, Domain domain, DType dtype, int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(std::max<int64_t>(n, 0)));
  for (double& x : v) {
    if (dtype == DType::Bool)
      x = domain == Domain::NonZero || domain == Domain::Positive ? 1.0 : rng.chance(0.5);
    else if (dtype == DType::UInt8)
      x = std::fabs(random_int(rng, domain));
    else if (is_integral(dtype))
      x = random_int(rng, domain);
    else if (dtype == DType::Float32)
      x = static_cast<double>(static_cast<float>(random_float(rng, domain)));
    else if (dtype == DType::Float16)
      x = static_cast<float>(Half(static_cast<float>(random_float(rng, domain))));
    else if (dtype == DType::BFloat16)
      x = static_cast<float>(BFloat16(static_cast<float>(random_float(rng, domain))));
    else
      x = random_float(rng, domain);
  }
  return v;
}

std::vector<int64_t> random_shape(Rng& rng, int min_rank, int max_rank, int64_t max_numel) {
  const int rank = static_cast<int>(rng.uniform_int(min_rank, max_rank));
  std::vector<int64_t> shape(static_cast<std::size_t>(rank));
  int64_t numel = 1;
  for (auto& s : shape) {
    s = rng.uniform_int(1, 5);
    while (s > 1 && numel * s > max_numel) --s;
    numel *= s;
  }
  return shape;
}

BuiltInput build_input(const Context& ctx, Rng& rng, const InputSpec& spec, DType case_dtype,
                       Layout layout) {
  const DType dtype = spec.dtype.value_or(case_dtype);
  const std::vector<int64_t>& shape = spec.shape;
  Recipe recipe;
  std::vector<int64_t> pre_expand = shape;
  if (layout == Layout::Strided) {
    recipe = random_recipe(rng, shape, !spec.writable && !spec.varied && !spec.values);
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (recipe.expanded[d]) pre_expand[d] = 1;
  }
  const int64_t n =
      std::accumulate(pre_expand.begin(), pre_expand.end(), int64_t{1}, std::multiplies<int64_t>());
  std::vector<double> values =
      spec.values ? spec.values(rng, pre_expand) : random_values(rng, spec.domain, dtype, n);
  BP_ASSERT(static_cast<int64_t>(values.size()) == n, "an input's value function gave ",
            values.size(), " values for ", n, " elements");
  const std::vector<double> logical =
      pre_expand == shape ? values : broadcast_values(values, pre_expand, shape);

  BuiltInput b;
  b.ref = from_vector(logical, IntArrayRef(shape), ctx.reference_options(dtype));
  b.dut = layout == Layout::Strided
              ? strided_tensor(ctx, rng, spec, dtype, recipe, pre_expand, values)
              : from_vector(logical, IntArrayRef(shape), ctx.options(dtype));
  b.description = describe(b.dut);
  return b;
}

}  // namespace bp::conformance
