// ARGSORT and CUMSUM along dim ints[0]: loops, since oneDNN has neither.
// Lines are split over threads; a single long line (a tensor with fewer
// lines than threads) is sorted in one chunk per thread, the sorted chunks
// then merged, stably, into one order.
#include <algorithm>
#include <backplane/sdk/loops.hpp>
#include <utility>
#include <vector>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

// Sorts one long line with the whole team: each thread stable-sorts a
// chunk of positions, then neighbouring chunks merge (std::merge keeps the
// left chunk's element first among equals, so the result is stable).
template <class T>
void argsort_line_parallel(const T* x, int64_t step, int64_t n, bool descending, int64_t* out,
                           int64_t ostep) {
  using Pair = std::pair<T, int64_t>;
  std::vector<Pair> pairs(static_cast<std::size_t>(n)), merged(pairs.size());
  const int nt = omp_get_max_threads();
  std::vector<int64_t> cut(static_cast<std::size_t>(nt) + 1);
  for (int t = 0; t <= nt; ++t) cut[t] = n * t / nt;
  auto before = [descending](const Pair& a, const Pair& b) {
    return bp::sdk::fn::sorts_before(a.first, b.first, descending);
  };
#pragma omp parallel for num_threads(nt) schedule(static, 1)
  for (int t = 0; t < nt; ++t) {
    for (int64_t k = cut[t]; k < cut[t + 1]; ++k) pairs[k] = {x[k * step], k};
    std::stable_sort(pairs.begin() + cut[t], pairs.begin() + cut[t + 1], before);
  }
  for (int width = 1; width < nt; width *= 2) {
    for (int t = 0; t < nt; t += 2 * width) {
      const int64_t lo = cut[t], mid = cut[std::min(t + width, nt)],
                    hi = cut[std::min(t + 2 * width, nt)];
      std::merge(pairs.begin() + lo, pairs.begin() + mid, pairs.begin() + mid, pairs.begin() + hi,
                 merged.begin() + lo, before);
    }
    pairs.swap(merged);
  }
  for (int64_t k = 0; k < n; ++k) out[k * ostep] = pairs[static_cast<std::size_t>(k)].second;
}

// Runs line(in_line, out_line) for every line along `d`, the lines split
// over threads unless `one_at_a_time` (each line then has the team).
template <class Line>
void for_each_line(const TensorRef& in, const TensorRef& out, int d, Line&& line,
                   bool one_at_a_time = false) {
  TensorDesc o(out), x(in);
  const int64_t n = x.size(d);
  x.size(d) = 1;
  o.size(d) = 1;
  auto row = [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
    for (int64_t j = 0; j < len; ++j) line(p[1] + j * s[1], p[0] + j * s[0]);
  };
  if (one_at_a_time)
    bp::sdk::for_each_row<2>({o.ref(), x.ref()}, row);
  else
    for_each_row_parallel<2>({o.ref(), x.ref()}, row, n * 8);
}

void argsort_kernel(const KernelCall& c) {
  bool descending = false;
  const int d = check::argsort(c, &descending);
  const TensorDesc in_desc(c.input(0)), out_desc(c.output(0));  // 0-d as [1]
  const TensorRef in = in_desc.ref(), out = out_desc.ref();
  if (out.numel() == 0) return;
  const int64_t n = in.size(d), step = in.stride(d), ostep = out.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (n >= kParallelMinElements && out.numel() / n < omp_get_max_threads()) {
      for_each_line(
          in, out, d,
          [&](char* x, char* o) {
            argsort_line_parallel(reinterpret_cast<const T*>(x), step, n, descending,
                                  reinterpret_cast<int64_t*>(o), ostep);
          },
          true);
      return;
    }
    for_each_line(in, out, d, [&](char* x, char* o) {
      bp::sdk::argsort_line(reinterpret_cast<const T*>(x), step, n, descending,
                            reinterpret_cast<int64_t*>(o), ostep);
    });
  });
}

void cumsum_kernel(const KernelCall& c) {
  const int d = check::cumsum(c);
  const TensorDesc in_desc(c.input(0)), out_desc(c.output(0));
  const TensorRef in = in_desc.ref(), out = out_desc.ref();
  if (out.numel() == 0) return;
  const int64_t n = in.size(d), step = in.stride(d), ostep = out.stride(d);
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    for_each_line(in, out, d, [&](char* x, char* o) {
      bp::sdk::cumsum_line(reinterpret_cast<const T*>(x), step, n, reinterpret_cast<O*>(o), ostep);
    });
  });
}

}  // namespace

void register_sort_kernels(Registrar& r) {
  r.add<&argsort_kernel>(BP_OP_ARGSORT, kBaseDtypes, BP_ORIGIN);
  r.add<&cumsum_kernel>(BP_OP_CUMSUM, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
