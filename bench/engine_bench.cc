// delayq-engine-bench: the embedded engine's figures from SPEC section 9, one scenario per run.
// Prints one JSON object per run (scripts/bench-engine.sh repeats runs and takes medians).
//
//   enqueue     --durability interval|sync|none --batch 100 --threads 1 --jobs N
//   reserve-ack --jobs N --batch 100 [--rate-per-s R --max-reserved M] [--groups N --priorities 1
//               --group-max-reserved M]
//   lateness    --rate 20000 --seconds 10 --consumers 4
//   memory      --jobs 10000000
//   growth      --levels 0,1000000,10000000 --jobs 200000 --rate 20000 --seconds 5
//   (--store redis://HOST:PORT or redis-cluster://HOST:PORT [--shards N]: on the Redis store)
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/histogram.h"
#include "delayq/engine.h"
#include "store/redis/redis_queue.h"

using namespace delayq;
using Steady = std::chrono::steady_clock;

namespace {

struct Args {
  std::string scenario;
  std::map<std::string, std::string> kv;
  int64_t Int(const std::string& k, int64_t def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : std::stoll(it->second);
  }
  std::string Str(const std::string& k, const std::string& def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
};

double Seconds(Steady::time_point a, Steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

int64_t PeakRssBytes() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024;
}

uint64_t DirBytes(const std::string& path) {
  uint64_t n = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(path)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

std::unique_ptr<Engine> OpenFresh(const std::string& dir, Durability d) {
  std::filesystem::remove_all(dir);
  EngineOptions o;
  o.path = dir;
  o.durability = d;
  auto e = Engine::Open(o);
  if (!e.ok()) {
    std::fprintf(stderr, "open: %s\n", e.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*e);
}

std::string Payload() { return std::string(100, 'x'); }

// --store redis://HOST:PORT runs a scenario on the Redis store instead (the caller flushes Redis
// between runs); the queue name is fresh per run.
std::string g_store;
int g_shards = 1;
std::string g_queue = "bench";

std::unique_ptr<Queue> OpenStore(const std::string& dir, Durability d) {
  if (g_store.empty()) return OpenFresh(dir, d);
  redis::RedisQueueOptions o;
  o.url = g_store;
  o.shards = g_shards;
  auto q = redis::RedisQueue::Open(o);
  if (!q.ok()) {
    std::fprintf(stderr, "open: %s\n", q.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*q);
}

int64_t RedisUsedMemory(Queue& q) {
  auto* r = dynamic_cast<redis::RedisQueue*>(&q);
  if (!r) return 0;
  auto all = r->client().CallAll({"INFO", "memory"});
  int64_t total = 0;
  if (!all.ok()) return 0;
  for (auto& [node, v] : *all) {
    auto p = v.str.find("used_memory:");
    if (p != std::string::npos) total += std::atoll(v.str.c_str() + p + 12);
  }
  return total;
}

// The commands Redis ran (scripts' redis.call included, EVALSHA itself not), summed over its
// nodes: INFO commandstats' calls. Taken before and after a phase, the difference per job is what
// "fewer redis.calls per job" measures. Empty for the embedded store.
std::map<std::string, int64_t> RedisCommandCalls(Queue& q) {
  std::map<std::string, int64_t> calls;
  auto* r = dynamic_cast<redis::RedisQueue*>(&q);
  if (!r) return calls;
  auto all = r->client().CallAll({"INFO", "commandstats"});
  if (!all.ok()) return calls;
  for (auto& [node, v] : *all) {
    std::istringstream in(v.str);
    std::string line;
    while (std::getline(in, line)) {  // cmdstat_hget:calls=12,usec=...
      const auto colon = line.find(":calls=");
      if (line.rfind("cmdstat_", 0) != 0 || colon == std::string::npos) continue;
      const std::string name = line.substr(8, colon - 8);
      if (name == "evalsha" || name == "eval" || name == "info") continue;
      calls[name] += std::atoll(line.c_str() + colon + 7);
    }
  }
  return calls;
}

// "calls_per_job": the commands per job between two RedisCommandCalls, and the five most called.
std::string CallsPerJobJson(const std::map<std::string, int64_t>& before, const std::map<std::string, int64_t>& after,
                            int64_t jobs) {
  if (after.empty() || jobs <= 0) return "";
  std::vector<std::pair<int64_t, std::string>> by;
  int64_t total = 0;
  for (const auto& [name, n] : after) {
    auto it = before.find(name);
    const int64_t d = n - (it == before.end() ? 0 : it->second);
    total += d;
    if (d > 0) by.emplace_back(d, name);
  }
  std::sort(by.rbegin(), by.rend());
  std::string top;
  for (size_t i = 0; i < by.size() && i < 5; ++i) {
    char item[96];
    std::snprintf(item, sizeof item, "%s\"%s\":%.2f", i ? "," : "", by[i].second.c_str(),
                  static_cast<double>(by[i].first) / static_cast<double>(jobs));
    top += item;
  }
  char out[160];
  std::snprintf(out, sizeof out, ",\"redis_calls_per_job\":%.2f,\"top_calls_per_job\":{",
                static_cast<double>(total) / static_cast<double>(jobs));
  return out + top + "}";
}

void Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  std::exit(1);
}

int Enqueue(const Args& a, const std::string& dir) {
  Durability d = Durability::kInterval;
  ParseDurability(a.Str("durability", "interval"), &d);
  const int64_t jobs = a.Int("jobs", 1'000'000);
  const int64_t batch = a.Int("batch", 100);
  const int64_t threads = a.Int("threads", 1);
  // Due times: uniform over the next `spread_ms` (default an hour), in random order or, with
  // --order due, in due order (a burst handed in as it will come due).
  const int64_t spread_ms = a.Int("spread_ms", 3'600'000);
  const bool in_due_order = a.Str("order", "random") == "due";
  auto engine = OpenStore(dir, d);
  const int64_t memory_before = RedisUsedMemory(*engine);
  std::atomic<int64_t> next{0};
  auto start = Steady::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<EnqueueRequest> reqs(static_cast<size_t>(batch));
      for (auto& r : reqs) r.payload = Payload();
      int64_t n;
      while ((n = next.fetch_add(batch)) < jobs) {
        for (auto& r : reqs) {
          r.when.delay_ms = in_due_order ? 1000 + n++ * spread_ms / jobs
                                         : static_cast<int64_t>(rng() % static_cast<uint64_t>(spread_ms));
        }
        if (batch == 1) {
          auto e = engine->Enqueue(g_queue, reqs[0]);
          if (!e.ok()) Fail(e.status());
        } else {
          auto e = engine->EnqueueBatch(g_queue, reqs);
          if (!e.ok()) Fail(e.status());
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  double secs = Seconds(start, Steady::now());
  auto* as_engine = dynamic_cast<Engine*>(engine.get());
  EngineInfo info = as_engine ? as_engine->Info() : EngineInfo{};
  const int64_t memory_after = RedisUsedMemory(*engine);
  std::printf(
      "{\"scenario\":\"enqueue\",\"store\":\"%s\",\"durability\":\"%s\",\"batch\":%lld,\"threads\":%lld,"
      "\"jobs\":%lld,\"seconds\":%.3f,\"jobs_per_s\":%.0f,\"writes_per_fsync\":%.1f,"
      "\"redis_bytes_per_job\":%.0f}\n",
      g_store.empty() ? "embedded" : "redis", DurabilityName(d), (long long)batch, (long long)threads, (long long)jobs,
      secs, static_cast<double>(jobs) / secs,
      info.syncs ? static_cast<double>(info.writes) / static_cast<double>(info.syncs) : 0.0,
      static_cast<double>(memory_after - memory_before) / static_cast<double>(jobs));
  return 0;
}

int ReserveAck(const Args& a, const std::string& dir) {
  Durability d = Durability::kInterval;
  ParseDurability(a.Str("durability", "interval"), &d);
  const int64_t jobs = a.Int("jobs", 500'000);
  const int32_t batch = static_cast<int32_t>(a.Int("batch", 100));
  auto engine = OpenStore(dir, d);
  // Flow control on the measured path (--rate-per-s, --max-reserved): set high enough not to bind,
  // this is what its bookkeeping costs a reserve (docs/performance.md).
  QueueConfig limited;
  limited.rate_per_s = static_cast<double>(a.Int("rate-per-s", 0));
  limited.max_reserved = a.Int("max-reserved", 0);
  if (limited.rate_per_s > 0) limited.burst = 1'000'000;
  // Priorities and fair groups on the measured path (--groups N: jobs spread over N groups;
  // --priorities: priorities 0..9 in turn; --group-max-reserved), against the plain path.
  const int64_t groups = a.Int("groups", 0);
  const bool priorities = a.Int("priorities", 0) != 0;
  limited.group_max_reserved = a.Int("group-max-reserved", 0);
  if (limited.rate_per_s > 0 || limited.max_reserved > 0 || limited.group_max_reserved > 0) {
    if (Status s = engine->SetConfig(g_queue, limited); !s.ok()) Fail(s);
  }
  std::vector<EnqueueRequest> reqs(1000);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].payload = Payload();
    if (groups > 0) reqs[i].group = "tenant-" + std::to_string(static_cast<int64_t>(i) % groups);
    if (priorities) reqs[i].priority = static_cast<int32_t>(i % 10);
  }
  for (int64_t i = 0; i < jobs; i += 1000) {
    auto e = engine->EnqueueBatch(g_queue, reqs);
    if (!e.ok()) Fail(e.status());
  }
  int64_t done = 0;
  const auto calls_before = RedisCommandCalls(*engine);
  auto start = Steady::now();
  std::vector<std::string> receipts;
  while (done < jobs) {
    auto got = engine->Reserve(g_queue, {batch, 0, std::nullopt});
    if (!got.ok()) Fail(got.status());
    if (got->empty()) break;
    receipts.clear();
    for (auto& j : *got) receipts.push_back(std::move(j.receipt));
    for (const Status& s : engine->AckBatch(g_queue, receipts)) {
      if (!s.ok()) Fail(s);
    }
    done += static_cast<int64_t>(got->size());
  }
  double secs = Seconds(start, Steady::now());
  std::printf(
      "{\"scenario\":\"reserve-ack\",\"store\":\"%s\",\"durability\":\"%s\",\"batch\":%d,\"jobs\":%lld,"
      "\"groups\":%lld,\"priorities\":%s,\"seconds\":%.3f,\"jobs_per_s\":%.0f%s}\n",
      g_store.empty() ? "embedded" : "redis", DurabilityName(d), batch, (long long)done, (long long)groups,
      priorities ? "true" : "false", secs, static_cast<double>(done) / secs,
      CallsPerJobJson(calls_before, RedisCommandCalls(*engine), done).c_str());
  return 0;
}

// N = rate * seconds jobs, due uniformly over `seconds` starting 2 s after the enqueue ended;
// `consumers` threads wait on reserve and ack at once. Lateness = received - due, measured
// with the same clock the engine uses.
struct LatenessResult {
  int64_t received = 0, early = 0;
  LatencyHistogram hist;
  double engine_p99_ms = -1;
};
LatenessResult MeasureLateness(Queue& engine, int64_t rate, int64_t seconds, int consumers) {
  const int64_t n = rate * seconds;
  SystemClock clock;
  const int64_t window_start = clock.NowMs() + 3000 + n / 200;  // after the enqueue is done
  std::vector<EnqueueRequest> reqs;
  std::mt19937_64 rng(1);
  for (int64_t i = 0; i < n; ++i) {
    EnqueueRequest r;
    r.payload = Payload();
    r.when.deliver_at_ms = window_start + static_cast<int64_t>(rng() % (seconds * 1000));
    reqs.push_back(std::move(r));
    if (reqs.size() == 1000 || i == n - 1) {
      auto e = engine.EnqueueBatch(g_queue, reqs);
      if (!e.ok()) Fail(e.status());
      reqs.clear();
    }
  }
  if (clock.NowMs() >= window_start) {
    std::fprintf(stderr, "enqueue did not finish before the jobs came due\n");
    std::exit(1);
  }
  std::mutex mu;
  LatenessResult result;
  std::atomic<int64_t> received{0}, early{0};
  std::vector<std::thread> ts;
  for (int c = 0; c < consumers; ++c) {
    ts.emplace_back([&] {
      LatencyHistogram local;
      std::vector<std::string> receipts;
      while (received.load() < n) {
        auto got = engine.Reserve(g_queue, {100, 500, std::nullopt});
        if (!got.ok()) Fail(got.status());
        const int64_t now_us = clock.NowUs();
        receipts.clear();
        for (auto& j : *got) {
          int64_t late_us = now_us - j.due_at_ms * 1000;
          if (late_us < 0) ++early;
          local.Record(late_us);
          receipts.push_back(std::move(j.receipt));
        }
        received += static_cast<int64_t>(got->size());
        if (!receipts.empty()) (void)engine.AckBatch(g_queue, receipts);
      }
      std::lock_guard lock(mu);
      result.hist.Merge(local);
    });
  }
  for (auto& t : ts) t.join();
  auto stats = engine.Stats(g_queue);
  result.received = received.load();
  result.early = early.load();
  result.engine_p99_ms = stats.ok() ? stats->lateness.p99_ms : -1.0;
  return result;
}

int Lateness(const Args& a, const std::string& dir) {
  const int64_t rate = a.Int("rate", 20'000);
  const int64_t seconds = a.Int("seconds", 10);
  const int consumers = static_cast<int>(a.Int("consumers", 4));
  Durability d = Durability::kInterval;
  ParseDurability(a.Str("durability", "interval"), &d);
  auto engine = OpenStore(dir, d);
  const LatenessResult r = MeasureLateness(*engine, rate, seconds, consumers);
  std::printf(
      "{\"scenario\":\"lateness\",\"store\":\"%s\",\"durability\":\"%s\",\"rate\":%lld,\"jobs\":%lld,"
      "\"consumers\":%d,\"early\":%lld,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
      "\"p999_ms\":%.3f,\"max_ms\":%.3f,\"engine_p99_ms\":%.3f}\n",
      g_store.empty() ? "embedded" : "redis", DurabilityName(d), (long long)rate, (long long)r.received, consumers,
      (long long)r.early, r.hist.Percentile(0.5) / 1000.0, r.hist.Percentile(0.9) / 1000.0,
      r.hist.Percentile(0.99) / 1000.0, r.hist.Percentile(0.999) / 1000.0, r.hist.max_us() / 1000.0, r.engine_p99_ms);
  return 0;
}

// `jobs` scheduled jobs due over the next week: RSS after the enqueue and after a reopen
// (what a restarted server holds), disk bytes, and the reopen (recovery) time.
int Memory(const Args& a, const std::string& dir) {
  const int64_t jobs = a.Int("jobs", 10'000'000);
  const int64_t rss_start = RssBytes();
  auto start = Steady::now();
  {
    auto engine = OpenFresh(dir, Durability::kNone);
    std::vector<EnqueueRequest> reqs(1000);
    for (auto& r : reqs) r.payload = Payload();
    std::mt19937_64 rng(3);
    for (int64_t i = 0; i < jobs; i += 1000) {
      for (auto& r : reqs) r.when.delay_ms = 86'400'000 + static_cast<int64_t>(rng() % (7 * 86'400'000LL));
      auto e = engine->EnqueueBatch("bench", reqs);
      if (!e.ok()) Fail(e.status());
      if (i % 1'000'000 == 0)
        std::fprintf(stderr, "  %lld M jobs, RSS %lld MiB\n", (long long)(i / 1'000'000),
                     (long long)(RssBytes() >> 20));
    }
  }
  double enqueue_secs = Seconds(start, Steady::now());
  const int64_t rss_after_enqueue = PeakRssBytes();
  auto reopen_start = Steady::now();
  EngineOptions o;
  o.path = dir;
  auto engine = Engine::Open(o);
  if (!engine.ok()) Fail(engine.status());
  double reopen_secs = Seconds(reopen_start, Steady::now());
  auto stats = (*engine)->Stats("bench");
  const int64_t rss_reopened = RssBytes();
  EngineInfo info = (*engine)->Info();
  std::printf(
      "{\"scenario\":\"memory\",\"jobs\":%lld,\"scheduled\":%lld,\"enqueue_jobs_per_s\":%.0f,"
      "\"peak_rss_mib\":%.1f,\"rss_after_reopen_mib\":%.1f,\"rss_at_start_mib\":%.1f,"
      "\"window_entries\":%zu,\"disk_mib\":%.1f,\"reopen_seconds\":%.2f}\n",
      (long long)jobs, stats.ok() ? (long long)stats->scheduled : -1LL, static_cast<double>(jobs) / enqueue_secs,
      rss_after_enqueue / 1048576.0, rss_reopened / 1048576.0, rss_start / 1048576.0, info.window_entries,
      DirBytes(dir) / 1048576.0, reopen_secs);
  return 0;
}

// How cost grows with what is already scheduled. For each level of --levels the store is
// filled up to that many jobs (due 1-8 days ahead, batches of 1000, not measured), then: the
// enqueue of --jobs more (batches of 100, one thread; due 1-8 days ahead too, so that none of
// them comes due in a later level's lateness run and counts there: they join the backlog),
// the lateness of --rate due/s for --seconds with 4 consumers (delivered and acknowledged), and
// the memory held: this process's RSS, plus Redis's used_memory on every node on Redis.
int Growth(const Args& a, const std::string& dir) {
  Durability d = Durability::kInterval;
  ParseDurability(a.Str("durability", "interval"), &d);
  const int64_t jobs = a.Int("jobs", 200'000);
  const int64_t rate = a.Int("rate", 20'000);
  const int64_t seconds = a.Int("seconds", 5);
  std::vector<int64_t> levels;
  for (std::string rest = a.Str("levels", "0,1000000,10000000"); !rest.empty();) {
    const size_t comma = rest.find(',');
    levels.push_back(std::stoll(rest.substr(0, comma)));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  auto engine = OpenStore(dir, d);
  std::vector<EnqueueRequest> fill(1000);
  for (auto& r : fill) r.payload = Payload();
  std::mt19937_64 rng(5);
  int64_t filled = 0;
  for (const int64_t level : levels) {
    while (filled < level) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(1000, level - filled));
      fill.resize(n);
      for (auto& r : fill) r.when.delay_ms = 86'400'000 + static_cast<int64_t>(rng() % (7 * 86'400'000LL));
      auto e = engine->EnqueueBatch(g_queue, fill);
      if (!e.ok()) Fail(e.status());
      filled += static_cast<int64_t>(n);
      if (filled % 1'000'000 == 0) std::fprintf(stderr, "  filled %lld M\n", (long long)(filled / 1'000'000));
    }
    std::vector<EnqueueRequest> reqs(100);
    for (auto& r : reqs) r.payload = Payload();
    auto start = Steady::now();
    for (int64_t i = 0; i < jobs; i += 100) {
      for (auto& r : reqs) r.when.delay_ms = 86'400'000 + static_cast<int64_t>(rng() % (7 * 86'400'000LL));
      auto e = engine->EnqueueBatch(g_queue, reqs);
      if (!e.ok()) Fail(e.status());
    }
    const double enqueue_secs = Seconds(start, Steady::now());
    filled += jobs;
    const LatenessResult l = MeasureLateness(*engine, rate, seconds, 4);
    std::printf(
        "{\"scenario\":\"growth\",\"store\":\"%s\",\"shards\":%lld,\"durability\":\"%s\",\"level\":%lld,"
        "\"scheduled\":%lld,\"enqueue_jobs_per_s\":%.0f,\"rate\":%lld,\"delivered\":%lld,\"early\":%lld,"
        "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"rss_mib\":%.1f,\"redis_used_mib\":%.1f}\n",
        g_store.empty() ? "embedded" : "redis", (long long)a.Int("shards", 1), DurabilityName(d), (long long)level,
        (long long)filled, static_cast<double>(jobs) / enqueue_secs, (long long)rate, (long long)l.received,
        (long long)l.early, l.hist.Percentile(0.5) / 1000.0, l.hist.Percentile(0.99) / 1000.0, l.hist.max_us() / 1000.0,
        RssBytes() / 1048576.0, RedisUsedMemory(*engine) / 1048576.0);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: delayq-engine-bench enqueue|reserve-ack|lateness|memory|growth [--key value]... "
                 "[--dir DIR]\n");
    return 2;
  }
  Args a;
  a.scenario = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) == 0) k = k.substr(2);
    a.kv[k] = argv[i + 1];
  }
  spdlog::set_level(spdlog::level::warn);
  g_store = a.Str("store", "");
  g_shards = static_cast<int>(a.Int("shards", 1));
  g_queue = "bench." + std::to_string(::getpid());
  const std::string dir = a.Str("dir", "/tmp/delayq-bench-" + std::to_string(::getpid()));
  int rc;
  if (a.scenario == "enqueue") rc = Enqueue(a, dir);
  else if (a.scenario == "reserve-ack") rc = ReserveAck(a, dir);
  else if (a.scenario == "lateness") rc = Lateness(a, dir);
  else if (a.scenario == "memory") rc = Memory(a, dir);
  else if (a.scenario == "growth") rc = Growth(a, dir);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", a.scenario.c_str());
    return 2;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
