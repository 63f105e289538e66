// The sim backend: an accelerator simulated on the host, for proving that
// the core and the conformance suite use the ABI as a real device needs.
//   - Memory the host cannot touch: an arena kept PROT_NONE outside the
//     plugin's own work (arena.h), reached through handles that are not
//     addresses; host_addressable = 0, DLPack type kDLExtDev.
//   - Asynchrony: every stream is a queue run by a thread of its own after a
//     random delay per item (queue.h), so that work ends after the call that
//     enqueued it; a read without synchronisation sees stale memory.
//   - Asynchronous errors: a kernel that fails on the queue (an index out of
//     range) is reported by the next synchronisation of its stream.
//   - Kernels written as an accelerator's (kernels/grid.h): a launch of one
//     thread per output element, blocks run last first; each runs on the
//     queue inside a guard that opens the arena for the operands it touches.
#include <atomic>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/plugin.hpp>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "arena.h"
#include "kernels/grid.h"
#include "queue.h"

namespace bp::sim {

namespace {

constexpr int32_t kDLExtDev = 12;

long long env_or(const char* name, long long fallback) {
  const char* env = std::getenv(name);
  return env && *env ? std::atoll(env) : fallback;
}

// Arena size in MiB: the option memory_mib, else BACKPLANE_SIM_MEMORY_MB,
// else 1024 (address space only; pages are used as tensors are written).
std::size_t arena_bytes(const bp::sdk::Options& options) {
  long long mb = env_or("BACKPLANE_SIM_MEMORY_MB", 1024);
  mb = options.get_int("memory_mib", mb > 0 ? mb : 1024, 1, 1 << 20);
  return static_cast<std::size_t>(mb) << 20;
}

// Largest random delay before each item of a stream's work, in
// microseconds: the option delay_us, else BACKPLANE_SIM_DELAY_US, else 20
// (0: none).
unsigned max_delay_us(const bp::sdk::Options& options) {
  long long us = env_or("BACKPLANE_SIM_DELAY_US", 20);
  us = us < 0 ? 0 : us > 1000000 ? 1000000 : us;
  return static_cast<unsigned>(options.get_int("delay_us", us, 0, 1000000));
}

// sim::delay(x, microseconds): out = x after waiting, on the stream; lets a
// test hold a stream busy for a known time. Contiguous operands only. The
// wait is an item of its own on the queue (see enqueue), outside the arena
// lock, so that other streams run meanwhile.
void delay_kernel(const bp::sdk::KernelCall& c) {
  const bp::sdk::TensorRef x = c.input(0), out = c.output(0);
  if (!x.is_contiguous() || !out.is_contiguous())
    throw bp::sdk::InvalidArgument("[sim::delay] takes contiguous tensors");
  std::memcpy(out.base(), x.base(),
              static_cast<std::size_t>(x.numel()) * bp::sdk::dtype_size(x.dtype()));
}

// A stream: its queue (shared with the marks recorded on it).
struct Stream {
  std::shared_ptr<Queue> queue;
};
// An event: the mark it last recorded, and the device's clock when the
// queue reached it (a stamp enqueued by the record; -1 until then).
struct Event {
  std::mutex mu;
  Mark mark;
  std::shared_ptr<std::atomic<int64_t>> stamp_ns;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class SimPlugin final : public bp::sdk::Plugin {
 public:
  explicit SimPlugin(const bp::sdk::Options& options)
      : devices_(static_cast<int32_t>(options.get_int("devices", 1, 1, 16))),
        arena_(arena_bytes(options)),
        delay_us_(max_delay_us(options)),
        default_(std::make_shared<Queue>(delay_us_, next_seed())) {}

  ~SimPlugin() override {
    // Work still queued runs before the arena goes.
    default_.reset();
  }

#ifdef BACKPLANE_SIM_NO_WAIT
  const char* name() const override { return "sim_no_wait"; }
#else
  const char* name() const override { return "sim"; }
#endif
  const char* version() const override { return "0.2.0"; }
  int32_t dl_device_type() const override { return kDLExtDev; }

  std::vector<bp_option_info> options() const override {
    return {{"devices",
             "number of devices, 1 to 16 (default 1); they share one arena and its "
             "streams, for testing code that picks a device"},
            {"memory_mib",
             "size of the device memory in MiB (default $BACKPLANE_SIM_MEMORY_MB, "
             "else 1024)"},
            {"delay_us",
             "largest random delay before each item of a stream's work, in "
             "microseconds (default $BACKPLANE_SIM_DELAY_US, else 20; 0: none)"}};
  }

  int32_t device_count(std::string&) const override { return devices_; }

  void device_props(int32_t device, bp_device_props& props) const override {
    BP_SDK_CHECK(device >= 0 && device < devices_, "device_props",
                 "sim has " << devices_ << " device(s), got " << device);
    std::snprintf(props.name, sizeof(props.name), "%s",
                  "simulated device (memory the host cannot address, asynchronous streams)");
    props.total_memory = arena_.capacity();
    props.host_addressable = 0;
  }

  // The kernels and sim::delay, each registered with the core behind
  // enqueue(): a registrar of our own receives them and forwards a wrapped
  // copy.
  void register_kernels(bp::sdk::Registrar& core) override {
    Forward forward{&core, this};
    const bp_registrar inner{sizeof(bp_registrar), &forward, &forward_registration,
                             &forward_named_registration};
    bp::sdk::Registrar wrapped(inner);
    register_elementwise_kernels(wrapped);
    register_reduce_kernels(wrapped);
    register_sort_kernels(wrapped);
    register_linalg_kernels(wrapped);
    register_index_kernels(wrapped);
    register_nn_kernels(wrapped);
    register_optim_kernels(wrapped);
    wrapped.add_named<&delay_kernel>("sim::delay", "(Tensor x, int microseconds) -> Tensor",
                                     bp::sdk::kBaseDtypes, BP_ORIGIN);
    wrapped.emulate_narrow_dtypes(wide_);
  }

  // --- memory ---------------------------------------------------------------
  void* allocate(int32_t, bp_stream, std::size_t nbytes, std::size_t alignment) override {
    return arena_.handle_of(arena_.allocate(nbytes, alignment));
  }
  // Stream-ordered: the block returns to the arena when the stream gets
  // there, after the work enqueued before that used it.
  void deallocate(int32_t, bp_stream stream, void* mem, std::size_t) override {
    char* block = arena_.resolve(mem, 0, 0, "deallocate");
    queue(stream).push([this, block] { arena_.deallocate(block); });
  }
  void copy_from_host(int32_t, bp_stream stream, void* mem, uint64_t offset, const void* host,
                      std::size_t n) override {
    char* dst = at(mem, offset, n, "copy_from_host");
    if (staging_.contains(host, n)) {
      // From our own page-locked memory the read happens on the queue, as
      // a DMA engine's would: the core leaves the buffer alone until then.
      queue(stream).push([this, dst, host, n] {
        Arena::Access open(arena_, {{dst, n}});
        std::memcpy(dst, host, n);
      });
      return;
    }
    // The host buffer is the caller's again when this returns: keep a copy.
    auto bytes = std::make_shared<std::vector<char>>(static_cast<const char*>(host),
                                                     static_cast<const char*>(host) + n);
    queue(stream).push([this, dst, bytes] {
      Arena::Access open(arena_, {{dst, bytes->size()}});
      std::memcpy(dst, bytes->data(), bytes->size());
    });
  }
  void copy_to_host(int32_t, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) override {
    const char* src = at(mem, offset, n, "copy_to_host");
    queue(stream).push([this, host, src, n] {
      Arena::Access open(arena_, {{src, n}});
      std::memcpy(host, src, n);
    });
  }
  void copy_on_device(bp_stream stream, int32_t, void* dst, uint64_t dst_offset, int32_t,
                      const void* src, uint64_t src_offset, std::size_t n) override {
    char* to = at(dst, dst_offset, n, "copy_on_device");
    const char* from = at(src, src_offset, n, "copy_on_device");
    queue(stream).push([this, to, from, n] {
      Arena::Access open(arena_, {{to, n}, {from, n}});
      std::memmove(to, from, n);
    });
  }
  void memset(int32_t, bp_stream stream, void* mem, uint64_t offset, int32_t value,
              std::size_t n) override {
    char* dst = at(mem, offset, n, "memset");
    queue(stream).push([this, dst, value, n] {
      Arena::Access open(arena_, {{dst, n}});
      std::memset(dst, value, n);
    });
  }
  // "Page-locked" staging memory: host memory whose copies to the device
  // run on the queue (see copy_from_host).
  bool has_host_alloc() const override { return true; }
  void* host_alloc(std::size_t nbytes) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    staging_.add(p, nbytes);
    return p;
  }
  void host_free(void* host) override {
    staging_.remove(host);
    std::free(host);
  }
  void* host_pointer(int32_t, const void*, uint64_t) override {
    throw bp::sdk::Unsupported("[host_pointer] sim memory is not host addressable");
  }
  void memory_stats(int32_t, bp_memory_stats& stats) override { arena_.stats(stats); }

  // --- streams and events ------------------------------------------------------
  bp_stream stream_create(int32_t) override {
    auto* s = new Stream{std::make_shared<Queue>(delay_us_, next_seed())};
    std::lock_guard lock(streams_mu_);
    streams_.push_back(s);
    return reinterpret_cast<bp_stream>(s);
  }
  void stream_destroy(int32_t, bp_stream stream) override {
    auto* s = reinterpret_cast<Stream*>(stream);
    {
      std::lock_guard lock(streams_mu_);
      std::erase(streams_, s);
    }
    delete s;  // its queue finishes its work first (or when the last mark goes)
  }
  void stream_synchronize(int32_t, bp_stream stream) override {
    Queue& q = queue(stream);
    q.drain();
    report(q);
  }
  bool stream_query(int32_t, bp_stream stream) override {
    Queue& q = queue(stream);
    if (!q.reached(q.enqueued())) return false;
    report(q);
    return true;
  }
  bp_event event_create(int32_t) override { return reinterpret_cast<bp_event>(new Event); }
  void event_destroy(int32_t, bp_event event) override { delete reinterpret_cast<Event*>(event); }
  void event_record(int32_t, bp_event event, bp_stream stream) override {
    auto* e = reinterpret_cast<Event*>(event);
    std::shared_ptr<Queue> q = queue_ptr(stream);
    auto stamp = std::make_shared<std::atomic<int64_t>>(-1);
    const uint64_t position = q->push([stamp] { stamp->store(now_ns()); });
    std::lock_guard lock(e->mu);
    e->mark = Mark{std::move(q), position};
    e->stamp_ns = std::move(stamp);
  }
  // The device's clock is its queues' threads': the time between the
  // moments they reached the two marks.
  bool has_event_timing() const override { return true; }
  std::optional<double> event_elapsed(int32_t, bp_event start, bp_event end) override {
    const int64_t a = stamp_of(start), b = stamp_of(end);
    if (a < 0 || b < 0) return std::nullopt;
    return static_cast<double>(b - a) / 1e6;
  }
  void stream_wait_event(int32_t, bp_stream stream, bp_event event) override {
#ifdef BACKPLANE_SIM_NO_WAIT
    // A build with the race the conformance suite must catch
    // (tests/plugins: sim_no_wait): the wait is dropped.
    return;
#endif
    const Mark m = mark_of(event);
    if (!m.queue) return;
    queue(stream).push([m] { m.queue->wait_for(m.position); });
  }
  bool event_query(int32_t, bp_event event) override {
    const Mark m = mark_of(event);
    if (!m.queue || !m.queue->reached(m.position)) return m.queue == nullptr;
    report(*m.queue);
    return true;
  }
  void event_synchronize(int32_t, bp_event event) override {
    const Mark m = mark_of(event);
    if (!m.queue) return;
    m.queue->wait_for(m.position);
    report(*m.queue);
  }
  void synchronize(int32_t) override {
    std::vector<std::shared_ptr<Queue>> all{default_};
    {
      std::lock_guard lock(streams_mu_);
      for (Stream* s : streams_) all.push_back(s->queue);
    }
    for (auto& q : all) q->drain();
    for (auto& q : all) report(*q);
  }

 private:
  struct Forward {
    bp::sdk::Registrar* core;
    SimPlugin* self;
  };
  // A kernel and the plugin whose queues and arena it runs on.
  struct GuardedKernel {
    bp_kernel_fn fn;
    void* ctx;
    SimPlugin* self;
    bool overrides_composite;  // a "core::" override: may decline, so runs at once
    bool delays;               // sim::delay: a wait goes first
  };

  // A kernel call copied for running later: the core's descriptors live only
  // until the kernel returns. Handles are resolved to arena addresses. It
  // points into itself: filled in place, never moved.
  struct Job {
    bp_kernel_call call{};
    bp_attrs attrs{};
    std::vector<bp_tensor> tensors;
    std::vector<int64_t> dims;
    std::vector<Arena::Range> ranges;
  };

  Queue& queue(bp_stream s) { return s ? *reinterpret_cast<Stream*>(s)->queue : *default_; }
  std::shared_ptr<Queue> queue_ptr(bp_stream s) {
    return s ? reinterpret_cast<Stream*>(s)->queue : default_;
  }
  static int64_t stamp_of(bp_event event) {
    auto* e = reinterpret_cast<Event*>(event);
    std::lock_guard lock(e->mu);
    if (!e->stamp_ns)
      throw bp::sdk::InvalidArgument("[event_elapsed] an event that was never recorded");
    return e->stamp_ns->load();
  }
  static Mark mark_of(bp_event event) {
    auto* e = reinterpret_cast<Event*>(event);
    std::lock_guard lock(e->mu);
    return e->mark;
  }
  // Throws the first failure of `q`'s work since the last report.
  static void report(Queue& q) {
    std::string e = q.take_error();
    if (!e.empty()) throw bp::sdk::DeviceError(e);
  }
  uint64_t next_seed() {
    return static_cast<uint64_t>(env_or("BACKPLANE_SIM_SEED", 20261125)) * 0x9E3779B97F4A7C15ull +
           seeds_++;
  }
  char* at(const void* mem, uint64_t offset, std::size_t n, const char* op) {
    return arena_.resolve(mem, static_cast<int64_t>(offset), static_cast<int64_t>(offset + n), op) +
           offset;
  }

  // Copies `c`, resolving each operand's handle and checking that the bytes
  // it reaches lie in its block (on the calling thread: a bad call fails at
  // once, not later).
  void prepare(const bp_kernel_call& c, Job& j) {
    j.call = c;
    j.attrs = *c.attrs;
    const int n = c.num_inputs + c.num_outputs;
    j.tensors.reserve(static_cast<std::size_t>(n));
    j.dims.reserve(static_cast<std::size_t>(n) * 2 * BP_MAX_DIMS);
    const char* op = bp::sdk::op_name(c.op);
    for (int i = 0; i < n; ++i) {
      bp_tensor t = i < c.num_inputs ? c.inputs[i] : c.outputs[i - c.num_inputs];
      const bp::sdk::TensorRef ref(t);
      const int64_t item = static_cast<int64_t>(bp::sdk::dtype_size(ref.dtype()));
      int64_t lo = 0, hi = 0;
      if (ref.numel() > 0) {
        for (int d = 0; d < t.ndim; ++d)
          (t.strides[d] < 0 ? lo : hi) += (t.shape[d] - 1) * t.strides[d];
        lo = static_cast<int64_t>(t.byte_offset) + lo * item;
        hi = static_cast<int64_t>(t.byte_offset) + (hi + 1) * item;
      }
      char* block = arena_.resolve(t.data, lo, hi, op);
      j.ranges.push_back({block + lo, static_cast<std::size_t>(hi - lo)});
      const std::size_t base = j.dims.size();
      j.dims.insert(j.dims.end(), t.shape, t.shape + t.ndim);
      j.dims.insert(j.dims.end(), t.strides, t.strides + t.ndim);
      t.data = block;
      t.shape = j.dims.data() + base;
      t.strides = j.dims.data() + base + t.ndim;
      j.tensors.push_back(t);
    }
    j.call.attrs = &j.attrs;
    j.call.inputs = j.tensors.data();
    j.call.outputs = j.tensors.data() + c.num_inputs;
  }

  template <class Reg, class Add>
  static bp_status forward(void* ctx, const Reg* reg, bool overrides, bool delays, bp_error* error,
                           Add add) noexcept {
    auto* f = static_cast<Forward*>(ctx);
    return bp::sdk::guarded(error, [&] {
      GuardedKernel& k = f->self->kernels_.emplace_back(
          GuardedKernel{reg->fn, reg->kernel_ctx, f->self, overrides, delays});
      add(*f->core, &k);
    });
  }
  static bp_status forward_registration(void* ctx, const bp_kernel_registration* reg,
                                        bp_error* error) noexcept {
    return forward(ctx, reg, false, false, error,
                   [reg](bp::sdk::Registrar& core, GuardedKernel* k) {
                     core.add_raw(static_cast<bp_op>(reg->op), reg->dtype_mask, &enqueue, k,
                                  reg->origin, reg->flags);
                   });
  }
  static bp_status forward_named_registration(void* ctx, const bp_named_kernel_registration* reg,
                                              bp_error* error) noexcept {
    const std::string_view name(reg->name);
    return forward(ctx, reg, name.starts_with("core::"), name == "sim::delay", error,
                   [reg](bp::sdk::Registrar& core, GuardedKernel* k) {
                     core.add_named_raw(reg->name, reg->schema, reg->dtype_mask, &enqueue, k,
                                        reg->origin);
                   });
  }

  // Runs a prepared call with the operands' pages open; the status and message.
  static bp_status run(GuardedKernel& k, Job& j, std::string& message) {
    char buf[1024] = {0};
    bp_error err{sizeof(bp_error), buf, sizeof(buf)};
    Arena::Access open(k.self->arena_, j.ranges.data(), j.ranges.size());
    const bp_status st = k.fn(k.ctx, &j.call, &err);
    message = buf;
    return st;
  }

  // The kernel entry the core calls: checks and copies the call, then
  // enqueues it on the call's stream. An override of a core composite may
  // decline the call, which must be known now: it runs at once, after the
  // stream's earlier work.
  static bp_status enqueue(void* ctx, const bp_kernel_call* call, bp_error* error) noexcept {
    auto* k = static_cast<GuardedKernel*>(ctx);
    bp_status status = BP_STATUS_OK;
    const bp_status checked = bp::sdk::guarded(error, [&] {
      auto job = std::make_shared<Job>();
      k->self->prepare(*call, *job);
      Queue& q = k->self->queue(call->stream);
      if (k->overrides_composite) {
        q.drain();
        std::string message;
        status = run(*k, *job, message);
        if (status != BP_STATUS_OK) bp::sdk::set_error(error, message.c_str());
        return;
      }
      if (k->delays) {
        const auto us = std::chrono::microseconds(job->attrs.ints[0]);
        q.push([us] { std::this_thread::sleep_for(us); });
      }
      q.push([k, job] {
        std::string message;
        if (run(*k, *job, message) != BP_STATUS_OK)
          throw std::runtime_error(message.empty()
                                       ? std::string("[") + bp::sdk::op_name(job->call.op) +
                                             "] failed on the device"
                                       : message);
      });
    });
    return checked != BP_STATUS_OK ? checked : status;
  }

  const int32_t devices_;
  Arena arena_;                           // first: destroyed after the queues that use it
  std::deque<GuardedKernel> kernels_;     // a deque: kernel_ctx pointers stay valid
  std::deque<bp::sdk::WideKernel> wide_;  // the narrow dtypes' adapters
  const unsigned delay_us_;
  std::atomic<uint64_t> seeds_{0};  // streams may be made on any thread
  std::shared_ptr<Queue> default_;
  std::mutex streams_mu_;
  std::vector<Stream*> streams_;
  bp::sdk::HostBuffers staging_;  // what host_alloc handed out
};

}  // namespace bp::sim

BP_SDK_PLUGIN(bp::sim::SimPlugin)
