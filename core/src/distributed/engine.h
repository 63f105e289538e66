#pragma once
// Inside Backplane::distributed: the engine interface (bytes in host memory,
// no tensors), the call fingerprints, and the host buffers tensors travel in.

#include <backplane/distributed.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store;
}

namespace bp::distributed {
using bp::detail::concat;
}  // namespace bp::distributed

namespace bp::distributed::detail {

// What a rank is about to do, exchanged before the call runs. Fixed size:
// Gloo aborts the process when two ranks exchange buffers of different sizes,
// so this is the one exchange whose size cannot differ.
enum class CallKind : uint32_t {
  AllReduce = 1,
  Broadcast,
  AllGather,
  ReduceScatter,
  Barrier,
  Send,
  Recv,
  Refused,  // the rank's own checks rejected its call; `note` says why
};
struct Fingerprint {
  uint32_t magic = 0x42504450;  // "BPDP"
  uint32_t kind = 0;
  uint32_t dtype = 0;
  uint32_t reduce = 0;
  int64_t count = 0;  // elements per rank
  uint64_t seq = 0;   // the call's number in the group (or on the pair)
  int32_t root = -1;  // broadcast's source, a point-to-point peer
  int32_t tag = 0;
  char note[88] = {};
};
static_assert(sizeof(Fingerprint) == 128);

std::string_view call_name(CallKind kind);
// "all_reduce(sum) of 1024 float32", "broadcast from rank 0 of 3 int64".
std::string describe(const Fingerprint& f);
// Empty when every rank's fingerprint equals `mine`; else a message naming
// the differing calls (the same text on every rank).
std::string compare(const std::vector<Fingerprint>& all, int me);
// The transport slot of a point-to-point call's phase (0 and 1: the
// fingerprints, 2: the data): apart from the collectives' and per pair.
uint64_t p2p_slot(const Fingerprint& f, int phase);

// An engine's failure to communicate (a timeout, a lost peer): the group
// cannot be used after it.
class CommError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

// Collectives on host memory. Each throws CommError on a timeout or a lost
// peer; `tag` tells concurrent calls apart and is the same on every rank.
class Engine {
 public:
  virtual ~Engine() = default;
  // The memory the calls take: host addresses (gloo), or device addresses
  // of CUDA memory on device() (nccl).
  virtual bool device_memory() const { return false; }
  virtual int device() const { return -1; }
  // The group is broken: give up on the peers (NCCL's communicator abort).
  virtual void abort() {}
  // Whether point-to-point calls may run beside the collectives (each on a
  // thread), or must take their turn in the group's order.
  virtual bool concurrent_p2p() const { return true; }
  virtual void all_reduce(void* buf, std::size_t count, DType dtype, ReduceOp op, uint32_t tag,
                          Milliseconds timeout) = 0;
  virtual void broadcast(void* buf, std::size_t nbytes, int root, uint32_t tag,
                         Milliseconds timeout) = 0;
  // out: size() blocks of `nbytes`, rank r's input in block r.
  virtual void all_gather(const void* in, void* out, std::size_t nbytes, uint32_t tag,
                          Milliseconds timeout) = 0;
  virtual void barrier(uint32_t tag, Milliseconds timeout) = 0;
  virtual void send(const void* buf, std::size_t nbytes, int dst, uint64_t slot,
                    Milliseconds timeout) = 0;
  virtual void recv(void* buf, std::size_t nbytes, int src, uint64_t slot,
                    Milliseconds timeout) = 0;
};

// Connects `size` ranks through `store` (every rank's address goes in it).
// `hostname` or `iface` picks the local address the peers reach.
std::unique_ptr<Engine> make_gloo_engine(const std::shared_ptr<gloo::rendezvous::Store>& store,
                                         int rank, int size, Milliseconds timeout,
                                         const std::string& hostname, const std::string& iface);

// The rendezvous store of env:// and tcp://: rank 0 serves it on `port`.
std::shared_ptr<gloo::rendezvous::Store> make_tcp_store(const std::string& host, int port,
                                                        bool serve, Milliseconds timeout);
// file:///DIR
std::shared_ptr<gloo::rendezvous::Store> make_file_store(const std::string& dir,
                                                         Milliseconds timeout);
// The local address from which `host` is reached ("127.0.0.1" for loopback).
std::string local_address_towards(const std::string& host);

// NCCL through dlopen: the engine of the "nccl" backend, connected through
// `store` (rank 0's unique id goes in it) on CUDA device `device`. Throws
// DistributedError when NCCL or the CUDA runtime cannot be loaded or there
// is no device, naming what was looked for.
std::unique_ptr<Engine> make_nccl_engine(const std::shared_ptr<gloo::rendezvous::Store>& store,
                                         int rank, int size, int device, Milliseconds timeout);
// The CUDA device this rank's NCCL communicator uses: LOCAL_RANK (else the
// rank) modulo the devices the CUDA runtime sees.
int nccl_device_for(int rank);

// A tensor's bytes where the engine reads and writes them, for the length of
// a call. Host engines: the tensor's own memory when it is dense and host
// addressable, else a host copy, written back by finish(). Device engines:
// the address of the tensor's CUDA memory (a dense copy when it is not).
class HostBuffer {
 public:
  // `read`: the call reads the tensor's values (else it only writes them).
  HostBuffer(const Tensor& t, bool read, const Engine& engine);
  void* data() { return ptr_; }
  std::size_t nbytes() const { return nbytes_; }
  // Writes the call's result into the tensor (bumping its version).
  void finish();

 private:
  Tensor tensor_;  // the caller's
  Tensor dense_;   // contiguous, same device (the tensor itself when it is)
  void* ptr_ = nullptr;
  std::size_t nbytes_ = 0;
  std::vector<std::byte> copy_;  // when dense_ is not host addressable
};

}  // namespace bp::distributed::detail
