#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_common.h"
#include "cli/exit_codes.h"
#include "core/duration.h"
#include "core/flow_control.h"
#include "delayq/clock.h"
#include "wire/error.h"
#include "wire/job.h"
#include "wire/json_read.h"
#include "wire/queue.h"
#include "wire/reserve.h"

namespace delayq::cli {

Result<std::unique_ptr<Client>> MakeClient(const Global& g) {
  ClientOptions options{.auth_token = g.token, .timeout_ms = 30'000, .tls_ca_file = g.ca_file};
  options.tls_cert_file = g.client_cert;
  options.tls_key_file = g.client_key;
  options.tls_server_name = g.server_name;
  return Client::Connect(g.server, std::move(options));
}

namespace {
bool json_errors = false;
}  // namespace

void SetJsonErrors(bool json) { json_errors = json; }

int Fail(const Status& s) {
  if (json_errors) {
    std::fprintf(stderr, "%s\n", wire::ErrorBody(s.code(), s.message()).c_str());
  } else {
    std::fprintf(stderr, "delayq: %s\n", s.message().c_str());
  }
  return ExitCodeOf(s.code());
}

std::string HumanDuration(int64_t ms) {
  if (ms < 0) ms = -ms;
  if (ms >= 60'000) ms = ms / 1000 * 1000;
  return FormatDuration(ms);
}

std::string WhenText(int64_t epoch_ms) {
  const int64_t now = SystemClock().NowMs();
  const int64_t d = epoch_ms - now;
  std::string rel = d > 0 ? "in " + HumanDuration(d) : HumanDuration(d) + " ago";
  if (d == 0) rel = "now";
  return FormatTimestamp(epoch_ms) + " (" + rel + ")";
}

namespace {
std::string PayloadText(const std::string& payload, bool binary) {
  if (!binary && wire::IsJsonValue(payload)) return payload.size() > 400 ? payload.substr(0, 400) + "..." : payload;
  return "base64:" + wire::Base64Encode(payload.substr(0, 300)) + (payload.size() > 300 ? "..." : "");
}
}  // namespace

void PrintJob(const Job& j, bool json) {
  if (json) {
    wire::JsonWriter w;
    wire::WriteJob(w, j);
    std::printf("%s\n", w.str().c_str());
    return;
  }
  std::printf("id          %s\nqueue       %s\nstate       %s\ndue         %s\nattempt     %d of %d\n", j.id.c_str(),
              j.queue.c_str(), JobStateName(j.state), WhenText(j.due_at_ms).c_str(), j.attempt, j.max_attempts);
  if (!j.key.empty()) std::printf("key         %s\n", j.key.c_str());
  if (j.priority != 0) std::printf("priority    %d\n", j.priority);
  if (!j.group.empty()) std::printf("group       %s\n", j.group.c_str());
  std::printf("created     %s\n", WhenText(j.created_at_ms).c_str());
  if (j.state == JobState::kReserved) std::printf("lease until %s\n", WhenText(j.lease_deadline_ms).c_str());
  if (!j.progress.empty()) std::printf("progress    %s\n", j.progress.c_str());
  if (j.state == JobState::kDead) std::printf("dead since  %s\n", WhenText(j.dead_at_ms).c_str());
  if (j.state == JobState::kCompleted) std::printf("completed   %s\n", WhenText(j.completed_at_ms).c_str());
  if (!j.result.empty()) std::printf("result      %s\n", j.result.c_str());
  if (!j.last_error.empty()) std::printf("last error  %s\n", j.last_error.c_str());
  for (const auto& [k, v] : j.headers) std::printf("header      %s: %s\n", k.c_str(), v.c_str());
  std::printf("payload     %s\n", PayloadText(j.payload, j.binary).c_str());
}

void PrintDeadJobs(const std::vector<Job>& jobs, bool json) {
  if (json) {
    wire::JsonWriter w;
    w.BeginObject().Key("jobs").BeginArray();
    for (const auto& j : jobs) wire::WriteJob(w, j);
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return;
  }
  if (jobs.empty()) {
    std::printf("no dead jobs\n");
    return;
  }
  std::printf("%-26s  %-8s  %-24s  %s\n", "ID", "ATTEMPTS", "DEAD SINCE", "LAST ERROR");
  for (const auto& j : jobs) {
    std::printf("%-26s  %-8d  %-24s  %s\n", j.id.c_str(), j.attempt, FormatTimestamp(j.dead_at_ms).c_str(),
                j.last_error.substr(0, 80).c_str());
  }
}

void PrintJobPage(const JobPage& page, JobState state, bool json, const std::string& more_hint) {
  if (json) {
    std::printf("%s\n", wire::WriteJobPageResponse(page).c_str());
    return;
  }
  const char* when = state == JobState::kDead        ? "DEAD SINCE"
                     : state == JobState::kReserved  ? "LEASE UNTIL"
                     : state == JobState::kCompleted ? "COMPLETED"
                                                     : "DUE";
  if (page.jobs.empty() && more_hint.empty()) {
    std::printf("no %s jobs\n", JobStateName(state));
    return;
  }
  // A reserved job's progress, a completed job's result ends each line.
  const char* last = state == JobState::kReserved ? "PROGRESS" : state == JobState::kCompleted ? "RESULT" : nullptr;
  if (!page.jobs.empty()) {
    std::printf("%-26s  %-24s  %-7s  %-20s  %s\n", "ID", when, "ATTEMPT", "KEY",
                last ? fmt::format("{:<60}  {}", "PAYLOAD", last).c_str() : "PAYLOAD");
  }
  for (const auto& j : page.jobs) {
    const int64_t at = state == JobState::kDead        ? j.dead_at_ms
                       : state == JobState::kReserved  ? j.lease_deadline_ms
                       : state == JobState::kCompleted ? j.completed_at_ms
                                                       : j.due_at_ms;
    std::string payload = PayloadText(j.payload, j.binary);
    if (payload.size() > 60) payload = payload.substr(0, 57) + "...";
    if (last) {
      const std::string& shown = state == JobState::kReserved ? j.progress : j.result;
      std::string text = shown.size() > 60 ? shown.substr(0, 57) + "..." : shown;
      payload = fmt::format("{:<60}  {}", payload, text);
    }
    std::printf("%-26s  %-24s  %-7s  %-20s  %s\n", j.id.c_str(), FormatTimestamp(at).c_str(),
                fmt::format("{}/{}", j.attempt, j.max_attempts).c_str(), j.key.substr(0, 20).c_str(), payload.c_str());
  }
  if (!more_hint.empty()) std::printf("more: %s\n", more_hint.c_str());
}

void PrintDeliveries(const std::vector<Delivery>& jobs, bool json) {
  if (json) {
    wire::JsonWriter w;
    w.BeginObject().Key("jobs").BeginArray();
    for (const auto& d : jobs) wire::WriteDelivery(w, d);
    w.EndArray().EndObject();
    std::printf("%s\n", w.str().c_str());
    return;
  }
  if (jobs.empty()) {
    std::printf("no job ready\n");
    return;
  }
  for (const auto& d : jobs) {
    std::printf("id %s attempt %d receipt %s\n  payload %s\n", d.id.c_str(), d.attempt, d.receipt.c_str(),
                PayloadText(d.payload, d.binary).c_str());
  }
}

void PrintStats(const std::vector<QueueStats>& list, bool json, bool one) {
  if (json) {
    wire::JsonWriter w;
    if (one && list.size() == 1) {
      wire::WriteStats(w, list[0]);
    } else {
      w.BeginObject().Key("queues").BeginArray();
      for (const auto& s : list) wire::WriteStats(w, s);
      w.EndArray().EndObject();
    }
    std::printf("%s\n", w.str().c_str());
    return;
  }
  if (list.empty()) {
    std::printf("no queues yet\n");
    return;
  }
  std::printf("%-24s %10s %8s %9s %7s %10s %12s %10s\n", "QUEUE", "SCHEDULED", "READY", "RESERVED", "DEAD", "DUE 60s",
              "LATE p99", "PAUSED");
  for (const auto& s : list) {
    std::printf("%-24s %10lld %8lld %9lld %7lld %10lld %10.2fms %10s\n", s.name.c_str(),
                static_cast<long long>(s.scheduled), static_cast<long long>(s.ready),
                static_cast<long long>(s.reserved), static_cast<long long>(s.dead),
                static_cast<long long>(s.due_next_60s), s.lateness.p99_ms, s.paused ? "yes" : "");
  }
  if (one && list.size() == 1) {
    const auto& s = list[0];
    std::printf(
        "counters: enqueued %llu, delivered %llu, acked %llu, nacked %llu, redelivered %llu, dead %llu\n",
        static_cast<unsigned long long>(s.counters.enqueued), static_cast<unsigned long long>(s.counters.delivered),
        static_cast<unsigned long long>(s.counters.acked), static_cast<unsigned long long>(s.counters.nacked),
        static_cast<unsigned long long>(s.counters.redelivered), static_cast<unsigned long long>(s.counters.dead));
    std::printf("lateness: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %llu deliveries\n", s.lateness.p50_ms,
                s.lateness.p99_ms, s.lateness.max_ms, static_cast<unsigned long long>(s.lateness.count));
    if (s.earliest_due_at_ms) std::printf("next due: %s\n", WhenText(*s.earliest_due_at_ms).c_str());
    if (s.completed > 0) std::printf("completed jobs kept: %lld\n", static_cast<long long>(s.completed));
    if (s.ready > 0) std::printf("oldest ready job waits %s\n", HumanDuration(s.oldest_ready_ms).c_str());
    for (const auto& g : s.groups) {
      std::printf("group %-24s %8lld ready %8lld reserved\n", g.group.empty() ? "(default)" : g.group.c_str(),
                  static_cast<long long>(g.ready), static_cast<long long>(g.reserved));
    }
  }
}

void PrintConfig(const std::string& queue, const QueueConfig& c, bool json) {
  if (json) {
    wire::JsonWriter w;
    wire::WriteConfig(w, c);
    std::printf("%s\n", w.str().c_str());
    return;
  }
  std::printf(
      "queue           %s\nmax attempts    %d\nlease           %s\n"
      "back-off        %s x%.2g up to %s, jitter %.2g\nmax payload     %lld bytes\n"
      "dead retention  %s\nmax delay       %s\n",
      queue.c_str(), c.max_attempts, FormatDuration(c.lease_ms).c_str(), FormatDuration(c.backoff.base_ms).c_str(),
      c.backoff.factor, FormatDuration(c.backoff.max_ms).c_str(), c.backoff.jitter,
      static_cast<long long>(c.max_payload), FormatDuration(c.dead_retention_ms).c_str(),
      FormatDuration(c.max_delay_ms).c_str());
  if (c.rate_per_s > 0) {
    std::printf("rate limit      %g deliveries/s, burst %lld\n", c.rate_per_s,
                static_cast<long long>(EffectiveBurst(c)));
  } else {
    std::printf("rate limit      none\n");
  }
  if (c.max_reserved > 0) {
    std::printf("max reserved    %lld jobs leased at once\n", static_cast<long long>(c.max_reserved));
  } else {
    std::printf("max reserved    no limit\n");
  }
  if (c.group_max_reserved > 0) {
    std::printf("group max       %lld jobs of one group leased at once\n",
                static_cast<long long>(c.group_max_reserved));
  } else {
    std::printf("group max       no limit\n");
  }
  if (c.priority_aging_ms > 0) {
    std::printf("priority aging  one level per %s due\n", FormatDuration(c.priority_aging_ms).c_str());
  } else {
    std::printf("priority aging  none (strict priorities)\n");
  }
  if (c.keep_completed_ms > 0) {
    std::printf("keep completed  %s after the ack, with its result\n", FormatDuration(c.keep_completed_ms).c_str());
  } else {
    std::printf("keep completed  no (an acked job is deleted)\n");
  }
}

}  // namespace delayq::cli
