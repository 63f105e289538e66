#pragma once
// ProcessGroup::Impl: the calls' order, checks and fingerprints, and the
// thread that runs them on an engine.
#include <gloo/rendezvous/store.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "engine.h"

namespace bp::distributed {

class Work::State {
 public:
  void finish(std::exception_ptr error);
  bool done() const;
  std::exception_ptr error() const;
  // False when `timeout` passed first.
  bool wait(std::optional<Milliseconds> timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class ProcessGroup::Impl {
 public:
  Impl(std::unique_ptr<detail::Engine> engine, std::unique_ptr<detail::Engine> control,
       std::shared_ptr<gloo::rendezvous::Store> store, int rank, int size, std::string backend,
       Milliseconds timeout, bool check_calls);
  ~Impl();

  // What a call runs on the group's thread, after the fingerprints agree.
  // It gets the call's fingerprint, numbered.
  using Body = std::function<void(const detail::Fingerprint& fp, Milliseconds timeout)>;
  // `make` checks the arguments, completes the fingerprint (dtype, count)
  // and stages the tensors, on the caller's thread, and returns the body. A
  // collective whose checks fail still takes its turn, so that the other
  // ranks hear of it instead of waiting.
  Work submit(detail::Fingerprint fp, const CallOptions& o,
              const std::function<Body(detail::Fingerprint&)>& make);

  int rank;
  int size;
  std::string backend;
  Milliseconds timeout;
  bool check_calls;
  std::unique_ptr<detail::Engine> engine;
  // Host engine of the fingerprints, the point-to-point checks and barriers,
  // when `engine` works on device memory (else the engine itself).
  std::unique_ptr<detail::Engine> control_engine;
  detail::Engine& control() { return control_engine ? *control_engine : *engine; }
  std::atomic<bool> broken{false};
  // Point-to-point calls per peer (sender's count to, receiver's count from).
  std::vector<uint64_t> sent, received;

 private:
  struct Task {
    detail::Fingerprint fp;
    Milliseconds timeout;
    Body body;
    std::exception_ptr refused;
    std::shared_ptr<Work::State> state;
  };
  void loop();
  void execute(Task& t);  // runs it and finishes its Work
  void run(Task& t);
  void handshake(const detail::Fingerprint& mine, Milliseconds timeout);

  std::shared_ptr<gloo::rendezvous::Store> store_;  // keeps rank 0's server up
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  // Point-to-point calls in flight, each on a thread (joined when done).
  std::list<std::pair<std::thread, std::shared_ptr<Work::State>>> p2p_;
  bool stopping_ = false;
  uint64_t seq_ = 0;
  std::string broken_reason_;  // under mu_
  std::thread thread_;
};

}  // namespace bp::distributed
