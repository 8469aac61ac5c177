// The logs of every command: to stderr (stdout is for results), timestamps in UTC, as text
// ("2026-12-01T10:00:00.123Z warn message") or one JSON object per line
// ({"time": "...", "level": "warn", "message": "..."}), from --log-format / DELAYQ_LOG_FORMAT,
// and filtered by --log-level / DELAYQ_LOG_LEVEL.
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/cli_common.h"

namespace delayq::cli {
namespace {

// %* : the message as the inside of a JSON string (spdlog's %v writes it raw).
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        dest.push_back('\\');
        dest.push_back(c);
      } else if (c == '\n') {
        dest.append(std::string_view("\\n"));
      } else if (u < 0x20) {
        const char esc[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
        dest.append(esc, esc + sizeof(esc));
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessage>(); }
};

}  // namespace

void AddLogOptions(CLI::App& app, LogOptions& o) {
  app.add_option("--log-format", o.format, "Logs as text or json, one line each (or DELAYQ_LOG_FORMAT)")
      ->envname("DELAYQ_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", o.level, "Least level logged: debug, info, warn, error, off (or DELAYQ_LOG_LEVEL)")
      ->envname("DELAYQ_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
}

void SetUpLogging(const LogOptions& o) {
  auto logger = spdlog::get("delayq");
  if (!logger) logger = spdlog::stderr_color_mt("delayq");
  spdlog::set_default_logger(logger);
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (o.format == "json") {
    formatter->add_flag<JsonMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","message":"%*"})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v");
  }
  spdlog::set_formatter(std::move(formatter));
  spdlog::set_level(spdlog::level::from_str(o.level));
}

}  // namespace delayq::cli
