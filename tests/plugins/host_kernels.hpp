// Correct host-memory kernels for the fake plugins that the conformance
// runner is tested with: fill and copy (every dtype, every layout, with
// conversion) so that tensors can be made and read back, and add.
#pragma once

#include <array>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>

namespace bp::fake {

template <class T>
T& at(char* p, int64_t stride, int64_t i) {
  return *reinterpret_cast<T*>(p + i * stride);
}

inline void fill_any(const bp::sdk::KernelCall& call) {
  bp::sdk::visit_dtype(call.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = bp::sdk::scalar_as<T>(call.scalar(0));
    bp::sdk::for_each_row<1>({call.output(0)}, [&](auto p, auto s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) at<T>(p[0], s[0], i) = v;
    });
  });
}

// Any dtype to any dtype; to bool is x != 0.
inline void copy_any(const bp::sdk::KernelCall& call) {
  bp::sdk::visit_dtype(call.output(0).dtype(), [&](auto out_tag) {
    using To = decltype(out_tag);
    bp::sdk::visit_dtype(call.input(0).dtype(), [&](auto in_tag) {
      using From = decltype(in_tag);
      bp::sdk::for_each_row<2>({call.output(0), call.input(0)}, [&](auto p, auto s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const From v = at<From>(p[1], s[1], i);
          if constexpr (std::is_same_v<To, bool>)
            at<To>(p[0], s[0], i) = v != From(0);
          else
            at<To>(p[0], s[0], i) = static_cast<To>(v);
        }
      });
    });
  });
}

// in0 + alpha * in1 + `bias`: 0 for a correct add. `Skip` leaves the first
// element of each row of more than one element unwritten (a kernel that
// forgets an element, for the fuzzer's --poison).
template <int Bias, bool Skip = false>
void add_biased(const bp::sdk::KernelCall& call) {
  bp::sdk::visit_dtype(call.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw bp::sdk::Unsupported("add is not defined for bool");
    } else {
      const T alpha = bp::sdk::scalar_as<T>(call.scalar(0));
      bp::sdk::for_each_row<3>(
          {call.output(0), call.input(0), call.input(1)}, [&](auto p, auto s, int64_t n) {
            for (int64_t i = Skip && n > 1 ? 1 : 0; i < n; ++i)
              at<T>(p[0], s[0], i) =
                  static_cast<T>(at<T>(p[1], s[1], i) + alpha * at<T>(p[2], s[2], i) + T(Bias));
          });
    }
  });
}

inline constexpr std::initializer_list<bp_dtype> kAllDTypes = {
    BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};
inline constexpr std::initializer_list<bp_dtype> kNumericDTypes = {
    BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64};

// Fill and copy for every dtype: enough to make tensors and read them back.
inline void register_fill_and_copy(bp::sdk::Registrar& r) {
  r.add<&fill_any>(BP_OP_FILL, kAllDTypes, BP_ORIGIN);
  r.add<&copy_any>(BP_OP_COPY, kAllDTypes, BP_ORIGIN);
}

}  // namespace bp::fake
