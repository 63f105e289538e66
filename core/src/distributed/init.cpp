// Making process groups: init methods, the environment, the default group.
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>

#include "group.h"

namespace bp::distributed {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int parse_int(const std::string& text, const char* what) {
  int v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  BP_CHECK(!text.empty() && ec == std::errc() && p == end, "[init_process_group] ", what,
           " must be an integer, not '", text, "'");
  return v;
}

int from_env(int given, const char* name) {
  if (given >= 0) return given;
  const std::string v = env(name);
  BP_CHECK(!v.empty(), "[init_process_group] ", name,
           " is not set: give it, or start the program with `backplane launch` (it sets RANK, "
           "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  return parse_int(v, name);
}

// A store that puts a prefix before every key: one rendezvous store serves
// every group made through it, each group under a prefix of its own.
class Prefixed final : public gloo::rendezvous::Store {
 public:
  Prefixed(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}
  void set(const std::string& k, const std::vector<char>& d) override {
    base_->set(prefix_ + k, d);
  }
  std::vector<char> get(const std::string& k) override { return base_->get(prefix_ + k); }
  void wait(const std::vector<std::string>& keys) override { base_->wait(with_prefix(keys)); }
  void wait(const std::vector<std::string>& keys, const Milliseconds& t) override {
    base_->wait(with_prefix(keys), t);
  }

 private:
  std::vector<std::string> with_prefix(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

// The stores in use, by init method, and how many groups each has made
// (every rank makes its groups in the same order, so the counts agree).
struct Stores {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<gloo::rendezvous::Store>> live;
  std::map<std::string, int> made;
};
Stores& stores() {
  static Stores* s = new Stores;  // never destroyed: groups may outlive static destructors
  return *s;
}

struct Rendezvous {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string hostname;  // the address this rank's peers reach it at
};

Rendezvous rendezvous(const GroupOptions& o, int rank) {
  const std::string& m = o.init_method;
  std::string host;
  int port = 0;
  std::string key;
  if (m == "env://") {
    host = env("MASTER_ADDR");
    BP_CHECK(!host.empty(),
             "[init_process_group] env:// needs MASTER_ADDR and MASTER_PORT (as "
             "`backplane launch` sets them)");
    const std::string p = env("MASTER_PORT");
    BP_CHECK(!p.empty(), "[init_process_group] env:// needs MASTER_PORT");
    port = parse_int(p, "MASTER_PORT");
    key = "tcp://" + host + ":" + p;
  } else if (m.rfind("tcp://", 0) == 0) {
    const std::string hp = m.substr(6);
    const auto colon = hp.rfind(':');
    BP_CHECK(colon != std::string::npos && colon > 0, "[init_process_group] '", m,
             "' is not tcp://HOST:PORT");
    host = hp.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    port = parse_int(hp.substr(colon + 1), "the port of tcp://HOST:PORT");
    key = m;
  } else if (m.rfind("file://", 0) == 0) {
    key = m;
  } else {
    throw ValueError(concat("[init_process_group] unknown init_method '", m,
                            "': env://, tcp://HOST:PORT or file:///DIR"));
  }
  if (!host.empty())
    BP_CHECK(port > 0 && port < 65536, "[init_process_group] port ", port, " is out of range");

  Stores& s = stores();
  std::lock_guard lock(s.mu);
  auto base = s.live[key].lock();
  if (!base) {
    if (host.empty())
      base = detail::make_file_store(m.substr(7), o.timeout);
    else
      base = detail::make_tcp_store(host, port, rank == 0, o.timeout);
    s.live[key] = base;
  }
  Rendezvous r;
  r.store = std::make_shared<Prefixed>(base, "group" + std::to_string(s.made[key]++) + "/");
  // Peers reach this rank at the address it uses towards rank 0; with a
  // file store, on loopback (GLOO_SOCKET_IFNAME picks an interface instead).
  r.hostname = host.empty() ? "127.0.0.1" : detail::local_address_towards(host);
  if (r.hostname.empty()) r.hostname = "127.0.0.1";
  return r;
}

std::mutex default_mu;
std::shared_ptr<ProcessGroup> default_pg;

}  // namespace

std::shared_ptr<ProcessGroup> new_process_group(const GroupOptions& o) {
  BP_CHECK(o.backend == "gloo" || o.backend == "nccl", "[init_process_group] unknown backend '",
           o.backend,
           "': gloo (host memory; tensors of other devices are staged through host "
           "buffers) or nccl (CUDA tensors)");
  const int size = from_env(o.world_size, "WORLD_SIZE");
  const int rank = from_env(o.rank, "RANK");
  BP_CHECK(size >= 1, "[init_process_group] the world size must be at least 1, not ", size);
  BP_CHECK_INDEX(rank >= 0 && rank < size, "[init_process_group] rank ", rank,
                 " is out of range for a world of ", size);
  BP_CHECK(o.timeout.count() > 0, "[init_process_group] the timeout must be positive");
  // A peer that went away must show as an error, not kill this process.
  struct sigaction sa {};
  if (sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
  bool check = o.check_calls;
  if (env("BACKPLANE_DIST_CHECK") == "0") check = false;

  // NCCL and a device first: a missing one is said before any waiting.
  const int device = o.backend == "nccl" ? detail::nccl_device_for(rank) : -1;
  Rendezvous r = rendezvous(o, rank);
  auto host = detail::make_gloo_engine(r.store, rank, size, o.timeout, r.hostname,
                                       env("GLOO_SOCKET_IFNAME"));
  // Ranks that disagree on checking would exchange different messages:
  // settled first, with a fixed size.
  {
    const char mine = check ? 1 : 0;
    std::vector<char> all(static_cast<std::size_t>(size));
    host->all_gather(&mine, all.data(), 1, 0xFFFFFFFFu, o.timeout);
    for (int q = 0; q < size; ++q)
      BP_CHECK(all[static_cast<std::size_t>(q)] == mine,
               "[init_process_group] the ranks disagree on "
               "checking calls: rank ",
               rank, " has check_calls ", check ? "on" : "off", ", rank ", q, " has it ",
               mine ? "off" : "on", " (BACKPLANE_DIST_CHECK and GroupOptions must agree)");
  }
  std::unique_ptr<detail::Engine> engine, control;
  if (o.backend == "nccl") {
    engine = detail::make_nccl_engine(r.store, rank, size, device, o.timeout);
    control = std::move(host);  // fingerprints, point-to-point checks, barriers
  } else {
    engine = std::move(host);
  }
  auto pg = std::make_shared<ProcessGroup>(std::make_unique<ProcessGroup::Impl>(
      std::move(engine), std::move(control), r.store, rank, size, o.backend, o.timeout, check));
  // Every rank has joined when this returns: rank 0's store may then go.
  pg->barrier();
  return pg;
}

void init_process_group(const GroupOptions& o) {
  std::lock_guard lock(default_mu);
  BP_CHECK(!default_pg,
           "[init_process_group] the default group is already initialised "
           "(destroy_process_group() first)");
  default_pg = new_process_group(o);
}

bool is_initialized() {
  std::lock_guard lock(default_mu);
  return static_cast<bool>(default_pg);
}

ProcessGroup& default_group() {
  std::lock_guard lock(default_mu);
  BP_CHECK(default_pg,
           "[distributed] the default process group is not initialised: call "
           "bp::distributed::init_process_group() first");
  return *default_pg;
}

void destroy_process_group() {
  std::shared_ptr<ProcessGroup> pg;
  {
    std::lock_guard lock(default_mu);
    pg = std::move(default_pg);
  }
}

int get_rank() { return default_group().rank(); }
int get_world_size() { return default_group().size(); }

Work all_reduce(const Tensor& t, ReduceOp op, CallOptions o) {
  return default_group().all_reduce(t, op, o);
}
Work broadcast(const Tensor& t, int src, CallOptions o) {
  return default_group().broadcast(t, src, o);
}
Work all_gather(const std::vector<Tensor>& outs, const Tensor& in, CallOptions o) {
  return default_group().all_gather(outs, in, o);
}
Work all_gather_into_tensor(const Tensor& out, const Tensor& in, CallOptions o) {
  return default_group().all_gather_into_tensor(out, in, o);
}
Work reduce_scatter(const Tensor& out, const std::vector<Tensor>& ins, ReduceOp op, CallOptions o) {
  return default_group().reduce_scatter(out, ins, op, o);
}
Work reduce_scatter_tensor(const Tensor& out, const Tensor& in, ReduceOp op, CallOptions o) {
  return default_group().reduce_scatter_tensor(out, in, op, o);
}
Work barrier(CallOptions o) { return default_group().barrier(o); }
Work send(const Tensor& t, int dst, int tag, CallOptions o) {
  return default_group().send(t, dst, tag, o);
}
Work recv(const Tensor& t, int src, int tag, CallOptions o) {
  return default_group().recv(t, src, tag, o);
}

}  // namespace bp::distributed
