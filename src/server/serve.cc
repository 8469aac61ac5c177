#include "server/serve.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "http/api.h"
#include "server/http_server.h"
#include "server/store.h"

namespace delayq::server {

extern const char kDashboardHtml[];  // dashboard_assets.cc, generated from dashboard/

namespace {

// Samples every queue's stats into the API's history (the dashboard's charts).
class HistorySampler {
 public:
  HistorySampler(Queue& queue, http::History& history) : queue_(queue), history_(history) {
    thread_ = std::thread([this] { Run(); });
  }
  ~HistorySampler() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      auto stats = queue_.ListQueues();
      if (stats.ok()) history_.Add(SystemClock().NowMs(), *stats);
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(history_.interval_ms()), [this] { return stop_; });
    }
  }
  Queue& queue_;
  http::History& history_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Whether a listen host only accepts connections from this machine.
bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

// A token a client can send in an Authorization header: visible ASCII, no space (RFC 6750's
// b64token is narrower still). Found: a token with a NUL, a newline or padding was accepted, and
// no client could ever match it (or one cut at the NUL matched).
Status ValidateToken(const std::string& token) {
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument(fmt::format(
          "the bearer token has a character no client can send at position {} ({}): use letters, digits and "
          "-._~+/= only (--auth-token, --auth-token-file, DELAYQ_AUTH_TOKEN)",
          i + 1,
          c == ' '                ? "a space"
          : c < 0x20 || c == 0x7f ? "a control character"
                                  : "a non-ASCII byte"));
    }
  }
  return Status::Ok();
}

// The token from a file: its first line, without surrounding white space; the file must hold
// one, and should be readable by the server's user only.
Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument(fmt::format("--auth-token-file {}: cannot read it", path));
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(0, 1);
  if (token.empty()) {
    return Status::InvalidArgument(
        fmt::format("--auth-token-file {}: the first line is empty; put the token there", path));
  }
  return token;
}

}  // namespace

namespace {

// The token in force (from --auth-token-file when given) and whether the listen address may go
// without one; 0, or the exit code after saying what is wrong.
int CheckAuth(ServeOptions& o, const std::string& host) {
  if (!o.auth_token_file.empty()) {
    if (!o.auth_token.empty()) {
      spdlog::error("give --auth-token or --auth-token-file, not both");
      return 2;
    }
    auto token = ReadTokenFile(o.auth_token_file);
    if (!token.ok()) {
      spdlog::error("{}", token.status().message());
      return 2;
    }
    o.auth_token = *token;
  }
  if (Status valid = ValidateToken(o.auth_token); !valid.ok()) {
    spdlog::error("{}", valid.message());
    return 2;
  }
  // Anyone who can reach the port can use the whole API when there is no token.
  if (o.auth_token.empty() && !IsLoopback(host) && !o.insecure_no_auth) {
    spdlog::error(
        "--listen {} is reachable beyond this machine and no token is set: give --auth-token-file "
        "(or --auth-token / DELAYQ_AUTH_TOKEN), listen on 127.0.0.1, or accept the risk with "
        "--insecure-no-auth",
        o.listen);
    return 2;
  }
  return 0;
}

// The API server's options from the serve options (host and port are already set).
void ApplyHttpOptions(const ServeOptions& o, HttpServerOptions& http) {
  // Enqueues and acks no longer hold a thread through their fsync, so threads beyond the cores
  // mostly wake each other up (8 on 2 cores: 35 % fewer single-job requests/s than 4; see
  // docs/performance.md); a few spare ones cover the handlers that still wait. The Redis store
  // answers every call on the handler's thread while Redis replies, so it keeps 8.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  http.threads = o.threads > 0 ? o.threads : std::max(o.store == "embedded" ? 4 : 8, cores);
  http.max_body_bytes = o.max_body_bytes;
  http.max_connections = o.max_connections;
  http.max_body_memory = o.max_body_memory;
  http.max_connections_per_address = o.max_connections_per_address;
  http.header_timeout_s = o.header_timeout_s;
  http.tls_cert_file = o.tls_cert;
  http.tls_key_file = o.tls_key;
  http.tls_client_ca_file = o.tls_client_ca;
}

// The monitoring address: /metrics, /healthz, /readyz without the token, plain HTTP, on a thread
// of its own. nullptr with nothing to start; an error when the address is bad or taken.
Result<std::unique_ptr<HttpServer>> StartMonitoring(const std::string& listen, http::Api& api, std::thread& thread) {
  if (listen.empty()) return std::unique_ptr<HttpServer>{};
  HttpServerOptions m;
  if (!SplitHostPort(listen, &m.host, &m.port)) {
    return Status::InvalidArgument(
        fmt::format("--metrics-listen \"{}\" is not HOST:PORT (e.g. 127.0.0.1:9090)", listen));
  }
  m.threads = 1;
  m.max_body_bytes = 64 * 1024;
  m.max_connections = 256;
  auto monitoring = std::make_unique<HttpServer>(
      [&api](http::HttpRequest request, http::Reply reply) {
        return api.HandleMonitoring(std::move(request), std::move(reply));
      },
      m);
  if (Status started = monitoring->Start(); !started.ok()) {
    return Status::InvalidArgument("--metrics-listen: " + started.message());
  }
  thread = std::thread([server = monitoring.get()] { server->Run(false); });
  spdlog::info("metrics, health and readiness on http://{}:{} (no token)", m.host, monitoring->port());
  return monitoring;
}

// The first lines a user sees: where it serves, and try: lines that work as printed, with the
// certificate to trust and the token to send.
void PrintWelcome(const ServeOptions& o, const std::string& url, const std::string& store) {
  std::string curl = "curl -s";
  if (!o.tls_cert.empty()) curl += " --cacert " + o.tls_cert;
  if (!o.tls_client_ca.empty()) curl += " --cert CLIENT.pem --key CLIENT.key";
  if (!o.auth_token.empty()) curl += " -H \"Authorization: Bearer $DELAYQ_AUTH_TOKEN\"";
  std::printf(
      "delayq serving %s (store: %s%s%s)\n"
      "try:  %s --json '{\"payload\":{\"hello\":\"world\"},\"delay\":\"5s\"}' %s/v1/queues/demo/jobs\n"
      "      %s --json '{\"wait_ms\":10000}' %s/v1/queues/demo/reserve\n",
      url.c_str(), store.c_str(), o.auth_token.empty() ? "" : ", bearer token required",
      o.tls_client_ca.empty() ? "" : ", client certificate required", curl.c_str(), url.c_str(), curl.c_str(),
      url.c_str());
  std::fflush(stdout);
}

}  // namespace

int Serve(const ServeOptions& options) {
  // Buffers of 1 MiB and more (a large request's body and parse) are mmapped and so go back to
  // the system when freed; glibc would otherwise raise this threshold after the first large free
  // and keep later ones in its heap.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ServeOptions o = options;
  HttpServerOptions http;
  if (!SplitHostPort(o.listen, &http.host, &http.port)) {
    spdlog::error("--listen \"{}\" is not HOST:PORT (for example 127.0.0.1:7070)", o.listen);
    return 2;
  }
  if (int refused = CheckAuth(o, http.host); refused != 0) return refused;
  auto store = OpenStore(o);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return store.code() == Code::kInvalidArgument ? 2 : store.code() == Code::kUnavailable ? 5 : 1;
  }
  Queue& queue = *store->queue;
  std::atomic<bool> ready{true};
  http::ApiOptions api_options;
  api_options.auth_token = o.auth_token;
  api_options.allowed_hosts = o.allowed_hosts;
  api_options.max_waiting = o.max_waiting;
  api_options.stream_heartbeat_ms = o.stream_heartbeat_ms;
  api_options.ready = [&ready] { return ready.load(); };
  api_options.dashboard_html = kDashboardHtml;
  api_options.build = {store->kind, store->durability};
  api_options.access_log = o.access_log;
  http::Api api(queue, api_options);
  HistorySampler sampler(queue, api.history());

  ApplyHttpOptions(o, http);
  HttpServer server(api, http);
  Status s = server.Start();
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return s.code() == Code::kInvalidArgument ? 2 : 1;
  }
  std::thread monitoring_thread;
  auto monitoring = StartMonitoring(o.metrics_listen, api, monitoring_thread);
  if (!monitoring.ok()) {
    spdlog::error("{}", monitoring.status().message());
    return 2;
  }
  const std::string url =
      fmt::format("{}://{}:{}", o.tls_cert.empty() ? "http" : "https",
                  http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host, server.port());
  if (!o.port_file.empty()) {
    std::ofstream(o.port_file) << server.port() << "\n";
  }
  PrintWelcome(o, url, store->description);
  server.Run(true, [&] {
    ready = false;
    api.StopStreams();  // before the store closes: they end cleanly, their deliveries leased
    store->close();     // answers waiting reserves, flushes
  });
  if (*monitoring) {
    (*monitoring)->Stop();
    monitoring_thread.join();
  }
  store->close();
  spdlog::info("stopped");
  return 0;
}

}  // namespace delayq::server
