// ARGMAX and ARGMIN along one dim: loops only, since oneDNN has no
// index-returning reduction. Each output element owns one line of the input;
// lines are split over threads, and a few very long lines are each split
// into chunks whose winners are merged in order.
#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

using bp::sdk::fn::arg_better;  // strictly better; NaN is extreme and wins for good

// Index of the extreme element among x[k * sd], k in [b, e) (b < e).
template <bool kMax, class T>
int64_t scan_line(const T* x, int64_t sd, int64_t b, int64_t e, T* value) {
  T best = x[b * sd];
  int64_t bi = b;
  for (int64_t k = b + 1; k < e; ++k) {
    const T v = x[k * sd];
    if (arg_better<kMax>(v, best)) {
      best = v;
      bi = k;
    }
  }
  *value = best;
  return bi;
}

// `len` lines starting sx apart, each of n elements sd apart; indices to o.
template <bool kMax, class T>
void arg_lines(int64_t* o, int64_t so, const T* x, int64_t sx, int64_t sd, int64_t n, int64_t len) {
  if (len == 1 || std::abs(sd) <= std::abs(sx)) {
    for (int64_t j = 0; j < len; ++j) {
      T v;
      o[j * so] = scan_line<kMax>(x + j * sx, sd, 0, n, &v);
    }
    return;
  }
  // The lines lie closer together than the elements of one line: walk a
  // block of lines side by side so that every load is near the previous one.
  constexpr int64_t kBlock = 256;
  T best[kBlock];
  int64_t bi[kBlock];
  for (int64_t j0 = 0; j0 < len; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, len - j0);
    const T* xb = x + j0 * sx;
    for (int64_t j = 0; j < nb; ++j) {
      best[j] = xb[j * sx];
      bi[j] = 0;
    }
    for (int64_t k = 1; k < n; ++k) {
      const T* row = xb + k * sd;
      for (int64_t j = 0; j < nb; ++j) {
        const T v = row[j * sx];
        if (arg_better<kMax>(v, best[j])) {
          best[j] = v;
          bi[j] = k;
        }
      }
    }
    for (int64_t j = 0; j < nb; ++j) o[(j0 + j) * so] = bi[j];
  }
}

// One long line, split over the team; chunk winners merge in index order.
template <bool kMax, class T>
int64_t arg_line_parallel(const T* x, int64_t sd, int64_t n) {
  struct Chunk {
    T value{};
    int64_t index = -1;
  };
  const int nt = omp_get_max_threads();
  std::vector<Chunk> chunk(nt);
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t b = n * t / team, e = n * (t + 1) / team;
    if (b < e) chunk[t].index = scan_line<kMax>(x, sd, b, e, &chunk[t].value);
  }
  Chunk best;
  for (const Chunk& ch : chunk)
    if (ch.index >= 0 && (best.index < 0 || arg_better<kMax>(ch.value, best.value))) best = ch;
  return best.index;
}

template <bool kMax>
void arg_kernel(const KernelCall& c) {
  const int d = check::arg_reduce(c);
  const TensorRef in = c.input(0), out = c.output(0);
  // 0-d operands are walked as [1].
  TensorDesc o(out), x(in);
  const int64_t n = x.size(d), sd = x.stride(d);
  const int64_t lines = out.numel();
  if (lines == 0) return;
  x.size(d) = 1;  // x now walks the first element of each line, like out
  bp::sdk::visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (n >= kParallelMinElements && lines < omp_get_max_threads()) {
      bp::sdk::for_each_row<2>(
          {o.ref(), x.ref()}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
            for (int64_t j = 0; j < len; ++j)
              *reinterpret_cast<int64_t*>(p[0] + j * s[0]) =
                  arg_line_parallel<kMax>(reinterpret_cast<const T*>(p[1] + j * s[1]), sd, n);
          });
      return;
    }
    auto row = [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t len) {
      arg_lines<kMax>(reinterpret_cast<int64_t*>(p[0]), s[0] / 8, reinterpret_cast<const T*>(p[1]),
                      s[1] / int64_t(sizeof(T)), sd, n, len);
    };
    for_each_row_parallel<2>({o.ref(), x.ref()}, row, n);
  });
}

}  // namespace

void register_argreduce_kernels(Registrar& r) {
  r.add<&arg_kernel<true>>(BP_OP_ARGMAX, kBaseDtypes, BP_ORIGIN);
  r.add<&arg_kernel<false>>(BP_OP_ARGMIN, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cpu
