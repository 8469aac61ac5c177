// `delayq doctor`: reads every master's settings and reports those that lose or delay jobs.
#include "store/redis/doctor.h"

#include <cstdio>

#include <fmt/format.h>

#include "store/redis/redis_client.h"

namespace delayq::redis {

namespace {

bool Loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

// How delayq reaches Redis: encrypted and checked when it leaves this machine.
void CheckTransport(const RedisUrl& url, std::vector<DoctorFinding>& findings) {
  if (url.tls.enabled && url.tls.insecure) {
    findings.push_back({url.endpoints[0].ToString(),
                        "?insecure=true: Redis' certificate is not checked, so anyone on the path can pose as it",
                        "drop ?insecure=true and give Redis' CA with ?ca=FILE"});
    return;
  }
  for (const Endpoint& e : url.endpoints) {
    if (Loopback(e.host)) continue;
    if (!url.tls.enabled) {
      findings.push_back({e.ToString(),
                          "the connection to Redis is not encrypted: jobs, receipts and the password cross the "
                          "network in clear text",
                          "serve TLS on Redis (tls-port) and use rediss:// (with ?ca=FILE for a private CA)"});
    }
    return;  // one finding per URL
  }
}

// A Redis that takes commands without a password, reached from another host.
void CheckAuth(RedisClient& client, const RedisUrl& url, const Endpoint& node, std::vector<DoctorFinding>& findings) {
  if (!url.auth.password.empty() || Loopback(node.host)) return;
  auto who = client.CallNode(node, {"ACL", "GETUSER", "default"});
  if (!who.ok() || who->is_error()) return;
  for (size_t i = 0; i + 1 < who->array.size(); i += 2) {
    if (who->array[i].str != "flags") continue;
    for (const auto& f : who->array[i + 1].array) {
      if (f.str == "nopass") {
        findings.push_back({node.ToString(),
                            "Redis takes commands without a password: anyone who can reach it can read and delete "
                            "every job",
                            "set a password (requirepass, or an ACL user: ACL SETUSER delayq on >PASSWORD ~* &* "
                            "+@all) and give it to delayq with --redis-password-file"});
        return;
      }
    }
  }
}

// The Sentinels of a redis-sentinel:// URL: each reachable, and enough of them to agree.
void CheckSentinels(const RedisUrl& url, std::vector<DoctorFinding>& findings) {
  if (url.sentinel_master.empty()) return;
  RedisUrl one = url;
  one.sentinel_master.clear();
  one.auth = {};
  one.auth.password = url.sentinel_password;
  for (const Endpoint& e : url.endpoints) {
    one.endpoints = {e};
    auto sentinel = RedisClient::Connect(one);
    if (!sentinel.ok()) {
      findings.push_back({e.ToString(), "this Sentinel cannot be reached: " + sentinel.status().message(),
                          "start it, or take it out of the URL"});
      continue;
    }
    auto quorum = (*sentinel)->Call("", {"SENTINEL", "CKQUORUM", url.sentinel_master});
    if (quorum.ok() && quorum->is_error()) {
      findings.push_back({e.ToString(), "the Sentinels cannot fail the master over: " + quorum->str,
                          "run at least three Sentinels on separate machines, with a quorum of two"});
      return;
    }
  }
}

}  // namespace

Result<std::vector<DoctorFinding>> Doctor(std::string_view url_text, const std::string& password) {
  auto url = RedisUrl::Parse(url_text);
  if (!url.ok()) return url.status();
  if (url->auth.password.empty()) url->auth.password = password;
  auto client = RedisClient::Connect(*url);
  if (!client.ok()) return client.status();
  std::vector<DoctorFinding> findings;
  CheckTransport(*url, findings);
  CheckSentinels(*url, findings);
  std::vector<Endpoint> nodes = (*client)->Masters();
  if (nodes.empty() && url->sentinel_master.empty()) nodes = url->endpoints;
  auto config = [&](const Endpoint& node, const std::string& name) -> std::string {
    auto v = (*client)->CallNode(node, {"CONFIG", "GET", name});
    if (!v.ok()) return "?" + v.status().message();
    if (v->is_error()) return "?" + v->str;
    return v->array.size() >= 2 ? v->array[1].str : "?missing";
  };
  for (const Endpoint& node : nodes) {
    const std::string where = node.ToString();
    CheckAuth(**client, *url, node, findings);
    std::string version;
    auto info = (*client)->CallNode(node, {"INFO", "server"});
    if (info.ok()) {
      auto p = info->str.find("redis_version:");
      if (p != std::string::npos) version = info->str.substr(p + 14, info->str.find('\r', p) - p - 14);
    }
    int major = 0, minor = 0;
    std::sscanf(version.c_str(), "%d.%d", &major, &minor);
    if (version.empty() || major < 6 || (major == 6 && minor < 2)) {
      findings.push_back({where,
                          fmt::format("Redis {} is older than 6.2: delayq needs XAUTOCLAIM and "
                                      "XPENDING IDLE, which came with 6.2",
                                      version.empty() ? "of unknown version" : version),
                          "upgrade Redis to 6.2 or later (7.x recommended)"});
    }
    const std::string policy = config(node, "maxmemory-policy");
    if (policy.rfind('?', 0) == 0) {
      findings.push_back(
          {where, "CONFIG GET is refused (" + policy.substr(1) + "), so the settings that lose jobs cannot be checked",
           "allow CONFIG GET for the user delayq connects as, and run doctor again"});
      continue;
    }
    if (policy != "noeviction") {
      findings.push_back({where,
                          fmt::format("maxmemory-policy is {}: when Redis fills up it deletes keys, "
                                      "which loses jobs without an error",
                                      policy),
                          "CONFIG SET maxmemory-policy noeviction (and set it in redis.conf); Redis "
                          "then refuses writes when full, and delayq reports them as errors"});
    }
    if (config(node, "appendonly") != "yes") {
      findings.push_back({where,
                          "appendonly is no: a Redis restart loses every job written since the last "
                          "RDB snapshot",
                          "CONFIG SET appendonly yes and CONFIG SET appendfsync everysec (and in redis.conf)"});
    } else {
      const std::string fsync = config(node, "appendfsync");
      if (fsync != "everysec" && fsync != "always") {
        findings.push_back({where,
                            fmt::format("appendfsync is {}: a crash of the machine loses what the OS had "
                                        "not yet written",
                                        fsync),
                            "CONFIG SET appendfsync everysec (at most a second lost) or always"});
      }
    }
    if ((*client)->cluster()) {
      auto ci = (*client)->CallNode(node, {"CLUSTER", "INFO"});
      const std::string text = ci.ok() ? ci->str : "";
      auto field = [&](const std::string& name) {
        auto p = text.find(name + ":");
        if (p == std::string::npos) return std::string("?");
        return text.substr(p + name.size() + 1, text.find('\r', p) - p - name.size() - 1);
      };
      if (field("cluster_state") != "ok" || field("cluster_slots_ok") != "16384") {
        findings.push_back({where,
                            fmt::format("the cluster state is {} with {} of 16384 slots served: jobs in "
                                        "the missing slots can be neither written nor delivered",
                                        field("cluster_state"), field("cluster_slots_ok")),
                            "assign every slot to a master (redis-cli --cluster fix HOST:PORT)"});
      }
    }
  }
  return findings;
}

}  // namespace delayq::redis
