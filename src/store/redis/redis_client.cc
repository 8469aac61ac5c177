#include "store/redis/redis_client.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "core/redact.h"

namespace delayq::redis {
namespace {

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
  if (starts("BUSY ")) {  // not BUSYGROUP or BUSYKEY: those are answers
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

// The sequential Eval's answer stands for a pipelined call whose reply says the script did not
// run where it was sent: not loaded there, its slot elsewhere, or the node cannot serve now.
bool RunAgainOnItsOwn(const Value& v, const Endpoint& node) {
  if (!v.is_error()) return false;
  const std::string& e = v.str;
  return e.rfind("NOSCRIPT", 0) == 0 || e.rfind("MOVED ", 0) == 0 || e.rfind("ASK ", 0) == 0 ||
         TransientError(v, node).has_value();
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
    out.push_back(ReplyToValue(reply));
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

namespace {

constexpr std::string_view kUrlForms =
    "redis://[USER[:PASSWORD]@]HOST[:PORT][/DB], rediss://... (TLS), redis-cluster://HOST:PORT[,HOST:PORT...], "
    "or redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER";

// %XX decoding (user, password, option values).
Result<std::string> PercentDecode(std::string_view s, std::string_view what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); };
    if (i + 2 >= s.size() || !hex(s[i + 1]) || !hex(s[i + 2])) {
      return Status::InvalidArgument(fmt::format("the Redis URL's {} has a bad %-escape (write %XX)", what));
    }
    out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
    i += 2;
  }
  return out;
}

Result<Endpoint> ParseEndpoint(std::string_view part, std::string_view redacted) {
  Endpoint e;
  std::string_view host = part, port;
  if (!part.empty() && part.front() == '[') {  // [IPv6]:PORT
    auto close = part.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(fmt::format("store \"{}\": \"[\" without \"]\"", redacted));
    }
    host = part.substr(1, close - 1);
    if (close + 1 < part.size()) {
      if (part[close + 1] != ':') return Status::InvalidArgument(fmt::format("store \"{}\": bad address", redacted));
      port = part.substr(close + 2);
    }
  } else if (auto colon = part.rfind(':'); colon != std::string_view::npos) {
    host = part.substr(0, colon);
    port = part.substr(colon + 1);
  }
  e.host = std::string(host);
  if (!port.empty() || part.find(':') != std::string_view::npos) {
    if (port.empty() || port.find_first_not_of("0123456789") != std::string_view::npos || port.size() > 5 ||
        std::stoi(std::string(port)) > 65535 || std::stoi(std::string(port)) == 0) {
      return Status::InvalidArgument(
          fmt::format("store \"{}\": bad port \"{}\" (1 to 65535)", redacted, std::string(port).substr(0, 20)));
    }
    e.port = std::stoi(std::string(port));
  }
  if (e.host.empty()) return Status::InvalidArgument(fmt::format("store \"{}\" has an empty host", redacted));
  return e;
}

Status ParseOptions(std::string_view query, RedisUrl* out, std::string_view redacted) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (kv.empty()) continue;
    auto eq = kv.find('=');
    const std::string key(kv.substr(0, eq));
    auto value = PercentDecode(eq == std::string_view::npos ? "" : kv.substr(eq + 1), "option " + key);
    if (!value.ok()) return value.status();
    auto boolean = [&](bool* to) -> Status {
      if (*value != "true" && *value != "false") {
        return Status::InvalidArgument(fmt::format("store \"{}\": ?{}= takes true or false", redacted, key));
      }
      *to = *value == "true";
      return Status::Ok();
    };
    if (key == "ca") {
      out->tls.ca_file = *value;
    } else if (key == "cert") {
      out->tls.cert_file = *value;
    } else if (key == "key") {
      out->tls.key_file = *value;
    } else if (key == "server_name") {
      out->tls.server_name = *value;
    } else if (key == "insecure") {
      DELAYQ_RETURN_IF_ERROR(boolean(&out->tls.insecure));
    } else if (key == "tls") {
      DELAYQ_RETURN_IF_ERROR(boolean(&out->tls.enabled));
    } else if (key == "sentinel_password") {
      out->sentinel_password = *value;
    } else {
      return Status::InvalidArgument(
          fmt::format("store \"{}\": unknown option \"{}\" (known: ca, cert, key, server_name, insecure, tls, "
                      "sentinel_password)",
                      redacted, key.substr(0, 40)));
    }
  }
  const bool any_tls =
      !out->tls.ca_file.empty() || !out->tls.cert_file.empty() || out->tls.insecure || !out->tls.server_name.empty();
  if (any_tls && !out->tls.enabled) {
    return Status::InvalidArgument(
        fmt::format("store \"{}\" gives TLS options without TLS: use rediss:// (or ?tls=true)", redacted));
  }
  return Status::Ok();
}

}  // namespace

// The user info ends where libpq's rule ends it (core/redact.h): a password holding '/' or '?'
// (base64 ones do) was left in the clear by a parse that stopped at the first of them.
std::string RedisUrl::Redacted(std::string_view url) { return RedactSecrets(url); }

Result<RedisUrl> RedisUrl::Parse(std::string_view url) {
  const std::string redacted = Redacted(url);
  RedisUrl out;
  std::string_view rest;
  bool sentinel = false;
  struct Scheme {
    std::string_view prefix;
    bool tls, cluster, sentinel;
  };
  static constexpr Scheme kSchemes[] = {
      {"redis://", false, false, false},         {"rediss://", true, false, false},
      {"redis-cluster://", false, true, false},  {"rediss-cluster://", true, true, false},
      {"redis-sentinel://", false, false, true}, {"rediss-sentinel://", true, false, true}};
  bool known = false;
  for (const Scheme& s : kSchemes) {
    if (url.rfind(s.prefix, 0) == 0) {
      rest = url.substr(s.prefix.size());
      out.tls.enabled = s.tls;
      out.cluster = s.cluster;
      sentinel = s.sentinel;
      known = true;
      break;
    }
  }
  if (!known) return Status::InvalidArgument(fmt::format("store \"{}\" is not {}", redacted, kUrlForms));
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    DELAYQ_RETURN_IF_ERROR(ParseOptions(rest.substr(q + 1), &out, redacted));
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    auto user = PercentDecode(userinfo.substr(0, colon), "user");
    if (!user.ok()) return user.status();
    out.auth.user = *user;
    if (colon != std::string_view::npos) {
      auto password = PercentDecode(userinfo.substr(colon + 1), "password");
      if (!password.ok()) return password.status();
      out.auth.password = *password;
    }
    if (!out.auth.user.empty() && out.auth.password.empty()) {
      return Status::InvalidArgument(fmt::format(
          "store \"{}\" names user \"{}\" without a password: write USER:PASSWORD@, or give the password with "
          "--redis-password-file / DELAYQ_REDIS_PASSWORD",
          redacted, out.auth.user));
    }
  }
  while (!rest.empty()) {
    auto comma = rest.find(',');
    auto e = ParseEndpoint(rest.substr(0, comma), redacted);
    if (!e.ok()) return e.status();
    out.endpoints.push_back(std::move(*e));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (out.endpoints.empty()) return Status::InvalidArgument(fmt::format("store \"{}\" names no host", redacted));
  // The path: /DB for one Redis; /MASTER[/DB] for Sentinel; nothing for a cluster (db 0 only).
  std::string_view db;
  if (sentinel) {
    const auto slash = path.find('/');
    out.sentinel_master = std::string(path.substr(0, slash));
    if (out.sentinel_master.empty()) {
      return Status::InvalidArgument(fmt::format(
          "store \"{}\" names no master: write redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER_NAME", redacted));
    }
    if (slash != std::string_view::npos) db = path.substr(slash + 1);
  } else if (out.cluster) {
    if (!path.empty()) {
      return Status::InvalidArgument(fmt::format("store \"{}\": a Redis Cluster has database 0 only (drop \"/{}\")",
                                                 redacted, std::string(path).substr(0, 20)));
    }
  } else {
    db = path;
  }
  if (!db.empty()) {
    if (db.find_first_not_of("0123456789") != std::string_view::npos || db.size() > 5) {
      return Status::InvalidArgument(
          fmt::format("store \"{}\": the database \"{}\" is not a number", redacted, std::string(db).substr(0, 20)));
    }
    out.auth.db = std::stoi(std::string(db));
  }
  if (!out.cluster && !sentinel && out.endpoints.size() > 1) {
    return Status::InvalidArgument(fmt::format(
        "store \"{}\" names {} hosts: one Redis takes one (several are redis-cluster:// or redis-sentinel://)",
        redacted, out.endpoints.size()));
  }
  return out;
}

// A pool of connections to one node.
class RedisClient::Node {
 public:
  Node(Endpoint e, const RedisAuth& auth, const RedisTls* tls, int timeout_ms)
      : endpoint_(std::move(e)), auth_(auth), tls_(tls), timeout_ms_(timeout_ms) {}

  // Runs the commands (pipelined) on one connection; ASKING first when `asking`. `reached`, when
  // given, says after a failure whether the commands may have reached Redis (a connection was had
  // and writing began): only when not may they be sent again without running twice.
  Result<std::vector<Value>> Run(const std::vector<std::vector<std::string>>& commands, bool asking,
                                 int extra_timeout_ms = 0, bool* reached = nullptr) {
    std::vector<std::vector<std::string>> all;
    if (asking) all.push_back({"ASKING"});
    all.insert(all.end(), commands.begin(), commands.end());
    auto sent = Send(all, reached);
    if (!sent.ok()) return sent.status();
    auto out = Finish(*sent, extra_timeout_ms);
    if (out.ok() && asking) out->erase(out->begin());
    return out;
  }

  // Commands sent on a connection of this node whose replies are still to read (Finish): what
  // lets a caller send to several nodes before it waits for any.
  struct Sent {
    std::unique_ptr<RedisConnection> connection;
    size_t replies = 0;
  };
  Result<Sent> Send(const std::vector<std::vector<std::string>>& commands, bool* reached = nullptr) {
    auto c = Take();
    if (!c.ok()) return c.status();
    if (reached != nullptr) *reached = true;
    // A broken connection is dropped (the next call reconnects).
    DELAYQ_RETURN_IF_ERROR((*c)->Send(commands));
    return Sent{std::move(*c), commands.size()};
  }
  Result<std::vector<Value>> Finish(Sent& sent, int extra_timeout_ms = 0) {
    std::vector<Value> out;
    out.reserve(sent.replies);
    for (size_t i = 0; i < sent.replies; ++i) {
      auto reply = sent.connection->Read(timeout_ms_ + extra_timeout_ms);
      if (!reply.ok()) return reply.status();
      out.push_back(std::move(**reply));
    }
    Give(std::move(sent.connection));
    return out;
  }

  const Endpoint& endpoint() const { return endpoint_; }
  // A connection of its own (not pooled).
  Result<std::unique_ptr<RedisConnection>> Open() { return RedisConnection::Open(endpoint_, auth_, tls_, timeout_ms_); }

 private:
  Result<std::unique_ptr<RedisConnection>> Take() {
    for (;;) {
      std::unique_ptr<RedisConnection> c;
      {
        std::lock_guard lock(mu_);
        if (idle_.empty()) break;
        c = std::move(idle_.back());
        idle_.pop_back();
      }
      // Redis closed it while idle (it restarted): nothing was sent on it, so dropping it is safe.
      if (c->StillOpen()) return c;
    }
    return Open();
  }
  void Give(std::unique_ptr<RedisConnection> c) {
    std::lock_guard lock(mu_);
    if (idle_.size() < 32) idle_.push_back(std::move(c));
  }

  const Endpoint endpoint_;
  const RedisAuth auth_;
  const RedisTls* const tls_;  // the client's; null without TLS
  const int timeout_ms_;
  std::mutex mu_;
  std::vector<std::unique_ptr<RedisConnection>> idle_;
};

RedisClient::RedisClient(const RedisUrl& url, std::shared_ptr<RedisTls> tls, int timeout_ms)
    : cluster_(url.cluster),
      seeds_(url.endpoints),
      auth_(url.auth),
      tls_(std::move(tls)),
      sentinel_master_(url.sentinel_master),
      sentinel_password_(url.sentinel_password),
      timeout_ms_(timeout_ms) {}

RedisClient::~RedisClient() = default;

Result<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisUrl& url, int timeout_ms) {
  std::shared_ptr<RedisTls> tls;
  if (url.tls.enabled) {
    auto made = MakeRedisTls(url.tls);
    if (!made.ok()) return made.status();
    tls = std::move(*made);
  }
  auto client = std::unique_ptr<RedisClient>(new RedisClient(url, std::move(tls), timeout_ms));
  if (url.cluster) {
    DELAYQ_RETURN_IF_ERROR(client->RefreshSlots());
  } else {
    if (!url.sentinel_master.empty()) DELAYQ_RETURN_IF_ERROR(client->FindMaster());
    auto pong = client->Call("", {"PING"});
    if (!pong.ok()) return pong.status();
    if (pong->is_error()) return Status::Unavailable("Redis answered PING with: " + pong->str);
  }
  return client;
}

// Asks the Sentinels, in turn, where the master of `sentinel_master_` is now. Sentinels get no
// AUTH unless the URL gave them a password of their own (sentinel_password), and the same TLS.
Status RedisClient::FindMaster() {
  std::string errors;
  RedisAuth sentinel_auth;
  sentinel_auth.password = sentinel_password_;
  for (const auto& s : seeds_) {
    auto c = RedisConnection::Open(s, sentinel_auth, tls_.get(), timeout_ms_);
    if (!c.ok()) {
      errors += c.status().message() + "; ";
      continue;
    }
    Status sent = (*c)->Send({{"SENTINEL", "get-master-addr-by-name", sentinel_master_}});
    auto r = sent.ok() ? (*c)->Read(timeout_ms_) : Result<std::optional<Value>>(sent);
    if (!r.ok()) {
      errors += r.status().message() + "; ";
      continue;
    }
    const Value& v = **r;
    if (v.is_error()) {
      errors += fmt::format("Sentinel at {}: {}; ", s.ToString(), v.str.substr(0, 200));
      continue;
    }
    if (v.array.size() != 2) {
      errors += fmt::format("Sentinel at {} knows no master named \"{}\"; ", s.ToString(), sentinel_master_);
      continue;
    }
    Endpoint master{v.array[0].str, static_cast<int>(v.array[1].AsInt())};
    std::lock_guard lock(mu_);
    if (master_.ToString() != master.ToString() && !master_.host.empty()) {
      master_moved_ = true;  // a failover: the scheduler looks at every queue again
    }
    master_ = master;
    return Status::Ok();
  }
  return Status::Unavailable(fmt::format("no Sentinel could name the master \"{}\": {}", sentinel_master_, errors));
}

bool RedisClient::TakeMasterMoved() {
  std::lock_guard lock(mu_);
  const bool moved = master_moved_;
  master_moved_ = false;
  return moved;
}

Endpoint RedisClient::Single() {
  if (sentinel_master_.empty()) return seeds_[0];
  std::lock_guard lock(mu_);
  return master_;
}

RedisClient::Node* RedisClient::NodeAt(const Endpoint& e) {
  std::lock_guard lock(mu_);
  auto& n = nodes_[e.ToString()];
  if (!n) n = std::make_unique<Node>(e, auth_, tls_.get(), timeout_ms_);
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
  if (!cluster_) return NodeAt(Single());
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
  if (!cluster_) return {Single()};
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

Result<Value> RedisClient::CallOn(Node* node, const std::vector<std::string>& argv, bool asking, bool* reached) {
  auto r = node->Run({argv}, asking, 0, reached);
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
    bool reached = false;
    auto v = CallOn(node, argv, asking, &reached);
    if (!v.ok()) {
      // The node may have failed over. Sent again only if it never went out: a command that may
      // have run (a read that timed out) is not run twice; the caller hears kUnavailable.
      if (redirects == 0 && !reached && Relocate()) {
        node = NodeFor(route_key);
        continue;
      }
      return v;
    }
    if (auto transient = TransientError(*v, node->endpoint())) {
      if (redirects == 0 && v->str.rfind("READONLY", 0) == 0 && Relocate()) {
        node = NodeFor(route_key);  // a replica now: ask who the master is
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
                                                 const std::vector<std::vector<std::string>>& commands,
                                                 int extra_timeout_ms) {
  Node* node = NodeFor(route_key);
  bool asking = false;
  for (int redirects = 0; redirects < 5; ++redirects) {
    bool reached = false;
    auto r = node->Run(commands, asking, extra_timeout_ms, &reached);
    if (!r.ok()) {
      if (redirects == 0 && !reached && Relocate()) {  // failed over, and nothing went out (as in Call)
        node = NodeFor(route_key);
        continue;
      }
      return r;
    }
    for (const auto& v : *r) {
      if (auto transient = TransientError(v, node->endpoint())) {
        if (redirects == 0 && v.str.rfind("READONLY", 0) == 0 && Relocate()) {
          node = NodeFor(route_key);
          break;
        }
        return *transient;
      }
    }
    if (node != NodeFor(route_key)) continue;  // relocated: the whole pipeline again
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

Result<Value> RedisClient::Call(std::string_view route_key, const std::vector<std::string>& argv, int wait_replicas,
                                int wait_timeout_ms) {
  if (wait_replicas <= 0) return Call(route_key, argv);
  // WAIT on the command's own connection: it returns once that many replicas have every write
  // made on it so far (or the timeout passed), and says how many did.
  auto both = Pipeline(route_key, {argv, {"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout_ms)}},
                       wait_timeout_ms);  // the WAIT may take that long before it answers
  if (!both.ok()) return both.status();
  Value v = std::move((*both)[0]);
  const int64_t replicas = (*both)[1].AsInt();
  if (!v.is_error() && replicas < wait_replicas) {
    return Status::Unavailable(
        fmt::format("the write reached {} of {} replicas within {} ms (--redis-wait-replicas): it is on the primary "
                    "but a failover could lose it; retry it (with the same key, a retry is not a duplicate)",
                    replicas, wait_replicas, wait_timeout_ms));
  }
  return v;
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
    Result<Value> v = Call(route, argv, wait_replicas, wait_timeout_ms);
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

std::vector<Result<Value>> RedisClient::EvalAll(const Script& script, const std::vector<EvalCall>& calls,
                                                int wait_replicas, int wait_timeout_ms) {
  std::vector<Result<Value>> out(calls.size(), Result<Value>(Status::Internal("not run")));
  auto own = [&](size_t i) { out[i] = Eval(script, calls[i].keys, calls[i].args, wait_replicas, wait_timeout_ms); };
  std::string sha;
  {
    std::lock_guard lock(mu_);
    sha = shas_[script.name];
  }
  if (calls.size() == 1 || sha.empty()) {  // nothing to overlap, or the script to load first
    for (size_t i = 0; i < calls.size(); ++i) own(i);
    return out;
  }
  // Each node's calls on one connection, every node's sent before any reply is read.
  std::vector<std::pair<Node*, std::vector<size_t>>> groups;
  for (size_t i = 0; i < calls.size(); ++i) {
    Node* node = NodeFor(calls[i].keys.empty() ? std::string_view() : calls[i].keys[0]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == node; });
    if (it == groups.end()) it = groups.insert(groups.end(), {node, {}});
    it->second.push_back(i);
  }
  std::vector<Result<Node::Sent>> sent;
  std::vector<char> reached(groups.size(), 0);
  for (const auto& [node, members] : groups) {
    std::vector<std::vector<std::string>> commands;
    for (size_t i : members) {
      std::vector<std::string> argv = {"EVALSHA", sha, std::to_string(calls[i].keys.size())};
      argv.insert(argv.end(), calls[i].keys.begin(), calls[i].keys.end());
      argv.insert(argv.end(), calls[i].args.begin(), calls[i].args.end());
      commands.push_back(std::move(argv));
    }
    if (wait_replicas > 0) commands.push_back({"WAIT", std::to_string(wait_replicas), std::to_string(wait_timeout_ms)});
    bool went_out = false;
    sent.push_back(node->Send(commands, &went_out));
    reached[sent.size() - 1] = went_out ? 1 : 0;
  }
  bool relocated = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [node, members] = groups[g];
    if (!sent[g].ok() && !reached[g]) {  // no connection to it: nothing went out; moved? each on its own
      if (!relocated) {
        (void)Relocate();
        relocated = true;
      }
      for (size_t i : members) own(i);
      continue;
    }
    // Unavailable as one call whose connection broke: what reached Redis may have run.
    auto replies = sent[g].ok() ? node->Finish(*sent[g], wait_replicas > 0 ? wait_timeout_ms : 0)
                                : Result<std::vector<Value>>(sent[g].status());
    for (size_t j = 0; j < members.size(); ++j) {
      if (!replies.ok()) {
        out[members[j]] = replies.status();
      } else if (RunAgainOnItsOwn((*replies)[j], node->endpoint())) {
        own(members[j]);
      } else if (wait_replicas > 0 && !(*replies)[j].is_error() && replies->back().AsInt() < wait_replicas) {
        out[members[j]] = Status::Unavailable(fmt::format(
            "the write reached {} of {} replicas within {} ms (--redis-wait-replicas): it is on the primary but a "
            "failover could lose it; retry it (with the same key, a retry is not a duplicate)",
            replies->back().AsInt(), wait_replicas, wait_timeout_ms));
      } else {
        out[members[j]] = std::move((*replies)[j]);
      }
    }
  }
  return out;
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

// Where the data is may have moved: a cluster's slots (CLUSTER SLOTS again), or a Sentinel-managed
// master (the Sentinels asked again). True when the caller should try again.
bool RedisClient::Relocate() {
  if (cluster_) return RefreshSlots().ok();
  if (!sentinel_master_.empty()) {
    const std::string before = Single().ToString();
    return FindMaster().ok() && Single().ToString() != before;
  }
  return false;
}

std::unique_ptr<RedisClient::RawConnection> RedisClient::Dedicated(std::string* error) {
  if (!sentinel_master_.empty()) (void)FindMaster();  // a subscriber reconnecting after a failover
  const Endpoint e = Masters().empty() ? seeds_[0] : Masters()[0];
  auto c = NodeAt(e)->Open();
  if (!c.ok()) {
    *error = c.status().message();
    return nullptr;
  }
  auto raw = std::make_unique<RawConnection>();
  raw->connection = std::move(*c);
  return raw;
}

RedisClient::RawConnection::~RawConnection() = default;

Status RedisClient::RawConnection::Send(const std::vector<std::string>& argv) { return connection->Send({argv}); }

Result<Value> RedisClient::RawConnection::Read(int timeout_ms) {
  auto v = connection->Read(timeout_ms, /*idle_ok=*/true);
  if (!v.ok()) return v.status();
  return *v ? std::move(**v) : Value{};
}

}  // namespace delayq::redis
