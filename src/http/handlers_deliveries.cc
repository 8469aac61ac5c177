// Delivery routes: reserve (which may wait, holding no thread) and the ends of deliveries: ack,
// nack, touch, each for one receipt or a batch.
#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <optional>

#include "core/receipt.h"
#include "core/validate.h"
#include "http/handlers.h"
#include "http/response.h"
#include "wire/receipts.h"
#include "wire/reserve.h"
#include "wire/stream.h"

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
  if (waits && c.metrics.waiting.load() + c.metrics.streams.load() >= c.options.max_waiting) {
    reply(ErrorResponse(Status::ResourceExhausted(
        fmt::format("{} reserves, streams and waits for an outcome are already waiting, the most this server holds "
                    "(--max-waiting); retry shortly or use a shorter wait_ms",
                    c.options.max_waiting))));
    return {};
  }
  if (waits) ++c.metrics.waiting;
  Queue& queue = c.queue;
  Metrics& metrics = c.metrics;
  const uint64_t handle =
      queue.ReserveAsync(call.queue(), *parsed,
                         [&queue, &metrics, reply = std::move(reply), waits, name = call.queue(),
                          peer_closed = call.request.peer_closed](Result<std::vector<Delivery>> jobs) {
                           if (waits) --metrics.waiting;
                           if (!jobs.ok()) {
                             reply(ErrorResponse(jobs.status()));
                             return;
                           }
                           std::vector<std::string> receipts;
                           for (const auto& d : *jobs) receipts.push_back(d.receipt);
                           if (!receipts.empty() && peer_closed && peer_closed()) {
                             // The consumer left while the jobs were taken for it: they are ready again now, and
                             // the delivery that never reached anyone uses no attempt.
                             (void)queue.ReleaseBatch(name, receipts);
                             jobs->clear();
                             receipts.clear();
                           }
                           HttpResponse response = JsonResponse(200, wire::WriteReserveResponse(*jobs));
                           if (!receipts.empty()) {
                             // An answer that cannot be written (the connection broke) gives its jobs back the same
                             // way.
                             response.unwritten = [&queue, name, receipts = std::move(receipts)] {
                               (void)queue.ReleaseBatch(name, receipts);
                             };
                           }
                           reply(std::move(response));
                         });
  if (handle == 0) return {};
  return [&queue, handle] { queue.CancelReserve(handle); };
}

HttpResponse Stream(Context& c, const Call& call) {
  auto parsed = wire::ParseStreamRequest(call.request.body);
  if (!parsed.ok()) return ErrorResponse(parsed.status());
  if (Status s = ValidateQueueName(call.queue()); !s.ok()) return ErrorResponse(s);
  // A stream holds a waiting reserve most of its life: it counts against --max-waiting.
  if (c.metrics.waiting.load() + c.metrics.streams.load() >= c.options.max_waiting) {
    return ErrorResponse(Status::ResourceExhausted(
        fmt::format("{} reserves, streams and waits for an outcome are already waiting, the most this server holds "
                    "(--max-waiting); retry shortly",
                    c.options.max_waiting)));
  }
  HttpResponse r;
  r.content_type = "application/x-ndjson";
  r.stream =
      std::make_shared<PushStream>(c.queue, c.streams, c.metrics, call.queue(), *parsed, c.options.stream_heartbeat_ms);
  return r;
}

namespace {

// Tells this server's push streams that their deliveries ended (room for one more each), unless
// the store could not say (unavailable: the delivery may still be in flight). All at once: a
// stream then reserves once for the room an ack of many makes, not once per receipt.
void TellStreams(PushStreams& streams, const std::vector<std::string>& receipts, const std::vector<Status>& results) {
  std::vector<std::string> ended;
  ended.reserve(receipts.size());
  for (size_t i = 0; i < receipts.size() && i < results.size(); ++i) {
    if (results[i].code() != Code::kUnavailable && results[i].code() != Code::kInternal) ended.push_back(receipts[i]);
  }
  streams.Ended(ended);
}

}  // namespace

std::function<void()> Ack(Context& c, const Call& call, Reply reply) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kAck);
  if (!body.ok()) {
    reply(ErrorResponse(body.status()));
    return {};
  }
  std::vector<AckRequest> requests;
  requests.reserve(body->receipts.size());
  for (size_t i = 0; i < body->receipts.size(); ++i) {
    requests.push_back({body->receipts[i], body->results.empty() ? std::nullopt : std::move(body->results[i])});
  }
  auto receipts = std::make_shared<std::vector<std::string>>(std::move(body->receipts));
  const bool batch = body->batch;
  c.queue.AckBatchAsync(
      call.queue(), requests,
      [reply = std::move(reply), receipts, batch, &streams = c.streams](std::vector<Status> results) {
        TellStreams(streams, *receipts, results);
        if (!batch) {
          if (!results[0].ok()) return reply(ErrorResponse(results[0]));
          return reply(JsonResponse(200, R"({"acked":1})"));
        }
        reply(JsonResponse(200, wire::WriteBatchResponse("acked", *receipts, results, FirstOccurrences(*receipts))));
      });
  return {};
}

namespace {

// Ends each delivery of a receipts request with `start(receipt, done)`, all of them in flight at
// once (each store call does its part at once, in request order, and answers once its write is
// durable: one fsync covers the lot), and replies when the last has answered: the single answer
// written by `write_one`, or the batch answer. A receipt given twice is ended once. `ended`,
// when given, hears every receipt and its outcome once the last has answered, before the reply.
template <typename R>
void EndEach(std::vector<std::string> receipts, bool batch, std::string_view verb,
             std::function<void(const std::string&, std::function<void(Result<R>)>)> start,
             std::string (*write_one)(const R&), Reply reply,
             std::function<void(const std::vector<std::string>&, const std::vector<Status>&)> ended = {}) {
  struct State {
    std::vector<std::string> receipts;
    std::vector<size_t> first;
    std::vector<std::optional<Result<R>>> results;
    std::atomic<size_t> left{0};
    bool batch;
    std::string verb;
    std::string (*write_one)(const R&);
    Reply reply;
    std::function<void(const std::vector<std::string>&, const std::vector<Status>&)> ended;
  };
  auto state = std::make_shared<State>();
  state->first = FirstOccurrences(receipts);
  state->receipts = std::move(receipts);
  state->results.resize(state->receipts.size());
  state->batch = batch;
  state->verb = verb;
  state->write_one = write_one;
  state->reply = std::move(reply);
  state->ended = std::move(ended);
  size_t firsts = 0;
  for (size_t i = 0; i < state->first.size(); ++i) firsts += state->first[i] == i;
  state->left = firsts;
  auto finish = [](State& st) {
    std::vector<Status> statuses;
    const R* last = nullptr;
    for (size_t i = 0; i < st.results.size(); ++i) {
      const Result<R>& r = *st.results[st.first[i]];
      statuses.push_back(r.status());
      if (r.ok() && st.first[i] == i) last = &*r;
    }
    if (st.ended) st.ended(st.receipts, statuses);
    if (!st.batch) {
      if (!statuses[0].ok()) return st.reply(ErrorResponse(statuses[0]));
      return st.reply(JsonResponse(200, st.write_one(*last)));
    }
    st.reply(JsonResponse(200, wire::WriteBatchResponse(st.verb, st.receipts, statuses, st.first)));
  };
  for (size_t i = 0; i < state->receipts.size(); ++i) {
    if (state->first[i] != i) continue;
    start(state->receipts[i], [state, i, finish](Result<R> r) {
      state->results[i] = std::move(r);
      if (state->left.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(*state);
    });
  }
}

}  // namespace

std::function<void()> Nack(Context& c, const Call& call, Reply reply) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kNack);
  if (!body.ok()) {
    reply(ErrorResponse(body.status()));
    return {};
  }
  Queue& queue = c.queue;
  std::string name(call.queue());
  EndEach<NackResult>(
      std::move(body->receipts), body->batch, "nacked",
      [&queue, name, retry = body->retry_in_ms, error = body->error, dead = body->dead](const std::string& receipt,
                                                                                        NackCallback done) {
        queue.NackAsync(name, {receipt, retry, error, dead}, std::move(done));
      },
      wire::WriteNackResponse, std::move(reply),
      // The streams hear of the whole nack at once: one reserve for the room it makes.
      [&streams = c.streams](const std::vector<std::string>& receipts, const std::vector<Status>& results) {
        TellStreams(streams, receipts, results);
      });
  return {};
}

std::function<void()> Touch(Context& c, const Call& call, Reply reply) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kTouch);
  if (!body.ok()) {
    reply(ErrorResponse(body.status()));
    return {};
  }
  Queue& queue = c.queue;
  std::string name(call.queue());
  EndEach<TouchResult>(
      std::move(body->receipts), body->batch, "touched",
      [&queue, &streams = c.streams, name, lease = body->lease_ms, progress = body->progress](
          const std::string& receipt, TouchCallback done) {
        queue.TouchAsync(name, TouchRequest{receipt, lease, progress},
                         [&streams, receipt, done = std::move(done)](Result<TouchResult> r) {
                           if (r.ok()) streams.Touched(receipt, r->lease_deadline_ms);
                           done(std::move(r));
                         });
      },
      wire::WriteTouchResponse, std::move(reply));
  return {};
}

HttpResponse Release(Context& c, const Call& call) {
  auto body = wire::ParseReceiptsRequest(call.request.body, wire::ReceiptsFor::kRelease);
  if (!body.ok()) return ErrorResponse(body.status());
  std::vector<Status> results = c.queue.ReleaseBatch(call.queue(), body->receipts);
  TellStreams(c.streams, body->receipts, results);
  if (!body->batch) {
    if (!results[0].ok()) return ErrorResponse(results[0]);
    return JsonResponse(200, R"({"released":1})");
  }
  return JsonResponse(200,
                      wire::WriteBatchResponse("released", body->receipts, results, FirstOccurrences(body->receipts)));
}

}  // namespace delayq::http::handlers
