// Rendezvous stores: where the ranks leave their addresses for each other.
// Gloo ships file and hash stores; env:// and tcp:// need one over TCP,
// served by rank 0 (as PyTorch's TCPStore is).
// First: Boost.Asio 1.74 uses std::exchange without including <utility>.
#include <utility>
// Then Gloo, the standard library and Boost.
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>

#include <array>
#include <boost/asio.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "engine.h"

namespace bp::distributed::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// The protocol: a request is an op byte, the key's and the value's lengths
// (u32, host order: both ends are this library) and the bytes. kSet is
// answered with one byte once stored, kGet with the value's length and
// bytes once the key exists.
enum : uint8_t { kSet = 1, kGet = 2 };
struct Header {
  uint8_t op = 0;
  uint32_t key_len = 0;
  uint32_t value_len = 0;
};
constexpr std::size_t kHeaderBytes = 9;
constexpr uint32_t kMaxBytes = 64u << 20;

class Server {
 public:
  explicit Server(int port) : acceptor_(io_) {
    boost::system::error_code ec;
    // Both address families where the machine has IPv6, else IPv4 only.
    acceptor_.open(tcp::v6(), ec);
    if (!ec) acceptor_.set_option(asio::ip::v6_only(false), ec);
    tcp::endpoint ep(ec ? tcp::v4() : tcp::v6(), static_cast<unsigned short>(port));
    if (ec) {
      acceptor_.close();
      acceptor_.open(tcp::v4());
    }
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep, ec);
    if (ec)
      throw DistributedError(concat("[distributed] rank 0 cannot serve the rendezvous on port ",
                                    port, ": ", ec.message(),
                                    " (another program, or a previous run, holds it?)"));
    acceptor_.listen();
    accept();
    // A handler that throws must not end rank 0: logged, and serving goes on.
    thread_ = std::thread([this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "[distributed] rendezvous store: %s\n", e.what());
        }
      }
    });
  }
  ~Server() {
    io_.stop();
    thread_.join();
  }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    Session(Server& s, tcp::socket sock) : server(s), socket(std::move(sock)) {}
    Server& server;
    tcp::socket socket;
    std::array<char, kHeaderBytes> head{};
    Header h;
    std::string key;
    std::vector<char> value;
    std::vector<char> reply;

    void read_request() {
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(head), [self](auto ec, std::size_t) {
        if (ec) return;
        std::memcpy(&self->h.op, &self->head[0], 1);
        std::memcpy(&self->h.key_len, &self->head[1], 4);
        std::memcpy(&self->h.value_len, &self->head[5], 4);
        if (self->h.key_len > kMaxBytes || self->h.value_len > kMaxBytes) return;  // drop it
        self->key.resize(self->h.key_len);
        self->value.resize(self->h.value_len);
        std::array<asio::mutable_buffer, 2> bufs{asio::buffer(self->key),
                                                 asio::buffer(self->value)};
        asio::async_read(self->socket, bufs, [self](auto ec2, std::size_t) {
          if (!ec2) self->server.handle(self);
        });
      });
    }
    void send_reply() {
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(reply), [self](auto ec, std::size_t) {
        if (!ec) self->read_request();
      });
    }
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted) return;  // stopping
      if (!ec) {
        boost::system::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(*this, std::move(sock))->read_request();
      }
      accept();
    });
  }

  void answer_get(const std::shared_ptr<Session>& s, const std::vector<char>& v) {
    const auto n = static_cast<uint32_t>(v.size());
    s->reply.resize(4 + v.size());
    std::memcpy(s->reply.data(), &n, 4);
    if (n) std::memcpy(s->reply.data() + 4, v.data(), n);
    s->send_reply();
  }

  void handle(const std::shared_ptr<Session>& s) {
    if (s->h.op == kSet) {
      auto& v = data_[s->key] = std::move(s->value);
      auto waiting = std::move(waiters_[s->key]);
      waiters_.erase(s->key);
      for (auto& w : waiting) answer_get(w, v);
      s->reply.assign(1, 1);
      s->send_reply();
    } else if (s->h.op == kGet) {
      auto it = data_.find(s->key);
      if (it != data_.end())
        answer_get(s, it->second);
      else
        waiters_[s->key].push_back(s);  // answered by the set
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::map<std::string, std::vector<char>> data_;
  std::map<std::string, std::vector<std::shared_ptr<Session>>> waiters_;
  std::thread thread_;
};

class TcpStore final : public gloo::rendezvous::Store {
 public:
  TcpStore(const std::string& host, int port, bool serve, Milliseconds timeout)
      : host_(host), port_(port), timeout_(timeout), socket_(io_) {
    if (serve) server_ = std::make_unique<Server>(port);
    connect();
  }

  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard lock(mu_);
    const auto deadline = Clock::now() + timeout_;
    request(kSet, key, data, deadline, timeout_);
    char ack = 0;
    run(deadline, timeout_, "store a key",
        [&](auto done) { asio::async_read(socket_, asio::buffer(&ack, 1), done); });
  }

  std::vector<char> get(const std::string& key) override { return get(key, timeout_); }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Milliseconds& timeout) override {
    for (const auto& k : keys) get(k, timeout);
  }

 private:
  std::vector<char> get(const std::string& key, Milliseconds timeout) {
    std::lock_guard lock(mu_);
    const auto deadline = Clock::now() + timeout;
    request(kGet, key, {}, deadline, timeout);
    uint32_t n = 0;
    run(deadline, timeout, concat("get key '", key, "'"),
        [&](auto done) { asio::async_read(socket_, asio::buffer(&n, 4), done); });
    std::vector<char> v(n);
    run(deadline, timeout, "read a value",
        [&](auto done) { asio::async_read(socket_, asio::buffer(v), done); });
    return v;
  }

  void request(uint8_t op, const std::string& key, const std::vector<char>& value,
               Clock::time_point deadline, Milliseconds timeout) {
    std::array<char, kHeaderBytes> head{};
    const auto kl = static_cast<uint32_t>(key.size());
    const auto vl = static_cast<uint32_t>(value.size());
    head[0] = static_cast<char>(op);
    std::memcpy(&head[1], &kl, 4);
    std::memcpy(&head[5], &vl, 4);
    std::array<asio::const_buffer, 3> bufs{asio::buffer(head), asio::buffer(key),
                                           asio::buffer(value)};
    run(deadline, timeout, "send a request",
        [&](auto done) { asio::async_write(socket_, bufs, done); });
  }

  // Runs one asynchronous operation to its end or the deadline.
  template <class Start>
  void run(Clock::time_point deadline, Milliseconds timeout, const std::string& what,
           Start&& start) {
    if (!socket_.is_open())
      throw DistributedError(
          concat("[distributed] the rendezvous store at ", host_, ':', port_, " was lost earlier"));
    boost::system::error_code result = asio::error::would_block;
    io_.restart();
    start([&](const boost::system::error_code& ec, std::size_t) { result = ec; });
    io_.run_until(deadline);
    if (result == asio::error::would_block) {
      socket_.close();
      io_.restart();
      io_.poll();  // the cancelled handler
      throw DistributedError(concat("[distributed] timed out after ", timeout.count(),
                                    " ms waiting to ", what, " at the rendezvous store ", host_,
                                    ':', port_, " (did every rank start?)"));
    }
    if (result) {
      socket_.close();
      throw DistributedError(concat("[distributed] the rendezvous store at ", host_, ':', port_,
                                    " failed to ", what, ": ", result.message()));
    }
  }

  void connect() {
    const auto deadline = Clock::now() + timeout_;
    std::string last = "no address";
    tcp::resolver resolver(io_);
    while (Clock::now() < deadline) {
      boost::system::error_code ec;
      auto endpoints = resolver.resolve(host_, std::to_string(port_), ec);
      if (!ec) {
        for (const auto& ep : endpoints) {
          socket_.close();
          socket_.connect(ep.endpoint(), ec);
          if (!ec) {
            socket_.set_option(tcp::no_delay(true));
            return;
          }
        }
      }
      last = ec.message();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is not up yet
    }
    throw DistributedError(concat("[distributed] could not reach the rendezvous store at ", host_,
                                  ':', port_, " within ", timeout_.count(), " ms (", last,
                                  "): rank 0 serves it; check MASTER_ADDR and MASTER_PORT"));
  }

  std::string host_;
  int port_;
  Milliseconds timeout_;
  std::unique_ptr<Server> server_;  // rank 0 only
  std::mutex mu_;
  asio::io_context io_;
  tcp::socket socket_;
};

// Gloo's file store, with the group's timeout on every wait.
class FileStore final : public gloo::rendezvous::Store {
 public:
  FileStore(const std::string& dir, Milliseconds timeout)
      : dir_(dir), store_(dir), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    try {
      store_.set(key, data);
    } catch (const std::exception& e) {
      throw DistributedError(concat("[distributed] cannot write key '", key, "' in ", dir_, ": ",
                                    e.what(), " (a previous run's directory? use a fresh one)"));
    }
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    return store_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Milliseconds& timeout) override {
    try {
      store_.wait(keys, timeout);
    } catch (const std::exception& e) {
      throw DistributedError(concat("[distributed] timed out after ", timeout.count(),
                                    " ms waiting for the other ranks in ", dir_, ": ", e.what()));
    }
  }

 private:
  std::string dir_;
  gloo::rendezvous::FileStore store_;
  Milliseconds timeout_;
};

}  // namespace

std::shared_ptr<gloo::rendezvous::Store> make_tcp_store(const std::string& host, int port,
                                                        bool serve, Milliseconds timeout) {
  return std::make_shared<TcpStore>(host, port, serve, timeout);
}

std::shared_ptr<gloo::rendezvous::Store> make_file_store(const std::string& dir,
                                                         Milliseconds timeout) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw DistributedError(
        concat("[distributed] cannot make the rendezvous directory ", dir, ": ", ec.message()));
  return std::make_shared<FileStore>(dir, timeout);
}

std::string local_address_towards(const std::string& host) {
  try {
    asio::io_context io;
    asio::ip::udp::resolver resolver(io);
    auto endpoints = resolver.resolve(host, "9");
    asio::ip::udp::socket s(io);
    s.connect(endpoints.begin()->endpoint());  // no packet: it only picks a route
    return s.local_endpoint().address().to_string();
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace bp::distributed::detail
