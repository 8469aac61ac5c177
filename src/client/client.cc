// delayq::Client: the Queue interface over the HTTP API (SPEC section 6).
#include "delayq/client.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "client/http_connection.h"
#include "core/validate.h"
#include "http/json.h"
#include "http/json_responses.h"

namespace delayq {
namespace {

using client::HttpConnectionPool;
using client::HttpResult;
using client::UrlEncode;
using http::JsonWriter;

void WriteRequestJob(JsonWriter& w, const EnqueueRequest& r) {
  w.BeginObject();
  if (r.binary || !http::IsJsonValue(r.payload)) {
    w.Key("payload_base64").String(http::Base64Encode(r.payload));
  } else {
    w.Key("payload").Raw(r.payload);
  }
  if (r.when.delay_ms) w.Key("delay_ms").Int(*r.when.delay_ms);
  if (r.when.deliver_at_ms) w.Key("deliver_at").Int(*r.when.deliver_at_ms);
  if (!r.key.empty()) w.Key("key").String(r.key);
  if (r.replace) w.Key("replace").Bool(true);
  if (!r.headers.empty()) {
    w.Key("headers").BeginObject();
    for (const auto& [k, v] : r.headers) w.Key(k).String(v);
    w.EndObject();
  }
  if (r.max_attempts) w.Key("max_attempts").Int(*r.max_attempts);
  w.EndObject();
}

class HttpClient final : public Client {
 public:
  explicit HttpClient(std::unique_ptr<HttpConnectionPool> pool) : pool_(std::move(pool)) {}

  ~HttpClient() override {
    std::unique_lock lock(mu_);
    for (auto& [handle, call] : calls_) call->cancel.Cancel();
    cv_.wait(lock, [this] { return calls_.empty(); });
  }

  Status Ping() override {
    auto r = pool_->Request("GET", "/healthz", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return http::ParseErrorResponse(r->status, r->body);
    return Status::Ok();
  }

  // GET /readyz: the server's own view of its store.
  Status Health() override {
    auto r = pool_->Request("GET", "/readyz", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return http::ParseErrorResponse(r->status, r->body);
    return Status::Ok();
  }

  Result<std::string> Metrics() override {
    auto r = pool_->Request("GET", "/metrics", "");
    if (!r.ok()) return r.status();
    if (r->status != 200) return http::ParseErrorResponse(r->status, r->body);
    return std::move(r->body);
  }

  Result<EnqueueResult> Enqueue(std::string_view queue, const EnqueueRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    WriteRequestJob(w, request);
    auto r = Call("POST", Path(queue, "/jobs"), w.str());
    if (!r.ok()) return r.status();
    auto results = http::ParseEnqueueResponse(r->body);
    if (!results.ok()) return results.status();
    if (results->size() != 1) return Status::Internal("the server answered a batch to one job");
    return std::move(results->front());
  }

  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view queue,
                                                  std::span<const EnqueueRequest> requests) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject().Key("jobs").BeginArray();
    for (const auto& r : requests) WriteRequestJob(w, r);
    w.EndArray().EndObject();
    auto r = Call("POST", Path(queue, "/jobs"), w.str());
    if (!r.ok()) return r.status();
    return http::ParseEnqueueResponse(r->body);
  }

  Result<Job> Get(std::string_view queue, const JobRef& ref) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", JobPath(queue, ref), "");
    if (!r.ok()) return r.status();
    return http::ParseJobResponse(r->body);
  }

  Status Cancel(std::string_view queue, const JobRef& ref) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", JobPath(queue, ref), "");
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<Job> Reschedule(std::string_view queue, const JobRef& ref, const When& when) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject();
    if (when.delay_ms) w.Key("delay_ms").Int(*when.delay_ms);
    if (when.deliver_at_ms) w.Key("deliver_at").Int(*when.deliver_at_ms);
    w.EndObject();
    auto r = Call("PATCH", JobPath(queue, ref), w.str());
    if (!r.ok()) return r.status();
    return http::ParseJobResponse(r->body);
  }

  Result<std::vector<Delivery>> Reserve(std::string_view queue,
                                        const ReserveRequest& request) override {
    return ReserveCall(queue, request, nullptr);
  }

  uint64_t ReserveAsync(std::string_view queue, const ReserveRequest& request,
                        ReserveCallback done) override {
    auto call = std::make_shared<AsyncCall>();
    uint64_t handle;
    {
      std::lock_guard lock(mu_);
      handle = next_handle_++;
      calls_[handle] = call;
    }
    std::thread([this, call, handle, q = std::string(queue), request, done = std::move(done)] {
      auto result = ReserveCall(q, request, &call->cancel);
      if (call->cancel.cancelled()) result = std::vector<Delivery>{};
      done(std::move(result));
      std::lock_guard lock(mu_);
      calls_.erase(handle);
      cv_.notify_all();
    }).detach();
    return handle;
  }

  void CancelReserve(uint64_t handle) override {
    std::lock_guard lock(mu_);
    auto it = calls_.find(handle);
    if (it != calls_.end()) it->second->cancel.Cancel();
  }

  Status Ack(std::string_view queue, std::string_view receipt) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject().Key("receipt").String(receipt).EndObject();
    auto r = Call("POST", Path(queue, "/ack"), w.str());
    return r.ok() ? Status::Ok() : r.status();
  }

  std::vector<Status> AckBatch(std::string_view queue,
                               std::span<const std::string> receipts) override {
    std::vector<std::string> list(receipts.begin(), receipts.end());
    Status valid = ValidateQueueName(queue);
    if (!valid.ok() || list.empty()) return std::vector<Status>(list.size(), valid);
    JsonWriter w;
    w.BeginObject().Key("receipts").BeginArray();
    for (const auto& r : list) w.String(r);
    w.EndArray().EndObject();
    auto r = Call("POST", Path(queue, "/ack"), w.str());
    if (!r.ok()) return std::vector<Status>(list.size(), r.status());
    auto statuses = http::ParseBatchResponse(r->body, list);
    if (!statuses.ok()) return std::vector<Status>(list.size(), statuses.status());
    return std::move(*statuses);
  }

  Result<NackResult> Nack(std::string_view queue, const NackRequest& request) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject().Key("receipt").String(request.receipt);
    if (request.retry_in_ms) w.Key("retry_in_ms").Int(*request.retry_in_ms);
    if (!request.error.empty()) w.Key("error").String(request.error);
    if (request.dead) w.Key("dead").Bool(true);
    w.EndObject();
    auto r = Call("POST", Path(queue, "/nack"), w.str());
    if (!r.ok()) return r.status();
    return http::ParseNackResponse(r->body);
  }

  Result<TouchResult> Touch(std::string_view queue, std::string_view receipt,
                            std::optional<int64_t> lease_ms) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject().Key("receipt").String(receipt);
    if (lease_ms) w.Key("lease_ms").Int(*lease_ms);
    w.EndObject();
    auto r = Call("POST", Path(queue, "/touch"), w.str());
    if (!r.ok()) return r.status();
    return http::ParseTouchResponse(r->body);
  }

  Result<std::vector<Job>> ListDead(std::string_view queue, int32_t limit) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, fmt::format("/dead?limit={}", limit)), "");
    if (!r.ok()) return r.status();
    return http::ParseJobListResponse(r->body);
  }

  Result<int64_t> ReplayDead(std::string_view queue, std::span<const std::string> ids) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject();
    if (!ids.empty()) {
      w.Key("ids").BeginArray();
      for (const auto& id : ids) w.String(id);
      w.EndArray();
    }
    w.EndObject();
    auto r = Call("POST", Path(queue, "/dead/replay"), w.str());
    if (!r.ok()) return r.status();
    return http::ParseCountResponse(r->body, "replayed");
  }

  Result<int64_t> PurgeDead(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", Path(queue, "/dead"), "");
    if (!r.ok()) return r.status();
    return http::ParseCountResponse(r->body, "purged");
  }

  Result<QueueStats> Stats(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, ""), "");
    if (!r.ok()) return r.status();
    return http::ParseStatsResponse(r->body);
  }

  Result<std::vector<QueueStats>> ListQueues() override {
    auto r = Call("GET", "/v1/queues", "");
    if (!r.ok()) return r.status();
    return http::ParseQueuesResponse(r->body);
  }

  Result<ScheduleHistogram> Schedule(std::string_view queue, int64_t bucket_ms,
                                     int32_t buckets) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, fmt::format("/schedule?bucket={}&horizon={}", bucket_ms,
                                                 bucket_ms * buckets)),
                  "");
    if (!r.ok()) return r.status();
    return http::ParseScheduleResponse(r->body);
  }

  Result<QueueConfig> GetConfig(std::string_view queue) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("GET", Path(queue, "/config"), "");
    if (!r.ok()) return r.status();
    return http::ParseConfig(r->body, QueueConfig{});
  }

  Status SetConfig(std::string_view queue, const QueueConfig& config) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    http::WriteConfig(w, config);
    auto r = Call("PUT", Path(queue, "/config"), w.str());
    return r.ok() ? Status::Ok() : r.status();
  }

  Result<int64_t> DeleteQueue(std::string_view queue, bool force) override {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    auto r = Call("DELETE", Path(queue, force ? "?force=true" : ""), "");
    if (!r.ok()) return r.status();
    return http::ParseCountResponse(r->body, "jobs");
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

 private:
  struct AsyncCall {
    client::RequestCancel cancel;
  };

  static std::string Path(std::string_view queue, std::string_view rest) {
    return fmt::format("/v1/queues/{}{}", UrlEncode(queue), rest);
  }
  static std::string JobPath(std::string_view queue, const JobRef& ref) {
    if (!ref.id.empty()) return Path(queue, "/jobs/" + UrlEncode(ref.id));
    return Path(queue, "/jobs?key=" + UrlEncode(ref.key));
  }

  // A request whose non-2xx answers become the server's Status.
  Result<HttpResult> Call(std::string_view method, const std::string& target, std::string_view body,
                          int64_t timeout_ms = 0, client::RequestCancel* cancel = nullptr) {
    auto r = pool_->Request(method, target, body, timeout_ms, cancel);
    if (!r.ok()) return r.status();
    if (r->status < 200 || r->status >= 300) return http::ParseErrorResponse(r->status, r->body);
    return r;
  }

  Result<std::vector<Delivery>> ReserveCall(std::string_view queue, const ReserveRequest& request,
                                            client::RequestCancel* cancel) {
    DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
    JsonWriter w;
    w.BeginObject().Key("max").Int(request.max).Key("wait_ms").Int(request.wait_ms);
    if (request.lease_ms) w.Key("lease_ms").Int(*request.lease_ms);
    if (request.max_bytes != Limits::kDefaultReserveBytes) w.Key("max_bytes").Int(request.max_bytes);
    w.EndObject();
    auto r = Call("POST", Path(queue, "/reserve"), w.str(),
                  std::max<int64_t>(0, request.wait_ms) + 30'000, cancel);
    if (!r.ok()) return r.status();
    return http::ParseReserveResponse(r->body);
  }

  std::unique_ptr<HttpConnectionPool> pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, std::shared_ptr<AsyncCall>> calls_;
};

}  // namespace

Result<std::unique_ptr<Client>> Client::Connect(std::string_view url, ClientOptions options) {
  auto pool = client::HttpConnectionPool::Create(url, options.auth_token, options.timeout_ms, options.tls_ca_file);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<Client>(std::make_unique<HttpClient>(std::move(*pool)));
}

}  // namespace delayq
