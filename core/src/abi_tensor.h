// Tensors as the ABI describes them: DLPack dtypes, bp_tensor descriptors of
// a tensor (as it is, or seen with a broadcast shape), and the bp_kernel_call
// and bp_attrs of one call; not installed.
#pragma once

#include <backplane/dispatcher.h>
#include <backplane/plugin.h>
#include <backplane/tensor.h>

#include <backplane/sdk/tensor.hpp>
#include <span>

#include "runtime.h"

namespace bp::detail {

// DLPack's code, bits and lanes of each dtype, by enum value.
inline constexpr bp_dl_dtype kDlDtypes[kNumDTypes] = {
    {6, 8, 1},  {0, 32, 1}, {0, 64, 1}, {2, 32, 1}, {2, 64, 1},
    {2, 16, 1}, {4, 16, 1}, {0, 8, 1},  {1, 8, 1},  {0, 16, 1}};
constexpr bool dl_table_matches_sdk() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const bp_dl_dtype a = kDlDtypes[d], b = sdk::to_dl(static_cast<bp_dtype>(d));
    if (a.code != b.code || a.bits != b.bits || a.lanes != b.lanes) return false;
  }
  return true;
}
static_assert(dl_table_matches_sdk(), "kDlDtypes must say what bp::sdk::to_dl says");

// An ABI descriptor of `t` (pointers into t's metadata; t must outlive it).
inline bp_tensor abi_descriptor(const Tensor& t, int32_t dl_device_type) {
  TensorImpl* i = t.impl();
  bp_tensor d;
  d.data = i->storage->data();
  d.device = {dl_device_type, i->device.index};
  d.ndim = static_cast<int32_t>(i->sizes.size());
  d.dtype = kDlDtypes[static_cast<int>(i->dtype)];
  d.shape = const_cast<int64_t*>(i->sizes.data());
  d.strides = const_cast<int64_t*>(i->strides.data());
  d.byte_offset = i->storage->offset() + static_cast<uint64_t>(i->offset) * itemsize(i->dtype);
  return d;
}

// Same, seen with another shape and strides (broadcast operands).
inline bp_tensor abi_descriptor_as(const Tensor& t, const DimVector& shape,
                                   const DimVector& strides, int32_t dl_device_type) {
  bp_tensor d = abi_descriptor(t, dl_device_type);
  d.ndim = static_cast<int32_t>(shape.size());
  d.shape = const_cast<int64_t*>(shape.data());
  d.strides = const_cast<int64_t*>(strides.data());
  return d;
}

// The ABI's description of one kernel call (pointers into the spans and
// `attrs`, which must outlive it).
inline bp_kernel_call make_call(int32_t op, DType dtype, Device device,
                                std::span<const bp_tensor> inputs,
                                std::span<const bp_tensor> outputs, const bp_attrs& attrs) {
  bp_kernel_call call;
  call.struct_size = sizeof(call);
  call.device = device.index;
  call.reserved = 0;
  call.stream = current_stream_of(device);
  call.op = op;
  call.dtype = static_cast<int32_t>(dtype);
  call.num_inputs = static_cast<int32_t>(inputs.size());
  call.num_outputs = static_cast<int32_t>(outputs.size());
  call.inputs = inputs.data();
  call.outputs = outputs.data();
  call.attrs = &attrs;
  return call;
}

inline bp_attrs make_attrs() {
  bp_attrs a;
  a.struct_size = sizeof(bp_attrs);
  a.num_scalars = 0;
  a.num_ints = 0;
  return a;
}

}  // namespace bp::detail
