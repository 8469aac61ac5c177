// Microbenchmarks of the per-job hot paths that are pure CPU: ids, the record codec, the
// lateness histogram, receipts.
#include <benchmark/benchmark.h>

#include "core/histogram.h"
#include "core/receipt_signer.h"
#include "core/record.h"
#include "core/ulid.h"

namespace delayq {
namespace {

void BM_UlidNext(benchmark::State& state) {
  UlidGenerator gen;
  int64_t ms = 1'767'225'600'000;
  for (auto _ : state) benchmark::DoNotOptimize(gen.Next(ms++ / 4));
}
BENCHMARK(BM_UlidNext);

JobRecord Sample() {
  JobRecord r;
  r.queue = "orders";
  r.key = "order-42";
  r.due_at_ms = 1'767'225'600'000;
  r.created_at_ms = 1'767'225'000'000;
  r.max_attempts = 5;
  r.headers = {{"version", "2"}};
  r.payload = std::string(100, 'x');
  return r;
}

void BM_EncodeJobRecord(benchmark::State& state) {
  JobRecord r = Sample();
  for (auto _ : state) benchmark::DoNotOptimize(EncodeJobRecord(r));
}
BENCHMARK(BM_EncodeJobRecord);

void BM_DecodeJobRecord(benchmark::State& state) {
  std::string bytes = EncodeJobRecord(Sample());
  JobRecord r;
  for (auto _ : state) benchmark::DoNotOptimize(DecodeJobRecord(bytes, &r));
}
BENCHMARK(BM_DecodeJobRecord);

void BM_HistogramRecord(benchmark::State& state) {
  LatencyHistogram h;
  int64_t v = 0;
  for (auto _ : state) h.Record((v += 7919) & 0xfffff);
  benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HistogramRecord);

}  // namespace
}  // namespace delayq

// Issuing a receipt (an HMAC-SHA256 tag) for each delivery, and opening one for each ack.
static void BM_ReceiptIssue(benchmark::State& state) {
  delayq::ReceiptSigner signer(delayq::ReceiptSigner::NewSecret());
  delayq::UlidGenerator gen;
  delayq::Receipt r{.id = gen.Next(1'700'000'000'000), .token = {1, 2}};
  for (auto _ : state) benchmark::DoNotOptimize(signer.Issue("orders", r));
}
BENCHMARK(BM_ReceiptIssue);

static void BM_ReceiptOpen(benchmark::State& state) {
  delayq::ReceiptSigner signer(delayq::ReceiptSigner::NewSecret());
  delayq::UlidGenerator gen;
  const std::string text = signer.Issue("orders", {.id = gen.Next(1'700'000'000'000), .token = {1, 2}});
  for (auto _ : state) benchmark::DoNotOptimize(signer.Open("orders", text));
}
BENCHMARK(BM_ReceiptOpen);
