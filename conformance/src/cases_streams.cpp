// Streams, events, asynchronous errors and memory reuse across streams
// (DV-7, DV-8), on every backend. On a backend whose work completes before
// each call returns these hold trivially; on an asynchronous one (sim, a
// GPU) a missing wait in the core or the plugin shows up as a wrong value.
#include <backplane/conformance.h>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "streams";

// Enough queued work on the current stream that an asynchronous device is
// still busy with it when the host moves on.
void keep_busy(const Context& ctx) {
  Tensor t = zeros({256}, ctx.options());
  for (int k = 0; k < 64; ++k) t.add_(1);
}

// Work on one stream runs in the order it was enqueued, and a read waits for it.
void one_stream_in_order(const Context& ctx) {
  const Stream s = Stream::create(ctx.device());
  StreamGuard on(s);
  BP_EXPECT(current_stream(ctx.device()) == s, "the guard makes the stream current");
  Tensor x = full({1000}, 1.0, ctx.options());
  for (int k = 0; k < 50; ++k) x.mul_(1.0).add_(1);
  BP_EXPECT_EQ(x.sum().item<double>(), 51.0 * 1000, "50 in-place steps, then a read");
  s.synchronize();
  BP_EXPECT(s.query(), "a synchronised stream has nothing left to run");
}

// An event recorded on one stream orders work on another.
void events_order_streams(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  Tensor x, y;
  Event ready(ctx.device());
  BP_EXPECT(ready.query(), "an event never recorded counts as reached");
  {
    StreamGuard on(a);
    keep_busy(ctx);
    x = full({4096}, 2.0, ctx.options());
    x.mul_(3);
    ready.record();
  }
  {
    StreamGuard on(b);
    ready.block(b);
    y = x * 2;  // reads x on b, after a's work
    x.record_stream(b);
    b.synchronize();
  }
  BP_EXPECT(ready.query(), "the event was reached");
  const std::vector<double> v = y.to_vector<double>();
  BP_EXPECT(std::all_of(v.begin(), v.end(), [](double e) { return e == 12; }),
            "b saw a's result: y[0] = ", v[0], ", expected 12");
  Event done(ctx.device());
  done.record(Stream::default_stream(ctx.device()));
  done.synchronize();
  BP_EXPECT(done.query(), "a synchronised event is reached");
}

// A bad index found by the kernel raises an error naming the op by the next
// synchronisation at the latest, once; the stream keeps working.
void async_error_names_the_op(const Context& ctx) {
  const Tensor src = from_vector(std::vector<double>{1, 2, 3}, {3}, ctx.options());
  const Tensor bad = from_vector(std::vector<double>{0, 7}, {2}, ctx.options(DType::Int64));
  std::string message;
  try {
    Tensor out = src.index_select(0, bad);
    synchronize(ctx.device());
  } catch (const Error& e) {
    message = e.what();
  }
  BP_EXPECT(!message.empty(), "index_select with index 7 of 3 was not refused");
  BP_EXPECT(message.find("index_select") != std::string::npos, "the error names the op: ",
            message);
  synchronize(ctx.device());  // reported once: nothing left to raise
  const Tensor ok = from_vector(std::vector<double>{2, 0}, {2}, ctx.options(DType::Int64));
  BP_EXPECT_EQ(src.index_select(0, ok).to_vector<double>(), (std::vector<double>{3, 1}),
               "the stream works after the error");
}

// Memory another stream still reads is not reused before that stream is
// done with it (record_stream), and goes back to the backend afterwards.
void reuse_waits_for_user_stream(const Context& ctx) {
  const Stream user = Stream::create(ctx.device());
  const int64_t n = 1 << 16;
  Tensor x = full({n}, 5.0, ctx.options());
  Tensor y;
  {
    StreamGuard on(user);
    keep_busy(ctx);
    y = x * 2;
    x.record_stream(user);
  }
  x = Tensor();  // freed while `user` may still be reading it
  Tensor z = full({n}, 7.0, ctx.options());  // would take x's memory if it were free
  z.add_(1);
  user.synchronize();
  BP_EXPECT_EQ(y.sum().item<double>(), 10.0 * n, "y was computed from x's values, not reused memory");
  BP_EXPECT_EQ(z.sum().item<double>(), 8.0 * n, "z is intact");
  synchronize(ctx.device());
  BP_EXPECT_EQ(ctx.backend().deferred_frees(), 0u,
               "memory kept for another stream goes back once that stream is done");
}

}  // namespace

void add_stream_cases(Suite& suite) {
  suite.add({"streams.one_stream_in_order", {"DV-7"}, kCategory, one_stream_in_order});
  suite.add({"streams.events_order_streams", {"DV-7"}, kCategory, events_order_streams});
  suite.add({"streams.async_error_names_the_op", {"DV-7"}, kCategory, async_error_names_the_op});
  suite.add({"streams.reuse_waits_for_user_stream", {"DV-8"}, kCategory,
             reuse_waits_for_user_stream});
}

}  // namespace bp::conformance
