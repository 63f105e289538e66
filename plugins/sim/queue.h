// The sim device's streams: each one a queue of work that a thread of its
// own runs in order, with random delays (one item in eight waits up to
// BACKPLANE_SIM_DELAY_US first), so that work finishes
// later than the call that enqueued it, as on an accelerator. A core that
// reads results without synchronising sees stale memory here, not by luck
// a finished result.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace bp::sim {

class Queue {
 public:
  // `max_delay_us`: one item in eight waits 1..max_delay_us first.
  explicit Queue(unsigned max_delay_us, uint64_t seed);
  ~Queue();  // finishes what is queued, then stops the thread
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Appends `work`; returns its position (1, 2, ...). An exception from it
  // is kept as the queue's error (the first one) and reported by take_error.
  uint64_t push(std::function<void()> work);
  // The position of the last item enqueued so far.
  uint64_t enqueued() const;
  // True when the items up to `position` have run.
  bool reached(uint64_t position) const;
  // Waits until the items up to `position` have run.
  void wait_for(uint64_t position) const;
  // Waits for everything enqueued so far.
  void drain() const { wait_for(enqueued()); }
  // The first failure since the last call, or "" (and clears it).
  std::string take_error();

 private:
  void run();

  const unsigned max_delay_us_;
  uint64_t rng_;
  mutable std::mutex mu_;
  mutable std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> items_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stop_ = false;
  bool idle_ = false;        // the thread waits for work
  mutable int waiters_ = 0;  // threads in wait_for
  std::string error_;
  std::thread thread_;  // last: starts after the members it uses
};

// A recorded point of a queue: reached once the queue has run the items
// enqueued before the record.
struct Mark {
  std::shared_ptr<Queue> queue;  // null: never recorded
  uint64_t position = 0;
};

}  // namespace bp::sim
