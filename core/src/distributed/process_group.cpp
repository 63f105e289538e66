// Work handles and the group's thread: calls run one at a time, in the order
// they were made, each after the ranks' fingerprints agree.
#include "group.h"

#include <cstring>

namespace bp::distributed {

using detail::CallKind;
using detail::Fingerprint;

// --- Work ---------------------------------------------------------------

void Work::State::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool Work::State::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

std::exception_ptr Work::State::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool Work::State::wait(std::optional<Milliseconds> timeout) const {
  std::unique_lock lock(mu_);
  if (!timeout) {
    cv_.wait(lock, [&] { return done_; });
    return true;
  }
  return cv_.wait_for(lock, *timeout, [&] { return done_; });
}

bool Work::is_completed() const { return state_->done(); }
bool Work::is_success() const { return state_->done() && !state_->error(); }
std::exception_ptr Work::exception() const { return state_->error(); }

void Work::wait(std::optional<Milliseconds> timeout) const {
  if (!state_->wait(timeout))
    throw DistributedError(concat("[distributed] Work::wait: the call did not finish within ",
                                  timeout->count(), " ms (it goes on, bounded by the group's "
                                  "timeout)"));
  if (auto e = state_->error()) std::rethrow_exception(e);
}

// --- the group's thread -------------------------------------------------

ProcessGroup::Impl::Impl(std::unique_ptr<detail::Engine> e, std::unique_ptr<detail::Engine> c,
                         std::shared_ptr<gloo::rendezvous::Store> store, int r, int n,
                         std::string b, Milliseconds t, bool check)
    : rank(r), size(n), backend(std::move(b)), timeout(t), check_calls(check),
      engine(std::move(e)), control_engine(std::move(c)), sent(n), received(n),
      store_(std::move(store)) {
  thread_ = std::thread([this] { loop(); });
}

ProcessGroup::Impl::~Impl() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();  // after the calls already made
}

Work ProcessGroup::Impl::submit(Fingerprint fp, const CallOptions& o,
                                const std::function<Body(Fingerprint&)>& make) {
  Task t;
  t.state = std::make_shared<Work::State>();
  t.timeout = o.timeout.value_or(timeout);
  const auto kind = static_cast<CallKind>(fp.kind);
  const bool p2p = kind == CallKind::Send || kind == CallKind::Recv;
  try {
    BP_CHECK(t.timeout.count() > 0, "[", detail::call_name(kind), "] the timeout must be positive, not ",
             t.timeout.count(), " ms");
    t.body = make(fp);
  } catch (...) {
    t.refused = std::current_exception();
  }
  Work work(t.state);
  if (t.refused) {
    // A point-to-point call concerns one peer, which may not even exist:
    // refused here only. A collective tells the others (unless unchecked).
    if (p2p || !check_calls) {
      t.state->finish(t.refused);
      if (!o.async_op) work.wait();
      return work;
    }
    std::string why;
    try {
      std::rethrow_exception(t.refused);
    } catch (const std::exception& e) {
      why = e.what();
    }
    fp.reduce = fp.kind;
    fp.kind = static_cast<uint32_t>(CallKind::Refused);
    std::strncpy(fp.note, why.c_str(), sizeof fp.note - 1);
  }
  {
    std::lock_guard lock(mu_);
    if (kind == CallKind::Send) fp.seq = sent[static_cast<std::size_t>(fp.root)]++;
    else if (kind == CallKind::Recv) fp.seq = received[static_cast<std::size_t>(fp.root)]++;
    else fp.seq = seq_++;
    t.fp = fp;
    queue_.push_back(std::move(t));
  }
  cv_.notify_all();
  if (!o.async_op) work.wait();
  return work;
}

void ProcessGroup::Impl::loop() {
  for (;;) {
    Task t;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      run(t);
      t.state->finish(nullptr);
    } catch (const detail::CommError& e) {
      std::string reason = concat(detail::describe(t.fp), " failed on rank ", rank, ": ", e.what());
      {
        std::lock_guard lock(mu_);
        if (broken_reason_.empty()) broken_reason_ = reason;
      }
      broken = true;
      t.state->finish(std::make_exception_ptr(DistributedError(concat(
          "[distributed] ", reason, " (a rank stopped or is late; the group cannot be used any "
          "more)"))));
    } catch (...) {
      t.state->finish(std::current_exception());
    }
  }
}

void ProcessGroup::Impl::run(Task& t) {
  if (broken) {
    std::lock_guard lock(mu_);
    throw DistributedError(concat("[distributed] ", detail::describe(t.fp),
                                  ": the group is unusable since ", broken_reason_));
  }
  const auto kind = static_cast<CallKind>(t.fp.kind);
  const bool p2p = kind == CallKind::Send || kind == CallKind::Recv;
  if (check_calls && !p2p) {
    std::vector<Fingerprint> all(static_cast<std::size_t>(size));
    control().all_gather(&t.fp, all.data(), sizeof(Fingerprint),
                         static_cast<uint32_t>(2 * t.fp.seq), t.timeout);
    const std::string diff = detail::compare(all, rank);
    if (t.refused) std::rethrow_exception(t.refused);
    if (!diff.empty())
      throw DistributedError(concat("[distributed] ", detail::call_name(kind), ": ", diff));
  }
  t.body(t.fp, t.timeout);
}

}  // namespace bp::distributed
