// DLPack exchange (backplane/dlpack.h): tensors exported as DLManagedTensor
// over their own memory, and DLPack tensors imported through the backend's
// import_memory (ABI 2.10).
#include <backplane/dlpack.h>
#include <backplane/ops.h>
#include <backplane/stream.h>
#include <dlpack/dlpack.h>

#include <cstring>
#include <string>

#include "abi_tensor.h"
#include "internal.h"
#include "runtime.h"

namespace bp {

static_assert(sizeof(DLTensor) == sizeof(bp_tensor), "bp_tensor is laid out as DLTensor");
static_assert(offsetof(DLTensor, byte_offset) == offsetof(bp_tensor, byte_offset));

namespace dl {

const char* device_type_name(int32_t type) {
  switch (type) {
    case kCPU:
      return "kDLCPU";
    case kCUDA:
      return "kDLCUDA";
    case kCUDAHost:
      return "kDLCUDAHost";
    case kOpenCL:
      return "kDLOpenCL";
    case kVulkan:
      return "kDLVulkan";
    case kMetal:
      return "kDLMetal";
    case 9:
      return "kDLVPI";
    case kROCM:
      return "kDLROCM";
    case kROCMHost:
      return "kDLROCMHost";
    case kExtDev:
      return "kDLExtDev";
    case kCUDAManaged:
      return "kDLCUDAManaged";
    case kOneAPI:
      return "kDLOneAPI";
    default:
      return "an unnamed device type";
  }
}

bool is_address_type(int32_t type) {
  switch (type) {
    case kCPU:
    case kCUDA:
    case kCUDAHost:
    case kROCM:
    case kROCMHost:
    case kCUDAManaged:
    case kOneAPI:
      return true;
    default:
      return false;
  }
}

}  // namespace dl

namespace {

std::string describe_type(int32_t type) {
  return std::to_string(type) + " (" + dl::device_type_name(type) + ")";
}

// What a DLManagedTensor from to_dlpack holds: the tensor (its memory stays
// alive), and the shape and strides its DLTensor points at.
struct Exported {
  DLManagedTensor managed{};
  Tensor keep;
  DimVector shape, strides;
};

void delete_exported(DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

// The Backplane dtype of a DLPack dtype; TypeError for one it lacks.
DType dtype_from_dl(const DLDataType& t) {
  BP_CHECK_TYPE(t.lanes == 1, "[from_dlpack] DLPack dtype {code ", int(t.code), ", bits ",
                int(t.bits), ", lanes ", t.lanes,
                "} has several lanes: Backplane's dtypes are scalars (lanes 1)");
  for (int d = 0; d < kNumDTypes; ++d) {
    const bp_dl_dtype k = detail::kDlDtypes[d];
    if (k.code == t.code && k.bits == t.bits) return static_cast<DType>(d);
  }
  const char* kind = t.code == kDLComplex        ? " (complex)"
                     : t.code == kDLOpaqueHandle ? " (opaque)"
                                                 : "";
  throw TypeError("[from_dlpack] DLPack dtype {code " + std::to_string(t.code) + ", bits " +
                  std::to_string(t.bits) + "}" + kind +
                  " has no Backplane dtype (bool, int8/16/32/64, uint8, float16/32/64, bfloat16)");
}

// The device src's memory goes to: `want` when given (checked), else the
// default device when it fits, else the first loaded backend that does.
Device target_device(const DLDevice& src, std::optional<Device> want) {
  auto fits = [&](const Backend& b) { return b.dl_device_type() == src.device_type; };
  if (want) {
    const Backend& b = *detail::acquire_backend(*want);
    BP_CHECK(fits(b), "[from_dlpack] the tensor's memory is of DLPack device type ",
             describe_type(src.device_type), ", and backend '", b.name(), "' (", *want,
             ") holds memory of device type ", describe_type(b.dl_device_type()));
    BP_CHECK(src.device_type == dl::kCPU || want->index == src.device_id, "[from_dlpack] the ",
             "tensor's memory is on device ", src.device_id, " of its type, not on ", *want);
    return *want;
  }
  const int16_t index = src.device_type == dl::kCPU ? 0 : static_cast<int16_t>(src.device_id);
  try {
    const Device def = default_device();
    const Backend& db = *detail::acquire_backend(def);
    if (fits(db) && db.imports_memory() && index < db.device_count()) return {def.backend, index};
  } catch (const Error&) {
    // No default backend to be had: the loaded ones below may still fit.
  }
  for (Backend* b : PluginLoader::instance().loaded())
    if (fits(*b) && b->imports_memory() && index < b->device_count())
      return {static_cast<int16_t>(b->id()), index};
  std::string loaded;
  for (Backend* b : PluginLoader::instance().loaded())
    loaded += std::string(loaded.empty() ? "" : ", ") + b->name() + " (" +
              dl::device_type_name(b->dl_device_type()) +
              (b->imports_memory() ? ")" : ", imports nothing)");
  throw ValueError("[from_dlpack] no loaded backend takes memory of DLPack device type " +
                   describe_type(src.device_type) + ", device " + std::to_string(src.device_id) +
                   "; loaded: " + loaded +
                   ". Load one that does, or pass its device to from_dlpack");
}

void release_managed(void* m) noexcept {
  auto* managed = static_cast<DLManagedTensor*>(m);
  if (managed->deleter) managed->deleter(managed);
}

}  // namespace

std::pair<int32_t, int32_t> dlpack_device(const Tensor& t) {
  BP_CHECK(t.defined(), "[dlpack] the tensor is undefined");
  const Backend& b = t.impl()->storage->backend();
  const Device d = t.device();
  if (b.host_addressable(d.index)) return {dl::kCPU, 0};
  return {b.dl_device_type(), d.index};
}

DLManagedTensor* to_dlpack(const Tensor& t) { return to_dlpack(t, dlpack_device(t).first); }

DLManagedTensor* to_dlpack(const Tensor& t, int32_t consumer) {
  BP_CHECK(t.defined(), "[to_dlpack] the tensor is undefined");
  const TensorImpl& i = *t.impl();
  const StorageImpl& st = *i.storage;
  const Backend& b = st.backend();
  const Device d = i.device;
  const uint64_t offset = st.offset() + static_cast<uint64_t>(i.offset) * itemsize(i.dtype);
  const bool host = consumer == dl::kCPU && b.host_addressable(d.index);
  BP_CHECK(host || consumer == b.dl_device_type(), "[to_dlpack] a tensor on ", d, " (backend '",
           b.name(), "', memory of DLPack device type ", describe_type(b.dl_device_type()),
           b.host_addressable(d.index) ? ", host-addressable" : ", not host-addressable",
           ") cannot be handed to a consumer of device type ", describe_type(consumer),
           "; copy it to a backend of that type first (Tensor::to)");
  // The consumer reads as soon as it has the tensor.
  synchronize(d);
  auto* e = new Exported;
  e->keep = t;
  e->shape = i.sizes;
  e->strides = i.strides;
  DLTensor& dt = e->managed.dl_tensor;
  // The host address of the first element, a device address plus the
  // offset, or an opaque handle with the offset beside it (cl_mem).
  const bool address = !host && dl::is_address_type(consumer);
  dt.data = host      ? b.host_pointer(d.index, st.data(), offset)
            : address ? static_cast<char*>(st.data()) + offset
                      : st.data();
  dt.device = host ? DLDevice{kDLCPU, 0} : DLDevice{static_cast<DLDeviceType>(consumer), d.index};
  dt.byte_offset = host || address ? 0 : offset;
  dt.ndim = static_cast<int32_t>(e->shape.size());
  const bp_dl_dtype k = detail::kDlDtypes[static_cast<int>(i.dtype)];
  dt.dtype = {k.code, k.bits, k.lanes};
  dt.shape = e->shape.data();
  dt.strides = e->strides.data();
  e->managed.manager_ctx = e;
  e->managed.deleter = &delete_exported;
  return &e->managed;
}

Tensor from_dlpack(DLManagedTensor* src, std::optional<Device> device) {
  BP_CHECK(src != nullptr, "[from_dlpack] the DLManagedTensor is null");
  const DLTensor& dt = src->dl_tensor;
  BP_CHECK(dt.ndim >= 0 && dt.ndim <= kMaxDims, "[from_dlpack] ndim ", dt.ndim,
           " is outside Backplane's 0 to ", kMaxDims);
  BP_CHECK(dt.ndim == 0 || dt.shape != nullptr, "[from_dlpack] shape is null for ndim ", dt.ndim);
  const DType dtype = dtype_from_dl(dt.dtype);
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  const std::size_t rank = static_cast<std::size_t>(dt.ndim);
  DimVector shape(IntArrayRef(dt.shape, rank)), strides;
  const int64_t n = checked_numel(shape, "from_dlpack");
  if (dt.strides != nullptr) {
    strides = DimVector(IntArrayRef(dt.strides, rank));
    for (int k = 0; k < dt.ndim; ++k)
      BP_CHECK(strides[k] >= 0 || shape[k] <= 1, "[from_dlpack] stride ", strides[k],
               " of dimension ", k, " is negative: Backplane's strides are not (copy the ",
               "array first, e.g. numpy.ascontiguousarray)");
  } else {
    strides = contiguous_strides(shape);  // DLPack: null strides are compact row-major
  }
  const Device target = target_device(dt.device, device);
  if (n == 0) {
    // Nothing to share: an empty tensor of the shape, and the memory back now.
    Tensor t = empty(shape, TensorOptions().dtype(dtype).device(target));
    release_managed(src);
    return t;
  }
  // The farthest element any index reaches (no stride is negative here).
  const int64_t hi = checked_extent(shape, strides, 0, "from_dlpack").second;
  const bool address = dl::is_address_type(dt.device.device_type);
  BP_CHECK(dt.data != nullptr, "[from_dlpack] data is null for ", n, " elements");
  BP_CHECK(dt.byte_offset % static_cast<uint64_t>(item) == 0, "[from_dlpack] byte_offset ",
           dt.byte_offset, " is not a multiple of the element size ", item, " of ", dtype);
  if (address)
    BP_CHECK((reinterpret_cast<uintptr_t>(dt.data) + dt.byte_offset) % item == 0,
             "[from_dlpack] the first element's address is not aligned to its size ", item, " (",
             dtype, ")");
  // Address types give the plugin the first element; opaque handles keep
  // the offset beside the handle, as the ABI does.
  void* external = address ? static_cast<char*>(dt.data) + dt.byte_offset : dt.data;
  const int64_t lead = address ? 0 : static_cast<int64_t>(dt.byte_offset) / item;
  const std::size_t nbytes = static_cast<std::size_t>((lead + hi + 1) * item);
  IntrusivePtr<Backend> backend = detail::acquire_backend(target);
  void* handle = backend->import_memory(target.index, external, nbytes);
  auto impl = make_intrusive<TensorImpl>();
  impl->sizes = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = lead;
  impl->dtype = dtype;
  impl->device = target;
  impl->refresh();
  impl->storage = make_intrusive<StorageImpl>(std::move(backend), target, handle, nbytes,
                                              detail::current_stream_of(target),
                                              StorageImpl::ExternalOwner{&release_managed, src});
  impl->version = &impl->storage->version_counter();
  return Tensor(std::move(impl));
}

}  // namespace bp
