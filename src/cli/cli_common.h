// What the CLI's commands share: the global options, the client, and text/JSON output.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "delayq/client.h"

namespace delayq::cli {

struct Global {
  std::string server = "http://127.0.0.1:7070";
  std::string token;
  std::string ca_file;  // https: trust this PEM CA file (DELAYQ_CA_FILE)
  bool json = false;
};

Result<std::unique_ptr<Client>> MakeClient(const Global& g);
// Prints the error to stderr and returns its exit code.
int Fail(const Status& s);

// "2026-12-01T10:00:00.000Z (in 29m59s)"
std::string WhenText(int64_t epoch_ms);
// "29m59s": whole seconds above a minute, milliseconds below.
std::string HumanDuration(int64_t ms);

void PrintJob(const Job& job, bool json);
void PrintDeadJobs(const std::vector<Job>& jobs, bool json);
void PrintDeliveries(const std::vector<Delivery>& jobs, bool json);
void PrintStats(const std::vector<QueueStats>& stats, bool json, bool one);
void PrintConfig(const std::string& queue, const QueueConfig& c, bool json);

void AddWorkCommand(CLI::App& app, Global& g, int& rc);   // work.cc
void AddBenchCommand(CLI::App& app, Global& g, int& rc);  // bench.cc
void AddForwardCommand(CLI::App& app, int& rc);           // forward.cc

}  // namespace delayq::cli
