// Callbacks collected under the engine's lock and run after it is released: the answers to
// waiting reserves. They run at the latest when the Deferred is destroyed, so no way out of an
// operation can drop one (a dropped answer leaves its reserve hanging and its jobs leased to
// no one). Destroy it only where the engine's lock is not held.
#pragma once

#include <functional>
#include <utility>
#include <vector>

namespace delayq {

class Deferred {
 public:
  Deferred() = default;
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  ~Deferred() { Run(); }
  void Add(std::function<void()> fn) { fns_.push_back(std::move(fn)); }
  bool empty() const { return fns_.empty(); }
  void Run() {
    while (!fns_.empty()) {
      auto fns = std::move(fns_);
      fns_.clear();
      for (auto& fn : fns) fn();
    }
  }

 private:
  std::vector<std::function<void()>> fns_;
};

}  // namespace delayq
