// `delayq doctor`: reads every master's settings and reports those that lose or delay jobs.
#include "store/redis/doctor.h"

#include <cstdio>

#include <fmt/format.h>

#include "store/redis/redis_client.h"

namespace delayq::redis {

Result<std::vector<DoctorFinding>> Doctor(std::string_view url_text) {
  auto url = RedisUrl::Parse(url_text);
  if (!url.ok()) return url.status();
  auto client = RedisClient::Connect(*url);
  if (!client.ok()) return client.status();
  std::vector<DoctorFinding> findings;
  std::vector<Endpoint> nodes = (*client)->Masters();
  if (nodes.empty()) nodes = url->endpoints;
  auto config = [&](const Endpoint& node, const std::string& name) -> std::string {
    auto v = (*client)->CallNode(node, {"CONFIG", "GET", name});
    if (!v.ok()) return "?" + v.status().message();
    if (v->is_error()) return "?" + v->str;
    return v->array.size() >= 2 ? v->array[1].str : "?missing";
  };
  for (const Endpoint& node : nodes) {
    const std::string where = node.ToString();
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
