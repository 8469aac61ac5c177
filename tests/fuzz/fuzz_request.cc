// libFuzzer: one HTTP API request (method, target, body from the input) handled by the Api over
// an embedded engine. Any crash, sanitizer report or an answer that is not JSON with the
// documented shape is a bug. The input is "METHOD TARGET\nBODY".
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include "delayq/engine.h"
#include "http/api.h"
#include "wire/json_read.h"

namespace {

delayq::Engine& TheEngine() {
  static delayq::Engine* engine = [] {
    std::string dir = std::filesystem::temp_directory_path() / ("delayq-fuzz-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    static std::string cleanup = dir;
    std::atexit([] {
      std::error_code ignored;  // a throw here would abort the run
      std::filesystem::remove_all(cleanup, ignored);
    });
    delayq::EngineOptions o;
    o.path = dir;
    o.durability = delayq::Durability::kNone;
    auto e = delayq::Engine::Open(o);
    if (!e.ok()) std::abort();
    return e->release();
  }();
  return *engine;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static delayq::http::Api api(TheEngine(), {});
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t space = input.find(' ');
  size_t nl = input.find('\n');
  if (space == std::string::npos || nl == std::string::npos || space > nl) return 0;
  delayq::http::HttpRequest req;
  req.method = input.substr(0, space);
  req.target = input.substr(space + 1, nl - space - 1);
  req.body = input.substr(nl + 1);
  req.content_type = "application/json";  // past the browser guard, into the parsers
  // Waits would make the fuzzer slow, not find more: keep reserves immediate.
  if (req.body.find("wait_ms") != std::string::npos) return 0;
  std::promise<delayq::http::HttpResponse> p;
  auto f = p.get_future();
  api.Handle(req, [&p](delayq::http::HttpResponse r) { p.set_value(std::move(r)); });
  delayq::http::HttpResponse r = f.get();
  if (r.status < 200 || r.status > 599) std::abort();
  if (r.content_type == "application/json" && !delayq::wire::IsJsonValue(r.body)) std::abort();
  if (r.status >= 400 && r.body.find("{\"error\":{\"code\":") != 0) std::abort();
  return 0;
}
