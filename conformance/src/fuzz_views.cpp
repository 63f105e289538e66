// View steps: each resolved against the layout it meets (dims modulo the
// rank, starts clamped, a step that cannot apply skipped, a probe given the
// arguments the contract rejects), the layout the contract says it makes
// (for the host model), and the call and C++ it becomes.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "fuzz_internal.h"

namespace bp::conformance::fuzz {

namespace {

// Views bigger than this are skipped (not probes): reading them back would
// cost more than the case is worth.
constexpr int64_t kMaxViewNumel = 4096;

int64_t wrap(int64_t v, int64_t m) { return m <= 0 ? 0 : ((v % m) + m) % m; }

// The dim as printed: its negative form when `negative`.
int64_t shown(int64_t d, int64_t rank, bool negative) {
  return negative ? d - std::max<int64_t>(rank, 1) : d;
}

bool bit(uint64_t seed, int k) { return (seed >> k) & 1u; }

// A shape (with at most one -1) for viewing `sizes` differently: adjacent
// dims merged, dims split into factors, size-1 dims added or removed.
std::vector<int64_t> reshaped(const std::vector<int64_t>& sizes, uint64_t seed) {
  Rng g(seed);
  std::vector<int64_t> t = sizes;
  const int n = static_cast<int>(g.uniform_int(1, 3));
  for (int k = 0; k < n; ++k) {
    const int64_t r = static_cast<int64_t>(t.size());
    switch (g.uniform_int(0, 3)) {
      case 0:  // merge
        if (r >= 2) {
          const auto i = static_cast<std::size_t>(g.uniform_int(0, r - 2));
          t[i] *= t[i + 1];
          t.erase(t.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        }
        break;
      case 1:  // split
        if (r >= 1 && r < kMaxDims) {
          const auto i = static_cast<std::size_t>(g.uniform_int(0, r - 1));
          std::vector<int64_t> divisors;
          if (t[i] == 0) divisors = {0, 2};
          for (int64_t a = 1; a <= t[i]; ++a)
            if (t[i] % a == 0) divisors.push_back(a);
          const int64_t a = g.pick(divisors);
          const int64_t b = t[i] == 0 ? (a == 0 ? 2 : 0) : t[i] / a;
          t[i] = a;
          t.insert(t.begin() + static_cast<std::ptrdiff_t>(i) + 1, b);
        }
        break;
      case 2:  // insert a 1
        if (r < kMaxDims) t.insert(t.begin() + g.uniform_int(0, r), 1);
        break;
      default:  // remove a 1
        for (std::size_t i = 0; i < t.size(); ++i)
          if (t[i] == 1 && g.chance(0.5)) {
            t.erase(t.begin() + static_cast<std::ptrdiff_t>(i));
            break;
          }
    }
  }
  return t;
}

}  // namespace

// --- views ---------------------------------------------------------------------

std::string_view view_name(ViewKind kind) {
  static constexpr std::string_view names[kNumViewKinds] = {
      "narrow",  "slice",      "select",  "transpose",    "t",         "permute",  "expand",
      "unfold",  "as_strided", "squeeze", "squeeze(dim)", "unsqueeze", "diagonal", "view",
      "reshape", "flatten"};
  return names[static_cast<int>(kind)];
}

ResolvedView resolve_view(const ViewStep& s, const Layout& in, int64_t capacity) {
  ResolvedView v;
  v.kind = s.kind;
  v.out = in;
  Layout& o = v.out;
  const int64_t r = static_cast<int64_t>(in.sizes.size());
  const bool neg = bit(s.seed, 0);
  auto fail = [&](std::string why) {
    v.error = std::move(why);
    return v;
  };
  auto skip = [&] {
    v.skip = true;
    return v;
  };
  switch (s.kind) {
    case ViewKind::Narrow: {
      if (r == 0) return s.probe ? (v.i0 = 0, v.i2 = 1, fail("narrow of a 0-d tensor")) : skip();
      const int64_t d = wrap(s.p[0], r), n = in.sizes[d];
      v.i0 = shown(d, r, neg);
      if (s.probe) {
        v.i1 = std::min(std::abs(s.p[1]), n);
        v.i2 = n - v.i1 + 1;
        return fail("start + length exceeds the dim's size (VW-5)");
      }
      v.i1 = s.p[1] < 0 ? std::max(s.p[1], -n) : std::min(s.p[1], n);
      const int64_t start = v.i1 < 0 ? v.i1 + n : v.i1;
      v.i2 = std::min(std::max<int64_t>(s.p[2], 0), n - start);
      o.sizes[d] = v.i2;
      o.offset += start * in.strides[d];
      break;
    }
    case ViewKind::Slice: {
      if (r == 0) return s.probe ? (v.i2 = 1, fail("slice of a 0-d tensor")) : skip();
      const int64_t d = wrap(s.p[0], r), n = in.sizes[d];
      v.i0 = shown(d, r, neg);
      if (!bit(s.seed, 1)) v.start = s.p[1];
      if (!bit(s.seed, 2)) v.stop = s.p[2];
      v.i2 = 1 + static_cast<int64_t>((s.seed >> 8) % 4);
      if (s.probe) {
        v.i2 = -static_cast<int64_t>((s.seed >> 8) % 2);
        return fail("a slice step must be positive");
      }
      auto clamp = [n](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + n : x, 0, n); };
      const int64_t b = v.start ? clamp(*v.start) : 0;
      const int64_t e = std::max(b, v.stop ? clamp(*v.stop) : n);
      o.sizes[d] = (e - b + v.i2 - 1) / v.i2;
      o.offset += b * in.strides[d];
      o.strides[d] *= v.i2;
      break;
    }
    case ViewKind::Select: {
      const int64_t d = wrap(s.p[0], r), n = r ? in.sizes[d] : 0;
      v.i0 = shown(d, r, neg);
      if (r == 0 || n == 0 || s.probe) {
        if (!s.probe) return skip();
        v.i1 = bit(s.seed, 1) ? -n - 1 : n;
        return fail("the index is out of range (VW-5)");
      }
      v.i1 = s.p[1] < 0 ? std::max(s.p[1], -n) : std::min(s.p[1], n - 1);
      o.offset += (v.i1 < 0 ? v.i1 + n : v.i1) * in.strides[d];
      o.sizes.erase(o.sizes.begin() + d);
      o.strides.erase(o.strides.begin() + d);
      break;
    }
    case ViewKind::Transpose: {
      if (s.probe) {
        v.i0 = std::max<int64_t>(r, 1);
        return fail("the dim is out of range (VW-5)");
      }
      const int64_t d0 = wrap(s.p[0], r), d1 = wrap(s.p[1], r);
      v.i0 = shown(d0, r, neg);
      v.i1 = shown(d1, r, bit(s.seed, 1));
      if (r > 0) {
        std::swap(o.sizes[d0], o.sizes[d1]);
        std::swap(o.strides[d0], o.strides[d1]);
      }
      break;
    }
    case ViewKind::T:
      if (r > 2) return s.probe ? fail("t() needs at most 2 dims") : skip();
      if (r == 2) {
        std::swap(o.sizes[0], o.sizes[1]);
        std::swap(o.strides[0], o.strides[1]);
      }
      break;
    case ViewKind::Permute: {
      std::vector<int64_t> perm(static_cast<std::size_t>(r));
      std::iota(perm.begin(), perm.end(), 0);
      Rng g(s.seed);
      for (int64_t i = r - 1; i > 0; --i) std::swap(perm[i], perm[g.uniform_int(0, i)]);
      for (int64_t i = 0; i < r; ++i) {
        o.sizes[i] = in.sizes[perm[i]];
        o.strides[i] = in.strides[perm[i]];
        v.a.push_back(shown(perm[i], r, bit(s.seed, 10 + static_cast<int>(i))));
      }
      if (s.probe) {
        if (r >= 2) {
          v.a[1] = v.a[0];
          return fail("a dim appears twice in the permutation");
        }
        v.a.push_back(0);
        return fail("the permutation has more dims than the tensor");
      }
      break;
    }
    case ViewKind::Expand: {
      Rng g(s.seed);
      const int64_t lead = std::min<int64_t>(g.uniform_int(0, 2), kMaxDims - r);
      std::vector<int64_t> target, shown_target;
      for (int64_t i = 0; i < lead; ++i) target.push_back(g.chance(0.06) ? 0 : g.uniform_int(1, 3));
      shown_target = target;
      for (int64_t d = 0; d < r; ++d) {
        const int64_t n = in.sizes[d];
        const int64_t want = n == 1 ? (g.chance(0.06) ? 0 : g.uniform_int(1, 4)) : n;
        target.push_back(want);
        shown_target.push_back(want == n && g.chance(0.3) ? -1 : want);
      }
      if (s.probe) {
        const int variant = static_cast<int>(s.p[0] % 3);
        const auto big =
            std::find_if(in.sizes.begin(), in.sizes.end(), [](int64_t n) { return n != 1; });
        if (variant == 2 && big != in.sizes.end()) {
          shown_target[lead + (big - in.sizes.begin())] = *big + 1;
          v.a = shown_target;
          return fail("a non-singleton dim cannot expand");
        }
        if (variant == 1 && in.numel() > 0) {
          shown_target.insert(shown_target.begin(), {int64_t{1} << 32, int64_t{1} << 32});
          v.a = shown_target;
          return fail("the size overflows int64 (CR-8)");
        }
        while (static_cast<int64_t>(shown_target.size()) <= kMaxDims)
          shown_target.insert(shown_target.begin(), 1);
        v.a = shown_target;
        return fail("the result would have more than 8 dims (CR-8)");
      }
      v.a = shown_target;
      o.sizes = target;
      o.strides.assign(target.size(), 0);
      for (int64_t d = 0; d < r; ++d)
        if (in.sizes[d] == target[lead + d]) o.strides[lead + d] = in.strides[d];
      break;
    }
    case ViewKind::Unfold: {
      const int64_t d = wrap(s.p[0], r), n = r ? in.sizes[d] : 1;
      v.i0 = shown(d, r, neg);
      v.i1 = std::min(std::max<int64_t>(s.p[1], 0), n);
      v.i2 = std::max<int64_t>(s.p[2], 1);
      if (s.probe) {
        if (r == kMaxDims) return fail("the result would have more than 8 dims (CR-8)");
        if (bit(s.seed, 1)) {
          v.i2 = 0;
          return fail("an unfold step must be positive");
        }
        v.i1 = n + 1;
        return fail("the window is bigger than the dim");
      }
      if (r == kMaxDims) return skip();
      if (r == 0) {
        o.sizes = {v.i1};
        o.strides = {1};
      } else {
        o.sizes[d] = (n - v.i1) / v.i2 + 1;
        o.strides[d] = in.strides[d] * v.i2;
        o.sizes.push_back(v.i1);
        o.strides.push_back(in.strides[d]);
      }
      break;
    }
    case ViewKind::AsStrided: {
      Rng g(s.seed);
      const int64_t rank = g.uniform_int(0, 4);
      const int mode = static_cast<int>(g.uniform_int(0, 2));
      o.sizes.clear();
      for (int64_t i = 0; i < rank; ++i)
        o.sizes.push_back(g.chance(0.06) ? 0 : g.uniform_int(1, 4));
      o.strides = contiguous_layout(o.sizes).strides;
      for (int64_t i = 0; i < rank; ++i) {
        if (mode == 0) o.strides[i] = g.uniform_int(0, 6);
        if (mode == 2) o.strides[i] = i + 1 == rank ? 1 : g.uniform_int(1, 2);  // sliding windows
      }
      o.offset = g.uniform_int(0, std::max<int64_t>(capacity - 1, 0));
      if (s.probe) {
        for (int64_t& n : o.sizes) n = std::max<int64_t>(n, 1);
        v.a = o.sizes;
        v.b = o.strides;
        switch (s.p[0] % 3) {
          case 0:
            v.a.push_back(1);
            v.b.push_back(1);
            v.i0 = capacity;
            return fail("the view reaches past the end of the memory");
          case 1:
            v.a.push_back(2);
            v.b.push_back(-1);
            v.i0 = capacity;
            return fail("a negative stride");
          default:
            v.a.insert(v.a.begin(), {int64_t{1} << 40, int64_t{1} << 40});
            v.b.insert(v.b.begin(), {0, 0});
            v.i0 = 0;
            return fail("the size overflows int64 (CR-8)");
        }
      }
      if (capacity == 0) {
        if (rank == 0) return skip();
        o.sizes[0] = 0;
        o.offset = 0;
      }
      // Shrink until the last element reached lies inside the memory.
      for (;;) {
        int64_t span = 0;
        for (int64_t i = 0; i < rank; ++i) span += (o.sizes[i] - 1) * o.strides[i];
        if (o.numel() == 0 || o.offset + span < capacity) break;
        if (o.offset > 0) {
          o.offset = std::max<int64_t>(0, capacity - 1 - span);
          continue;
        }
        auto widest = std::max_element(o.sizes.begin(), o.sizes.end());
        --*widest;
      }
      v.a = o.sizes;
      v.b = o.strides;
      v.i0 = o.offset;
      break;
    }
    case ViewKind::Squeeze:
      o.sizes.clear();
      o.strides.clear();
      for (int64_t d = 0; d < r; ++d)
        if (in.sizes[d] != 1) {
          o.sizes.push_back(in.sizes[d]);
          o.strides.push_back(in.strides[d]);
        }
      break;
    case ViewKind::SqueezeDim: {
      if (s.probe) {
        v.i0 = std::max<int64_t>(r, 1);
        return fail("the dim is out of range (VW-5)");
      }
      const int64_t d = wrap(s.p[0], r);
      v.i0 = shown(d, r, neg);
      if (r > 0 && in.sizes[d] == 1) {
        o.sizes.erase(o.sizes.begin() + d);
        o.strides.erase(o.strides.begin() + d);
      }
      break;
    }
    case ViewKind::Unsqueeze: {
      const int64_t d = wrap(s.p[0], r + 1);
      v.i0 = neg ? d - (r + 1) : d;
      if (r == kMaxDims)
        return s.probe ? fail("the result would have more than 8 dims (CR-8)") : skip();
      if (s.probe) {
        v.i0 = r + 2;
        return fail("the dim is out of range (VW-5)");
      }
      o.sizes.insert(o.sizes.begin() + d, 1);
      o.strides.insert(o.strides.begin() + d, d < r ? in.sizes[d] * in.strides[d] : 1);
      break;
    }
    case ViewKind::Diagonal: {
      if (r < 2) return s.probe ? (v.i1 = 0, v.i2 = 1, fail("diagonal needs 2 dims")) : skip();
      const int64_t d1 = wrap(s.p[0], r);
      int64_t d2 = wrap(s.p[1], r);
      if (d2 == d1) d2 = (d1 + 1) % r;
      v.i0 = s.p[2];
      v.i1 = shown(d1, r, neg);
      v.i2 = shown(d2, r, bit(s.seed, 1));
      if (s.probe) {
        v.i2 = v.i1;
        return fail("dim1 and dim2 must differ");
      }
      const int64_t off = v.i0;
      int64_t len;
      if (off >= 0) {
        len = std::max<int64_t>(std::min(in.sizes[d1], in.sizes[d2] - off), 0);
        if (len > 0) o.offset += off * in.strides[d2];
      } else {
        len = std::max<int64_t>(std::min(in.sizes[d1] + off, in.sizes[d2]), 0);
        if (len > 0) o.offset -= off * in.strides[d1];
      }
      o.sizes.clear();
      o.strides.clear();
      for (int64_t d = 0; d < r; ++d)
        if (d != d1 && d != d2) {
          o.sizes.push_back(in.sizes[d]);
          o.strides.push_back(in.strides[d]);
        }
      o.sizes.push_back(len);
      o.strides.push_back(in.strides[d1] + in.strides[d2]);
      break;
    }
    case ViewKind::View:
    case ViewKind::Reshape:
    case ViewKind::Flatten: {
      std::vector<int64_t> target;
      if (s.kind == ViewKind::Flatten) {
        if (r == 0) {
          target = {1};
        } else {
          int64_t a = wrap(s.p[0], r), b = wrap(s.p[1], r);
          if (s.probe && r >= 2) {
            int64_t lo = std::min(a, b), hi = std::max(a, b);
            if (lo == hi) (hi + 1 < r ? hi : lo) += hi + 1 < r ? 1 : -1;
            v.i0 = hi;
            v.i1 = lo;
            return fail("flatten's start_dim comes after end_dim");
          }
          if (a > b) std::swap(a, b);
          v.i0 = shown(a, r, neg);
          v.i1 = shown(b, r, bit(s.seed, 1));
          for (int64_t d = 0; d < a; ++d) target.push_back(in.sizes[d]);
          int64_t m = 1;
          for (int64_t d = a; d <= b; ++d) m *= in.sizes[d];
          target.push_back(m);
          for (int64_t d = b + 1; d < r; ++d) target.push_back(in.sizes[d]);
        }
      } else {
        target = reshaped(in.sizes, s.seed);
        v.a = target;
        if (in.numel() > 0 && !target.empty() && bit(s.seed, 1)) {
          const auto i = static_cast<std::size_t>(mix(s.seed, 7) % target.size());
          v.a[i] = -1;
        }
        if (s.probe) {
          if (s.kind == ViewKind::View && !view_strides_of(in, target) && !(s.p[0] & 1))
            return fail("view() of an incompatible layout must point to reshape (VW-2)");
          v.a = target;
          v.a.push_back(in.numel() == 0 ? 3 : 2);
          if (in.numel() == 0) v.a.push_back(-1);  // -1 next to a 0 cannot be inferred
          return fail("the shape does not hold the same number of elements");
        }
      }
      const auto strides = view_strides_of(in, target);
      if (s.kind == ViewKind::View && !strides)
        v.kind = ViewKind::Reshape;  // a copy, printed as such
      o.sizes = target;
      if (strides) {
        o.strides = *strides;
      } else {
        v.copies = true;
        o = contiguous_layout(target);
      }
      break;
    }
  }
  if (o.numel() > kMaxViewNumel) return skip();
  return v;
}

Tensor apply_view(const ResolvedView& v, const Tensor& t) {
  switch (v.kind) {
    case ViewKind::Narrow:
      return t.narrow(v.i0, v.i1, v.i2);
    case ViewKind::Slice:
      return t.slice(v.i0, v.start, v.stop, v.i2);
    case ViewKind::Select:
      return t.select(v.i0, v.i1);
    case ViewKind::Transpose:
      return t.transpose(v.i0, v.i1);
    case ViewKind::T:
      return t.t();
    case ViewKind::Permute:
      return t.permute(v.a);
    case ViewKind::Expand:
      return t.expand(v.a);
    case ViewKind::Unfold:
      return t.unfold(v.i0, v.i1, v.i2);
    case ViewKind::AsStrided:
      return t.as_strided(v.a, v.b, v.i0);
    case ViewKind::Squeeze:
      return t.squeeze();
    case ViewKind::SqueezeDim:
      return t.squeeze(v.i0);
    case ViewKind::Unsqueeze:
      return t.unsqueeze(v.i0);
    case ViewKind::Diagonal:
      return t.diagonal(v.i0, v.i1, v.i2);
    case ViewKind::View:
      return t.view(v.a);
    case ViewKind::Reshape:
      return t.reshape(v.a);
    case ViewKind::Flatten:
      return t.flatten(v.i0, v.i1);
  }
  return t;
}

std::string view_cpp(const ResolvedView& v) {
  std::ostringstream os;
  auto opt = [](const std::optional<int64_t>& x) {
    return x ? std::to_string(*x) : std::string("bp::None");
  };
  switch (v.kind) {
    case ViewKind::Narrow:
      os << ".narrow(" << v.i0 << ", " << v.i1 << ", " << v.i2 << ")";
      break;
    case ViewKind::Slice:
      os << ".slice(" << v.i0 << ", " << opt(v.start) << ", " << opt(v.stop) << ", " << v.i2 << ")";
      break;
    case ViewKind::Select:
      os << ".select(" << v.i0 << ", " << v.i1 << ")";
      break;
    case ViewKind::Transpose:
      os << ".transpose(" << v.i0 << ", " << v.i1 << ")";
      break;
    case ViewKind::T:
      os << ".t()";
      break;
    case ViewKind::Permute:
      os << ".permute(" << braces(v.a) << ")";
      break;
    case ViewKind::Expand:
      os << ".expand(" << braces(v.a) << ")";
      break;
    case ViewKind::Unfold:
      os << ".unfold(" << v.i0 << ", " << v.i1 << ", " << v.i2 << ")";
      break;
    case ViewKind::AsStrided:
      os << ".as_strided(" << braces(v.a) << ", " << braces(v.b) << ", " << v.i0 << ")";
      break;
    case ViewKind::Squeeze:
      os << ".squeeze()";
      break;
    case ViewKind::SqueezeDim:
      os << ".squeeze(" << v.i0 << ")";
      break;
    case ViewKind::Unsqueeze:
      os << ".unsqueeze(" << v.i0 << ")";
      break;
    case ViewKind::Diagonal:
      os << ".diagonal(" << v.i0 << ", " << v.i1 << ", " << v.i2 << ")";
      break;
    case ViewKind::View:
      os << ".view(" << braces(v.a) << ")";
      break;
    case ViewKind::Reshape:
      os << ".reshape(" << braces(v.a) << ")";
      break;
    case ViewKind::Flatten:
      os << ".flatten(" << v.i0 << ", " << v.i1 << ")";
      break;
  }
  return os.str();
}

}  // namespace bp::conformance::fuzz
