// The "gloo" engine: Gloo's collectives over TCP, on host memory.
#include <backplane/dtype.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstdint>
#include <exception>
#include <type_traits>

#include "engine.h"

namespace bp::distributed::detail {

namespace {

// Element-wise reductions; 16-bit floats are added in float, as PyTorch does.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class T, class F>
void reduce_loop(void* c, const void* a, const void* b, std::size_t n, F f) {
  T* out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(f(static_cast<Acc<T>>(x[i]), static_cast<Acc<T>>(y[i])));
}

template <class T>
gloo::AllreduceOptions::Func reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return [](void* c, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(c, a, b, n, [](auto x, auto y) { return x + y; });
      };
    case ReduceOp::Product:
      return [](void* c, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(c, a, b, n, [](auto x, auto y) { return x * y; });
      };
    case ReduceOp::Min:
      return [](void* c, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(c, a, b, n, [](auto x, auto y) { return y < x ? y : x; });
      };
    case ReduceOp::Max:
      return [](void* c, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(c, a, b, n, [](auto x, auto y) { return x < y ? y : x; });
      };
  }
  return {};
}

template <class T>
void divide(void* buf, std::size_t n, int by) {
  T* p = static_cast<T*>(buf);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(static_cast<Acc<T>>(p[i]) / static_cast<Acc<T>>(by));
}

template <class F>
void visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8:
      return f(uint8_t{});
    case DType::Int8:
      return f(int8_t{});
    case DType::Int16:
      return f(int16_t{});
    case DType::Int32:
      return f(int32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Float16:
      return f(Half{});
    case DType::BFloat16:
      return f(BFloat16{});
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
  }
  throw TypeError(concat("[distributed] dtype ", name(dtype), " has no reduction"));
}

// Gloo reports failures as gloo::Exception (a runtime_error) or, for broken
// invariants, gloo::EnforceNotMet (a plain std::exception).
template <class F>
void guarded(const char* what, Milliseconds timeout, F&& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string m = e.what();
    if (m.find("Timed out") != std::string::npos)
      throw CommError(concat("timed out after ", timeout.count(),
                             " ms waiting for the other ranks (", what, ": ", m, ")"));
    throw CommError(concat("Gloo's ", what, " failed: ", m));
  }
}

class GlooEngine final : public Engine {
 public:
  explicit GlooEngine(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

  void all_reduce(void* buf, std::size_t count, DType dtype, ReduceOp op, uint32_t tag,
                  Milliseconds timeout) override {
    if (count == 0) return;
    if (dtype == DType::Bool)  // logical or / and on 0 and 1
      op = (op == ReduceOp::Sum || op == ReduceOp::Max) ? ReduceOp::Max : ReduceOp::Min;
    visit_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(static_cast<T*>(buf), count);
      opts.setReduceFunction(reduce_fn<T>(op));
      opts.setTag(tag);
      opts.setTimeout(timeout);
      guarded("allreduce", timeout, [&] { gloo::allreduce(opts); });
      if (op == ReduceOp::Avg) divide<T>(buf, count, ctx_->size);
    });
  }

  void broadcast(void* buf, std::size_t nbytes, int root, uint32_t tag,
                 Milliseconds timeout) override {
    if (nbytes == 0) return;
    gloo::BroadcastOptions opts(ctx_);
    opts.setOutput(static_cast<char*>(buf), nbytes);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    guarded("broadcast", timeout, [&] { gloo::broadcast(opts); });
  }

  void all_gather(const void* in, void* out, std::size_t nbytes, uint32_t tag,
                  Milliseconds timeout) override {
    if (nbytes == 0) return;
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput(static_cast<char*>(const_cast<void*>(in)), nbytes);
    opts.setOutput(static_cast<char*>(out), nbytes * static_cast<std::size_t>(ctx_->size));
    opts.setTag(tag);
    opts.setTimeout(timeout);
    guarded("allgather", timeout, [&] { gloo::allgather(opts); });
  }

  void barrier(uint32_t tag, Milliseconds timeout) override {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    guarded("barrier", timeout, [&] { gloo::barrier(opts); });
  }

  void send(const void* buf, std::size_t nbytes, int dst, uint64_t slot,
            Milliseconds timeout) override {
    if (nbytes == 0) return;
    guarded("send", timeout, [&] {
      auto ub = ctx_->createUnboundBuffer(const_cast<void*>(buf), nbytes);
      ub->send(dst, slot);
      if (!ub->waitSend(timeout)) throw CommError("[distributed] the send was aborted");
    });
  }

  void recv(void* buf, std::size_t nbytes, int src, uint64_t slot, Milliseconds timeout) override {
    if (nbytes == 0) return;
    guarded("recv", timeout, [&] {
      auto ub = ctx_->createUnboundBuffer(buf, nbytes);
      ub->recv(src, slot);
      if (!ub->waitRecv(timeout)) throw CommError("[distributed] the receive was aborted");
    });
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
};

}  // namespace

std::unique_ptr<Engine> make_gloo_engine(const std::shared_ptr<gloo::rendezvous::Store>& store,
                                         int rank, int size, Milliseconds timeout,
                                         const std::string& hostname, const std::string& iface) {
  gloo::transport::tcp::attr attr;
  if (!iface.empty())
    attr.iface = iface;
  else
    attr.hostname = hostname;
  std::shared_ptr<gloo::transport::Device> dev;
  try {
    dev = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw DistributedError(concat("[distributed] Gloo found no network device for ",
                                  iface.empty() ? "address " + hostname : "interface " + iface,
                                  ": ", e.what()));
  }
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  guarded("rendezvous (connectFullMesh)", timeout, [&] { ctx->connectFullMesh(*store, dev); });
  return std::make_unique<GlooEngine>(std::move(ctx));
}

}  // namespace bp::distributed::detail
