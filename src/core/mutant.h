// Seeded defects for `make check-mutants` (scripts/check-mutants.sh): a history checker that
// cannot fail proves nothing, so each of these must get a FAIL verdict from delayq-check.
//
// They exist only in a build configured with -DDELAYQ_MUTANTS=ON (build-mutants/), never in a
// user's build nor in CI's: there Mutant() is a constant false and the compiler drops every
// branch on it. In a mutant build, DELAYQ_MUTANT=<name> in the server's environment turns one on:
//   answer-before-fsync   a write is answered before its fsync completes (sync durability)
//   drop-waiter-answer    one in 20 waiting reserves served is never answered (its jobs leased)
//   deliver-early         jobs become ready 300 ms before they are due
//   ack-keeps-job         one in 10 acks answers ok and deletes nothing
//   lease-twice           a lease runs out a second early: its job is handed out again while the
//                         first lease holds
//   result-of-another     one in 10 completed jobs is kept with another job's result
//   outcome-early         one in 5 waits for an outcome is answered at once, the job not yet final
//   payload-of-another    one in 10 deliveries carries the payload of the delivery before it
//   ignore-pause          a paused queue's jobs are handed out as if it were not paused
#pragma once

#ifdef DELAYQ_MUTANTS
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#endif

namespace delayq {

// Every seeded defect's name: a server of a mutant build refuses to start with another one in
// DELAYQ_MUTANT (a misspelt name ran a build without its defect, and "PASS" looked like a miss).
inline constexpr const char* kMutantNames[] = {"answer-before-fsync", "drop-waiter-answer", "deliver-early",
                                               "ack-keeps-job",       "lease-twice",        "result-of-another",
                                               "outcome-early",       "payload-of-another", "ignore-pause"};

#ifdef DELAYQ_MUTANTS
inline const char* ActiveMutant() {
  static const char* active = std::getenv("DELAYQ_MUTANT");
  return active;
}
inline bool Mutant(const char* name) { return ActiveMutant() != nullptr && std::strcmp(ActiveMutant(), name) == 0; }
// True once in `every` calls while `name` is on: a defect that strikes now and then, as real
// ones do.
inline bool MutantStrikes(const char* name, uint64_t every) {
  static std::atomic<uint64_t> calls{0};
  return Mutant(name) && calls.fetch_add(1) % every == 0;
}
// False when DELAYQ_MUTANT names a defect that kMutantNames does not list.
inline bool ActiveMutantKnown() {
  if (ActiveMutant() == nullptr) return true;
  for (const char* name : kMutantNames) {
    if (std::strcmp(name, ActiveMutant()) == 0) return true;
  }
  return false;
}
#else
constexpr const char* ActiveMutant() { return nullptr; }
constexpr bool Mutant(const char*) { return false; }
constexpr bool MutantStrikes(const char*, uint64_t) { return false; }
constexpr bool ActiveMutantKnown() { return true; }
#endif

}  // namespace delayq
