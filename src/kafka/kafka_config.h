// librdkafka configuration from delayq options, with errors that name the setting.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <map>
#include <memory>
#include <string>

#include "delayq/status.h"

namespace delayq::kafka {

// A global configuration with `settings` applied in order (later wins).
Result<std::unique_ptr<RdKafka::Conf>> MakeConf(const std::map<std::string, std::string>& settings);

// The producer settings delayq relies on: acks=all, idempotence, Java-compatible key
// partitioning. `extra` may tune anything else.
std::map<std::string, std::string> ProducerSettings(const std::string& brokers,
                                                    const std::map<std::string, std::string>& extra);

}  // namespace delayq::kafka
