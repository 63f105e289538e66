// Host-memory kernels shared by the fake plugins: enough (fill, copy, add on
// float32) for a test to create tensors on a fake backend and run one op.
#pragma once

#include <array>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>

namespace bp::fake {

inline void fill_f32(const bp::sdk::KernelCall& call) {
  const float v = bp::sdk::scalar_as<float>(call.scalar(0));
  bp::sdk::for_each_row<1>({call.output(0)}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<float*>(p[0] + i * s[0]) = v;
  });
}

// float32 -> float32 only: the fakes never convert.
inline void copy_f32(const bp::sdk::KernelCall& call) {
  if (call.output(0).dtype() != BP_DTYPE_FLOAT32)
    throw bp::sdk::Unsupported("fake copy converts to float32 only");
  bp::sdk::for_each_row<2>({call.output(0), call.input(0)}, [&](auto p, auto s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<float*>(p[0] + i * s[0]) = *reinterpret_cast<const float*>(p[1] + i * s[1]);
  });
}

inline void add_f32(const bp::sdk::KernelCall& call) {
  const float alpha = bp::sdk::scalar_as<float>(call.scalar(0));
  bp::sdk::for_each_row<3>({call.output(0), call.input(0), call.input(1)},
                           [&](auto p, auto s, int64_t n) {
                             for (int64_t i = 0; i < n; ++i)
                               *reinterpret_cast<float*>(p[0] + i * s[0]) =
                                   *reinterpret_cast<const float*>(p[1] + i * s[1]) +
                                   alpha * *reinterpret_cast<const float*>(p[2] + i * s[2]);
                           });
}

inline void register_basic(bp::sdk::Registrar& r) {
  r.add<&fill_f32>(BP_OP_FILL, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  r.add<&copy_f32>(BP_OP_COPY, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
}

}  // namespace bp::fake
