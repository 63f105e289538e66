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

#include <backplane/sdk/elementwise.hpp>  // Wrapping and the element functions
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>

#include <cstdint>
#include <type_traits>

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

}  // namespace bp::sdk
