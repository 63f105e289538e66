// Copies and fills: copy_, fill_, zero_, clone, contiguous, to(dtype|device).
#include <backplane/ops.h>

#include <algorithm>
#include <vector>

#include "../autograd/graph.h"
#include "../internal.h"

namespace bp {

namespace detail {

// Bytes of host memory a copy between two plugins passes through at a time.
constexpr std::size_t kStagingBytes = std::size_t{4} << 20;

// Between plugins through the destination's two page-locked buffers (ABI
// 2.0's host_alloc), when it has them and no other copy holds them: the
// destination may still be reading one chunk (its copy_from_host from
// page-locked memory runs in stream order) while the source writes the
// next into the other buffer; an event per buffer says when the
// destination is done with it. False when the buffers are not available.
bool copy_through_pinned(Backend& db, Device dd, bp_stream ds, void* to, uint64_t to_off,
                         Backend& sb, Device sd, bp_stream ss, const void* from, uint64_t from_off,
                         std::size_t n) {
  void* const* pinned = db.try_acquire_staging();
  if (pinned == nullptr) return false;
  struct Lease {
    Backend& b;
    int device;
    bp_event read[2] = {nullptr, nullptr};  // recorded after the copy that reads buffer k
    ~Lease() {
      for (bp_event e : read) {
        if (!e) continue;
        try {
          b.event_synchronize(device, e);  // the buffer is free again
        } catch (...) {
          // The stream's failure is reported by its next synchronisation.
        }
        b.event_destroy(device, e);
      }
      b.release_staging();
    }
  } lease{db, dd.index};
  const std::size_t chunk = Backend::kStagingChunk;
  for (std::size_t done = 0, k = 0; done < n; done += chunk, ++k) {
    const std::size_t slot = k % 2, len = std::min(chunk, n - done);
    bp_event& read = lease.read[slot];
    if (read) db.event_synchronize(dd.index, read);
    sb.read_to_host(sd.index, ss, pinned[slot], from, from_off + done, len);
    db.copy_from_host(dd.index, ds, to, to_off + done, pinned[slot], len);
    if (!read) read = db.event_create(dd.index);
    db.event_record(dd.index, read, ds);
  }
  return true;
}

// The first `n` bytes of contiguous `src` into contiguous `dst`, with each
// backend's own copy functions (DV-3), on each device's current stream.
// Between devices of one plugin the plugin copies itself, on the
// destination's stream after the source's work (an event orders them);
// between plugins the bytes go through a host buffer of at most
// kStagingBytes, chunk by chunk, the source's stream synchronised before
// each chunk is read. Either backend may be one that was unloaded while its
// tensors live.
void copy_bytes(const Tensor& dst, const Tensor& src, std::size_t n) {
  Backend& db = backend_of(dst);
  Backend& sb = backend_of(src);
  const Device dd = dst.device(), sd = src.device();
  void* to = dst.impl()->storage->data();
  const void* from = src.impl()->storage->data();
  const uint64_t to_off =
      dst.impl()->storage->offset() + static_cast<uint64_t>(dst.storage_offset()) * dst.itemsize();
  const uint64_t from_off =
      src.impl()->storage->offset() + static_cast<uint64_t>(src.storage_offset()) * src.itemsize();
  const bp_stream ds = current_stream_of(dd), ss = current_stream_of(sd);
  if (&db == &sb) {
    if (dd != sd) {
      // The destination's stream waits for what the source's stream has
      // queued, and the source's stream for the copy, so that the source
      // memory is not freed (on its stream) while the copy reads it. The
      // backend's own calls: it may be one that was unloaded (DV-4).
      struct Events {
        Backend& b;
        int sd, dd;
        bp_event ready = nullptr, copied = nullptr;
        ~Events() {
          if (ready) b.event_destroy(sd, ready);
          if (copied) b.event_destroy(dd, copied);
        }
      } ev{db, sd.index, dd.index};
      ev.ready = db.event_create(sd.index);
      db.event_record(sd.index, ev.ready, ss);
      db.stream_wait_event(dd.index, ds, ev.ready);
      db.copy_on_device(ds, dd.index, to, to_off, sd.index, from, from_off, n);
      ev.copied = db.event_create(dd.index);
      db.event_record(dd.index, ev.copied, ds);
      db.stream_wait_event(sd.index, ss, ev.copied);
      return;
    }
    db.copy_on_device(ds, dd.index, to, to_off, sd.index, from, from_off, n);
    return;
  }
  if (n > Backend::kStagingChunk &&
      copy_through_pinned(db, dd, ds, to, to_off, sb, sd, ss, from, from_off, n))
    return;
  std::vector<char> host(std::min(n, kStagingBytes));
  for (std::size_t done = 0; done < n; done += host.size()) {
    const std::size_t k = std::min(host.size(), n - done);
    sb.read_to_host(sd.index, ss, host.data(), from, from_off + done, k);
    db.copy_from_host(dd.index, ds, to, to_off + done, host.data(), k);
  }
}

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  Backend& db = backend_of(dst);
  Tensor s = src;
  if (src.device() != dst.device()) {
    // The bytes move first, in the source's dtype; the kernel below then
    // converts and writes dst's layout on dst's device.
    Tensor c = src.contiguous();
    s = make_empty(c.sizes(), c.dtype(), dst);
    copy_bytes(s, c, c.numel() * c.itemsize());
  }
  const DimVector shape(dst.sizes());
  const DimVector strides = broadcast_strides(s.sizes(), s.strides(), shape);
  bp_tensor in = abi_descriptor_as(s, shape, strides, db.dl_device_type());
  bp_tensor out = abi_descriptor(dst, db.dl_device_type());
  call_kernel(Op::Copy, s.dtype(), dst.device(), {&in, 1}, {&out, 1}, make_attrs());
}

}  // namespace detail

namespace {
// Records a copy whose gradient is the incoming one, cast back to the
// source's dtype and moved back to its device.
void record_copy(const char* name, const Tensor& src, const Tensor& out) {
  if (!autograd::needs_grad({&src})) return;
  const DType dt = src.dtype();
  const Device dev = src.device();
  auto node =
      autograd::make_node(name, {&src}, [dt, dev](autograd::FunctionNode&, std::vector<Tensor>& g) {
        Tensor r = g[0];
        if (r.device() != dev) r = r.to(dev);
        if (r.dtype() != dt) r = r.to(dt);
        return std::vector<Tensor>{r};
      });
  autograd::set_history(out, node.get());
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_writable("copy_", *this);
  DimVector shape = broadcast_shapes(sizes(), src.sizes(), "copy_");
  BP_CHECK(shape == DimVector(sizes()), "[copy_] the source of shape ", src.sizes(),
           " does not broadcast to the destination's shape ", sizes());
  detail::check_no_partial_overlap("copy_", *this, src);
  if (autograd::record_inplace("copy_", *this, {&src}, [&](const Tensor&) {
        return src.to(device(), dtype()).expand(sizes());
      }))
    return *this;
  detail::copy_into(*this, src);
  impl()->version->bump();
  return *this;
}

namespace {
void fill(const char* name, Tensor& self, const Scalar& value) {
  detail::check_writable(name, self);
  if (autograd::record_inplace(name, self, {},
                               [&](const Tensor& old) { return full_like(old, value); }))
    return;
  detail::fill_fresh(self, value);
  self.impl()->version->bump();
}
}  // namespace

void detail::fill_fresh(const Tensor& t, const Scalar& value) {
  if (t.numel() == 0) return;
  Backend& b = backend_of(t);
  const bp_tensor out = abi_descriptor(t, b.dl_device_type());
  bp_attrs attrs = make_attrs();
  attrs.num_scalars = 1;
  attrs.scalars[0] = value.to_abi();
  call_kernel(Op::Fill, t.dtype(), t.device(), {}, {&out, 1}, attrs);
}

Tensor& Tensor::fill_(const Scalar& value) {
  fill("fill_", *this, value);
  return *this;
}

Tensor& Tensor::zero_() {
  fill("zero_", *this, 0);
  return *this;
}

Tensor Tensor::clone(MemoryFormat format) const {
  // Keep the source's strides when they tile memory densely (CP-1).
  Tensor out = format == MemoryFormat::Preserve && is_non_overlapping_and_dense(sizes(), strides())
                   ? detail::make_empty_strided(sizes(), strides(), dtype(), *this)
                   : detail::make_empty(sizes(), dtype(), *this);
  detail::copy_into(out, *this);
  record_copy("CloneBackward0", *this, out);
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone(MemoryFormat::Contiguous);
}

Tensor Tensor::to(DType d) const {
  if (d == dtype()) return *this;
  Tensor out = is_non_overlapping_and_dense(sizes(), strides())
                   ? detail::make_empty_strided(sizes(), strides(), d, *this)
                   : detail::make_empty(sizes(), d, *this);
  detail::copy_into(out, *this);
  record_copy("ToCopyBackward0", *this, out);
  return out;
}

Tensor Tensor::to(Device dev, DType d) const {
  if (dev == device()) return to(d);
  return to(d).to(dev);
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor out = detail::make_empty(sizes(), dtype(), dev);
  detail::copy_into(out, *this);
  record_copy("ToCopyBackward0", *this, out);
  return out;
}

}  // namespace bp
