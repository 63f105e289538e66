// The narrow dtypes (float16, bfloat16, int8, uint8, int16) on a host plugin
// without kernels of its own for them: each op is computed in the wider
// dtype compute_dtype() gives (float32, int64) with the plugin's kernel for
// that one, its operands converted on the host and its outputs rounded (or,
// for integers, wrapped) back. Floating results are then those of the op in
// float32 rounded once, as PyTorch's CPU kernels give for most ops; integer
// results are exact (arithmetic modulo 2^bits is the same in int64).
//
// For plugins whose memory handles are host addresses. Used through
// Registrar::emulate_narrow_dtypes() (plugin.hpp).
#pragma once

#include <backplane/plugin.h>

#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstring>
#include <vector>

namespace bp::sdk {

// out = cast(in) for any pair of dtypes, any layouts of one shape (in may
// have stride 0). To bool: x != 0; floating to integer truncates; integers
// wrap, as C++ (and PyTorch) convert.
inline void cast_copy(const TensorRef& out, const TensorRef& in) {
  visit_any_dtype(out.dtype(), [&](auto to_tag) {
    using To = decltype(to_tag);
    visit_any_dtype(in.dtype(), [&](auto from_tag) {
      using From = decltype(from_tag);
      for_each_row<2>({out, in}, [](auto p, auto s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const From v = *reinterpret_cast<const From*>(p[1] + i * s[1]);
          To& o = *reinterpret_cast<To*>(p[0] + i * s[0]);
          if constexpr (std::is_same_v<To, bool>) {
            o = static_cast<double>(v) != 0.0;
          } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
            o = To(static_cast<float>(v));
          } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
            o = static_cast<To>(static_cast<float>(v));
          } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
            o = static_cast<To>(static_cast<int64_t>(v));
          } else {
            o = static_cast<To>(v);
          }
        }
      });
    });
  });
}

// A kernel for the compute dtype, and how to reach it.
struct WideKernel {
  bp_kernel_fn fn;
  void* ctx;
};

// Runs a call in a narrow dtype through `wide`: operands of the call's
// dtype are converted to contiguous buffers of the compute dtype (outputs
// too, when the op reads them: scatter updates self), the kernel runs on
// those, and the outputs are converted back.
inline bp_status run_widened(const WideKernel& wide, const bp_kernel_call& call, bp_error* error) {
  const bp_dtype narrow = static_cast<bp_dtype>(call.dtype);
  const bp_dtype wide_dt = compute_dtype(narrow);
  const int n = call.num_inputs + call.num_outputs;
  std::vector<bp_tensor> ops(call.inputs, call.inputs + call.num_inputs);
  ops.insert(ops.end(), call.outputs, call.outputs + call.num_outputs);
  std::vector<std::vector<char>> buffers(static_cast<std::size_t>(n));
  std::vector<std::vector<int64_t>> strides(static_cast<std::size_t>(n));
  const std::size_t item = dtype_size(wide_dt);
  for (int k = 0; k < n; ++k) {
    const bp_tensor& orig =
        k < call.num_inputs ? call.inputs[k] : call.outputs[k - call.num_inputs];
    const TensorRef ref(orig);
    if (ref.dtype() != narrow) continue;
    const bool output = k >= call.num_inputs;
    buffers[k].resize(static_cast<std::size_t>(ref.numel()) * item + 1);
    auto& st = strides[k];
    st.resize(static_cast<std::size_t>(orig.ndim));
    int64_t step = 1;
    for (int d = orig.ndim - 1; d >= 0; --d) {
      st[d] = step;
      step *= orig.shape[d] > 0 ? orig.shape[d] : 1;
    }
    bp_tensor& t = ops[k];
    t.data = buffers[k].data();
    t.byte_offset = 0;
    t.strides = st.data();
    t.dtype = to_dl(wide_dt);
    if (!output || call.op == BP_OP_SCATTER) cast_copy(TensorRef(t), ref);
  }
  bp_kernel_call c = call;
  c.dtype = wide_dt;
  c.inputs = ops.data();
  c.outputs = ops.data() + call.num_inputs;
  const bp_status st = wide.fn(wide.ctx, &c, error);
  if (st != BP_STATUS_OK) return st;
  for (int k = call.num_inputs; k < n; ++k)
    if (!buffers[k].empty())
      cast_copy(TensorRef(call.outputs[k - call.num_inputs]), TensorRef(ops[k]));
  return BP_STATUS_OK;
}

}  // namespace bp::sdk
