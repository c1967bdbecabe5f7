// SPDX-License-Identifier: Apache-2.0
// A policy's configuration that the registry's reconfigure() may replace while calls run
// (docs/operations.md, "Live reconfiguration").
//
// A call reads the current config with one acquire load and no lock; replace() publishes a new
// one. A replaced config stays alive until the policy is destroyed, because a call that read
// it before the replacement may still be using it: each reconfiguration that changes a policy
// keeps one more config (a few hundred bytes) for the policy's lifetime.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace r4c::detail {

/// The current config of one policy, replaceable at run time.
/// Thread safety: get() from any number of threads, concurrently with replace().
template <class Config>
class LiveConfig {
 public:
  explicit LiveConfig(Config config) {
    configs_.push_back(std::make_unique<const Config>(std::move(config)));
    current_.store(configs_.back().get(), std::memory_order_relaxed);
  }
  LiveConfig(const LiveConfig&) = delete;
  LiveConfig& operator=(const LiveConfig&) = delete;

  /// The config now. The reference stays valid for the owner's lifetime.
  const Config& get() const noexcept {
    // acquire: pairs with replace()'s release, so the new config's members are visible.
    return *current_.load(std::memory_order_acquire);
  }
  const Config* operator->() const noexcept { return &get(); }

  /// Makes `next` the current config; the previous one stays readable. Allocation: yes.
  void replace(Config next) {
    std::lock_guard<std::mutex> lock(mutex_);
    configs_.push_back(std::make_unique<const Config>(std::move(next)));
    current_.store(configs_.back().get(), std::memory_order_release);
  }

 private:
  std::mutex mutex_;  // guards configs_ (cold: reconfigurations only)
  std::vector<std::unique_ptr<const Config>> configs_;
  std::atomic<const Config*> current_{nullptr};
};

}  // namespace r4c::detail
