// The "nccl" engine: NVIDIA's NCCL on CUDA memory, loaded at run time (the
// library builds and runs where NCCL is missing; asking for the backend
// there is an error naming where it looked). NCCL and the CUDA runtime are
// opened with dlopen; the few types used are declared here as nccl.h and
// cuda_runtime_api.h define them (stable C ABIs).
#include <dlfcn.h>
#include <gloo/rendezvous/store.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "engine.h"

namespace bp::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

// nccl.h
using ncclComm_t = void*;
struct ncclUniqueId {
  char internal[128];
};
enum : int { ncclSuccess = 0, ncclInProgress = 7 };
enum : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt64 = 4,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
};
enum : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
// cuda_runtime_api.h
using cudaStream_t = void*;
enum : int { cudaSuccess = 0, cudaErrorNotReady = 600 };
constexpr unsigned kCudaStreamNonBlocking = 1;

struct Api {
  void* nccl = nullptr;
  void* cudart = nullptr;
  std::string nccl_path, error;
  int version = 0;
  int (*ncclGetVersion)(int*) = nullptr;
  int (*ncclGetUniqueId)(ncclUniqueId*) = nullptr;
  int (*ncclCommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  int (*ncclCommDestroy)(ncclComm_t) = nullptr;
  int (*ncclCommAbort)(ncclComm_t) = nullptr;
  int (*ncclCommGetAsyncError)(ncclComm_t, int*) = nullptr;
  const char* (*ncclGetErrorString)(int) = nullptr;
  int (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*ncclBroadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*ncclAllGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*ncclSend)(const void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*ncclRecv)(void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  int (*cudaGetDeviceCount)(int*) = nullptr;
  int (*cudaSetDevice)(int) = nullptr;
  int (*cudaStreamCreateWithFlags)(cudaStream_t*, unsigned) = nullptr;
  int (*cudaStreamQuery)(cudaStream_t) = nullptr;
  int (*cudaStreamDestroy)(cudaStream_t) = nullptr;
  const char* (*cudaGetErrorString)(int) = nullptr;
};

void* open_first(const std::vector<std::string>& names, std::string& opened, std::string& tried) {
  for (const std::string& n : names) {
    if (n.empty()) continue;
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      opened = n;
      return h;
    }
    tried += (tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

template <class F>
bool bind(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return fn != nullptr;
}

// Opened once per process; an error is kept and repeated.
const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("BACKPLANE_NCCL_LIBRARY");
    std::string tried;
    a.nccl = open_first({env ? env : "", "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                         "/usr/local/cuda/lib/libnccl.so.2"},
                        a.nccl_path, tried);
    if (!a.nccl) {
      a.error = "NCCL was not found (tried " + tried + "; BACKPLANE_NCCL_LIBRARY names another)";
      return;
    }
    std::string cudart_path, tried_rt;
    a.cudart = open_first({"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                           "/usr/local/cuda/lib64/libcudart.so"},
                          cudart_path, tried_rt);
    if (!a.cudart) {
      a.error = "the CUDA runtime was not found (tried " + tried_rt + ")";
      return;
    }
    std::string missing;
    bind(a.nccl, "ncclGetVersion", a.ncclGetVersion, missing);
    bind(a.nccl, "ncclGetUniqueId", a.ncclGetUniqueId, missing);
    bind(a.nccl, "ncclCommInitRank", a.ncclCommInitRank, missing);
    bind(a.nccl, "ncclCommDestroy", a.ncclCommDestroy, missing);
    bind(a.nccl, "ncclCommAbort", a.ncclCommAbort, missing);
    bind(a.nccl, "ncclCommGetAsyncError", a.ncclCommGetAsyncError, missing);
    bind(a.nccl, "ncclGetErrorString", a.ncclGetErrorString, missing);
    bind(a.nccl, "ncclAllReduce", a.ncclAllReduce, missing);
    bind(a.nccl, "ncclBroadcast", a.ncclBroadcast, missing);
    bind(a.nccl, "ncclAllGather", a.ncclAllGather, missing);
    bind(a.nccl, "ncclSend", a.ncclSend, missing);
    bind(a.nccl, "ncclRecv", a.ncclRecv, missing);
    bind(a.cudart, "cudaGetDeviceCount", a.cudaGetDeviceCount, missing);
    bind(a.cudart, "cudaSetDevice", a.cudaSetDevice, missing);
    bind(a.cudart, "cudaStreamCreateWithFlags", a.cudaStreamCreateWithFlags, missing);
    bind(a.cudart, "cudaStreamQuery", a.cudaStreamQuery, missing);
    bind(a.cudart, "cudaStreamDestroy", a.cudaStreamDestroy, missing);
    bind(a.cudart, "cudaGetErrorString", a.cudaGetErrorString, missing);
    if (!missing.empty()) {
      a.error = a.nccl_path + " or the CUDA runtime lacks " + missing;
      return;
    }
    a.ncclGetVersion(&a.version);
  });
  if (!a.error.empty()) throw DistributedError("[distributed] the nccl backend: " + a.error);
  return a;
}

std::string version_text(int v) { return concat(v / 10000, '.', (v / 100) % 100, '.', v % 100); }

int nccl_dtype(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::UInt8:
      return ncclUint8;
    case DType::Int8:
      return ncclInt8;
    case DType::Int32:
      return ncclInt32;
    case DType::Int64:
      return ncclInt64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Int16:
      break;
  }
  throw TypeError(concat("[distributed] NCCL has no ", name(d), " (PyTorch refuses it too)"));
}

class NcclEngine final : public Engine {
 public:
  NcclEngine(ncclComm_t comm, cudaStream_t stream, int device)
      : comm_(comm), stream_(stream), device_(device) {}
  ~NcclEngine() override {
    const Api& a = api();
    a.cudaSetDevice(device_);
    if (aborted_)
      a.ncclCommAbort(comm_);
    else
      a.ncclCommDestroy(comm_);
    a.cudaStreamDestroy(stream_);
  }
  bool device_memory() const override { return true; }
  // NCCL calls must be issued in the same order on every rank: point-to-point
  // calls take their turn with the collectives.
  bool concurrent_p2p() const override { return false; }
  void abort() override {
    std::lock_guard lock(mu_);
    if (!aborted_) api().ncclCommAbort(comm_);
    aborted_ = true;
  }
  int device() const override { return device_; }

  void all_reduce(void* buf, std::size_t count, DType dtype, ReduceOp op, uint32_t,
                  Milliseconds timeout) override {
    if (count == 0) return;
    const Api& a = api();
    int nop = op == ReduceOp::Sum       ? ncclSum
              : op == ReduceOp::Product ? ncclProd
              : op == ReduceOp::Min     ? ncclMin
              : op == ReduceOp::Max     ? ncclMax
                                        : ncclAvg;
    if (dtype == DType::Bool)
      nop = (op == ReduceOp::Sum || op == ReduceOp::Max) ? ncclMax : ncclMin;
    if (nop == ncclAvg && a.version < 21000)
      throw NotImplementedError(
          concat("[distributed] avg needs NCCL 2.10 or later; this is ", version_text(a.version)));
    run("allreduce", timeout,
        [&] { return a.ncclAllReduce(buf, buf, count, nccl_dtype(dtype), nop, comm_, stream_); });
  }
  void broadcast(void* buf, std::size_t nbytes, int root, uint32_t, Milliseconds timeout) override {
    if (nbytes == 0) return;
    run("broadcast", timeout,
        [&] { return api().ncclBroadcast(buf, buf, nbytes, ncclUint8, root, comm_, stream_); });
  }
  void all_gather(const void* in, void* out, std::size_t nbytes, uint32_t,
                  Milliseconds timeout) override {
    if (nbytes == 0) return;
    run("allgather", timeout,
        [&] { return api().ncclAllGather(in, out, nbytes, ncclUint8, comm_, stream_); });
  }
  void barrier(uint32_t, Milliseconds) override {
    throw InternalError("[distributed] the nccl engine's barrier runs on the host engine");
  }
  void send(const void* buf, std::size_t nbytes, int dst, uint64_t, Milliseconds timeout) override {
    if (nbytes == 0) return;
    run("send", timeout,
        [&] { return api().ncclSend(buf, nbytes, ncclUint8, dst, comm_, stream_); });
  }
  void recv(void* buf, std::size_t nbytes, int src, uint64_t, Milliseconds timeout) override {
    if (nbytes == 0) return;
    run("recv", timeout,
        [&] { return api().ncclRecv(buf, nbytes, ncclUint8, src, comm_, stream_); });
  }

 private:
  // Enqueues the call on the engine's stream and waits for it, watching
  // NCCL's asynchronous errors; past the timeout the communicator is
  // aborted (NCCL cannot take back a collective in flight).
  template <class F>
  void run(const char* what, Milliseconds timeout, F&& enqueue) {
    const Api& a = api();
    if (aborted_) throw CommError("the NCCL communicator was aborted earlier");
    a.cudaSetDevice(device_);
    if (int r = enqueue(); r != ncclSuccess && r != ncclInProgress)
      throw CommError(concat("NCCL's ", what, " failed: ", a.ncclGetErrorString(r)));
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const int q = a.cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady)
        throw CommError(concat("CUDA failed during NCCL's ", what, ": ", a.cudaGetErrorString(q)));
      int async = ncclSuccess;
      a.ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        abort();
        throw CommError(concat("NCCL's ", what, " failed: ", a.ncclGetErrorString(async)));
      }
      if (Clock::now() > deadline) {
        abort();
        throw CommError(concat("timed out after ", timeout.count(),
                               " ms waiting for the other ranks (", "NCCL's ", what,
                               "; the communicator was aborted)"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  std::mutex mu_;  // abort() may come from another call's thread
  std::atomic<bool> aborted_{false};
};

}  // namespace

int nccl_device_for(int rank) {
  const Api& a = api();
  int count = 0;
  if (int r = a.cudaGetDeviceCount(&count); r != cudaSuccess || count == 0)
    throw DistributedError(
        concat("[distributed] the nccl backend needs a CUDA device; the CUDA "
               "runtime sees none (",
               r != cudaSuccess ? a.cudaGetErrorString(r) : "0 devices", "). NCCL ",
               version_text(a.version), " is at ", a.nccl_path));
  const char* local = std::getenv("LOCAL_RANK");
  int which = rank;
  if (local && *local) {
    char* end = nullptr;
    const long v = std::strtol(local, &end, 10);
    BP_CHECK(*end == '\0' && v >= 0 && v < (1 << 20),
             "[distributed] LOCAL_RANK must be a "
             "non-negative integer, not '",
             local, "'");
    which = static_cast<int>(v);
  }
  return which % count;
}

std::unique_ptr<Engine> make_nccl_engine(const std::shared_ptr<gloo::rendezvous::Store>& store,
                                         int rank, int size, int device, Milliseconds timeout) {
  const Api& a = api();
  ncclUniqueId id{};
  if (rank == 0) {
    if (int r = a.ncclGetUniqueId(&id); r != ncclSuccess)
      throw DistributedError(
          concat("[distributed] ncclGetUniqueId failed: ", a.ncclGetErrorString(r)));
    store->set("nccl_unique_id", std::vector<char>(id.internal, id.internal + sizeof id.internal));
  } else {
    store->wait({"nccl_unique_id"}, timeout);
    const std::vector<char> v = store->get("nccl_unique_id");
    BP_CHECK(v.size() == sizeof id.internal, "[distributed] rank 0's NCCL id has ", v.size(),
             " bytes, not ", sizeof id.internal);
    std::memcpy(id.internal, v.data(), v.size());
  }
  if (int r = a.cudaSetDevice(device); r != cudaSuccess)
    throw DistributedError(
        concat("[distributed] cudaSetDevice(", device, "): ", a.cudaGetErrorString(r)));
  ncclComm_t comm = nullptr;
  if (int r = a.ncclCommInitRank(&comm, size, id, rank); r != ncclSuccess)
    throw DistributedError(concat("[distributed] ncclCommInitRank (rank ", rank, " of ", size,
                                  ", CUDA device ", device, ") failed: ", a.ncclGetErrorString(r)));
  cudaStream_t stream = nullptr;
  if (int r = a.cudaStreamCreateWithFlags(&stream, kCudaStreamNonBlocking); r != cudaSuccess) {
    a.ncclCommDestroy(comm);
    throw DistributedError(concat("[distributed] cudaStreamCreate: ", a.cudaGetErrorString(r)));
  }
  return std::make_unique<NcclEngine>(comm, stream, device);
}

}  // namespace bp::distributed::detail
