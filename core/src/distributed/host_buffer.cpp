// A tensor's bytes where the engine takes them, for the length of a call.
#include <backplane/autograd.h>
#include <backplane/backend.h>

#include "engine.h"

namespace bp::distributed::detail {

namespace {

constexpr int32_t kDLCUDA = 2;  // DLPack's device type of CUDA memory

uint64_t byte_offset(const Tensor& t) {
  return t.impl()->storage->offset() + static_cast<uint64_t>(t.storage_offset()) * t.itemsize();
}

}  // namespace

HostBuffer::HostBuffer(const Tensor& t, bool read, const Engine& engine) : tensor_(t) {
  NoGradGuard no_grad;  // the copies below are not part of any graph
  StorageImpl& st0 = *t.impl()->storage;
  if (engine.device_memory()) {
    BP_CHECK_TYPE(st0.backend().dl_device_type() == kDLCUDA,
                  "[distributed] the nccl backend "
                  "carries CUDA tensors; this one is on ",
                  to_string(t.device()), " (use a gloo group for it)");
    BP_CHECK(t.device().index == engine.device(), "[distributed] the tensor is on ",
             to_string(t.device()), " but this rank's NCCL communicator is on CUDA device ",
             engine.device());
  }
  dense_ = t.is_contiguous() ? t : t.contiguous();
  nbytes_ = static_cast<std::size_t>(dense_.numel()) * dense_.itemsize();
  if (nbytes_ == 0) return;
  StorageImpl& st = *dense_.impl()->storage;
  Backend& b = st.backend();
  const int dev = dense_.device().index;
  if (engine.device_memory()) {
    // A CUDA plugin's memory handle is the device address (DLPack's data).
    b.synchronize(dev);  // the streams' work on it first
    ptr_ = static_cast<char*>(st.data()) + byte_offset(dense_);
    return;
  }
  if (b.host_addressable(dev)) {
    ptr_ = const_cast<void*>(dense_.data_ptr());  // waits for the device's work
    return;
  }
  // Memory the host cannot address: staged through a host copy.
  copy_.resize(nbytes_);
  ptr_ = copy_.data();
  if (read) {
    b.synchronize(dev);
    b.read_to_host(dev, nullptr, ptr_, st.data(), byte_offset(dense_), nbytes_);
  }
}

void HostBuffer::finish() {
  if (nbytes_ == 0) return;
  if (!copy_.empty()) {
    StorageImpl& st = *dense_.impl()->storage;
    const int dev = dense_.device().index;
    st.backend().copy_from_host(dev, nullptr, st.data(), byte_offset(dense_), copy_.data(),
                                nbytes_);
    st.backend().synchronize(dev);
  }
  if (dense_.is_same(tensor_)) {
    tensor_.impl()->version->bump();  // written in place, as by an in-place op
  } else {
    NoGradGuard no_grad;
    tensor_.copy_(dense_);
  }
}

}  // namespace bp::distributed::detail
