// Streams on sim, whose streams are queues run later by threads of their own:
// memory freed while another stream still reads it is not reused before
// that stream is done (record_stream, DV-8), and the control without
// record_stream shows the hazard the rule prevents. sim::delay holds a
// stream busy for a known time.
#include <backplane/backplane.h>
#include <gtest/gtest.h>

namespace {

bp::Device sim() {
  bp::Backend& b = bp::PluginLoader::instance().load("sim");
  return bp::Device{static_cast<int16_t>(b.id()), 0};
}

// Reads x on `user` after a 200 ms delay; frees x; once the free has
// reached the backend, makes tensors of x's size on the default stream,
// enough to take every free block of that size, filled with 7. Returns what
// `user` computed: 2 * x, or 14 if x's memory was reused under it.
double reader_result(bool record) {
  const bp::Device d = sim();
  const bp::Stream user = bp::Stream::create(d);
  const int64_t n = 4096;
  bp::Tensor x = bp::full({n}, 5.0, bp::TensorOptions(bp::DType::Float32).device(d));
  bp::Stream::default_stream(d).synchronize();
  bp::Tensor y;
  {
    bp::StreamGuard on(user);
    const bp::Tensor late = bp::call_op("sim::delay", {x}, {int64_t{200000}})[0];
    y = late * 2;
    if (record) x.record_stream(user);
  }
  x = bp::Tensor();
  bp::Stream::default_stream(d).synchronize();  // the free has reached the arena
  std::vector<bp::Tensor> z;
  for (int k = 0; k < 64; ++k)
    z.push_back(bp::full({n}, 7.0, bp::TensorOptions(bp::DType::Float32).device(d)));
  bp::Stream::default_stream(d).synchronize();
  user.synchronize();
  return y.to_vector<float>()[0];
}

TEST(Streams, RecordStreamKeepsMemoryFromAnotherStreamUntilItIsDone) {
  EXPECT_EQ(reader_result(true), 10.0);
  bp::synchronize(sim());
  EXPECT_EQ(bp::PluginLoader::instance().load("sim").deferred_frees(), 0u);
}

TEST(Streams, WithoutRecordStreamTheMemoryIsReusedUnderTheReader) {
  // The hazard the rule exists for: the reader sees the new tensor's values.
  EXPECT_EQ(reader_result(false), 14.0);
}

TEST(Streams, AnErrorOnTheDeviceSurfacesAtTheNextSynchronisation) {
  const bp::Device d = sim();
  const auto opts = bp::TensorOptions(bp::DType::Float32).device(d);
  const bp::Tensor src = bp::full({3}, 1.0, opts);
  const bp::Tensor bad = bp::from_vector(std::vector<int64_t>{0, 9}, {2},
                                         bp::TensorOptions(bp::DType::Int64).device(d));
  bp::Tensor out = src.index_select(0, bad);  // enqueued: sim finds the index later
  try {
    bp::synchronize(d);
    FAIL() << "no error at the synchronisation";
  } catch (const bp::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("index_select"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(bp::synchronize(d));  // reported once
}

TEST(Streams, ReadsWaitForTheStreamThatWrote) {
  const bp::Device d = sim();
  const bp::Stream s = bp::Stream::create(d);
  bp::StreamGuard on(s);
  bp::Tensor x = bp::full({8}, 3.0, bp::TensorOptions(bp::DType::Float32).device(d));
  x = bp::call_op("sim::delay", {x}, {int64_t{50000}})[0];
  EXPECT_FALSE(s.query());  // still running
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(8, 3.0f));
  EXPECT_TRUE(s.query());
}

}  // namespace

namespace {

// Between plugins the bytes pass through host memory in 2 MiB chunks; into
// sim they go through sim's page-locked buffers, which sim reads on its
// queue after copy_from_host has returned: a buffer reused too early would
// show up as wrong values here.
TEST(Streams, CopiesBetweenPluginsThroughPageLockedBuffersKeepEveryValue) {
  const bp::Device d = sim();
  const int64_t n = (int64_t{5} << 20) / 4 + 7;  // 5 MiB and a bit: three chunks
  const bp::Tensor host = bp::arange(n, bp::TensorOptions(bp::DType::Float32));
  // sim's stream is busy for 100 ms: every chunk is read from its buffer late.
  const bp::Tensor busy = bp::zeros({1}, bp::TensorOptions().device(d));
  (void)bp::call_op("sim::delay", {busy}, {int64_t{100000}});
  const bp::Tensor on_sim = host.to(d);
  EXPECT_EQ(on_sim.device(), d);
  const bp::Tensor back = (on_sim * 2).to(host.device());
  const std::vector<float> v = back.to_vector<float>();
  ASSERT_EQ(static_cast<int64_t>(v.size()), n);
  for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(v[i], 2.0f * static_cast<float>(i)) << i;
  EXPECT_EQ(v[n - 1], 2.0f * static_cast<float>(n - 1));
}

}  // namespace

namespace {

// Event::elapsed_since (ABI 2.4's event_elapsed): the device's clock
// between two marks. sim's clock is its queue's thread: a 50 ms sim::delay
// between the marks is inside the interval, whatever the host did.
TEST(Streams, EventsTimeTheWorkBetweenThemByTheDevicesClock) {
  const bp::Device d = sim();
  ASSERT_TRUE(bp::PluginLoader::instance().load("sim").has_event_timing());
  const bp::Tensor x = bp::full({16}, 1.0, bp::TensorOptions(bp::DType::Float32).device(d));
  bp::Event start(d), end(d);
  start.record();
  const bp::Tensor late = bp::call_op("sim::delay", {x}, {int64_t{50000}})[0];
  end.record();
  const std::optional<double> s = end.elapsed_since(start);
  ASSERT_TRUE(s.has_value());
  EXPECT_GE(*s, 0.05);
  EXPECT_TRUE(end.query());  // elapsed_since waited for the mark
  // Nothing between two marks: no delay item can be inside.
  bp::Event a(d), b(d);
  a.record();
  b.record();
  EXPECT_GE(*b.elapsed_since(a), 0.0);
}

TEST(Streams, AHostBackendHasNoClockOfItsOwn) {
  bp::Backend& cpu = bp::PluginLoader::instance().load("cpu_onednn");
  EXPECT_FALSE(cpu.has_event_timing());
  const bp::Device d{static_cast<int16_t>(cpu.id()), 0};
  bp::Event a(d), b(d);
  a.record();
  b.record();
  EXPECT_FALSE(b.elapsed_since(a).has_value());
}

TEST(Streams, AnEventNeverRecordedCannotBeTimed) {
  const bp::Device d = sim();
  bp::Event recorded(d), never(d);
  recorded.record();
  EXPECT_THROW((void)recorded.elapsed_since(never), bp::ValueError);
}

}  // namespace
