#include "http/process.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace delayq::http {
namespace {

// Fields of /proc/self/stat after the command name (which may hold spaces): field 3 is first.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  const auto close = s.rfind(')');
  if (close == std::string::npos || close + 2 > s.size()) return out;
  std::istringstream fields(s.substr(close + 2));
  for (std::string f; fields >> f;) out.push_back(f);
  return out;
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return 0;
}

}  // namespace

ProcessFigures ReadProcess() {
  ProcessFigures p;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const std::vector<std::string> f = StatFields();  // f[i] is field i + 3 of proc(5)
  if (f.size() > 20) {
    p.start_time_seconds = BootTimeSeconds() + std::stod(f[19]) / ticks;  // starttime (22)
    p.virtual_bytes = std::stoll(f[20]);                                  // vsize (23)
  }
  // utime + stime of /proc/self/stat count whole clock ticks (10 ms): a fresh process reads 0 and a
  // benchmark's per-job figure is quantised. The kernel's own CPU clock counts nanoseconds.
  timespec cpu{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0) {
    p.cpu_seconds = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
  }
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  p.resident_bytes = resident * sysconf(_SC_PAGESIZE);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++p.open_fds;
  }
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) == 0) p.max_fds = static_cast<int64_t>(l.rlim_cur);
  return p;
}

void WriteProcessMetrics(PrometheusText& out, const ProcessFigures& p) {
  out.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  out.Sample("process_resident_memory_bytes", {}, p.resident_bytes);
  out.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  out.Sample("process_virtual_memory_bytes", {}, p.virtual_bytes);
  out.Family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
  out.Sample("process_cpu_seconds_total", {}, p.cpu_seconds);
  out.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  out.Sample("process_open_fds", {}, p.open_fds);
  out.Family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  out.Sample("process_max_fds", {}, p.max_fds);
  out.Family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.");
  out.Sample("process_start_time_seconds", {}, p.start_time_seconds);
}

}  // namespace delayq::http
