// A TCP proxy on 127.0.0.1 that can hold back what clients send once it contains a given text
// (e.g. a Redis PSUBSCRIBE), until the test releases it: a way to put a message between a command
// being sent and the server taking it. Plain blocking sockets and a thread per direction; a test
// tool for a few connections, not a server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace delayq::testing {

class HoldingProxy {
 public:
  HoldingProxy(int upstream_port, std::string hold_text)
      : upstream_port_(upstream_port), hold_text_(std::move(hold_text)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = Loopback(0);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 16) != 0) {
      throw std::runtime_error("the proxy cannot listen on 127.0.0.1");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_ = std::thread([this] { Accept(); });
  }
  ~HoldingProxy() {
    Release();
    ::shutdown(listener_, SHUT_RDWR);  // accept() returns
    accept_.join();                    // no pump starts after this
    ::close(listener_);
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  HoldingProxy(const HoldingProxy&) = delete;
  HoldingProxy& operator=(const HoldingProxy&) = delete;

  int port() const { return port_; }
  // Blocks until `n` sends containing the text are held.
  void AwaitHeld(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return held_ >= n; });
  }
  // Lets what is held, and everything later, through.
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }

  void Accept() {
    while (true) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr = Loopback(upstream_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      std::lock_guard lock(mu_);
      fds_.insert(fds_.end(), {client, server});
      threads_.emplace_back([this, client, server] { Pump(client, server, true); });
      threads_.emplace_back([this, client, server] { Pump(server, client, false); });
    }
  }

  void Pump(int from, int to, bool may_hold) {
    char buf[16384];
    while (true) {
      const ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0) break;
      if (may_hold && std::string_view(buf, static_cast<size_t>(n)).find(hold_text_) != std::string_view::npos) {
        std::unique_lock lock(mu_);
        ++held_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return released_; });
      }
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  const int upstream_port_;
  const std::string hold_text_;
  int listener_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0;           // guarded by mu_
  bool released_ = false;  // guarded by mu_
  std::vector<int> fds_;   // guarded by mu_
  std::thread accept_;
  std::vector<std::thread> threads_;  // the pumps; guarded by mu_ while accept_ runs
};

}  // namespace delayq::testing
