// `delayq bench`: a load generator against a running server.
//
//   burst       (default) N jobs with P-byte payloads due uniformly over a window, enqueued in
//               batches, consumed by C long-polling consumers as they come due. Reports enqueue
//               rate, delivery rate, lateness percentiles (received - due, one machine clock),
//               lost, duplicate and early counts, and the server's memory.
//   single      one job per request over K keep-alive connections for a while: requests/s.
//   idle-polls  N connections each holding a waiting reserve: the server's memory and CPU.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <regex>
#include <thread>
#include <unordered_set>

#include "cli/cli_common.h"
#include "core/duration.h"
#include "core/histogram.h"
#include "delayq/clock.h"
#include "wire/json_writer.h"

namespace delayq::cli {
namespace {

using Steady = std::chrono::steady_clock;

double Seconds(Steady::time_point a, Steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// A gauge or counter from the server's /metrics.
double MetricValue(Client& c, const std::string& name) {
  auto text = c.Metrics();
  if (!text.ok()) return -1;
  std::regex re("(^|\\n)" + name + " ([0-9.e+]+)");
  std::smatch m;
  if (std::regex_search(*text, m, re)) return std::stod(m[2]);
  return -1;
}

struct BenchArgs {
  std::string mode = "burst", queue, window = "10s", grace = "5s", duration = "10s";
  std::string lead;  // burst: from the enqueue's start to the window's; default: time to enqueue
  int64_t jobs = 100'000;
  int payload_bytes = 100, batch = 100, producers = 4, consumers = 4, reserve_max = 100;
  int connections = 16, polls = 10'000;
  bool progress = true;
  bool stream = false;  // burst: consumers take push streams (POST .../stream) instead of long polls
  int max_in_flight = 500;
};

void Progress(bool on, const char* fmt_text, int64_t a, int64_t b) {
  if (!on) return;
  std::fprintf(stderr, "\r%s", fmt::format(fmt::runtime(fmt_text), a, b).c_str());
}

// A burst run's plan and what its consumers saw.
struct Burst {
  const Global& g;
  const BenchArgs& a;
  const std::string& queue;
  int64_t window_ms = 0;
  int64_t start_ms = 0;  // the window's start
  int64_t end_ms = 0;    // the window's end and the grace after it: consumers stop
  SystemClock clock;

  std::mutex mu;
  LatencyHistogram hist;                 // under mu
  std::unordered_set<std::string> seen;  // under mu
  std::atomic<int64_t> received{0}, duplicates{0}, early{0}, errors{0}, enqueued{0}, next{0};
  std::atomic<int64_t> last_receive_ms{0};
  std::atomic<bool> done{false};

  void Consume();
  void ConsumeStream();
  // Notes one delivery (lateness, early, duplicate); under mu.
  void NoteLocked(const Delivery& d, int64_t now_us, LatencyHistogram& local);
  void Produce(int p, const std::string& payload);
  // Counts a failed call; the first few are shown, so a run with errors says what they were.
  void NoteError(const char* what, const Status& s);
  void Report(double enqueue_seconds, bool enqueue_late) const;
};

// A consumer: long-polls, notes each delivery's lateness (or that it came early or twice), and
// acks, until every job came or the window and grace are over.
void Burst::Consume() {
  auto client = MakeClient(g);
  if (!client.ok()) return;
  LatencyHistogram local;
  std::vector<std::string> receipts;
  while (!done && clock.NowMs() < end_ms) {
    auto got = (*client)->Reserve(queue, {a.reserve_max, 1000, std::nullopt});
    const int64_t now_us = clock.NowUs();
    if (!got.ok()) {
      NoteError("reserve", got.status());
      continue;
    }
    receipts.clear();
    {
      std::lock_guard lock(mu);
      for (auto& d : *got) {
        NoteLocked(d, now_us, local);
        receipts.push_back(std::move(d.receipt));
      }
    }
    if (!receipts.empty()) {
      last_receive_ms = now_us / 1000;
      received += static_cast<int64_t>(receipts.size());
      for (const Status& s : (*client)->AckBatch(queue, receipts)) {
        if (!s.ok()) NoteError("ack", s);
      }
    }
    if (received.load() >= a.jobs) done = true;
  }
  std::lock_guard lock(mu);
  hist.Merge(local);
}

void Burst::NoteError(const char* what, const Status& s) {
  if (++errors <= 5) std::fprintf(stderr, "\n%s failed: %s\n", what, s.message().c_str());
}

void Burst::NoteLocked(const Delivery& d, int64_t now_us, LatencyHistogram& local) {
  const int64_t late = now_us - d.due_at_ms * 1000;
  if (late < -1000) ++early;
  if (!seen.insert(d.id).second) {
    ++duplicates;
  } else {
    local.Record(late);
  }
}

// A consumer on a push stream: notes each job as its line arrives; a second thread acks what
// came, in batches, every 2 ms or so (an ack per line would be a request per job again).
void Burst::ConsumeStream() {
  auto client = MakeClient(g);
  auto acker = MakeClient(g);
  if (!client.ok() || !acker.ok()) return;
  LatencyHistogram local;
  std::mutex pending_mu;
  std::condition_variable pending_cv;
  std::vector<std::string> pending;
  std::atomic<bool> stop{false};
  std::thread acks([&] {
    std::vector<std::string> batch;
    while (true) {
      {
        std::unique_lock lock(pending_mu);
        pending_cv.wait_for(lock, std::chrono::milliseconds(2), [&] { return pending.size() >= 100 || stop; });
        batch.swap(pending);
        if (batch.empty() && stop) return;
      }
      if (batch.empty()) continue;
      for (const Status& s : (*acker)->AckBatch(queue, batch)) {
        if (!s.ok()) NoteError("ack", s);
      }
      batch.clear();
    }
  });
  // The last receipts are acked before the stream closes: a stream's end gives back what it
  // holds unacknowledged (ready again), and their acks would then be refused as stale.
  bool acks_over = false;
  auto finish_acks = [&] {
    if (acks_over) return;
    acks_over = true;
    {
      std::lock_guard lock(pending_mu);
      stop = true;
    }
    pending_cv.notify_one();
    acks.join();
  };
  StreamOptions options;
  options.max_in_flight = a.max_in_flight;
  while (!done && clock.NowMs() < end_ms) {
    Status s = (*client)->Stream(queue, options, [&](const Delivery* d) {
      if (d) {
        const int64_t now_us = clock.NowUs();
        {
          std::lock_guard lock(mu);
          NoteLocked(*d, now_us, local);
        }
        last_receive_ms = now_us / 1000;
        if (++received >= a.jobs) done = true;
        std::lock_guard lock(pending_mu);
        pending.push_back(d->receipt);
        if (pending.size() >= 100) pending_cv.notify_one();
      }
      const bool more = !done && clock.NowMs() < end_ms;
      if (!more) finish_acks();
      return more;
    });
    if (!s.ok()) NoteError("stream", s);
  }
  finish_acks();
  std::lock_guard lock(mu);
  hist.Merge(local);
}

// A producer: batches of jobs due uniformly over [start, start + window).
void Burst::Produce(int p, const std::string& payload) {
  auto client = MakeClient(g);
  if (!client.ok()) return;
  std::mt19937_64 rng(static_cast<uint64_t>(p) * 7919 + 1);
  std::vector<EnqueueRequest> reqs;
  while (true) {
    const int64_t first = next.fetch_add(a.batch);
    if (first >= a.jobs) break;
    const int64_t n = std::min<int64_t>(a.batch, a.jobs - first);
    reqs.assign(static_cast<size_t>(n), {});
    for (auto& r : reqs) {
      r.payload = payload;
      r.when.deliver_at_ms = start_ms + static_cast<int64_t>(rng() % static_cast<uint64_t>(window_ms));
    }
    Status res;
    if (a.batch == 1) {
      auto one = (*client)->Enqueue(queue, reqs[0]);
      if (!one.ok()) res = one.status();
    } else {
      auto many = (*client)->EnqueueBatch(queue, reqs);
      if (!many.ok()) res = many.status();
    }
    if (!res.ok()) {
      NoteError("enqueue", res);
      continue;
    }
    int64_t total = enqueued += n;
    if (p == 0) Progress(a.progress, "enqueued {}/{}   ", total, a.jobs);
  }
}

void Burst::Report(double enqueue_seconds, bool enqueue_late) const {
  auto client = MakeClient(g);
  const double rss = client.ok() ? MetricValue(**client, "delayq_process_resident_memory_bytes") : -1;
  const int64_t unique = static_cast<int64_t>(seen.size());
  const double delivery_seconds = std::max<double>(0.001, (last_receive_ms - start_ms) / 1000.0);
  auto ms = [&](double q) { return static_cast<double>(hist.Percentile(q)) / 1000.0; };
  if (g.json) {
    wire::JsonWriter j;
    j.BeginObject().Key("mode").String("burst").Key("queue").String(queue);
    j.Key("jobs").Int(a.jobs).Key("payload_bytes").Int(a.payload_bytes).Key("batch").Int(a.batch);
    j.Key("producers").Int(a.producers).Key("consumers").Int(a.consumers).Key("window_ms").Int(window_ms);
    j.Key("delivery").String(a.stream ? "stream" : "long-poll");
    j.Key("enqueue_jobs_per_s").Double(static_cast<double>(enqueued.load()) / enqueue_seconds);
    j.Key("enqueue_finished_before_window").Bool(!enqueue_late);
    j.Key("delivered").Int(unique).Key("lost").Int(a.jobs - unique).Key("duplicates").Int(duplicates.load());
    j.Key("early").Int(early.load()).Key("errors").Int(errors.load());
    j.Key("delivery_jobs_per_s").Double(static_cast<double>(unique) / delivery_seconds);
    j.Key("lateness_ms").BeginObject().Key("p50").Double(ms(0.5)).Key("p90").Double(ms(0.9));
    j.Key("p99").Double(ms(0.99)).Key("p999").Double(ms(0.999)).Key("max").Double(hist.max_us() / 1000.0);
    j.EndObject().Key("server_rss_bytes").Double(rss).EndObject();
    std::printf("%s\n", j.str().c_str());
    return;
  }
  std::printf("burst: %lld jobs of %d bytes due over %s, %d producers (batches of %d), %d consumers%s\n",
              static_cast<long long>(a.jobs), a.payload_bytes, a.window.c_str(), a.producers, a.batch, a.consumers,
              a.stream ? " on push streams" : " long-polling");
  std::printf("  enqueue     %.0f jobs/s%s\n", enqueued.load() / enqueue_seconds,
              enqueue_late ? "  (finished after the window began: jobs came due while others were still being "
                             "enqueued; --lead sets how long enqueueing runs before the window)"
                           : "");
  std::printf("  delivery    %.0f jobs/s\n", unique / delivery_seconds);
  std::printf("  lateness    p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n", ms(0.5), ms(0.9),
              ms(0.99), ms(0.999), hist.max_us() / 1000.0);
  std::printf("  delivered %lld, lost %lld, duplicates %lld, early %lld, errors %lld\n", static_cast<long long>(unique),
              static_cast<long long>(a.jobs - unique), static_cast<long long>(duplicates.load()),
              static_cast<long long>(early.load()), static_cast<long long>(errors.load()));
  std::printf("  server RSS  %.1f MiB\n", rss / 1048576.0);
}

Status RunBurst(const Global& g, const BenchArgs& a, const std::string& queue) {
  auto w = ParseDuration(a.window);
  auto grace = ParseDuration(a.grace);
  if (!w.ok()) return w.status();
  if (!grace.ok()) return grace.status();
  int64_t lead_ms = 3000 + a.jobs / 30;  // by default, time to enqueue everything first
  if (!a.lead.empty()) {
    auto l = ParseDuration(a.lead);
    if (!l.ok()) return l.status();
    lead_ms = *l;
  }
  Burst run{g, a, queue};
  run.window_ms = std::max<int64_t>(1, *w);
  run.start_ms = run.clock.NowMs() + lead_ms;
  run.end_ms = run.start_ms + run.window_ms + *grace;
  const std::string payload = "\"" + std::string(static_cast<size_t>(std::max(0, a.payload_bytes - 2)), 'x') + "\"";

  std::vector<std::thread> consumers;
  for (int c = 0; c < a.consumers; ++c) {
    consumers.emplace_back([&] { a.stream ? run.ConsumeStream() : run.Consume(); });
  }
  const auto enqueue_started = Steady::now();
  std::vector<std::thread> producers;
  for (int p = 0; p < a.producers; ++p) producers.emplace_back([&, p] { run.Produce(p, payload); });
  for (auto& t : producers) t.join();
  const double enqueue_seconds = Seconds(enqueue_started, Steady::now());
  const bool enqueue_late = run.clock.NowMs() > run.start_ms;
  while (!run.done && run.clock.NowMs() < run.end_ms) {
    Progress(a.progress, "received {}/{}   ", run.received.load(), a.jobs);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // progress display only
  }
  run.done = true;
  for (auto& t : consumers) t.join();
  if (a.progress) std::fprintf(stderr, "\r%60s\r", "");
  run.Report(enqueue_seconds, enqueue_late);
  const int64_t unique = static_cast<int64_t>(run.seen.size());
  return unique == a.jobs ? Status::Ok() : Status::Internal(fmt::format("{} jobs were not delivered", a.jobs - unique));
}

Status Single(const Global& g, const BenchArgs& a, const std::string& queue) {
  auto d = ParseDuration(a.duration);
  if (!d.ok()) return d.status();
  std::atomic<int64_t> count{0}, errors{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const std::string payload = "\"" + std::string(static_cast<size_t>(std::max(0, a.payload_bytes - 2)), 'x') + "\"";
  for (int c = 0; c < a.connections; ++c) {
    threads.emplace_back([&] {
      auto client = MakeClient(g);
      if (!client.ok()) return;
      EnqueueRequest r;
      r.payload = payload;
      r.when.delay_ms = 3'600'000;
      while (!stop) {
        if ((*client)->Enqueue(queue, r).ok()) {
          ++count;
        } else {
          ++errors;
        }
      }
    });
  }
  const auto started = Steady::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(*d));  // the measured interval
  stop = true;
  const int64_t n = count.load();
  const double secs = Seconds(started, Steady::now());
  for (auto& t : threads) t.join();
  if (g.json) {
    std::printf("{\"mode\":\"single\",\"connections\":%d,\"requests\":%lld,\"errors\":%lld,\"requests_per_s\":%.0f}\n",
                a.connections, static_cast<long long>(n), static_cast<long long>(errors.load()), n / secs);
  } else {
    std::printf("single: %d keep-alive connections, one job per request: %.0f requests/s (%lld errors)\n",
                a.connections, n / secs, static_cast<long long>(errors.load()));
  }
  return Status::Ok();
}

Status IdlePolls(const Global& g, const BenchArgs& a, const std::string& queue) {
  auto d = ParseDuration(a.duration);
  if (!d.ok()) return d.status();
  std::smatch m;
  std::regex re("http://([^:/]+):([0-9]+)");
  if (!std::regex_search(g.server, m, re)) {
    return Status::InvalidArgument("idle-polls needs --server http://IP:PORT");
  }
  auto client = MakeClient(g);
  if (!client.ok()) return client.status();
  const double rss_before = MetricValue(**client, "delayq_process_resident_memory_bytes");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(m[2])));
  if (inet_pton(AF_INET, m[1].str().c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("idle-polls needs an IPv4 server address");
  }
  std::string body = R"({"max":1,"wait_ms":60000})";
  std::string request = "POST /v1/queues/" + queue + "/reserve HTTP/1.1\r\nHost: x\r\n" +
                        (g.token.empty() ? "" : "Authorization: Bearer " + g.token + "\r\n") +
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::vector<int> fds;
  for (int i = 0; i < a.polls; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
      if (fd >= 0) ::close(fd);
      for (int f : fds) ::close(f);
      return Status::Unavailable(fmt::format("opened only {} of {} long polls (file limit? `ulimit -n`)", i, a.polls));
    }
    fds.push_back(fd);
    if (i % 500 == 0) Progress(a.progress, "opened {}/{} long polls   ", i, a.polls);
  }
  double waiting = 0;
  for (int i = 0; i < 100 && waiting < a.polls; ++i) {
    waiting = MetricValue(**client, "delayq_reserve_waiting");
    if (waiting < a.polls) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double rss_open = MetricValue(**client, "delayq_process_resident_memory_bytes");
  const double cpu_before = MetricValue(**client, "delayq_process_cpu_seconds_total");
  std::this_thread::sleep_for(std::chrono::milliseconds(*d));  // idle: the measured interval
  const double cpu_after = MetricValue(**client, "delayq_process_cpu_seconds_total");
  for (int f : fds) ::close(f);
  if (a.progress) std::fprintf(stderr, "\r%60s\r", "");
  const double cpu_pct = 100.0 * (cpu_after - cpu_before) / (*d / 1000.0);
  const double per_poll = (rss_open - rss_before) / a.polls;
  if (g.json) {
    std::printf(
        "{\"mode\":\"idle-polls\",\"polls\":%d,\"waiting\":%.0f,\"rss_before_bytes\":%.0f,"
        "\"rss_with_polls_bytes\":%.0f,\"bytes_per_poll\":%.0f,\"idle_cpu_percent\":%.2f}\n",
        a.polls, waiting, rss_before, rss_open, per_poll, cpu_pct);
  } else {
    std::printf(
        "idle-polls: %.0f of %d reserves waiting; server RSS %.1f -> %.1f MiB (%.0f bytes per "
        "poll); CPU while idle %.2f%% of a core\n",
        waiting, a.polls, rss_before / 1048576.0, rss_open / 1048576.0, per_poll, cpu_pct);
  }
  return Status::Ok();
}

}  // namespace

void AddBenchCommand(CLI::App& app, Global& g, int& rc) {
  auto a = std::make_shared<BenchArgs>();
  auto* b = app.add_subcommand("bench", "Load generator against a running server (burst, single, idle-polls)");
  b->add_option("--mode", a->mode, "burst | single | idle-polls")->capture_default_str();
  b->add_option("--queue", a->queue, "Queue to use (default: a fresh bench.<pid>)");
  b->add_option("--jobs", a->jobs, "burst: jobs")->capture_default_str();
  b->add_option("--window", a->window, "burst: due times spread over this")->capture_default_str();
  b->add_option("--grace", a->grace, "burst: wait this long after the window")->capture_default_str();
  b->add_option("--lead", a->lead,
                "burst: the window starts this long after the enqueue does (0: jobs come due while "
                "others are still being enqueued; default: time to enqueue them all first)");
  b->add_option("--payload-bytes", a->payload_bytes, "Payload size")->capture_default_str();
  b->add_option("--batch", a->batch, "burst: jobs per enqueue request")->capture_default_str();
  b->add_option("--producers", a->producers, "burst: enqueueing connections")->capture_default_str();
  b->add_option("--consumers", a->consumers, "burst: long-polling consumers")->capture_default_str();
  b->add_option("--reserve-max", a->reserve_max, "burst: jobs per reserve")->capture_default_str();
  b->add_flag("--stream", a->stream,
              "burst: consumers take push streams (POST /v1/queues/{q}/stream), acking in batches every 2 ms");
  b->add_option("--max-in-flight", a->max_in_flight, "burst --stream: each stream's window")->capture_default_str();
  b->add_option("--connections", a->connections, "single: keep-alive connections")->capture_default_str();
  b->add_option("--polls", a->polls, "idle-polls: waiting reserves")->capture_default_str();
  b->add_option("--duration", a->duration, "single, idle-polls: measured interval")->capture_default_str();
  b->add_flag("!--no-progress", a->progress, "Do not show progress on stderr");
  b->callback([a, &g, &rc] {
    const std::string queue = a->queue.empty() ? "bench." + std::to_string(::getpid()) : a->queue;
    if (!isatty(STDERR_FILENO)) a->progress = false;
    Status s = a->mode == "burst"        ? RunBurst(g, *a, queue)
               : a->mode == "single"     ? Single(g, *a, queue)
               : a->mode == "idle-polls" ? IdlePolls(g, *a, queue)
                                         : Status::InvalidArgument("--mode must be burst, single or idle-polls");
    if (!s.ok()) rc = Fail(s);
  });
}

}  // namespace delayq::cli
