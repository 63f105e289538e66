#pragma once
// Process groups for data-parallel work across processes and machines
// (PyTorch's torch.distributed, in C++). Library Backplane::distributed.
//
//   bp::distributed::init_process_group();           // env://, as `backplane launch` sets it
//   bp::distributed::all_reduce(grad, bp::distributed::ReduceOp::Avg);
//
// The "gloo" engine carries host memory; tensors of a backend whose memory is
// not host addressable (opencl, sim, cuda) are copied through host buffers.
// Before each collective the ranks exchange a fingerprint of the call (op,
// dtype, element count, sequence number), so a rank that calls something else
// gets an error naming both calls on every rank instead of a hang or an abort.
// docs/distributed.md has the whole story.

#include <backplane/error.h>
#include <backplane/tensor.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bp::distributed {

using Milliseconds = std::chrono::milliseconds;
// PyTorch's default for every call of a group.
inline constexpr Milliseconds kDefaultTimeout = std::chrono::minutes(30);

// An error of a process group: the ranks' calls differ, a call timed out, a
// peer went away. After a timeout or a lost peer the group is unusable
// (ProcessGroup::is_broken); a mismatch leaves it usable.
class DistributedError : public Error {
 public:
  using Error::Error;
};

// Avg: the sum divided by the world size (floating dtypes only).
enum class ReduceOp { Sum, Avg, Product, Min, Max };
std::string_view to_string(ReduceOp op);

// A call in flight. Every call returns one; a call made without async_op has
// finished (or thrown) when it returns.
class Work {
 public:
  class State;
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

  bool is_completed() const;
  // Completed without an error.
  bool is_success() const;
  // The call's error once it failed (nullptr otherwise).
  std::exception_ptr exception() const;
  // Waits for the call and rethrows its error. With a timeout, a call still
  // running after it raises DistributedError (the call goes on, bounded by
  // the group's own timeout).
  void wait(std::optional<Milliseconds> timeout = std::nullopt) const;

 private:
  std::shared_ptr<State> state_;
};

struct CallOptions {
  bool async_op = false;                  // return at once; wait() on the Work
  std::optional<Milliseconds> timeout{};  // this call's limit (else the group's)
};

struct GroupOptions {
  std::string backend = "gloo";
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment),
  // tcp://HOST:PORT (rank 0 listens on PORT) or file:///DIR (a directory
  // every rank sees; use a fresh one for each run).
  std::string init_method = "env://";
  int rank = -1;        // -1: RANK
  int world_size = -1;  // -1: WORLD_SIZE
  Milliseconds timeout = kDefaultTimeout;
  // Exchange a fingerprint of each call before it runs (on by default;
  // BACKPLANE_DIST_CHECK=0 turns it off for all groups).
  bool check_calls = true;
};

class ProcessGroup {
 public:
  class Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  const std::string& backend() const;
  Milliseconds timeout() const;
  // True once a call timed out or lost a peer: every later call raises.
  bool is_broken() const;

  // In place on every rank: the reduction of all ranks' `tensor`.
  Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, CallOptions o = {});
  // Every rank's `tensor` becomes rank `src`'s.
  Work broadcast(const Tensor& tensor, int src, CallOptions o = {});
  // outputs[r] = rank r's input; one output per rank, each of the input's
  // dtype and element count.
  Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input, CallOptions o = {});
  // output = the ranks' inputs concatenated along dim 0 (size() times the input's numel).
  Work all_gather_into_tensor(const Tensor& output, const Tensor& input, CallOptions o = {});
  // output = the reduction over ranks of inputs[rank()].
  Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                      ReduceOp op = ReduceOp::Sum, CallOptions o = {});
  // output = this rank's chunk of the reduction of `input` (size() chunks).
  Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                             CallOptions o = {});
  Work barrier(CallOptions o = {});
  // Point to point: the receiver checks dtype and element count first.
  Work send(const Tensor& tensor, int dst, int tag = 0, CallOptions o = {});
  Work recv(const Tensor& tensor, int src, int tag = 0, CallOptions o = {});

 private:
  std::unique_ptr<Impl> impl_;
};

// A group of its own (collective: every rank of it calls this).
std::shared_ptr<ProcessGroup> new_process_group(const GroupOptions& options = {});

// The default group, which the free functions below use.
void init_process_group(const GroupOptions& options = {});
bool is_initialized();
ProcessGroup& default_group();  // raises when not initialized
void destroy_process_group();
int get_rank();
int get_world_size();

Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum, CallOptions o = {});
Work broadcast(const Tensor& tensor, int src, CallOptions o = {});
Work all_gather(const std::vector<Tensor>& outputs, const Tensor& input, CallOptions o = {});
Work all_gather_into_tensor(const Tensor& output, const Tensor& input, CallOptions o = {});
Work reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                    ReduceOp op = ReduceOp::Sum, CallOptions o = {});
Work reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                           CallOptions o = {});
Work barrier(CallOptions o = {});
Work send(const Tensor& tensor, int dst, int tag = 0, CallOptions o = {});
Work recv(const Tensor& tensor, int src, int tag = 0, CallOptions o = {});

}  // namespace bp::distributed
