// Speaking HTTP/1.1 raw to a server under test: exact bytes, half-open and slow connections,
// connections from other loopback addresses (127.0.0.0/8 is all loopback on Linux).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace delayq::testing {

// A connected socket from `source` (an address of 127.0.0.0/8) to 127.0.0.1:`port`, with a
// receive timeout of `recv_timeout_s`; -1 when it cannot connect.
inline int ConnectFrom(int port, const char* source = "127.0.0.1", int recv_timeout_s = 10) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{recv_timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Everything the server sends on `fd` until it closes, the receive timeout passes, or `limit`
// bytes arrived.
inline std::string ReadAll(int fd, size_t limit = 1 << 20) {
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends raw bytes on a fresh connection, then its end (with `cork`, bytes and end leave in one
// segment, so the server reads them together), and returns everything the server answers until
// it closes or `limit` bytes arrived.
inline std::string RawExchange(int port, const std::string& bytes, size_t limit = 1 << 20, bool cork = false) {
  int fd = ConnectFrom(port);
  if (fd < 0) return "";
  const int on = 1;
  if (cork) ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out = ReadAll(fd, limit);
  ::close(fd);
  return out;
}

// The server's resident memory, as its /metrics reports it (-1 when it cannot be read).
inline double ResidentBytes(int port, const std::string& authorization = "") {
  std::string metrics =
      RawExchange(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization + "Connection: close\r\n\r\n");
  const std::string name = "\ndelayq_process_resident_memory_bytes ";
  const size_t at = metrics.find(name);
  return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size()));
}

inline std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A keep-alive reserve of one job that waits up to `wait_ms` (requests may follow it).
inline std::string WaitingReserve(const std::string& queue, int64_t wait_ms) {
  const std::string body = R"({"max":1,"wait_ms":)" + std::to_string(wait_ms) + "}";
  return "POST /v1/queues/" + queue +
         "/reserve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A keep-alive wait of up to `wait_ms` for job `id`'s outcome.
inline std::string WaitingGet(const std::string& queue, const std::string& id, int64_t wait_ms) {
  return "GET /v1/queues/" + queue + "/jobs/" + id + "?wait_ms=" + std::to_string(wait_ms) +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
}

inline int StatusOf(const std::string& response) {
  if (response.size() < 12 || response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

}  // namespace delayq::testing
