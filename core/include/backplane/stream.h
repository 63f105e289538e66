// Streams and events: the order in which a device runs the work it is given.
//
// Every kernel and copy the core enqueues goes to the calling thread's
// current stream of the device (the device's default stream unless a
// StreamGuard says otherwise). Work on one stream runs in order; work on
// two streams is ordered only by events. The core waits for a stream only
// where the host needs the data: item(), to_vector(), printing, copies to
// host memory, and synchronize().
#pragma once

#include <backplane/device.h>
#include <backplane/intrusive_ptr.h>
#include <backplane/plugin.h>

#include <optional>

namespace bp {

class Backend;

class Stream {
 public:
  Stream() = default;  // no device: not usable until assigned
  // The default stream of `device`.
  static Stream default_stream(Device device);
  // A new stream on `device`; it lives as long as its backend.
  static Stream create(Device device);

  Device device() const { return device_; }
  bp_stream handle() const { return handle_; }
  bool is_default() const { return handle_ == nullptr; }
  // Waits for the work enqueued so far; a failure of it raises DeviceError.
  void synchronize() const;
  // True when the work enqueued so far has finished.
  bool query() const;

  bool operator==(const Stream&) const = default;

 private:
  friend Stream current_stream(Device device);
  Stream(Device d, bp_stream h) : device_(d), handle_(h) {}
  Device device_;
  bp_stream handle_ = nullptr;
};

// The calling thread's current stream of `device`.
Stream current_stream(Device device);

// Makes `stream` the calling thread's current stream of its device for the
// guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A marker in a stream's work.
class Event {
 public:
  explicit Event(Device device);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Device device() const { return device_; }
  // Marks the point `stream` (the current stream by default) has reached.
  void record(const Stream& stream);
  void record();
  // Makes later work on `stream` (any device of this backend) wait for the
  // mark, without blocking the host.
  void block(const Stream& stream) const;
  // True once the mark is reached (and for an event never recorded).
  bool query() const;
  // Waits for the mark; a failure of the work before it raises DeviceError.
  void synchronize() const;
  // The device's own time from `start`'s mark to this one's, in seconds,
  // after waiting for this mark (`start` recorded before it, on the same
  // device); nullopt when the backend has no clock of its own (ABI 2.4's
  // event_elapsed: a device whose work runs before each call returns, where
  // the host's clock is the device's).
  std::optional<double> elapsed_since(const Event& start) const;

 private:
  IntrusivePtr<Backend> backend_;
  Device device_;
  bp_event event_ = nullptr;
};

// Waits for every stream of `device`; a failure of their work raises DeviceError.
void synchronize(Device device);
// Of the default device.
void synchronize();

}  // namespace bp
