// Delivery routes: reserve (which may wait, holding no thread) and the ends of deliveries: ack,
// nack, touch, each for one receipt or a batch.
#include <fmt/format.h>

#include <memory>

#include "core/receipt.h"
#include "http/handlers.h"
#include "http/response.h"
#include "wire/receipts.h"
#include "wire/reserve.h"

namespace delayq::http::handlers {

std::function<void()> Reserve(Context& c, const Call& call, Reply reply) {
  auto parsed = wire::ParseReserveRequest(call.request.body);
  if (!parsed.ok()) {
    reply(ErrorResponse(parsed.status()));
    return {};
  }
  if (call.request.peer_closed && call.request.peer_closed()) {
    reply(JsonResponse(200, R"({"jobs":[]})"));
    return {};
  }
  const bool waits = parsed->wait_ms > 0;
  if (waits && c.metrics.waiting.load() >= c.options.max_waiting) {
    reply(ErrorResponse(Status::ResourceExhausted(fmt::format(
        "{} reserves are already waiting, the most this server holds (--max-waiting); retry shortly or use a "
        "shorter wait_ms",
        c.options.max_waiting))));
    return {};
  }
  if (waits) ++c.metrics.waiting;
  Queue& queue = c.queue;
  Metrics& metrics = c.metrics;
  const uint64_t handle = queue.ReserveAsync(
      call.queue(), *parsed,
      [&queue, &metrics, reply = std::move(reply), waits, name = call.queue(),
       peer_closed = call.request.peer_closed](Result<std::vector<Delivery>> jobs) {
        if (waits) --metrics.waiting;
        if (!jobs.ok()) {
          reply(ErrorResponse(jobs.status()));
          return;
        }
        if (!jobs->empty() && peer_closed && peer_closed()) {
          // The consumer left while the jobs were taken for it: they are ready again now rather
          // than at the end of a lease nobody holds (the delivery counts as an attempt).
          for (const auto& d : *jobs) {
            (void)queue.Nack(name, NackRequest{.receipt = d.receipt,
                                               .retry_in_ms = 0,
                                               .error = "the consumer hung up before the delivery reached it"});
          }
          jobs->clear();
        }
        reply(JsonResponse(200, wire::WriteReserveResponse(*jobs)));
      });
  if (handle == 0) return {};
  return [&queue, handle] { queue.CancelReserve(handle); };
}

std::function<void()> Ack(Context& c, const Call& call, Reply reply) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kAck);
  if (!body.ok()) {
    reply(ErrorResponse(body.status()));
    return {};
  }
  auto receipts = std::make_shared<std::vector<std::string>>(std::move(body->receipts));
  const bool batch = body->batch;
  c.queue.AckBatchAsync(
      call.queue(), *receipts, [reply = std::move(reply), receipts, batch](std::vector<Status> results) {
        if (!batch) {
          if (!results[0].ok()) return reply(ErrorResponse(results[0]));
          return reply(JsonResponse(200, R"({"acked":1})"));
        }
        reply(JsonResponse(200, wire::WriteBatchResponse("acked", *receipts, results, FirstOccurrences(*receipts))));
      });
  return {};
}

HttpResponse Nack(Context& c, const Call& call) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kNack);
  if (!body.ok()) return ErrorResponse(body.status());
  const std::vector<size_t> first = FirstOccurrences(body->receipts);
  std::vector<Status> results;
  NackResult last;
  for (size_t i = 0; i < body->receipts.size(); ++i) {
    if (first[i] != i) {  // the same delivery again: nacked once
      results.push_back(results[first[i]]);
      continue;
    }
    auto res = c.queue.Nack(call.queue(), {body->receipts[i], body->retry_in_ms, body->error, body->dead});
    results.push_back(res.ok() ? Status::Ok() : res.status());
    if (res.ok()) last = *res;
  }
  if (!body->batch) {
    if (!results[0].ok()) return ErrorResponse(results[0]);
    return JsonResponse(200, wire::WriteNackResponse(last));
  }
  return JsonResponse(200, wire::WriteBatchResponse("nacked", body->receipts, results, first));
}

HttpResponse Touch(Context& c, const Call& call) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kTouch);
  if (!body.ok()) return ErrorResponse(body.status());
  const std::vector<size_t> first = FirstOccurrences(body->receipts);
  std::vector<Status> results;
  TouchResult last;
  for (size_t i = 0; i < body->receipts.size(); ++i) {
    if (first[i] != i) {
      results.push_back(results[first[i]]);
      continue;
    }
    auto res = c.queue.Touch(call.queue(), body->receipts[i], body->lease_ms);
    results.push_back(res.ok() ? Status::Ok() : res.status());
    if (res.ok()) last = *res;
  }
  if (!body->batch) {
    if (!results[0].ok()) return ErrorResponse(results[0]);
    return JsonResponse(200, wire::WriteTouchResponse(last));
  }
  return JsonResponse(200, wire::WriteBatchResponse("touched", body->receipts, results, first));
}

}  // namespace delayq::http::handlers
