// Work handles and the group's thread: calls run one at a time, in the order
// they were made, each after the ranks' fingerprints agree.
#include <cstring>

#include "group.h"

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
                                  timeout->count(),
                                  " ms (it goes on, bounded by the group's "
                                  "timeout)"));
  if (auto e = state_->error()) std::rethrow_exception(e);
}

// --- the group's thread -------------------------------------------------

ProcessGroup::Impl::Impl(std::unique_ptr<detail::Engine> e, std::unique_ptr<detail::Engine> c,
                         std::shared_ptr<gloo::rendezvous::Store> store, int r, int n,
                         std::string b, Milliseconds t, bool check)
    : rank(r),
      size(n),
      backend(std::move(b)),
      timeout(t),
      check_calls(check),
      engine(std::move(e)),
      control_engine(std::move(c)),
      sent(n),
      received(n),
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
  // Joined without the lock, which a failing call takes to record why.
  std::list<std::pair<std::thread, std::shared_ptr<Work::State>>> p2p;
  {
    std::lock_guard lock(mu_);
    p2p.swap(p2p_);
  }
  for (auto& [th, state] : p2p) th.join();
}

namespace {

bool is_p2p(CallKind k) { return k == CallKind::Send || k == CallKind::Recv; }

// The call a fingerprint stands for (a refused one keeps it in `reduce`).
CallKind intended(const Fingerprint& f) {
  const auto k = static_cast<CallKind>(f.kind);
  return k == CallKind::Refused ? static_cast<CallKind>(f.reduce) : k;
}

}  // namespace

Work ProcessGroup::Impl::submit(Fingerprint fp, const CallOptions& o,
                                const std::function<Body(Fingerprint&)>& make) {
  Task t;
  t.state = std::make_shared<Work::State>();
  t.timeout = o.timeout.value_or(timeout);
  const auto kind = static_cast<CallKind>(fp.kind);
  const bool p2p = is_p2p(kind);
  try {
    BP_CHECK(t.timeout.count() > 0, "[", detail::call_name(kind),
             "] the timeout must be positive, not ", t.timeout.count(), " ms");
    t.body = make(fp);
  } catch (...) {
    t.refused = std::current_exception();
  }
  Work work(t.state);
  if (t.refused) {
    // The others hear of a refusal (a collective's ranks, a point-to-point
    // call's peer when there is one), unless calls are not checked.
    const bool peer = fp.root >= 0 && fp.root < size && fp.root != rank;
    if (!check_calls || (p2p && !peer)) {
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
    if (t.timeout.count() <= 0) t.timeout = timeout;  // the exchange needs a valid one
  }
  {
    std::lock_guard lock(mu_);
    if (kind == CallKind::Send)
      fp.seq = sent[static_cast<std::size_t>(fp.root)]++;
    else if (kind == CallKind::Recv)
      fp.seq = received[static_cast<std::size_t>(fp.root)]++;
    else
      fp.seq = seq_++;
    t.fp = fp;
    if (p2p && engine->concurrent_p2p()) {
      // Point-to-point calls run on threads of their own: a send waits for
      // its receive, which must not hold up the other calls (isend then
      // irecv on both sides). Their slots keep pairs apart.
      for (auto it = p2p_.begin(); it != p2p_.end();) {
        if (it->second->done()) {
          it->first.join();
          it = p2p_.erase(it);
        } else {
          ++it;
        }
      }
      auto state = t.state;
      p2p_.emplace_back(std::thread([this, task = std::move(t)]() mutable { execute(task); }),
                        std::move(state));
    } else {
      queue_.push_back(std::move(t));
    }
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
    execute(t);
  }
}

void ProcessGroup::Impl::execute(Task& t) {
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
    engine->abort();  // an NCCL communicator with a lost peer cannot be destroyed cleanly
    t.state->finish(std::make_exception_ptr(
        DistributedError(concat("[distributed] ", reason,
                                " (a rank stopped or is late; the group cannot be used any "
                                "more)"))));
  } catch (...) {
    t.state->finish(std::current_exception());
  }
}

void ProcessGroup::Impl::run(Task& t) {
  if (broken) {
    std::lock_guard lock(mu_);
    throw DistributedError(concat("[distributed] ", detail::describe(t.fp),
                                  ": the group is unusable since ", broken_reason_));
  }
  const CallKind kind = intended(t.fp);
  if (check_calls && is_p2p(kind)) {
    handshake(t.fp, t.timeout);
  } else if (check_calls) {
    std::vector<Fingerprint> all(static_cast<std::size_t>(size));
    control().all_gather(&t.fp, all.data(), sizeof(Fingerprint),
                         static_cast<uint32_t>(2 * t.fp.seq), t.timeout);
    const std::string diff = detail::compare(all, rank);
    if (t.refused) std::rethrow_exception(t.refused);
    if (!diff.empty())
      throw DistributedError(concat("[distributed] ", detail::call_name(kind), ": ", diff));
  }
  if (t.refused) std::rethrow_exception(t.refused);
  t.body(t.fp, t.timeout);
}

// A send and its receive exchange fingerprints before the data moves: the
// sender's goes first, the receiver's comes back; both compare the pair.
void ProcessGroup::Impl::handshake(const Fingerprint& mine, Milliseconds to) {
  const bool sender = intended(mine) == CallKind::Send;
  const int peer = mine.root;
  Fingerprint theirs;
  if (sender) {
    control().send(&mine, sizeof mine, peer, detail::p2p_slot(mine, 0), to);
    control().recv(&theirs, sizeof theirs, peer, detail::p2p_slot(mine, 1), to);
  } else {
    control().recv(&theirs, sizeof theirs, peer, detail::p2p_slot(mine, 0), to);
    control().send(&mine, sizeof mine, peer, detail::p2p_slot(mine, 1), to);
  }
  if (static_cast<CallKind>(mine.kind) == CallKind::Refused) return;  // the caller raises its own
  if (static_cast<CallKind>(theirs.kind) == CallKind::Refused)
    throw DistributedError(concat("[distributed] ", detail::describe(mine), ": rank ", peer,
                                  " called ", detail::describe(theirs)));
  const Fingerprint& s = sender ? mine : theirs;
  const Fingerprint& r = sender ? theirs : mine;
  const int sender_rank = sender ? rank : peer, receiver_rank = sender ? peer : rank;
  const bool ok = static_cast<CallKind>(s.kind) == CallKind::Send &&
                  static_cast<CallKind>(r.kind) == CallKind::Recv && s.dtype == r.dtype &&
                  s.count == r.count && s.tag == r.tag && s.seq == r.seq &&
                  s.root == receiver_rank && r.root == sender_rank;
  if (!ok)
    throw DistributedError(concat("[distributed] a send and its receive differ: rank ", sender_rank,
                                  " called ", detail::describe(s), "; rank ", receiver_rank,
                                  " called ", detail::describe(r)));
}

}  // namespace bp::distributed
