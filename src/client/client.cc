// delayq::Client: the Queue interface over the HTTP API (docs/http-api.md).
#include "delayq/client.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "client/http_connection.h"
#include "core/ack_results.h"
#include "core/validate.h"
#include "wire/enqueue.h"
#include "wire/error.h"
#include "wire/job.h"
#include "wire/queue.h"
#include "wire/receipts.h"
#include "wire/reserve.h"
#include "wire/schedule.h"
#include "wire/stream.h"
#include "wire/when.h"

namespace delayq {
namespace {

// The longest line a stream may send: a job with the largest payload a queue may allow
// (Limits::kMaxPayloadCeiling, 64 MiB), base64 if binary (4/3), and its other fields. A server
// sending more without a newline is not a delayq server; its bytes are not kept.
constexpr size_t kMaxStreamLineBytes = (Limits::kMaxPayloadCeiling / 3 * 4) + (1 << 20);

using client::HttpConnectionPool;
using client::HttpResult;
using client::UrlEncode;

class HttpClient final : public Client {
 public:
  HttpClient(std::unique_ptr<HttpConnectionPool> pool, std::function<void(const HttpExchange&)> on_answer)
      : pool_(std::move(pool)), on_answer_(std::move(on_answer)) {}

  ~HttpClient() override {
    std::unique_lock lock(mu_);
    for (auto& [handle, call] : calls_) call->cancel.Cancel();
    cv_.wait(lock, [this] { return calls_.empty(); });
  }

  Status Ping() override {
    auto r = Send("GET", "/healthz", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return wire::ParseErrorResponse(r->status, r->body);
    return Status::Ok();
  }

  // GET /readyz: the server's own view of its store.
  Status Health() override {
    auto r = Send("GET", "/readyz", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return wire::ParseErrorResponse(r->status, r->body);
    return Status::Ok();
  }

  Result<std::string> Metrics() override {
    auto r = Send("GET", "/metrics", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return wire::ParseErrorResponse(r->status, r->body);
    return std::move(r->body);
  }

  Result<EnqueueResult> Enqueue(std::string_view queue, const EnqueueRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/jobs"), wire::WriteEnqueueRequest(request));
    if (!r.ok()) return r.status();
    auto results = wire::ParseEnqueueResponse(r->body);
    if (!results.ok()) return results.status();
    if (results->size() != 1) return Status::Internal("the server answered a batch to one job");
    return std::move(results->front());
  }

  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view queue,
                                                  std::span<const EnqueueRequest> requests) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/jobs"), wire::WriteEnqueueBatchRequest(requests));
    if (!r.ok()) return r.status();
    return wire::ParseEnqueueResponse(r->body);
  }

  Result<Job> Get(std::string_view queue, const JobRef& ref) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", JobPath(queue, ref), "");
    if (!r.ok()) return r.status();
    return wire::ParseJobResponse(r->body);
  }

  Status Cancel(std::string_view queue, const JobRef& ref) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", JobPath(queue, ref), "");
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<Job> Reschedule(std::string_view queue, const JobRef& ref, const When& when) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("PATCH", JobPath(queue, ref), wire::WriteRescheduleRequest(when));
    if (!r.ok()) return r.status();
    return wire::ParseJobResponse(r->body);
  }

  Status Stream(std::string_view queue, const StreamOptions& options,
                const std::function<bool(const Delivery*)>& on_line) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    wire::StreamRequest request;
    request.max_in_flight = options.max_in_flight;
    request.lease_ms = options.lease_ms;
    std::string partial;
    size_t searched = 0;  // of `partial`: bytes already known to hold no newline
    Status ended = Status::Ok();
    auto on_body = [&](std::string_view piece) {
      partial.append(piece);
      size_t start = 0;
      for (size_t nl; (nl = partial.find('\n', std::max(start, searched))) != std::string::npos; start = nl + 1) {
        auto line = wire::ParseStreamLine(std::string_view(partial).substr(start, nl - start));
        if (!line.ok()) {
          ended = line.status();  // the server's last line: why it ended the stream
          return false;
        }
        const auto* d = std::get_if<Delivery>(&*line);
        if (!on_line(d)) return false;
      }
      partial.erase(0, start);
      searched = partial.size();
      if (partial.size() > kMaxStreamLineBytes) {
        ended = Status::Unavailable(fmt::format(
            "a line of the stream from delayq is longer than {} bytes (a job of the largest payload a queue allows "
            "is shorter): the stream was ended",
            kMaxStreamLineBytes));
        return false;
      }
      return true;
    };
    client::HttpResult refused;
    Status s = pool_->Stream(Path(queue, "/stream"), wire::WriteStreamRequest(request), options.idle_timeout_ms,
                             on_body, &refused, options.cancel ? &options.cancel->request() : nullptr);
    if (!s.ok()) return s;
    if (refused.status != 0) return wire::ParseErrorResponse(refused.status, refused.body);
    return ended;
  }

  Result<std::vector<Delivery>> Reserve(std::string_view queue, const ReserveRequest& request) override {
    return ReserveCall(queue, request, nullptr);
  }

  uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request, ReserveCallback done) override {
    return OnItsThread<Result<std::vector<Delivery>>>(
        [this, q = std::string(queue), request](client::RequestCancel* cancel) {
          return ReserveCall(q, request, cancel);
        },
        std::vector<Delivery>{}, std::move(done));
  }

  void CancelReserve(uint64_t handle) override {
    std::lock_guard lock(mu_);
    auto it = calls_.find(handle);
    if (it != calls_.end()) it->second->cancel.Cancel();
  }

  // GET …/jobs/{id}?wait_ms=N on a thread of its own, as ReserveAsync; cancelled, it answers
  // kUnavailable.
  uint64_t WaitOutcomeAsync(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) override {
    return OnItsThread<Result<Job>>([this, q = std::string(queue), ref, wait_ms](
                                        client::RequestCancel* cancel) { return WaitCall(q, ref, wait_ms, cancel); },
                                    Status::Unavailable("the wait for an outcome was ended early"), std::move(done));
  }

  // Runs `call` on a thread of its own and answers `done` with what it returned, or with
  // `if_cancelled` once Cancel… ended it; the handle is for CancelReserve / CancelOutcomeWait.
  template <class R>
  uint64_t OnItsThread(std::function<R(client::RequestCancel*)> call, R if_cancelled, std::function<void(R)> done) {
    auto state = std::make_shared<AsyncCall>();
    uint64_t handle;
    {
      std::lock_guard lock(mu_);
      handle = next_handle_++;
      calls_[handle] = state;
    }
    std::thread([this, state, handle, call = std::move(call), if_cancelled = std::move(if_cancelled),
                 done = std::move(done)]() mutable {
      R result = call(&state->cancel);
      done(state->cancel.cancelled() ? std::move(if_cancelled) : std::move(result));
      std::lock_guard lock(mu_);
      calls_.erase(handle);
      cv_.notify_all();
    }).detach();
    return handle;
  }

  void CancelOutcomeWait(uint64_t handle) override { CancelReserve(handle); }

  Result<Job> WaitCall(std::string_view queue, const JobRef& ref, int64_t wait_ms, client::RequestCancel* cancel) {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    DELAYQ_RETURN_IF_ERROR(ValidateWaitMs(wait_ms));
    std::string path = JobPath(queue, ref);
    path += fmt::format("{}wait_ms={}", path.find('?') == std::string::npos ? '?' : '&', wait_ms);
    auto r = Call("GET", path, "", wait_ms + pool_->timeout_ms(), cancel);
    if (!r.ok()) return r.status();
    return wire::ParseJobResponse(r->body);
  }

  using Queue::AckBatch;
  // A bad result answers its own request, as on a store (the server would refuse the whole body).
  std::vector<Status> AckBatch(std::string_view queue, std::span<const AckRequest> all) override {
    return AckWithValidResults(all, [&](std::span<const AckRequest> requests) { return AckValid(queue, requests); });
  }

  std::vector<Status> AckValid(std::string_view queue, std::span<const AckRequest> requests) {
    std::vector<std::string> list;
    for (const auto& r : requests) list.push_back(r.receipt);
    Status valid = ValidateQueueName(queue);
    if (!valid.ok() || list.empty()) return std::vector<Status>(list.size(), valid);
    if (requests.size() == 1) {  // the single form: its error is the answer's
      auto r = Call("POST", Path(queue, "/ack"), wire::WriteAckRequest(requests, false));
      return {r.ok() ? Status::Ok() : r.status()};
    }
    auto r = Call("POST", Path(queue, "/ack"), wire::WriteAckRequest(requests, true));
    if (!r.ok()) return std::vector<Status>(list.size(), r.status());
    auto statuses = wire::ParseBatchResponse(r->body, list);
    if (!statuses.ok()) return std::vector<Status>(list.size(), statuses.status());
    return std::move(*statuses);
  }

  std::vector<Status> ReleaseBatch(std::string_view queue, std::span<const std::string> receipts) override {
    std::vector<std::string> list(receipts.begin(), receipts.end());
    Status valid = ValidateQueueName(queue);
    if (!valid.ok() || list.empty()) return std::vector<Status>(list.size(), valid);
    auto r = Call("POST", Path(queue, "/release"), wire::WriteAckRequest(list, true));
    if (!r.ok()) return std::vector<Status>(list.size(), r.status());
    auto statuses = wire::ParseBatchResponse(r->body, list);
    if (!statuses.ok()) return std::vector<Status>(list.size(), statuses.status());
    return std::move(*statuses);
  }

  Result<NackResult> Nack(std::string_view queue, const NackRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/nack"), wire::WriteNackRequest(request));
    if (!r.ok()) return r.status();
    return wire::ParseNackResponse(r->body);
  }

  using Queue::Touch;
  Result<TouchResult> Touch(std::string_view queue, const TouchRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    DELAYQ_RETURN_IF_ERROR(ValidateTouch(request));  // the body carries the progress as it is
    auto r = Call("POST", Path(queue, "/touch"), wire::WriteTouchRequest(request));
    if (!r.ok()) return r.status();
    return wire::ParseTouchResponse(r->body);
  }

  Result<JobPage> ListJobs(std::string_view queue, const ListRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    std::string path = request.state == JobState::kDead
                           ? fmt::format("/dead?limit={}", request.limit)
                           : fmt::format("/jobs?state={}&limit={}", JobStateName(request.state), request.limit);
    if (!request.cursor.empty()) path += "&cursor=" + UrlEncode(request.cursor);
    auto r = Call("GET", Path(queue, path), "");
    if (!r.ok()) return r.status();
    return wire::ParseJobPageResponse(r->body);
  }

  Result<int64_t> ReplayDead(std::string_view queue, std::span<const std::string> ids) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/dead/replay"), wire::WriteReplayRequest(ids));
    if (!r.ok()) return r.status();
    return wire::ParseCountResponse(r->body, "replayed");
  }

  Result<int64_t> PurgeDead(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", Path(queue, "/dead"), "");
    if (!r.ok()) return r.status();
    return wire::ParseCountResponse(r->body, "purged");
  }

  Result<QueueStats> Stats(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, ""), "");
    if (!r.ok()) return r.status();
    return wire::ParseStatsResponse(r->body);
  }

  Result<std::vector<QueueStats>> ListQueues() override {
    auto r = Call("GET", "/v1/queues", "");
    if (!r.ok()) return r.status();
    return wire::ParseQueuesResponse(r->body);
  }

  Result<ScheduleHistogram> Schedule(std::string_view queue, int64_t bucket_ms, int32_t buckets) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r =
        Call("GET", Path(queue, fmt::format("/schedule?bucket={}&horizon={}", bucket_ms, bucket_ms * buckets)), "");
    if (!r.ok()) return r.status();
    return wire::ParseScheduleResponse(r->body);
  }

  Result<QueueConfig> GetConfig(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, "/config"), "");
    if (!r.ok()) return r.status();
    return wire::ParseConfig(r->body, QueueConfig{}, wire::Fields::kOpen);
  }

  Status SetConfig(std::string_view queue, const QueueConfig& config) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("PUT", Path(queue, "/config"), wire::WriteConfigBody(config));
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<int64_t> DeleteQueue(std::string_view queue, bool force) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", Path(queue, force ? "?force=true" : ""), "");
    if (!r.ok()) return r.status();
    return wire::ParseCountResponse(r->body, "jobs");
  }

  Status Pause(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/pause"), "");
    return r.ok() ? Status::Ok() : r.status();
  }

  Status Resume(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", Path(queue, "/resume"), "");
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<RecurringSchedule> PutSchedule(std::string_view queue, const ScheduleSpec& spec) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("PUT", SchedulePath(queue, spec.name), wire::WriteScheduleSpec(spec));
    if (!r.ok()) return r.status();
    return wire::ParseSchedule(r->body);
  }

  Result<RecurringSchedule> GetSchedule(std::string_view queue, std::string_view name) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", SchedulePath(queue, name), "");
    if (!r.ok()) return r.status();
    return wire::ParseSchedule(r->body);
  }

  Result<std::vector<RecurringSchedule>> ListSchedules(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, "/schedules"), "");
    if (!r.ok()) return r.status();
    return wire::ParseSchedules(r->body);
  }

  Status DeleteSchedule(std::string_view queue, std::string_view name) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", SchedulePath(queue, name), "");
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<RecurringSchedule> PauseSchedule(std::string_view queue, std::string_view name, bool paused) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("POST", SchedulePath(queue, name) + (paused ? "/pause" : "/resume"), "");
    if (!r.ok()) return r.status();
    return wire::ParseSchedule(r->body);
  }

 private:
  struct AsyncCall {
    client::RequestCancel cancel;
  };

  static std::string Path(std::string_view queue, std::string_view rest) {
    return fmt::format("/v1/queues/{}{}", UrlEncode(queue), rest);
  }
  static std::string SchedulePath(std::string_view queue, std::string_view name) {
    return Path(queue, "/schedules/" + UrlEncode(name));
  }
  static std::string JobPath(std::string_view queue, const JobRef& ref) {
    if (!ref.id.empty()) return Path(queue, "/jobs/" + UrlEncode(ref.id));
    return Path(queue, "/jobs?key=" + UrlEncode(ref.key));
  }

  // A request whose non-2xx answers become the server's Status.
  Result<HttpResult> Call(std::string_view method, const std::string& target, std::string_view body,
                          int64_t timeout_ms = 0, client::RequestCancel* cancel = nullptr) {
    auto r = Send(method, target, body, timeout_ms, cancel);
    if (!r.ok()) return r.status();
    if (r->status < 200 || r->status >= 300) return wire::ParseErrorResponse(r->status, r->body);
    return r;
  }

  // Every request goes through here, so on_answer sees each answer.
  Result<HttpResult> Send(std::string_view method, const std::string& target, std::string_view body,
                          int64_t timeout_ms = 0, client::RequestCancel* cancel = nullptr) {
    auto r = pool_->Request(method, target, body, timeout_ms, cancel);
    if (r.ok() && on_answer_) on_answer_({method, target, body, r->status, r->body});
    return r;
  }

  Result<std::vector<Delivery>> ReserveCall(std::string_view queue, const ReserveRequest& request,
                                            client::RequestCancel* cancel) {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    // The client's timeout, after the wait: a server that holds the answer longer than that has
    // dropped it (before, a fixed 30 s, whatever timeout_ms the client was given).
    auto r = Call("POST", Path(queue, "/reserve"), wire::WriteReserveRequest(request),
                  std::max<int64_t>(0, request.wait_ms) + pool_->timeout_ms(), cancel);
    if (!r.ok()) return r.status();
    return wire::ParseReserveResponse(r->body);
  }

  std::unique_ptr<HttpConnectionPool> pool_;
  const std::function<void(const HttpExchange&)> on_answer_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, std::shared_ptr<AsyncCall>> calls_;
};

}  // namespace

StreamCancel::StreamCancel() : request_(std::make_unique<client::RequestCancel>()) {}
StreamCancel::~StreamCancel() = default;
void StreamCancel::Cancel() { request_->Cancel(); }
bool StreamCancel::cancelled() const { return request_->cancelled(); }

Result<std::unique_ptr<Client>> Client::Connect(std::string_view url, ClientOptions options) {
  client::TlsOptions tls{options.tls_ca_file, options.tls_cert_file, options.tls_key_file, options.tls_server_name};
  auto pool = client::HttpConnectionPool::Create(url, options.auth_token, options.timeout_ms, tls);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<Client>(std::make_unique<HttpClient>(std::move(*pool), std::move(options.on_answer)));
}

}  // namespace delayq
