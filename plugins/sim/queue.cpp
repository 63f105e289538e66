#include "queue.h"

#include <chrono>
#include <exception>

namespace bp::sim {

Queue::Queue(unsigned max_delay_us, uint64_t seed)
    : max_delay_us_(max_delay_us), rng_(seed | 1), thread_([this] { run(); }) {}

Queue::~Queue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

uint64_t Queue::push(std::function<void()> work) {
  uint64_t position;
  bool wake;
  {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(work));
    position = ++enqueued_;
    wake = idle_;
  }
  if (wake) work_cv_.notify_one();  // a busy thread finds the item itself
  return position;
}

uint64_t Queue::enqueued() const {
  std::lock_guard lock(mu_);
  return enqueued_;
}

bool Queue::reached(uint64_t position) const {
  std::lock_guard lock(mu_);
  return completed_ >= position;
}

void Queue::wait_for(uint64_t position) const {
  std::unique_lock lock(mu_);
  if (completed_ >= position) return;
  ++waiters_;
  done_cv_.wait(lock, [&] { return completed_ >= position; });
  --waiters_;
}

std::string Queue::take_error() {
  std::lock_guard lock(mu_);
  std::string e;
  e.swap(error_);
  return e;
}

void Queue::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (items_.empty() && !stop_) {
      idle_ = true;
      work_cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      idle_ = false;
    }
    if (items_.empty()) return;  // stopping, and nothing left
    std::function<void()> work = std::move(items_.front());
    items_.pop_front();
    // xorshift64: a delay for this item.
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    // One item in eight waits (a sleep costs the OS's timer slack as well,
    // so a delay on every item would make long tests crawl).
    const unsigned delay = max_delay_us_ && (rng_ >> 61) == 0
                               ? static_cast<unsigned>((rng_ >> 8) % max_delay_us_) + 1
                               : 0;
    lock.unlock();
    if (delay) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    std::string failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown exception";
    }
    // Destroyed before the item counts as done: what it holds (a mark's
    // queue, possibly this one) must not outlive a drain that returned.
    work = nullptr;
    lock.lock();
    if (!failure.empty() && error_.empty()) error_ = std::move(failure);
    ++completed_;
    if (waiters_) done_cv_.notify_all();
  }
}

}  // namespace bp::sim
