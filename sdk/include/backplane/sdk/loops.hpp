// Header-only element loops for kernels on host-addressable memory: typed
// access to a row the strided walker hands out, and element-wise maps over
// one or two inputs of any layout.
//
//   bp::sdk::map2<float, float>(c.output(0), c.input(0), c.input(1),
//                               [](float x, float y) { return x + y; });
//
// The maps are plain sequential loops over bp::sdk::for_each_row: a
// reference to check a faster kernel against, or the whole kernel of a
// backend that does not need more.
#pragma once

#include <algorithm>
#include <backplane/sdk/elementwise.hpp>  // Wrapping and the element functions
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

namespace bp::sdk {

// Element i of a row that starts at byte pointer p with a byte stride.
template <class T>
inline T& at(char* p, int64_t stride, int64_t i) {
  return *reinterpret_cast<T*>(p + i * stride);
}

// out[i] = f(a[i]), a of type T, out of type O.
template <class O, class T, class F>
void map1(const TensorRef& out, const TensorRef& a, F f) {
  for_each_row<2>({out, a}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) at<O>(p[0], s[0], i) = f(at<T>(p[1], s[1], i));
  });
}

// out[i] = f(a[i], b[i]), a and b of type T. Each element is read before it
// is written, so out may be exactly a or b (in place).
template <class O, class T, class F>
void map2(const TensorRef& out, const TensorRef& a, const TensorRef& b, F f) {
  for_each_row<3>({out, a, b}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      at<O>(p[0], s[0], i) = f(at<T>(p[1], s[1], i), at<T>(p[2], s[2], i));
  });
}

// ARGSORT of one line: the n elements of x, `step` elements apart, in the
// order of fn::sorts_before (stable), their positions written to out,
// `ostep` elements apart. The (value, position) pairs are sorted in a
// buffer of the calling thread, so comparisons read neighbouring memory.
template <class T>
void argsort_line(const T* x, int64_t step, int64_t n, bool descending, int64_t* out,
                  int64_t ostep) {
  thread_local std::vector<std::pair<T, int64_t>> pairs;
  pairs.resize(static_cast<std::size_t>(n));
  for (int64_t k = 0; k < n; ++k) pairs[static_cast<std::size_t>(k)] = {x[k * step], k};
  std::stable_sort(pairs.begin(), pairs.end(), [descending](const auto& a, const auto& b) {
    return fn::sorts_before(a.first, b.first, descending);
  });
  for (int64_t k = 0; k < n; ++k) out[k * ostep] = pairs[static_cast<std::size_t>(k)].second;
  if (pairs.capacity() > (std::size_t{1} << 16)) {  // a long line's buffer is not kept
    pairs.clear();
    pairs.shrink_to_fit();
  }
}

// CUMSUM of one line: n elements of x, `step` apart, into out, `ostep`
// apart. Integers and bool sum in int64, wrapping; floating types in
// double, each partial sum rounded to O (as PyTorch's CPU kernel does).
template <class O, class T>
void cumsum_line(const T* x, int64_t step, int64_t n, O* out, int64_t ostep) {
  if constexpr (std::is_floating_point_v<T>) {
    double acc = 0;
    for (int64_t k = 0; k < n; ++k) out[k * ostep] = static_cast<O>(acc += x[k * step]);
  } else {
    uint64_t acc = 0;
    for (int64_t k = 0; k < n; ++k)
      out[k * ostep] =
          static_cast<O>(acc += static_cast<uint64_t>(static_cast<int64_t>(x[k * step])));
  }
}

}  // namespace bp::sdk
