#include "store/redis/redis_client.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

namespace delayq::redis {
namespace {

Value Convert(const redisReply* r) {
  Value v;
  if (!r) return v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = Value::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = Value::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = Value::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = Value::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = Value::kArray;
      v.array.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.array.push_back(Convert(r->element[i]));
      break;
    default: break;
  }
  return v;
}

// An error reply that says "this node cannot serve now" rather than "this command is wrong":
// the caller gets a Status (kUnavailable: HTTP 503, try again), not an error Value. Empty for
// every other reply.
std::optional<Status> TransientError(const Value& v, const Endpoint& node) {
  if (!v.is_error()) return std::nullopt;
  const std::string& e = v.str;
  auto starts = [&](const char* p) { return e.rfind(p, 0) == 0; };
  const std::string at = node.ToString();
  if (starts("LOADING")) {
    return Status::Unavailable(
        fmt::format("Redis at {} is loading its data set into memory (it restarted); retry shortly", at));
  }
  if (starts("BUSY")) {
    return Status::Unavailable(fmt::format("Redis at {} is busy running a script; retry shortly", at));
  }
  if (starts("MASTERDOWN")) {
    return Status::Unavailable(
        fmt::format("Redis at {} is a replica whose link to its master is down; retry shortly", at));
  }
  if (starts("READONLY")) {
    return Status::Unavailable(
        fmt::format("Redis at {} is a read-only replica (a failover happened?); point delayq at the master", at));
  }
  if (starts("NOREPLICAS")) {
    return Status::Unavailable(
        fmt::format("Redis at {} refuses writes: fewer replicas are connected than min-replicas-to-write", at));
  }
  if (starts("MISCONF")) {
    return Status::Unavailable(
        fmt::format("Redis at {} refuses writes because it cannot save its snapshot (is its disk full?): {}", at, e));
  }
  if (starts("TRYAGAIN") || starts("CLUSTERDOWN")) {
    return Status::Unavailable(fmt::format("the Redis Cluster cannot serve this slot now ({}); retry shortly", e));
  }
  if (starts("OOM")) {
    return Status::ResourceExhausted(
        fmt::format("Redis at {} is out of memory (maxmemory reached); nothing was written: {}", at, e));
  }
  return std::nullopt;
}

timeval Tv(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

}  // namespace

Result<std::vector<Value>> DecodeReplies(std::string_view resp) {
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader(redisReaderCreate(), redisReaderFree);
  if (!reader || redisReaderFeed(reader.get(), resp.data(), resp.size()) != REDIS_OK) {
    return Status::Internal("hiredis could not take the bytes");
  }
  std::vector<Value> out;
  while (true) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) {
      return Status::InvalidArgument(fmt::format("not RESP: {}", reader->errstr));
    }
    if (reply == nullptr) return out;
    out.push_back(Convert(static_cast<redisReply*>(reply)));
    freeReplyObject(reply);
  }
}

int64_t Value::AsInt() const {
  if (type == kInteger) return integer;
  if (type == kString && !str.empty()) {
    char* end = nullptr;
    long long v = std::strtoll(str.c_str(), &end, 10);
    if (end && *end == '\0') return v;
    return static_cast<int64_t>(std::strtod(str.c_str(), nullptr));
  }
  return 0;
}

// Written here because hiredis 0.14 has no cluster support and no packaged library exposes
// Redis' slot function.
uint16_t Crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

uint16_t KeySlot(std::string_view key) {
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return Crc16(key) & 16383;
}

Result<RedisUrl> RedisUrl::Parse(std::string_view url) {
  RedisUrl out;
  std::string_view rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("redis-cluster://", 0) == 0) {
    rest = url.substr(16);
    out.cluster = true;
  } else {
    return Status::InvalidArgument(
        fmt::format("store \"{}\" is not redis://HOST[:PORT] or redis-cluster://HOST:PORT[,HOST:PORT...]", url));
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    Endpoint e;
    auto colon = part.rfind(':');
    e.host = std::string(part.substr(0, colon));
    if (colon != std::string_view::npos) {
      std::string port(part.substr(colon + 1));
      if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) {
        return Status::InvalidArgument(fmt::format("store \"{}\": bad port \"{}\"", url, port));
      }
      e.port = std::stoi(port);
    }
    if (e.host.empty()) return Status::InvalidArgument(fmt::format("store \"{}\" has an empty host", url));
    out.endpoints.push_back(std::move(e));
  }
  if (out.endpoints.empty()) return Status::InvalidArgument(fmt::format("store \"{}\" names no host", url));
  return out;
}

// A pool of connections to one node.
class RedisClient::Node {
 public:
  Node(Endpoint e, int timeout_ms) : endpoint_(std::move(e)), timeout_ms_(timeout_ms) {}
  ~Node() {
    for (auto* c : idle_) redisFree(c);
  }

  // Runs the commands (pipelined) on one connection; ASKING first when `asking`.
  Result<std::vector<Value>> Run(const std::vector<std::vector<std::string>>& commands, bool asking) {
    redisContext* c = Take();
    if (!c) {
      std::string why;
      {
        std::lock_guard lock(mu_);  // another thread's failed connect may be writing it (TSan)
        why = last_error_;
      }
      return Status::Unavailable(fmt::format("cannot reach Redis at {}: {}", endpoint_.ToString(), why));
    }
    std::vector<std::vector<std::string>> all;
    if (asking) all.push_back({"ASKING"});
    all.insert(all.end(), commands.begin(), commands.end());
    for (const auto& argv : all) {
      std::vector<const char*> ptrs;
      std::vector<size_t> lens;
      for (const auto& a : argv) {
        ptrs.push_back(a.data());
        lens.push_back(a.size());
      }
      if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDIS_OK) {
        return Fail(c);
      }
    }
    std::vector<Value> out;
    for (size_t i = 0; i < all.size(); ++i) {
      void* reply = nullptr;
      if (redisGetReply(c, &reply) != REDIS_OK) return Fail(c);
      if (!(asking && i == 0)) out.push_back(Convert(static_cast<redisReply*>(reply)));
      freeReplyObject(reply);
    }
    Give(c);
    return out;
  }

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  redisContext* Take() {
    for (;;) {
      redisContext* c = nullptr;
      {
        std::lock_guard lock(mu_);
        if (idle_.empty()) break;
        c = idle_.back();
        idle_.pop_back();
      }
      if (StillOpen(c)) return c;
      redisFree(c);  // Redis closed it while idle (it restarted): nothing was sent on it
    }
    redisContext* c = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, Tv(timeout_ms_));
    if (!c || c->err) {
      std::lock_guard lock(mu_);
      last_error_ = c ? c->errstr : "cannot allocate a connection";
      if (c) redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, Tv(timeout_ms_));
    redisEnableKeepAlive(c);
    return c;
  }
  // Whether an idle connection is still open: a peek that would block means no EOF and no
  // reset is waiting. Checked before anything is sent, so dropping it cannot lose or repeat a
  // command (after a Redis restart, the first request would otherwise fail on a dead socket).
  static bool StillOpen(redisContext* c) {
    char byte;
    const ssize_t n = ::recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  void Give(redisContext* c) {
    std::lock_guard lock(mu_);
    if (idle_.size() < 32) {
      idle_.push_back(c);
    } else {
      redisFree(c);
    }
  }
  Result<std::vector<Value>> Fail(redisContext* c) {
    std::string why = c->errstr[0] ? c->errstr : "connection lost";
    redisFree(c);  // a broken connection is dropped; the next call reconnects
    return Status::Unavailable(fmt::format("lost the connection to Redis at {}: {}", endpoint_.ToString(), why));
  }

  const Endpoint endpoint_;
  const int timeout_ms_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
  std::string last_error_;
};

RedisClient::RedisClient(bool cluster, std::vector<Endpoint> seeds, int timeout_ms)
    : cluster_(cluster), seeds_(std::move(seeds)), timeout_ms_(timeout_ms) {}

RedisClient::~RedisClient() = default;

Result<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisUrl& url, int timeout_ms) {
  auto client = std::unique_ptr<RedisClient>(new RedisClient(url.cluster, url.endpoints, timeout_ms));
  if (url.cluster) {
    DELAYQ_RETURN_IF_ERROR(client->RefreshSlots());
  } else {
    auto pong = client->Call("", {"PING"});
    if (!pong.ok()) return pong.status();
    if (pong->is_error()) return Status::Unavailable("Redis answered PING with: " + pong->str);
  }
  return client;
}

RedisClient::Node* RedisClient::NodeAt(const Endpoint& e) {
  std::lock_guard lock(mu_);
  auto& n = nodes_[e.ToString()];
  if (!n) n = std::make_unique<Node>(e, timeout_ms_);
  return n.get();
}

Status RedisClient::RefreshSlots() {
  std::string errors;
  for (const auto& seed : seeds_) {
    auto r = NodeAt(seed)->Run({{"CLUSTER", "SLOTS"}}, false);
    if (!r.ok()) {
      errors += r.status().message() + "; ";
      continue;
    }
    const Value& v = (*r)[0];
    if (v.is_error()) return Status::Unavailable(fmt::format("CLUSTER SLOTS at {}: {}", seed.ToString(), v.str));
    std::vector<std::string> slots(16384);
    for (const auto& range : v.array) {
      if (range.array.size() < 3 || range.array[2].array.size() < 2) continue;
      Endpoint e{range.array[2].array[0].str, static_cast<int>(range.array[2].array[1].AsInt())};
      if (e.host.empty()) e.host = seed.host;
      NodeAt(e);
      for (int64_t s = range.array[0].AsInt(); s <= range.array[1].AsInt() && s < 16384; ++s) {
        slots[static_cast<size_t>(s)] = e.ToString();
      }
    }
    std::lock_guard lock(mu_);
    slots_ = std::move(slots);
    return Status::Ok();
  }
  return Status::Unavailable("cannot reach any Redis Cluster node: " + errors);
}

RedisClient::Node* RedisClient::NodeFor(std::string_view route_key) {
  if (!cluster_) return NodeAt(seeds_[0]);
  std::string where;
  {
    std::lock_guard lock(mu_);
    if (!slots_.empty()) where = slots_[KeySlot(route_key)];
    if (where.empty() && !nodes_.empty()) where = nodes_.begin()->first;
    auto it = nodes_.find(where);
    if (it != nodes_.end()) return it->second.get();
  }
  return NodeAt(seeds_[0]);
}

std::vector<Endpoint> RedisClient::Masters() {
  if (!cluster_) return {seeds_[0]};
  std::lock_guard lock(mu_);
  std::map<std::string, bool> seen;
  std::vector<Endpoint> out;
  for (const auto& s : slots_) {
    if (s.empty() || seen[s]) continue;
    seen[s] = true;
    out.push_back(nodes_.at(s)->endpoint());
  }
  return out;
}

Result<Value> RedisClient::CallOn(Node* node, const std::vector<std::string>& argv, bool asking) {
  auto r = node->Run({argv}, asking);
  if (!r.ok()) return r.status();
  return std::move((*r)[0]);
}

Result<Value> RedisClient::CallNode(const Endpoint& node, const std::vector<std::string>& argv) {
  return CallOn(NodeAt(node), argv, false);
}

Result<Value> RedisClient::Call(std::string_view route_key, const std::vector<std::string>& argv) {
  Node* node = NodeFor(route_key);
  bool asking = false;
  for (int redirects = 0; redirects < 5; ++redirects) {
    auto v = CallOn(node, argv, asking);
    if (!v.ok()) {
      if (cluster_ && redirects == 0 && RefreshSlots().ok()) {  // the node may have failed over
        node = NodeFor(route_key);
        continue;
      }
      return v;
    }
    if (auto transient = TransientError(*v, node->endpoint())) {
      if (cluster_ && redirects == 0 && v->str.rfind("READONLY", 0) == 0 && RefreshSlots().ok()) {
        node = NodeFor(route_key);  // a replica now: ask the cluster who the master is
        continue;
      }
      return *transient;
    }
    if (!cluster_ || !v->is_error()) return v;
    // "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"
    const std::string& e = v->str;
    bool moved = e.rfind("MOVED ", 0) == 0, ask = e.rfind("ASK ", 0) == 0;
    if (!moved && !ask) return v;
    auto space = e.rfind(' '), colon = e.rfind(':');
    if (space == std::string::npos || colon == std::string::npos || colon < space) return v;
    Endpoint target{e.substr(space + 1, colon - space - 1), std::atoi(e.c_str() + colon + 1)};
    node = NodeAt(target);
    asking = ask;
    if (moved) (void)RefreshSlots();
  }
  return Status::Unavailable("Redis Cluster kept redirecting the request (slots moving?)");
}

Result<std::vector<Value>> RedisClient::Pipeline(std::string_view route_key,
                                                 const std::vector<std::vector<std::string>>& commands) {
  Node* node = NodeFor(route_key);
  bool asking = false;
  for (int redirects = 0; redirects < 5; ++redirects) {
    auto r = node->Run(commands, asking);
    if (!r.ok()) {
      if (cluster_ && redirects == 0 && RefreshSlots().ok()) {  // the node may have failed over
        node = NodeFor(route_key);
        continue;
      }
      return r;
    }
    for (const auto& v : *r) {
      if (auto transient = TransientError(v, node->endpoint())) return *transient;
    }
    // Every command routes to one slot, so a redirect refused them all: the whole pipeline
    // goes again, on one connection of the node that owns the slot (a WAIT after a write
    // must share that write's connection).
    const Value* redirect = nullptr;
    for (const auto& v : *r) {
      if (v.is_error() && (v.str.rfind("MOVED ", 0) == 0 || v.str.rfind("ASK ", 0) == 0)) redirect = &v;
    }
    if (!cluster_ || !redirect) return r;
    const std::string& e = redirect->str;
    auto space = e.rfind(' '), colon = e.rfind(':');
    if (space == std::string::npos || colon == std::string::npos || colon < space) return r;
    asking = e.rfind("ASK ", 0) == 0;
    node = NodeAt({e.substr(space + 1, colon - space - 1), std::atoi(e.c_str() + colon + 1)});
    if (!asking) (void)RefreshSlots();
  }
  return Status::Unavailable("Redis Cluster kept redirecting the request (slots moving?)");
}

Result<Value> RedisClient::Eval(const Script& script, const std::vector<std::string>& keys,
                                const std::vector<std::string>& args, int wait_replicas, int wait_timeout_ms) {
  std::string sha;
  {
    std::lock_guard lock(mu_);
    sha = shas_[script.name];
  }
  const std::string route = keys.empty() ? std::string() : keys[0];
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (sha.empty()) {
      auto loaded = Call(route, {"SCRIPT", "LOAD", script.source});
      if (!loaded.ok()) return loaded;
      if (loaded->is_error()) {
        return Status::Internal(fmt::format("Redis refused script {}: {}", script.name, loaded->str));
      }
      sha = loaded->str;
      std::lock_guard lock(mu_);
      shas_[script.name] = sha;
    }
    std::vector<std::string> argv = {"EVALSHA", sha, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    Result<Value> v = Status::Internal("unset");
    if (wait_replicas > 0) {
      // WAIT on the script's own connection: it returns once that many replicas have every
      // write made on it so far (or the timeout passed), and says how many did.
      auto both = Pipeline(route, {argv, {"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout_ms)}});
      if (!both.ok()) return both.status();
      v = std::move((*both)[0]);
      const int64_t replicas = (*both)[1].AsInt();
      if (!v->is_error() && replicas < wait_replicas) {
        return Status::Unavailable(fmt::format(
            "the write reached {} of {} replicas within {} ms (--redis-wait-replicas): it is on the primary "
            "but a failover could lose it; retry it (with the same key, a retry is not a duplicate)",
            replicas, wait_replicas, wait_timeout_ms));
      }
    } else {
      v = Call(route, argv);
    }
    if (!v.ok()) return v;
    if (v->is_error() && v->str.rfind("NOSCRIPT", 0) == 0) {  // restarted, flushed, or another master
      auto loaded = Call(route, {"SCRIPT", "LOAD", script.source});
      if (!loaded.ok()) return loaded;
      if (loaded->is_error()) return Status::Internal("SCRIPT LOAD: " + loaded->str);
      continue;
    }
    return v;
  }
  return Status::Unavailable("Redis keeps forgetting the delayq scripts (NOSCRIPT)");
}

Result<std::vector<std::pair<Endpoint, Value>>> RedisClient::CallAll(const std::vector<std::string>& argv) {
  std::vector<std::pair<Endpoint, Value>> out;
  for (const auto& e : Masters()) {
    auto v = CallOn(NodeAt(e), argv, false);
    if (!v.ok()) return v.status();
    out.emplace_back(e, std::move(*v));
  }
  return out;
}

std::unique_ptr<RedisClient::RawConnection> RedisClient::Dedicated(std::string* error) {
  const Endpoint e = Masters().empty() ? seeds_[0] : Masters()[0];
  redisContext* c = redisConnectWithTimeout(e.host.c_str(), e.port, Tv(timeout_ms_));
  if (!c || c->err) {
    *error = fmt::format("cannot reach Redis at {}: {}", e.ToString(), c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return nullptr;
  }
  auto raw = std::make_unique<RawConnection>();
  raw->context = c;
  return raw;
}

RedisClient::RawConnection::~RawConnection() {
  if (context) redisFree(static_cast<redisContext*>(context));
}

Status RedisClient::RawConnection::Send(const std::vector<std::string>& argv) {
  auto* c = static_cast<redisContext*>(context);
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDIS_OK) {
    return Status::Unavailable(std::string("Redis: ") + c->errstr);
  }
  int done = 0;
  while (!done) {
    if (redisBufferWrite(c, &done) != REDIS_OK) return Status::Unavailable(std::string("Redis: ") + c->errstr);
  }
  return Status::Ok();
}

Result<Value> RedisClient::RawConnection::Read(int timeout_ms) {
  auto* c = static_cast<redisContext*>(context);
  void* reply = nullptr;
  while (true) {
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
      return Status::Unavailable(std::string("Redis: ") + c->errstr);
    }
    if (reply) break;
    pollfd p{c->fd, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms);
    if (ready == 0) return Value{};
    if (ready < 0 && errno != EINTR) return Status::Unavailable(std::string("Redis: ") + std::strerror(errno));
    if (redisBufferRead(c) != REDIS_OK) return Status::Unavailable(std::string("Redis: ") + c->errstr);
  }
  Value v = Convert(static_cast<redisReply*>(reply));
  freeReplyObject(reply);
  return v;
}

}  // namespace delayq::redis
