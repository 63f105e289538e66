// Tensors handed to and taken from other libraries without a copy, through
// DLPack's DLManagedTensor (DLPack 0.6 and later; include <dlpack/dlpack.h>
// to read its fields). docs/dlpack.md states the rules.
#pragma once

#include <backplane/device.h>
#include <backplane/tensor.h>

#include <cstdint>
#include <optional>
#include <utility>

struct DLManagedTensor;  // <dlpack/dlpack.h>

namespace bp {

// DLPack's device types that Backplane names (DLDeviceType's values).
namespace dl {
inline constexpr int32_t kCPU = 1, kCUDA = 2, kCUDAHost = 3, kOpenCL = 4, kVulkan = 7, kMetal = 8,
                         kROCM = 10, kROCMHost = 11, kExtDev = 12, kCUDAManaged = 13, kOneAPI = 14;
// "kDLCPU", "kDLOpenCL", ... ("device type N" for one DLPack does not name).
const char* device_type_name(int32_t type);
// Whether DLPack's `data` is an address on this device type, so that an
// offset may be added to it (CPU, CUDA, ROCm, oneAPI), rather than an opaque
// handle (a cl_mem, a Vulkan buffer) that carries its offset in byte_offset.
bool is_address_type(int32_t type);
}  // namespace dl

// Where a consumer finds `t`'s memory, as `__dlpack_device__` says it:
// {kDLCPU, 0} when its backend's memory is host-addressable, else the
// backend's own DLPack device type and the device's index.
std::pair<int32_t, int32_t> dlpack_device(const Tensor& t);

// Hands `t` to a DLPack consumer without a copy: the DLManagedTensor keeps
// t's memory alive until the consumer calls its deleter, and describes t's
// view of it (shape, strides in elements, offset). The consumer is of device
// type `consumer_device_type` (default: dlpack_device(t)'s):
//   - kDLCPU: only for host-addressable memory; data is the host address of
//     t's first element (byte_offset 0);
//   - the backend's own device type: data is the backend's memory handle,
//     plus the offset for address types, or with the offset in byte_offset
//     for opaque handles (DLPack's rule for cl_mem);
//   - any other: a ValueError naming the backend and both device types.
// Work enqueued on t's device is finished first (the consumer knows nothing
// of Backplane's streams). Writes through the consumer's tensor change t's
// values without bumping t's version counter, as in PyTorch. A tensor that
// requires grad is exported as its data, detached (as at::toDLPack does).
DLManagedTensor* to_dlpack(const Tensor& t);
DLManagedTensor* to_dlpack(const Tensor& t, int32_t consumer_device_type);

// A tensor over `src`'s memory, without a copy, on a backend whose DLPack
// device type is src's and whose plugin imports memory (import_memory, ABI
// 2.10): `device` when given, else the default device when it fits, else the
// first loaded backend that does. On success Backplane owns `src` and calls
// its deleter once the tensor, its views, and the work enqueued on them are
// gone; the new tensor is a leaf with a version counter of its own. On
// failure (a ValueError or TypeError naming what is wrong: an unknown dtype,
// lanes, negative strides, misaligned data, no backend for the device type)
// nothing is taken: the caller still owns `src`.
Tensor from_dlpack(DLManagedTensor* src, std::optional<Device> device = std::nullopt);

}  // namespace bp
