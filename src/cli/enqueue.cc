// `delayq enqueue QUEUE PAYLOAD [--delay D | --at T] [--key K] ...`
#include <fstream>
#include <iostream>
#include "cli/cli_common.h"

#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::cli {
namespace {

// The payload of `enqueue`: JSON text is sent as is; other text becomes a JSON string;
// with --base64 (or from a file/stdin that is not JSON) the bytes are sent as binary.
void SetPayload(EnqueueRequest& r, const std::string& text, bool raw_bytes, bool binary) {
  if (binary) {
    r.payload = text;
    r.binary = true;
  } else if (wire::IsJsonValue(text)) {
    r.payload = text;
  } else if (raw_bytes) {
    r.payload = text;
    r.binary = true;
  } else {
    wire::JsonWriter w;
    w.String(text);
    r.payload = w.Take();
  }
}

}  // namespace

void AddEnqueueCommand(CLI::App& app, Global& g, int& rc) {
  struct Args {
    std::string queue, payload, delay, at, key, file, group;
    std::vector<std::string> headers;
    bool replace = false, debounce = false, base64 = false;
    int32_t max_attempts = 0;
    int32_t priority = 0;
  };
  auto a = std::make_shared<Args>();
  Args& enq = *a;
  auto* e = app.add_subcommand("enqueue", "Add a job: delayq enqueue orders '{\"id\":42}' --delay 30m");
  e->add_option("queue", enq.queue, "Queue name")->required();
  e->add_option("payload", enq.payload, "The payload: JSON is sent as is, other text as a JSON string, - reads stdin");
  e->add_option("--delay", enq.delay, "Deliver after this long: 250ms, 90s, 30m, 1h30m, 7d");
  e->add_option("--at", enq.at, "Deliver at this time: 2026-12-01T10:00:00Z or epoch ms");
  e->add_option("--key", enq.key, "Idempotency key: a live job with this key is not added twice");
  e->add_flag("--replace", enq.replace, "With --key: replace the live job's payload and due time");
  e->add_flag("--debounce", enq.debounce, "With --key: replace the live job and push it back (never earlier)");
  e->add_option("-H,--header", enq.headers, "Header name=value (repeatable)");
  e->add_option("--max-attempts", enq.max_attempts, "Deliveries before the job goes dead");
  e->add_option("--priority", enq.priority, "0..9: among ready jobs of its group, higher first (default 0)");
  e->add_option("--group", enq.group, "Fairness group (e.g. a tenant): reserves take groups in turn");
  e->add_option("--file", enq.file, "Read the payload from this file");
  e->add_flag("--binary", enq.base64, "Send the payload as opaque bytes (payload_base64)");
  e->callback(Run(rc, [a, &g]() -> Status {
    Args& enq = *a;
    EnqueueRequest r;
    if (!enq.delay.empty() && !enq.at.empty()) {
      return Status::InvalidArgument("give --delay or --at, not both");
    }
    if (!enq.delay.empty()) r.when.delay_ms = Duration("--delay", enq.delay);
    if (!enq.at.empty()) r.when.deliver_at_ms = Timestamp("--at", enq.at);
    if (!enq.file.empty()) {
      std::ifstream in(enq.file, std::ios::binary);
      if (!in) return Status::InvalidArgument("cannot read --file " + enq.file);
      SetPayload(r, ReadAll(in), true, enq.base64);
    } else if (enq.payload == "-") {
      SetPayload(r, ReadAll(std::cin), true, enq.base64);
    } else if (!enq.payload.empty()) {
      SetPayload(r, enq.payload, false, enq.base64);
    } else {
      return Status::InvalidArgument("give a payload (JSON or text), - for stdin, or --file FILE");
    }
    for (const auto& h : enq.headers) {
      auto eq = h.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Status::InvalidArgument("--header \"" + h + "\" must be name=value");
      }
      r.headers[h.substr(0, eq)] = h.substr(eq + 1);
    }
    r.key = enq.key;
    r.replace = enq.replace;
    r.debounce = enq.debounce;
    if (enq.max_attempts) r.max_attempts = enq.max_attempts;
    r.priority = enq.priority;
    r.group = enq.group;
    auto client = MakeClient(g);
    if (!client.ok()) return client.status();
    auto res = (*client)->Enqueue(enq.queue, r);
    if (!res.ok()) return res.status();
    if (g.json) {
      wire::JsonWriter w;
      w.BeginObject().Key("id").String(res->id).Key("due_at").Int(res->due_at_ms);
      w.Key("duplicate").Bool(res->duplicate).EndObject();
      std::printf("%s\n", w.str().c_str());
    } else if (res->duplicate) {
      std::printf("%s %s (the key names this live job), due %s\n", res->replaced ? "replaced" : "duplicate of",
                  res->id.c_str(), WhenText(res->due_at_ms).c_str());
    } else {
      std::printf("enqueued %s due %s\n", res->id.c_str(), WhenText(res->due_at_ms).c_str());
    }
    return Status::Ok();
  }));
}

}  // namespace delayq::cli
