// Talking to Redis: one node, a Sentinel-managed master or a Redis Cluster, over connections of
// our own (redis_connection.h: TCP or TLS, AUTH; pooled per node, reconnected on demand). hiredis 0.14 has no cluster
// support, so this routes by hash slot (CRC16 of the key's hash tag, CLUSTER SLOTS), follows MOVED and ASK, and loads
// Lua scripts on whichever master answers NOSCRIPT. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "store/redis/redis_connection.h"

namespace delayq::redis {

// A reply, converted from hiredis' redisReply.
struct Value {
  enum Type { kNil, kString, kInteger, kArray, kStatus, kError } type = kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<Value> array;

  bool is_error() const { return type == kError; }
  bool is_nil() const { return type == kNil; }
  // Integers, and strings holding integers, as an int64 (0 otherwise).
  int64_t AsInt() const;
  const std::string& AsString() const { return str; }
};

// The replies in `resp` (RESP bytes, as Redis sends them), decoded by hiredis' reader as the
// client decodes every reply; kInvalidArgument for bytes that are not RESP. A reply cut short at
// the end is left out.
Result<std::vector<Value>> DecodeReplies(std::string_view resp);

struct Endpoint {
  std::string host;
  int port = 6379;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Where Redis is and how to log in:
//   redis://[USER[:PASSWORD]@]HOST[:PORT][/DB][?OPTIONS]          one Redis
//   redis-cluster://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][?OPTIONS]
//   redis-sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/MASTER[/DB][?OPTIONS]
// and rediss://, rediss-cluster://, rediss-sentinel:// for TLS (or ?tls=true). OPTIONS: ca=FILE,
// cert=FILE, key=FILE (a client certificate), server_name=NAME (SNI and the certificate's name),
// insecure=true (no certificate check), sentinel_password=P (when the Sentinels have a password of
// their own; by default they get none). USER, PASSWORD and values are percent-decoded.
struct RedisUrl {
  bool cluster = false;
  std::string sentinel_master;    // redis-sentinel://: the master's name; the endpoints are Sentinels
  std::string sentinel_password;  // the Sentinels' own (empty: none)
  std::vector<Endpoint> endpoints;
  RedisAuth auth;
  RedisTlsOptions tls;
  static Result<RedisUrl> Parse(std::string_view url);
  // The URL without its secrets, for logs and errors ("redis://app:***@host:6379").
  static std::string Redacted(std::string_view url);
};

// A Lua script: its source and the SHA1 Redis knows it by (after the first load).
struct Script {
  std::string name;
  std::string source;
};

// CRC16-CCITT (XModem) of `bytes`, the checksum Redis Cluster defines key slots with: the same
// value on every platform and build (crc16("123456789") == 0x31C3).
uint16_t Crc16(std::string_view bytes);
// The hash slot of a key: CRC16 of its {hash tag} (or of the whole key), modulo 16384.
uint16_t KeySlot(std::string_view key);

class RedisClient {
 public:
  static Result<std::unique_ptr<RedisClient>> Connect(const RedisUrl& url, int timeout_ms = 2000);
  ~RedisClient();

  // Runs one command on the node that owns `route_key`'s slot (any node when empty). Error
  // replies come back as Values of type kError, except those that mean the node cannot serve
  // now: kUnavailable for LOADING, BUSY, MASTERDOWN, READONLY, NOREPLICAS, MISCONF, TRYAGAIN
  // and CLUSTERDOWN, kResourceExhausted for OOM. kUnavailable also when Redis cannot be reached.
  Result<Value> Call(std::string_view route_key, const std::vector<std::string>& argv);
  // The same, followed by WAIT on its connection when wait_replicas > 0: kUnavailable when fewer
  // replicas confirmed the write within wait_timeout_ms (it is on the primary only).
  Result<Value> Call(std::string_view route_key, const std::vector<std::string>& argv, int wait_replicas,
                     int wait_timeout_ms);
  // Several commands to the same slot in one round trip (pipelined), on one connection; a
  // redirect sends them all again to the node it names.
  // extra_timeout_ms: how much longer than the client's timeout the replies may take (a WAIT).
  Result<std::vector<Value>> Pipeline(std::string_view route_key, const std::vector<std::vector<std::string>>& commands,
                                      int extra_timeout_ms = 0);
  // EVALSHA (loading the script first where needed). keys[0] decides the slot. With
  // wait_replicas > 0 the script is followed by WAIT on its connection; kUnavailable when fewer
  // replicas confirmed its writes within wait_timeout_ms (they are on the primary only).
  Result<Value> Eval(const Script& script, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                     int wait_replicas = 0, int wait_timeout_ms = 1000);
  // One script run on several slots at once, as Eval runs it on each: every call's EVALSHA is
  // sent before any reply is read, one node's calls pipelined on one connection and the nodes'
  // side by side, so several shards cost one round trip and a cluster's masters run their parts
  // at the same time. A call the pipeline could not run (NOSCRIPT, a redirect, a node that
  // cannot serve) is run again on its own by Eval; each answers in calls' order.
  struct EvalCall {
    std::vector<std::string> keys;
    std::vector<std::string> args;
  };
  std::vector<Result<Value>> EvalAll(const Script& script, const std::vector<EvalCall>& calls, int wait_replicas = 0,
                                     int wait_timeout_ms = 1000);
  // One command on every master (CONFIG GET, INFO, SCRIPT LOAD, ...), in node order.
  Result<std::vector<std::pair<Endpoint, Value>>> CallAll(const std::vector<std::string>& argv);

  // One command on a given node (no redirects followed).
  Result<Value> CallNode(const Endpoint& node, const std::vector<std::string>& argv);

  bool cluster() const { return cluster_; }
  std::vector<Endpoint> Masters();
  // A fresh dedicated connection (for SUBSCRIBE); nullptr with the reason in `error`.
  struct RawConnection;
  std::unique_ptr<RawConnection> Dedicated(std::string* error);
  // True once after the Sentinels named a new master (a failover): what the caller knew of the
  // old one (due times, leases) should be read again.
  bool TakeMasterMoved();

 private:
  class Node;
  RedisClient(const RedisUrl& url, std::shared_ptr<RedisTls> tls, int timeout_ms);
  Status RefreshSlots();
  Status FindMaster();
  bool Relocate();
  Endpoint Single();  // the one Redis (or, with Sentinel, its master now)
  Node* NodeFor(std::string_view route_key);
  Node* NodeAt(const Endpoint& e);
  Result<Value> CallOn(Node* node, const std::vector<std::string>& argv, bool asking, bool* reached = nullptr);

  const bool cluster_;
  const std::vector<Endpoint> seeds_;  // the nodes, or the Sentinels
  const RedisAuth auth_;
  const std::shared_ptr<RedisTls> tls_;
  const std::string sentinel_master_, sentinel_password_;
  const int timeout_ms_;
  std::mutex mu_;
  Endpoint master_;  // with Sentinel: the master as last named
  bool master_moved_ = false;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // "host:port" -> pool
  std::vector<std::string> slots_;                      // slot -> "host:port" (cluster)
  std::map<std::string, std::string> shas_;             // script name -> sha1
};

// A connection that is not pooled: SUBSCRIBE and its messages.
struct RedisClient::RawConnection {
  std::unique_ptr<RedisConnection> connection;
  ~RawConnection();
  Status Send(const std::vector<std::string>& argv);
  // The next reply; nil Value when none arrived within `timeout_ms` (the connection stays
  // usable: hiredis itself would mark it broken after a read timeout).
  Result<Value> Read(int timeout_ms);
  void Interrupt() { connection->Interrupt(); }  // see RedisConnection::Interrupt
};

}  // namespace delayq::redis
