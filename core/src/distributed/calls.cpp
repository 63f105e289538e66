// The process group's calls: argument checks, host staging, the engine.
#include <backplane/autograd.h>
#include <backplane/dtype.h>
#include <backplane/ops.h>

#include <cstring>

#include "group.h"

namespace bp::distributed {

using detail::CallKind;
using detail::Engine;
using detail::Fingerprint;
using detail::HostBuffer;
using Body = ProcessGroup::Impl::Body;

namespace {

Fingerprint call(CallKind kind, ReduceOp op = ReduceOp::Sum, int root = -1, int tag = 0) {
  Fingerprint f;
  f.kind = static_cast<uint32_t>(kind);
  f.reduce = static_cast<uint32_t>(op);
  f.root = root;
  f.tag = tag;
  return f;
}

uint32_t data_tag(const Fingerprint& f) { return static_cast<uint32_t>(2 * f.seq + 1); }

void need(const Tensor& t, const char* call, const char* what) {
  BP_CHECK(t.defined(), "[", call, "] the ", what, " is an undefined tensor");
}

void describe_tensor(Fingerprint& f, const Tensor& t) {
  f.dtype = static_cast<uint32_t>(t.dtype());
  f.count = t.numel();
}

void check_reduce(const char* call, ReduceOp op, DType dtype) {
  BP_CHECK_TYPE(op != ReduceOp::Avg || is_floating(dtype), "[", call,
                "] avg needs a floating dtype, not ", name(dtype), " (use sum and divide)");
}

void check_rank(const char* call, const char* what, int r, int size) {
  BP_CHECK_INDEX(r >= 0 && r < size, "[", call, "] ", what, ' ', r,
                 " is not a rank of this group (0 to ", size - 1, ")");
}

// The same dtype and element count as `like`.
void check_like(const char* call, const Tensor& t, const Tensor& like, const char* what,
                int64_t count) {
  BP_CHECK_TYPE(t.dtype() == like.dtype(), "[", call, "] ", what, " is ", name(t.dtype()),
                " but the input is ", name(like.dtype()));
  BP_CHECK(t.numel() == count, "[", call, "] ", what, " has ", t.numel(), " elements; ", count,
           " expected");
}

// Gloo has no reduce-scatter: an all-reduce of every chunk, of which each
// rank keeps its own (what PyTorch's users fall back on).
Body reduce_own_chunk(Engine* e, const Tensor& all, const Tensor& output, ReduceOp op, int me) {
  auto buf = std::make_shared<HostBuffer>(all, true, *e);
  return [e, buf, all, output, op, me](const Fingerprint& fp, Milliseconds to) {
    e->all_reduce(buf->data(), static_cast<std::size_t>(all.numel()), all.dtype(), op, data_tag(fp),
                  to);
    buf->finish();
    NoGradGuard no_grad;
    Tensor out = output;
    out.copy_(all.narrow(0, me * fp.count, fp.count).view(output.sizes()));
  };
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;
int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
const std::string& ProcessGroup::backend() const { return impl_->backend; }
Milliseconds ProcessGroup::timeout() const { return impl_->timeout; }
bool ProcessGroup::is_broken() const { return impl_->broken; }

Work ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op, CallOptions o) {
  Engine* e = impl_->engine.get();
  return impl_->submit(call(CallKind::AllReduce, op), o, [&](Fingerprint& f) -> Body {
    need(tensor, "all_reduce", "tensor");
    describe_tensor(f, tensor);
    check_reduce("all_reduce", op, tensor.dtype());
    auto hb = std::make_shared<HostBuffer>(tensor, true, *e);
    return [e, hb, op, dtype = tensor.dtype()](const Fingerprint& fp, Milliseconds to) {
      e->all_reduce(hb->data(), static_cast<std::size_t>(fp.count), dtype, op, data_tag(fp), to);
      hb->finish();
    };
  });
}

Work ProcessGroup::broadcast(const Tensor& tensor, int src, CallOptions o) {
  Engine* e = impl_->engine.get();
  const int me = impl_->rank;
  return impl_->submit(call(CallKind::Broadcast, ReduceOp::Sum, src), o,
                       [&](Fingerprint& f) -> Body {
                         need(tensor, "broadcast", "tensor");
                         describe_tensor(f, tensor);
                         check_rank("broadcast", "src", src, impl_->size);
                         auto hb = std::make_shared<HostBuffer>(tensor, me == src, *e);
                         return [e, hb, src, me](const Fingerprint& fp, Milliseconds to) {
                           e->broadcast(hb->data(), hb->nbytes(), src, data_tag(fp), to);
                           if (me != src) hb->finish();
                         };
                       });
}

Work ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input,
                              CallOptions o) {
  Engine* e = impl_->engine.get();
  const int n = impl_->size;
  return impl_->submit(call(CallKind::AllGather), o, [&](Fingerprint& f) -> Body {
    need(input, "all_gather", "input");
    describe_tensor(f, input);
    BP_CHECK(static_cast<int>(outputs.size()) == n, "[all_gather] ", outputs.size(),
             " outputs for a group of ", n, " ranks: one per rank expected");
    for (const Tensor& out : outputs) {
      need(out, "all_gather", "output");
      check_like("all_gather", out, input, "an output", input.numel());
    }
    auto in = std::make_shared<HostBuffer>(input, true, *e);
    // Gathered into one tensor where the engine works, then copied out.
    const Tensor all =
        empty({n * input.numel()}, TensorOptions(input.dtype()).device(input.device()));
    auto buf = std::make_shared<HostBuffer>(all, false, *e);
    return [e, in, buf, all, outputs](const Fingerprint& fp, Milliseconds to) {
      e->all_gather(in->data(), buf->data(), in->nbytes(), data_tag(fp), to);
      buf->finish();
      NoGradGuard no_grad;
      for (std::size_t r = 0; r < outputs.size(); ++r) {
        Tensor out = outputs[r];
        out.copy_(all.narrow(0, static_cast<int64_t>(r) * fp.count, fp.count).view(out.sizes()));
      }
    };
  });
}

Work ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input,
                                          CallOptions o) {
  Engine* e = impl_->engine.get();
  const int n = impl_->size;
  return impl_->submit(call(CallKind::AllGather), o, [&](Fingerprint& f) -> Body {
    need(input, "all_gather_into_tensor", "input");
    need(output, "all_gather_into_tensor", "output");
    describe_tensor(f, input);
    check_like("all_gather_into_tensor", output, input, "the output", input.numel() * n);
    auto in = std::make_shared<HostBuffer>(input, true, *e);
    auto out = std::make_shared<HostBuffer>(output, false, *e);
    return [e, in, out](const Fingerprint& fp, Milliseconds to) {
      e->all_gather(in->data(), out->data(), in->nbytes(), data_tag(fp), to);
      out->finish();
    };
  });
}

Work ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                  ReduceOp op, CallOptions o) {
  Engine* e = impl_->engine.get();
  const int n = impl_->size, me = impl_->rank;
  return impl_->submit(call(CallKind::ReduceScatter, op), o, [&](Fingerprint& f) -> Body {
    need(output, "reduce_scatter", "output");
    describe_tensor(f, output);
    check_reduce("reduce_scatter", op, output.dtype());
    BP_CHECK(static_cast<int>(inputs.size()) == n, "[reduce_scatter] ", inputs.size(),
             " inputs for a group of ", n, " ranks: one per rank expected");
    for (const Tensor& in : inputs) {
      need(in, "reduce_scatter", "input");
      check_like("reduce_scatter", in, output, "an input", output.numel());
    }
    // The inputs one after the other (as they are now), reduced in place.
    const int64_t count = output.numel();
    Tensor all = empty({n * count}, TensorOptions(output.dtype()).device(output.device()));
    {
      NoGradGuard no_grad;
      for (int r = 0; r < n; ++r) all.narrow(0, r * count, count).copy_(inputs[r].reshape({-1}));
    }
    return reduce_own_chunk(e, all, output, op, me);
  });
}

Work ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                                         CallOptions o) {
  Engine* e = impl_->engine.get();
  const int n = impl_->size, me = impl_->rank;
  return impl_->submit(call(CallKind::ReduceScatter, op), o, [&](Fingerprint& f) -> Body {
    need(output, "reduce_scatter_tensor", "output");
    need(input, "reduce_scatter_tensor", "input");
    describe_tensor(f, output);
    check_reduce("reduce_scatter_tensor", op, output.dtype());
    check_like("reduce_scatter_tensor", input, output, "the input", output.numel() * n);
    Tensor all;
    {
      NoGradGuard no_grad;
      all = input.reshape({-1}).clone(MemoryFormat::Contiguous);
    }
    return reduce_own_chunk(e, all, output, op, me);
  });
}

// On the host engine (a device engine's calls have finished when they return).
Work ProcessGroup::barrier(CallOptions o) {
  Engine* e = &impl_->control();
  return impl_->submit(call(CallKind::Barrier), o, [&](Fingerprint&) -> Body {
    return [e](const Fingerprint& fp, Milliseconds to) { e->barrier(data_tag(fp), to); };
  });
}

Work ProcessGroup::send(const Tensor& tensor, int dst, int tag, CallOptions o) {
  Impl* g = impl_.get();
  return impl_->submit(
      call(CallKind::Send, ReduceOp::Sum, dst, tag), o, [&](Fingerprint& f) -> Body {
        need(tensor, "send", "tensor");
        describe_tensor(f, tensor);
        check_rank("send", "dst", dst, g->size);
        BP_CHECK(dst != g->rank, "[send] rank ", dst, " cannot send to itself");
        auto hb = std::make_shared<HostBuffer>(tensor, true, *g->engine);
        return [g, hb, dst](const Fingerprint& fp, Milliseconds to) {
          g->engine->send(hb->data(), hb->nbytes(), dst, detail::p2p_slot(fp, 2), to);
        };
      });
}

Work ProcessGroup::recv(const Tensor& tensor, int src, int tag, CallOptions o) {
  Impl* g = impl_.get();
  return impl_->submit(
      call(CallKind::Recv, ReduceOp::Sum, src, tag), o, [&](Fingerprint& f) -> Body {
        need(tensor, "recv", "tensor");
        describe_tensor(f, tensor);
        check_rank("recv", "src", src, g->size);
        BP_CHECK(src != g->rank, "[recv] rank ", src, " cannot receive from itself");
        auto hb = std::make_shared<HostBuffer>(tensor, false, *g->engine);
        return [g, hb, src](const Fingerprint& fp, Milliseconds to) {
          g->engine->recv(hb->data(), hb->nbytes(), src, detail::p2p_slot(fp, 2), to);
          hb->finish();
        };
      });
}

}  // namespace bp::distributed
