// SPDX-License-Identifier: Apache-2.0
// Client-side adaptive throttling, from Google's SRE book ("Handling Overload"): over the last
// `window` (2 min) the client counts the requests it made and the ones the backend accepted,
// and rejects a call locally, before sending it, with probability
//
//   max(0, (requests - k * accepts) / (requests + 1))        k = 2 by default
//
// so a backend that refuses most calls stops receiving the calls that it would only refuse:
// once it accepts fewer than requests / k, the client sends about k times what it accepts and
// answers the rest itself with ThrottledException. It complements the adaptive limit (which
// bounds the calls in flight): this one answers a backend that is refusing.
//
//   r4c::Throttle throttle("search", r4c::ThrottleConfig().k(2).refused_on<Overloaded>());
//   auto hits = throttle.execute([&] { return backend.search(query); });   // ThrottledException
//
// What counts (the SRE book's definitions):
//  - requests: every call the application made through the throttle, including those the
//    throttle rejected itself: they are requests the application attempted. Without them the
//    client would not settle at k times the accepts.
//  - accepts: calls the backend accepted. A call the throttle rejected is never one, and never
//    a refusal of the backend either (snapshot().refused counts the backend's only); go-zero's
//    breaker once counted its own rejections as backend failures (zeromicro/go-zero#5011).
//  - a failure is classified in this order (the first that applies decides):
//      1. of a `refused_on` type, or `refused_on(predicate)` says so: a refusal;
//      2. a RejectedException from a policy inside the throttle (circuit breaker, rate limiter,
//         adaptive limit, bulkhead): it never reached the backend and counts as nothing;
//      3. with a `refused_on` type or predicate set: an accept (the backend answered);
//      4. with neither set (the default): a refusal.
//  - a result is an accept, unless `refused_result` says it is a refusal (an HTTP 503 that a
//    client returns rather than throws); it is returned either way.
// A call counts when its outcome is known, in the window's bucket of its admission; a call
// whose outcome is never known (an abandoned asynchronous call) counts as nothing.
//
// In a pipeline it sits outside the circuit breaker and the rate limiter (<r4c/pipeline.hpp>):
// the calls it sheds take no permit and no slot, and the breaker never sees them as failures.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/outcome_predicates.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"

namespace r4c {

/// A throttle rejected the call locally, without sending it: its backend has been refusing.
/// Thrown by the throttle policy.
class ThrottledException : public RejectedException {
 public:
  explicit ThrottledException(const std::string& message);
  ThrottledException(std::string instance_id, const std::string& message);
};

/// Settings of a throttle.
class ThrottleConfig {
 public:
  static constexpr double kDefaultK = 2.0;
  static constexpr std::chrono::nanoseconds kDefaultWindow = std::chrono::minutes(2);
  static constexpr std::int64_t kDefaultSeed = 0x5eed;

  /// The accepts multiplier k (2): the client sends about k times what the backend accepts.
  /// Lower is more aggressive. R4C-REG-001 outside 1 .. 100.
  ThrottleConfig& k(double value);
  /// How far back requests and accepts count (2 min), in 20 buckets of window / 20 each.
  /// R4C-REG-001 outside 10 ms .. 1 h.
  ThrottleConfig& window(std::chrono::nanoseconds value);
  /// The failures that are the backend's refusals, matched by dynamic type (derived classes
  /// included); any other failure is an accept. Replaces the list; empty (the default): every
  /// failure but an inner policy's RejectedException.
  template <class Exception, class... More>
  ThrottleConfig& refused_on() {
    refused_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// `refused_on(predicate)` (below) for failures of dynamic type Exception (others answer false),
  /// e.g. `refused_on<HttpError>([](const HttpError& e) { return e.status() == 503; })`.
  template <class Exception, class Predicate>
  requires std::is_invocable_r_v<bool, Predicate&, const Exception&> ThrottleConfig& refused_on(
      Predicate predicate) {
    return refused_on(detail::exception_predicate<Exception>(std::move(predicate)));
  }
  /// Same as `refused_on<...>()` with types known at run time.
  ThrottleConfig& refused_on(std::vector<ExceptionType> types);
  /// Also takes the failures for which `predicate` is true as refusals, besides the types
  /// (see the overview for the order); setting it makes the unmatched failures accepts, as a
  /// type does. Replaces an earlier predicate. A predicate that throws answers false.
  /// R4C-REG-001 when empty. Thread safety: called from every thread whose call fails.
  ThrottleConfig& refused_on(std::function<bool(const std::exception_ptr&)> predicate);
  /// Takes a result for which `predicate` is true as the backend's refusal (the result is
  /// still returned); any other result is an accept. Applies to execute() and
  /// async_execute() calls whose result type, without reference and const, is T. Replaces an
  /// earlier predicate. A predicate that throws ends a synchronous call with its exception,
  /// counting nothing. R4C-REG-001 when empty. Thread safety: called from every thread.
  template <class T>
  ThrottleConfig& refused_result(std::function<bool(const T&)> predicate) {
    check_predicate("refused_result", static_cast<bool>(predicate));
    result_predicate_.set<T>(std::move(predicate));
    return *this;
  }
  /// The random seed of the throttle's own source (0x5eed), so that a run on a ManualClock
  /// rejects the same calls every time. Any integer.
  ThrottleConfig& seed(std::int64_t value);

  double k() const noexcept { return k_; }
  std::chrono::nanoseconds window() const noexcept { return window_; }
  const std::vector<ExceptionType>& refused_on_types() const noexcept { return refused_on_; }
  const detail::ExceptionPredicate& refused_on_predicate() const noexcept { return refused_if_; }
  /// The refused_result predicate: `.get<T>()` for results of type T (nullptr when it applies
  /// to another type or none was set), `.type()` the type it applies to.
  const detail::ResultPredicate& refused_result_predicate() const noexcept {
    return result_predicate_;
  }
  std::int64_t seed() const noexcept { return seed_; }
  /// Checks every setting; throws ConfigException.
  void validate() const;

 private:
  double k_ = kDefaultK;
  std::chrono::nanoseconds window_ = kDefaultWindow;
  static void check_predicate(const char* setting, bool present);

  std::vector<ExceptionType> refused_on_;
  detail::ExceptionPredicate refused_if_;
  detail::ResultPredicate result_predicate_;
  std::int64_t seed_ = kDefaultSeed;
};

std::optional<SettingDifference> first_difference(const ThrottleConfig& first,
                                                  const ThrottleConfig& second);

struct ThrottleSnapshot {
  double k = 0;
  std::chrono::nanoseconds window{0};
  /// In the window: requests (the local rejections included) and the backend's accepts.
  std::uint64_t requests = 0;
  std::uint64_t accepts = 0;
  /// The probability the next call is rejected locally: max(0, (requests - k * accepts) /
  /// (requests + 1)).
  double rejection_probability = 0;
  /// Since creation, exact: calls rejected locally, and calls the backend refused.
  std::uint64_t throttled = 0;
  std::uint64_t refused = 0;
};

class Throttle;

/// A call the throttle let through; say how the backend answered with on_accepted(),
/// on_refused() or on_failure(). Destroyed without an answer, the call counts as nothing.
/// Move-only.
class [[nodiscard]] ThrottlePermit {
 public:
  ThrottlePermit() noexcept = default;
  ThrottlePermit(ThrottlePermit&& other) noexcept
      : throttle_(std::exchange(other.throttle_, nullptr)), bucket_(other.bucket_) {}
  ThrottlePermit& operator=(ThrottlePermit&& other) noexcept {
    throttle_ = std::exchange(other.throttle_, nullptr);
    bucket_ = other.bucket_;
    return *this;
  }
  ThrottlePermit(const ThrottlePermit&) = delete;
  ThrottlePermit& operator=(const ThrottlePermit&) = delete;
  ~ThrottlePermit() = default;

  explicit operator bool() const noexcept { return throttle_ != nullptr; }
  /// The backend accepted the call: a request and an accept.
  void on_accepted() noexcept;
  /// The backend refused it: a request only.
  void on_refused() noexcept;
  /// The call returned `result`: a refusal when refused_result says so, else an accept. A
  /// throwing predicate leaves the call unanswered (it counts as nothing) and propagates.
  template <class T>
  void on_result(const T& result);
  /// The call failed with `failure`, classified by refused_on (see the overview).
  void on_failure(const std::exception_ptr& failure) noexcept;
  /// The same for the exception being handled now (inside a `catch`).
  void on_current_exception() noexcept;

 private:
  friend class Throttle;
  ThrottlePermit(Throttle* throttle, std::int64_t bucket) noexcept
      : throttle_(throttle), bucket_(bucket) {}
  Throttle* throttle_ = nullptr;
  std::int64_t bucket_ = 0;
};

/// A view of a throttle for operators and tests. Valid while the throttle lives.
class ThrottleHandle : public detail::HandleBase<Throttle> {
 public:
  using HandleBase::HandleBase;
};

/// Client-side adaptive throttling (see the overview). Lock-free; no allocation per call; an
/// admitted call reads a few words and writes one when its outcome is known.
/// Thread safety: every member may be called from any number of threads.
class Throttle {
 public:
  /// A uniform random number in [0, 1), for the rejection draws; called only while the
  /// rejection probability is above 0, possibly from several threads at once; must not throw.
  using RandomSource = std::function<double()>;

  /// Without `random`, draws come from a generator seeded with config.seed().
  Throttle(std::string instance_id, ThrottleConfig config = {},
           std::shared_ptr<Clock> clock = nullptr, RandomSource random = {});
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

  /// Lets the call through, or rejects it locally with the rejection probability (an empty
  /// permit, counted as a request and in `throttled`).
  ThrottlePermit try_acquire() noexcept;

  /// Runs `f` unless rejected locally (then throws this throttle's ThrottledException, one
  /// preallocated object, without calling `f`); records how the backend answered: a return is
  /// an accept, a failure is classified by refused_on and rethrown unchanged.
  template <class F>
  std::invoke_result_t<F&> execute(F&& f) {
    ThrottlePermit permit = try_acquire();
    if (!permit) [[unlikely]]
      throw_throttled();
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
        std::invoke(f);
        permit.on_accepted();
      } else {
        std::invoke_result_t<F&> result = std::invoke(f);
        permit.on_result(result);
        return result;
      }
    } catch (...) {
      permit.on_current_exception();  // nothing when on_result has answered or thrown
      throw;
    }
  }
  /// execute() without a throw to say no (<r4c/outcome.hpp>): a local rejection returns a
  /// refusal; `f` (returning a value or an Outcome) ends as an Outcome, a failure recorded as
  /// execute() records what `f` throws.
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f) {
    ThrottlePermit permit = try_acquire();
    if (!permit) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal());
    auto outcome = detail::invoke_outcome(f);
    if (outcome.has_value()) [[likely]] {
      permit.on_accepted();
    } else {
      permit.on_failure(outcome.error());
    }
    return outcome;
  }

  /// Runs the Asio operation `op` unless rejected locally (then completes `token` at once with
  /// ThrottledException, the operation not started), completing `token` with
  /// void(std::exception_ptr, T). Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// Throws this throttle's ThrottledException.
  [[noreturn]] void throw_throttled() const;
  /// The ThrottledException locally rejected calls fail with (one object, shared).
  const std::exception_ptr& rejection() const noexcept { return throttled_exception_; }
  /// The probability the next call is rejected locally, from the window as it is now.
  double rejection_probability() const noexcept;

  ThrottleHandle handle() const noexcept { return ThrottleHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  const ThrottleConfig& config() const noexcept { return config_.get(); }
  /// Applies `next` (validated; throws ConfigException otherwise), as the registry's
  /// reconfigure() does; every setting may change and the window's counts stay. k rates the
  /// next call; refused_on (types, predicate, refused_result) classifies the next outcome, a
  /// call under way included (an outcome is classified when it is recorded, by one read of
  /// the config); a new seed restarts the draws on its sequence, as a throttle built with it
  /// draws. A new window gets new buckets (window / 20 each), made here, which take over the
  /// counts of every old bucket that began inside the new window (each in the new bucket of
  /// its beginning; older ones age out at once), then replace the old ones atomically; a call
  /// admitted before and answered after counts in the new current bucket. An outcome counted
  /// in the old buckets while they are being carried over (a few hundred nanoseconds) may be
  /// missed. Allocation: yes (cold).
  void reconfigure(const ThrottleConfig& next);
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_owner_; }
  ThrottleSnapshot snapshot() const;

  /// Buckets of the window; requests and accepts age out a bucket (window / 20) at a time.
  static constexpr int kBuckets = 20;

 private:
  friend class ThrottlePermit;

  // One bucket's counts, requests in the upper half and accepts in the lower, so that one
  // add records both; `bucket` is the bucket number the counts belong to.
  struct alignas(16) Slot {
    std::atomic<std::int64_t> bucket{-1};
    std::atomic<std::uint64_t> counts{0};
  };
  struct Totals {
    std::uint64_t requests;
    std::uint64_t accepts;
  };
  static constexpr std::uint64_t kRequest = std::uint64_t{1} << 32;

  // A permit's bucket: the bucket number, and above kTagShift the generation of the buckets
  // it belongs to (16 bits: a permit would have to outlive 65536 window changes to be mistaken).
  static constexpr int kTagShift = 47;
  static constexpr std::int64_t kNumberMask = (std::int64_t{1} << kTagShift) - 1;
  // The window's buckets, numbered from the throttle's start in buckets of `bucket_ticks`.
  // reconfigure() replaces them whole when the window changes; a replaced one stays alive
  // (a call may still read it) until the throttle is destroyed.
  struct Buckets {
    Buckets(std::int64_t ticks, std::int64_t generation_tag) noexcept
        : bucket_ticks(ticks), tag(generation_tag) {}
    // Written by every call's outcome.
    alignas(detail::kCacheLine) Slot slots[kBuckets];
    // Written once a bucket: the sum of the window's buckets before `closed_bucket`.
    alignas(detail::kCacheLine) std::atomic<std::uint64_t> closed_counts{0};
    std::atomic<std::int64_t> closed_bucket{-1};
    const std::int64_t bucket_ticks;
    const std::int64_t tag;  // the generation, shifted by kTagShift
  };

  std::int64_t bucket_at(const Buckets& buckets, std::int64_t ticks) const noexcept {
    return (ticks - start_) / buckets.bucket_ticks;
  }
  // The window's totals as of bucket `now`, rolling the window on first sight of a bucket.
  static Totals totals(Buckets& buckets, std::int64_t now) noexcept;
  static Totals totals_without_rolling(const Buckets& buckets, std::int64_t now) noexcept;
  static void roll(Buckets& buckets, std::int64_t now) noexcept;
  // Adds `counts` to `bucket` (inline: an outcome's path is one call, as with fixed buckets).
  static void record_in(Buckets& buckets, std::int64_t bucket, std::uint64_t counts) noexcept {
    Slot& slot = buckets.slots[bucket % kBuckets];
    // A call that outlived the window (its slot holds a later bucket) counts as nothing.
    if (slot.bucket.load(std::memory_order_relaxed) != bucket) return;
    slot.counts.fetch_add(counts, std::memory_order_relaxed);
    // Already summed into the closed counts: add it there too, while it is in the window.
    const std::int64_t closed = buckets.closed_bucket.load(std::memory_order_acquire);
    if (bucket < closed && bucket > closed - kBuckets) {
      buckets.closed_counts.fetch_add(counts, std::memory_order_relaxed);
    }
  }
  double probability(Totals totals) const noexcept;
  double draw() noexcept;
  // A permit's outcome; one of buckets replaced since counts in the current bucket.
  void record(std::int64_t bucket, std::uint64_t counts) noexcept;
  void record_moved(Buckets& buckets, std::uint64_t counts) noexcept;
  // The exception being handled: refused, accepted or nothing (see the overview).
  void record_failure(std::int64_t bucket) noexcept;
  std::int64_t bucket_ticks_of(std::chrono::nanoseconds window) const noexcept;
  // Adds to `next` (unpublished) what the current buckets hold of its window.
  void carry_into(Buckets& next) const noexcept;

  // The current buckets (acquire: their construction is seen); all_buckets_ keeps every one.
  alignas(detail::kCacheLine) std::atomic<Buckets*> buckets_{nullptr};
  // Written only while the backend refuses (draws).
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> random_state_;
  alignas(detail::kCacheLine) const detail::ClockReader clock_;
  const std::int64_t start_;
  std::mutex buckets_mutex_;  // guards all_buckets_ (cold: reconfigurations only)
  std::vector<std::unique_ptr<Buckets>> all_buckets_;
  std::atomic<double> k_;  // relaxed: set by reconfigure(), a factor with no other data
  // A refusal as a value, named by the kind's descriptor (defined after it, below).
  Refusal refusal() const noexcept;
  const std::string instance_id_;
  detail::LiveConfig<ThrottleConfig> config_;
  const std::shared_ptr<Clock> clock_owner_;
  const RandomSource random_;
  const std::exception_ptr throttled_exception_;
  detail::StripedCounter throttled_;
  detail::StripedCounter refused_;
};

inline void ThrottlePermit::on_accepted() noexcept {
  if (Throttle* throttle = std::exchange(throttle_, nullptr)) {
    throttle->record(bucket_, Throttle::kRequest | 1);
  }
}

inline void ThrottlePermit::on_refused() noexcept {
  if (Throttle* throttle = std::exchange(throttle_, nullptr)) {
    throttle->record(bucket_, Throttle::kRequest);
    throttle->refused_.increment();
  }
}

template <class T>
void ThrottlePermit::on_result(const T& result) {
  if (throttle_ == nullptr) return;
  const auto* refused = throttle_->config_->refused_result_predicate().template get<T>();
  if (refused == nullptr) [[likely]]
    return on_accepted();
  bool refusal = false;
  try {
    refusal = (*refused)(result);
  } catch (...) {
    throttle_ = nullptr;  // unanswered: the predicate's exception ends the call
    throw;
  }
  refusal ? on_refused() : on_accepted();
}

/// The throttle as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct ThrottleKind : detail::KindBase<Throttle, ThrottledException> {
  static constexpr KindNames kNames = {"throttle", "throttle", "throttle", "throttle"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

inline Refusal Throttle::refusal() const noexcept {
  return Refusal(throttled_exception_, ThrottleKind::kNames.metrics, instance_id_);
}

}  // namespace r4c
