// `delayq forward`: the Kafka delay-level forwarder (src/kafka) with its /metrics endpoint.
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"
#include "delayq/kafka/forwarder.h"
#include "server/http_server.h"

namespace delayq::cli {
namespace {

struct ForwardArgs {
  kafka::ForwarderOptions options;
  std::string metrics_listen = "127.0.0.1:7071";
  std::string port_file;
  std::vector<std::string> kafka_settings;  // KEY=VALUE, applied to consumer and producer
};

Status ApplyKafkaSettings(ForwardArgs& a) {
  for (const std::string& setting : a.kafka_settings) {
    auto eq = setting.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--kafka \"" + setting +
                                     "\" is not KEY=VALUE (e.g. --kafka security.protocol=ssl)");
    }
    std::string key = setting.substr(0, eq), value = setting.substr(eq + 1);
    a.options.consumer_config[key] = value;
    a.options.producer_config[key] = value;
  }
  return Status::Ok();
}

int RunForward(ForwardArgs& a) {
  // SIGTERM/SIGINT go to one waiting thread (every thread, librdkafka's included, inherits the
  // blocked mask), which asks the forwarder to stop; SIGUSR1 releases that thread at exit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (Status s = ApplyKafkaSettings(a); !s.ok()) return Fail(s);
  server::HttpServerOptions http;
  http.threads = 1;
  if (!server::SplitHostPort(a.metrics_listen, &http.host, &http.port)) {
    return Fail(Status::InvalidArgument("--metrics-listen \"" + a.metrics_listen +
                                        "\" is not HOST:PORT (for example 127.0.0.1:7071)"));
  }
  auto forwarder = kafka::Forwarder::Create(a.options);
  if (!forwarder.ok()) return Fail(forwarder.status());
  kafka::Forwarder& f = **forwarder;

  server::HttpServer metrics(
      [&f](http::HttpRequest request, http::Reply reply) -> std::function<void()> {
        http::HttpResponse response;
        std::string_view path = std::string_view(request.target).substr(0, request.target.find('?'));
        if (request.method != "GET") {
          response.status = 405;
          response.content_type = "text/plain";
          response.body = "only GET is served here\n";
        } else if (path == "/metrics") {
          response.content_type = "text/plain; version=0.0.4";
          response.body = f.RenderMetrics();
        } else if (path == "/healthz") {
          response.content_type = "text/plain";
          response.body = "ok\n";
        } else {
          response.status = 404;
          response.content_type = "text/plain";
          response.body = "not found; the forwarder serves GET /metrics and GET /healthz\n";
        }
        reply(std::move(response));
        return {};
      },
      http);
  if (Status s = metrics.Start(); !s.ok()) return Fail(s);
  if (!a.port_file.empty()) std::ofstream(a.port_file) << metrics.port() << "\n";
  std::printf("delayq forward: metrics on http://%s:%u/metrics\n", http.host.c_str(), metrics.port());
  std::fflush(stdout);
  std::thread http_thread([&metrics] { metrics.Run(/*handle_signals=*/false); });

  std::thread signal_thread([&signals, &f] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) spdlog::info("signal {}: stopping", sig);
    f.Stop();
  });

  Status status = f.Run();
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  metrics.Stop();
  http_thread.join();
  if (!status.ok()) return Fail(status);
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace

void AddForwardCommand(CLI::App& app, int& rc) {
  auto args = std::make_shared<ForwardArgs>();
  kafka::ForwarderOptions& o = args->options;
  auto* f = app.add_subcommand("forward", "Run the Kafka delay-level forwarder (docs/operations.md)");
  f->add_option("--brokers", o.brokers, "Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")->required();
  f->add_option("--levels", o.levels, "Delay levels, increasing")->capture_default_str();
  f->add_option("--topics-per-level", o.topics_per_level, "Topics per level (<prefix>.<level>.0..N-1)")
      ->capture_default_str();
  f->add_option("--prefix", o.prefix, "Topic prefix")->capture_default_str();
  f->add_option("--group", o.group, "Consumer group shared by the forwarder instances")->capture_default_str();
  f->add_flag("--exactly-once", o.exactly_once, "Forward and commit offsets in one transaction per batch");
  f->add_option("--transactional-id", o.transactional_id,
                "With --exactly-once: this instance's stable transactional.id (default group-host-pid)");
  f->add_option("--max-held", o.max_held_per_partition, "Messages read ahead per partition before pausing it")
      ->capture_default_str();
  f->add_option("--metrics-listen", args->metrics_listen, "HOST:PORT of /metrics")->capture_default_str();
  f->add_option("--port-file", args->port_file, "Write the metrics port to this file");
  f->add_option("--kafka", args->kafka_settings, "Extra librdkafka setting KEY=VALUE (repeatable)");
  f->callback([args, &rc] { rc = RunForward(*args); });
}

}  // namespace delayq::cli
