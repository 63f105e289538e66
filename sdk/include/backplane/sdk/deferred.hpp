// Deferring kernel calls onto a stream's worker: the part of an
// asynchronous plugin that every such plugin writes.
//
//   - StreamWorker: a thread that runs a stream's work in the order it was
//     pushed, counts what it has run (positions, for events) and keeps the
//     first failure for the next synchronisation.
//   - DeferredCall: a copy of a bp_kernel_call that outlives the call (the
//     core's descriptors are valid only until the kernel returns), each
//     operand's handle replaced by the address the kernel reads.
//   - DeferringRegistrar: registers kernels written as host loops (the SDK's
//     Registrar::add and friends) so that the core's call copies itself and
//     runs on the worker of its stream. Named "core::" overrides, which may
//     decline a call and so must answer at once, run at once after the
//     stream's earlier work instead.
//
// A kernel's argument checks then run on the worker too: a call it refuses
// is reported by the next synchronisation of the stream.
#pragma once

#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace bp::sdk {

class StreamWorker {
 public:
  StreamWorker() : thread_([this] { run(); }) {}
  // Finishes what is queued, then stops the thread.
  ~StreamWorker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
  }
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // Appends `work`; returns its position (1, 2, ...). An exception from it
  // becomes the worker's error (the first one, see take_error).
  uint64_t push(std::function<void()> work) {
    uint64_t position;
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(work));
      position = ++enqueued_;
    }
    work_cv_.notify_one();
    return position;
  }
  // The position of the last item pushed so far.
  uint64_t enqueued() const {
    std::lock_guard lock(mu_);
    return enqueued_;
  }
  // True once the items up to `position` have run.
  bool reached(uint64_t position) const {
    std::lock_guard lock(mu_);
    return completed_ >= position;
  }
  void wait_for(uint64_t position) const {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return completed_ >= position; });
  }
  // Waits for everything pushed so far.
  void drain() const { wait_for(enqueued()); }
  // The first failure since the last call, or "" (and clears it).
  std::string take_error() {
    std::lock_guard lock(mu_);
    std::string e;
    e.swap(error_);
    return e;
  }
  // Throws the first failure since the last report as a DeviceError.
  void report() {
    const std::string e = take_error();
    if (!e.empty()) throw DeviceError(e);
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;  // stopping, and nothing left
      std::function<void()> work = std::move(items_.front());
      items_.pop_front();
      lock.unlock();
      std::string failure;
      try {
        work();
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "unknown exception";
      }
      work = nullptr;  // what it holds goes before the item counts as done
      lock.lock();
      if (!failure.empty() && error_.empty()) error_ = std::move(failure);
      ++completed_;
      done_cv_.notify_all();
    }
  }

  mutable std::mutex mu_;
  mutable std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> items_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stop_ = false;
  std::string error_;
  std::thread thread_;  // last: starts after the members it uses
};

// A point of a worker's work: reached once the worker has run the items
// pushed before it. A null worker: never recorded (counts as reached).
struct WorkerMark {
  std::shared_ptr<StreamWorker> worker;
  uint64_t position = 0;
  bool reached() const { return !worker || worker->reached(position); }
  void wait() const {
    if (worker) worker->wait_for(position);
  }
};

// A kernel call copied for running later. `address_of(handle)` gives the
// address an operand's memory handle stands for (its byte_offset is kept).
// It points into itself: never copied or moved (hold it by pointer).
class DeferredCall {
 public:
  template <class AddressOf>
  DeferredCall(const bp_kernel_call& c, AddressOf&& address_of) : call_(c), attrs_(*c.attrs) {
    const int n = c.num_inputs + c.num_outputs;
    tensors_.reserve(static_cast<std::size_t>(n));
    dims_.reserve(static_cast<std::size_t>(n) * 2 * BP_MAX_DIMS);
    for (int i = 0; i < n; ++i) {
      bp_tensor t = i < c.num_inputs ? c.inputs[i] : c.outputs[i - c.num_inputs];
      const std::size_t base = dims_.size();
      dims_.insert(dims_.end(), t.shape, t.shape + t.ndim);
      dims_.insert(dims_.end(), t.strides, t.strides + t.ndim);
      t.data = address_of(t.data);
      t.shape = dims_.data() + base;
      t.strides = dims_.data() + base + t.ndim;
      tensors_.push_back(t);
    }
    call_.attrs = &attrs_;
    call_.inputs = tensors_.data();
    call_.outputs = tensors_.data() + c.num_inputs;
  }
  DeferredCall(const DeferredCall&) = delete;
  DeferredCall& operator=(const DeferredCall&) = delete;

  const bp_kernel_call& call() const { return call_; }
  // Runs `fn` on the copy; a failure it reports is thrown, naming the op.
  void run(bp_kernel_fn fn, void* kernel_ctx) const {
    char buf[1024] = {0};
    bp_error err{sizeof(bp_error), buf, sizeof(buf)};
    if (fn(kernel_ctx, &call_, &err) != BP_STATUS_OK)
      throw DeviceError(buf[0] ? std::string(buf)
                               : std::string("[") + op_name(static_cast<bp_op>(call_.op)) +
                                     "] failed on the device");
  }

 private:
  bp_kernel_call call_;
  bp_attrs attrs_;
  std::vector<bp_tensor> tensors_;
  std::vector<int64_t> dims_;
};

// What a DeferringRegistrar needs of the plugin: the worker of a stream of
// a device, and the address of a memory handle.
struct DeferTarget {
  std::function<std::shared_ptr<StreamWorker>(int32_t device, bp_stream stream)> worker_of;
  std::function<void*(void* handle)> address_of;
};

// Registers kernels with the core so that each call runs on its stream's
// worker. Use it as the SDK's Registrar, inside register_kernels:
//
//   void register_kernels(bp::sdk::Registrar& core) override {
//     bp::sdk::Registrar r = deferring_.wrap(core);
//     r.add<&my_add>(BP_OP_ADD, {BP_DTYPE_FLOAT32});
//   }
//
// The DeferringRegistrar must live as long as the plugin (the core's calls
// come back to it).
class DeferringRegistrar {
 public:
  explicit DeferringRegistrar(DeferTarget target) : target_(std::move(target)) {}
  DeferringRegistrar(const DeferringRegistrar&) = delete;
  DeferringRegistrar& operator=(const DeferringRegistrar&) = delete;

  // A registrar whose registrations reach `core` deferred. `core` must
  // outlive the returned registrar (both live through register_kernels).
  Registrar wrap(Registrar& core) {
    core_ = &core;
    inner_ = bp_registrar{sizeof(bp_registrar), this, &forward_kernel, &forward_named};
    return Registrar(inner_);
  }

 private:
  struct Entry {
    bp_kernel_fn fn;
    void* ctx;
    DeferringRegistrar* self;
    bool at_once;  // a "core::" override: may decline, so answers now
  };

  static bp_status forward_kernel(void* ctx, const bp_kernel_registration* reg,
                                  bp_error* error) noexcept {
    auto* self = static_cast<DeferringRegistrar*>(ctx);
    return guarded(error, [&] {
      Entry& e = self->entries_.emplace_back(Entry{reg->fn, reg->kernel_ctx, self, false});
      self->core_->add_raw(static_cast<bp_op>(reg->op), reg->dtype_mask, &enqueue, &e, reg->origin,
                           reg->flags);
    });
  }
  static bp_status forward_named(void* ctx, const bp_named_kernel_registration* reg,
                                 bp_error* error) noexcept {
    auto* self = static_cast<DeferringRegistrar*>(ctx);
    return guarded(error, [&] {
      const bool at_once = std::string_view(reg->name).starts_with("core::");
      Entry& e = self->entries_.emplace_back(Entry{reg->fn, reg->kernel_ctx, self, at_once});
      self->core_->add_named_raw(reg->name, reg->schema, reg->dtype_mask, &enqueue, &e,
                                 reg->origin);
    });
  }

  // The entry the core calls: copies the call and pushes it to the worker.
  static bp_status enqueue(void* ctx, const bp_kernel_call* call, bp_error* error) noexcept {
    auto* e = static_cast<Entry*>(ctx);
    bp_status status = BP_STATUS_OK;
    const bp_status pushed = guarded(error, [&] {
      const DeferTarget& t = e->self->target_;
      std::shared_ptr<StreamWorker> worker = t.worker_of(call->device, call->stream);
      auto job = std::make_shared<DeferredCall>(*call, t.address_of);
      if (e->at_once) {
        worker->drain();
        status = e->fn(e->ctx, &job->call(), error);
        return;
      }
      worker->push([e, job] { job->run(e->fn, e->ctx); });
    });
    return pushed != BP_STATUS_OK ? pushed : status;
  }

  DeferTarget target_;
  Registrar* core_ = nullptr;
  bp_registrar inner_{};       // the wrapped registrar's table (Registrar keeps a reference)
  std::deque<Entry> entries_;  // a deque: the core keeps pointers to them
};

}  // namespace bp::sdk
