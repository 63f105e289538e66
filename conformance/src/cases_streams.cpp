// Streams, events, asynchronous errors and memory reuse across streams
// (DV-7, DV-8), on every backend. On a backend whose work completes before
// each call returns these hold trivially; on an asynchronous one (sim, a
// GPU) a missing wait in the core or the plugin shows up as a wrong value.
#include <backplane/conformance.h>

#include <thread>

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

// How often each race case below runs: a missing wait or a query that
// answers too early shows up as a wrong value on most rounds, so on all of
// them only by extreme luck.
constexpr int kRounds = 12;

// A long first job on the current stream: a large fill, then a chain of
// in-place steps, each an item of its own on the stream. All elements of
// the result equal `value + steps`; the caller varies `value` by round, so
// that memory left over from an earlier round never holds the answer.
Tensor long_job(const Context& ctx, double value, int steps = 8) {
  Tensor x = full({1 << 20}, value, ctx.options());
  for (int k = 0; k < steps; ++k) x.add_(1);
  return x;
}

// The largest |x - expected|, computed and read on the current stream.
double max_error(const Tensor& x, double expected) {
  return x.sub(expected).abs().max().item<double>();
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
  BP_EXPECT(message.find("index_select") != std::string::npos, "the error names the op: ", message);
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
  Event filled(ctx.device());  // `user` reads x only after its fill (DV-7)
  filled.record();
  Tensor y;
  {
    StreamGuard on(user);
    filled.block(user);
    keep_busy(ctx);
    y = x * 2;
    x.record_stream(user);
  }
  x = Tensor();                              // freed while `user` may still be reading it
  Tensor z = full({n}, 7.0, ctx.options());  // would take x's memory if it were free
  z.add_(1);
  user.synchronize();
  BP_EXPECT_EQ(y.sum().item<double>(), 10.0 * n,
               "y was computed from x's values, not reused memory");
  BP_EXPECT_EQ(z.sum().item<double>(), 8.0 * n, "z is intact");
  synchronize(ctx.device());
  BP_EXPECT_EQ(ctx.backend().deferred_frees(), 0u,
               "memory kept for another stream goes back once that stream is done");
}

// A second stream that waits for an event reads what the first wrote after
// a long job (DV-7), round after round: a plugin whose stream_wait_event
// does not hold the second stream back reads a half-done result here.
void wait_after_long_job(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  for (int round = 0; round < kRounds; ++round) {
    Tensor x;
    Event ready(ctx.device());
    {
      StreamGuard on(a);
      x = long_job(ctx, 10.0 * round);
      ready.record();
    }
    StreamGuard on(b);
    ready.block(b);
    x.record_stream(b);
    const double error = max_error(x, 10.0 * round + 8);
    BP_EXPECT_EQ(error, 0.0, "round ", round, ": b read x before a's fill and 8 steps were done");
  }
}

// The same with work queued on the second stream before the wait and a
// chain of small jobs on the first: the wait holds back only what follows it.
void wait_after_chain(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  for (int round = 0; round < kRounds; ++round) {
    Tensor x, y;
    Event ready(ctx.device());
    {
      StreamGuard on(a);
      x = full({4096}, 1.0 * round, ctx.options());
      for (int k = 0; k < 100; ++k) x.add_(1);
      ready.record();
    }
    StreamGuard on(b);
    y = full({4096}, 3.0, ctx.options());
    ready.block(b);
    y.add_(x);
    x.record_stream(b);
    BP_EXPECT_EQ(max_error(y, round + 103.0), 0.0, "round ", round,
                 ": b added x before a's 100 steps were done");
  }
}

// An event that Event::query reports reached, or a stream that
// Stream::query reports idle, has finished the work before it: another
// stream may then read the result without waiting (DV-7).
void query_then_read_elsewhere(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  for (int round = 0; round < kRounds; ++round) {
    const bool by_event = round % 2 == 0;
    Tensor x;
    Event done(ctx.device());
    {
      StreamGuard on(a);
      x = long_job(ctx, 10.0 * round);
      done.record();
    }
    if (by_event) {
      while (!done.query()) std::this_thread::yield();
    } else {
      while (!a.query()) std::this_thread::yield();
    }
    StreamGuard on(b);
    x.record_stream(b);
    BP_EXPECT_EQ(max_error(x, 10.0 * round + 8), 0.0, "round ", round, ": ",
                 by_event ? "Event::query" : "Stream::query",
                 " answered true before a's fill and 8 steps were done");
  }
}

// A wait recorded behind another wait: b waits for a, c for b, and the host
// polls c's event. A stream that does not wait lets the mark through early.
void query_after_chained_waits(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  for (int round = 0; round < kRounds; ++round) {
    Tensor x;
    Event first(ctx.device()), second(ctx.device());
    {
      StreamGuard on(a);
      x = long_job(ctx, 10.0 * round);
      first.record();
    }
    first.block(b);
    second.record(b);
    while (!second.query()) std::this_thread::yield();
    BP_EXPECT(first.query(), "round ", round,
              ": b's mark was reached before a's, which it waits for");
    StreamGuard on(Stream::default_stream(ctx.device()));
    x.record_stream(Stream::default_stream(ctx.device()));
    BP_EXPECT_EQ(max_error(x, 10.0 * round + 8), 0.0, "round ", round,
                 ": an event behind a wait was reached before the work it waits for");
  }
}

// Memory freed on one stream is handed out again, possibly on another,
// only after the work enqueued on the first before the free (DV-8, the
// plugin's stream-ordered deallocate): neither the old owner's late writes
// nor the new owner's early ones may show.
void free_then_reuse_on_other_stream(const Context& ctx) {
  const Stream a = Stream::create(ctx.device()), b = Stream::create(ctx.device());
  const int64_t n = 1 << 20;
  for (int round = 0; round < kRounds; ++round) {
    Tensor y, z;
    {
      StreamGuard on(a);
      Tensor x = long_job(ctx, 10.0 * round);
      y = x * 2;  // a's last read of x
    }             // x freed on a, a's work still queued
    {
      StreamGuard on(b);
      z = full({n}, -1.0 * round, ctx.options());  // may take x's memory
      z.add_(-1);
    }
    {
      StreamGuard on(a);
      BP_EXPECT_EQ(max_error(y, 2 * (10.0 * round + 8)), 0.0, "round ", round,
                   ": a's read of x saw b's writes to memory freed too early");
    }
    StreamGuard on(b);
    BP_EXPECT_EQ(max_error(z, -1.0 * round - 1), 0.0, "round ", round,
                 ": b's new tensor was overwritten by a's work on the memory it took");
  }
}

}  // namespace

void add_stream_cases(Suite& suite) {
  suite.add({"streams.one_stream_in_order", {"DV-7"}, kCategory, one_stream_in_order});
  suite.add({"streams.events_order_streams", {"DV-7"}, kCategory, events_order_streams});
  suite.add({"streams.async_error_names_the_op", {"DV-7"}, kCategory, async_error_names_the_op});
  suite.add(
      {"streams.reuse_waits_for_user_stream", {"DV-8"}, kCategory, reuse_waits_for_user_stream});
  suite.add({"streams.wait_after_long_job", {"DV-7"}, kCategory, wait_after_long_job});
  suite.add({"streams.wait_after_chain", {"DV-7"}, kCategory, wait_after_chain});
  suite.add({"streams.query_then_read_elsewhere", {"DV-7"}, kCategory, query_then_read_elsewhere});
  suite.add({"streams.query_after_chained_waits", {"DV-7"}, kCategory, query_after_chained_waits});
  suite.add({"streams.free_then_reuse_on_other_stream",
             {"DV-8"},
             kCategory,
             free_then_reuse_on_other_stream});
}

}  // namespace bp::conformance
