// The history that delayq-check records and verifies.
//
// Every worker process appends to its own file, one JSON object per line, written with one
// write(2) each so that a worker killed with SIGKILL leaves whole lines behind:
//
//   {"k":"b","c":3,"n":17,"op":"ack","q":"chk.a","t":<send µs>,"a":{...arguments}}
//   {"k":"e","c":3,"n":17,"t":<receive µs>,"code":"ok","m":"<message>","r":{...result}}
//
// An operation with a begin line and no end line is in doubt: its client died, or the check
// ended, while it was in flight; it may or may not have taken effect. The parent adds fault
// lines, {"k":"f","name":"kill-server","t0":…,"t1":…}, for the windows in which errors and
// slow answers are expected. Times are the checker's wall clock in microseconds; the store's
// own times (due_at, lease_deadline) are carried inside results, in milliseconds.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace delayq::check {

using Json = nlohmann::json;

// Appends lines to a history file; each line reaches the kernel in one write. Thread-safe.
class Recorder {
 public:
  explicit Recorder(const std::string& path);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  void Line(const Json& j);

 private:
  int fd_ = -1;
  std::mutex mu_;
};

// One operation as recorded: its begin line joined with its end line (if any).
struct Op {
  int client = 0;
  int64_t seq = 0;
  std::string op;  // enqueue, reserve, ack, nack, touch, cancel, reschedule, get, ...
  std::string queue;
  int64_t t0 = 0;    // sent, µs
  int64_t t1 = -1;   // answered, µs; -1: never (in doubt)
  std::string code;  // "ok", "not_found", ...; "" when in doubt
  std::string message;
  Json args, result;
  bool answered() const { return t1 >= 0; }
  bool ok() const { return code == "ok"; }
};

struct Fault {
  std::string name;
  int64_t t0 = 0, t1 = 0;  // µs
};

struct History {
  std::vector<Op> ops;  // by send time
  std::vector<Fault> faults;
  int64_t torn_lines = 0;  // partial last lines of killed workers
};

// Reads and joins every history file.
History ReadHistory(const std::vector<std::string>& paths);

int64_t WallUs();

}  // namespace delayq::check
