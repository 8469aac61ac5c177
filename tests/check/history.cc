#include "check/history.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <stdexcept>

namespace delayq::check {

int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Recorder::Recorder(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot write the history file " + path);
}

Recorder::~Recorder() {
  if (fd_ >= 0) ::close(fd_);
}

void Recorder::Line(const Json& j) {
  std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mu_);
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n <= 0) throw std::runtime_error("writing the history failed");
    done += static_cast<size_t>(n);
  }
}

History ReadHistory(const std::vector<std::string>& paths) {
  History h;
  std::map<std::pair<int, int64_t>, size_t> open;
  for (const auto& path : paths) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        ++h.torn_lines;
        continue;
      }
      const std::string kind = j.value("k", "");
      if (kind == "f") {
        h.faults.push_back({j.value("name", ""), j.value("t0", int64_t{0}), j.value("t1", int64_t{0})});
      } else if (kind == "b") {
        Op op;
        op.client = j.value("c", 0);
        op.seq = j.value("n", int64_t{0});
        op.op = j.value("op", "");
        op.queue = j.value("q", "");
        op.t0 = j.value("t", int64_t{0});
        if (j.contains("a")) op.args = j["a"];
        open[{op.client, op.seq}] = h.ops.size();
        h.ops.push_back(std::move(op));
      } else if (kind == "e") {
        auto it = open.find({j.value("c", 0), j.value("n", int64_t{0})});
        if (it == open.end()) continue;
        Op& op = h.ops[it->second];
        op.t1 = j.value("t", int64_t{-1});
        op.code = j.value("code", "");
        op.message = j.value("m", "");
        if (j.contains("r")) op.result = j["r"];
        open.erase(it);
      }
    }
  }
  std::stable_sort(h.ops.begin(), h.ops.end(), [](const Op& a, const Op& b) { return a.t0 < b.t0; });
  std::sort(h.faults.begin(), h.faults.end(), [](const Fault& a, const Fault& b) { return a.t0 < b.t0; });
  return h;
}

}  // namespace delayq::check
