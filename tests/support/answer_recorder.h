// Records every answer a delayq::Client gets, for tests/openapi, which checks each one against
// docs/openapi.yaml. Active when DELAYQ_ANSWERS_DIR is set (CTest sets it for the HTTP
// conformance run): one JSON line per answer {method, target, request, status, body} in
// DELAYQ_ANSWERS_DIR/answers-<pid>.jsonl.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "delayq/client.h"

namespace delayq::testing {

// Options whose on_answer records, when DELAYQ_ANSWERS_DIR is set; plain options otherwise.
inline ClientOptions RecordingOptions(ClientOptions options = {}) {
  const char* dir = std::getenv("DELAYQ_ANSWERS_DIR");
  if (!dir || !*dir) return options;
  struct Sink {
    std::mutex mu;
    std::ofstream out;
  };
  static std::shared_ptr<Sink> sink = [dir] {
    auto s = std::make_shared<Sink>();
    s->out.open(std::string(dir) + "/answers-" + std::to_string(::getpid()) + ".jsonl", std::ios::app);
    return s;
  }();
  options.on_answer = [s = sink](const HttpExchange& e) {
    nlohmann::json line = {{"method", std::string(e.method)},
                           {"target", std::string(e.target)},
                           {"request", std::string(e.request_body)},
                           {"status", e.status},
                           {"body", std::string(e.body)}};
    std::lock_guard lock(s->mu);
    s->out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    s->out.flush();
  };
  return options;
}

}  // namespace delayq::testing
