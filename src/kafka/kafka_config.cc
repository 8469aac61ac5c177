#include "kafka/kafka_config.h"

#include <fmt/format.h>

namespace delayq::kafka {

Result<std::unique_ptr<RdKafka::Conf>> MakeConf(const std::map<std::string, std::string>& settings) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string error;
  for (const auto& [name, value] : settings) {
    if (conf->set(name, value, error) != RdKafka::Conf::CONF_OK) {
      return Status::InvalidArgument(fmt::format("Kafka setting {}={}: {}", name, value, error));
    }
  }
  return conf;
}

std::map<std::string, std::string> ProducerSettings(const std::string& brokers,
                                                    const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> settings = {
      {"linger.ms", "2"},
      {"partitioner", "murmur2_random"},
  };
  for (const auto& [name, value] : extra) settings[name] = value;
  // Not negotiable: a forwarded or delayed message is confirmed only when all replicas have it,
  // and retries never duplicate or reorder it.
  settings["bootstrap.servers"] = brokers;
  settings["acks"] = "all";
  settings["enable.idempotence"] = "true";
  return settings;
}

}  // namespace delayq::kafka
