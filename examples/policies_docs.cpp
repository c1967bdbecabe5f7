// SPDX-License-Identifier: Apache-2.0
// The code of docs/pipeline.md's sections on the circuit breaker's states and classification and
// on the retry's interval functions and predicates, in // [doc:NAME] regions (tests/docs checks
// the page against them). Each region is followed by checks; the program exits non-zero if one
// fails. Everything runs on a ManualClock: the retry's waits end when the driver thread below
// advances it.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <r4c/r4c.hpp>

namespace {

// The checks that failed, printed by main().
std::vector<const char*> failed_checks;

void check(bool ok, const char* what) {
  if (!ok) failed_checks.push_back(what);
}

// A failure of an HTTP client, with its status.
struct HttpError : std::runtime_error {
  explicit HttpError(int status) : std::runtime_error("http error"), status(status) {}
  int status;
};

// Advances `clock` whenever something waits on it, until stopped: the retry's waits pass at once
// and exactly.
class ClockDriver {
 public:
  explicit ClockDriver(std::shared_ptr<r4c::ManualClock> clock)
      : thread_([this, clock] {
          while (!stop_.load()) {
            if (clock->pending_tasks() > 0) {
              clock->advance(std::chrono::milliseconds(1));
            } else {
              std::this_thread::yield();
            }
          }
        }) {}
  ~ClockDriver() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void breaker_states(const std::shared_ptr<r4c::ManualClock>& clock) {
  using namespace std::chrono_literals;
  // [doc:breaker-states]
  r4c::CircuitBreaker breaker(
      "payments",
      r4c::CircuitBreakerConfig().minimum_number_of_calls(4).sliding_window_size(4).initial_state(
          r4c::CircuitBreakerState::metrics_only),
      clock);
  for (int i = 0; i < 4; ++i) {
    try {
      breaker.execute([]() -> int { throw HttpError(503); });
    } catch (const HttpError&) {
    }
  }
  // metrics_only records (failure_rate 100) and never opens
  r4c::CircuitBreakerSnapshot watched = breaker.snapshot();
  breaker.transition_to_forced_open();  // rejects every call until another transition
  breaker.transition_to_open_for(5s);   // open for exactly 5 s, then a trial
  breaker.reset();                      // closed, with empty statistics
  // [/doc:breaker-states]
  check(watched.state == r4c::CircuitBreakerState::metrics_only, "metrics_only stays");
  check(watched.failure_rate == 100, "metrics_only records");
  check(breaker.state() == r4c::CircuitBreakerState::closed, "reset closes");
  check(breaker.snapshot().buffered_calls == 0, "reset empties the window");
}

void breaker_classification(const std::shared_ptr<r4c::ManualClock>& clock) {
  using namespace std::chrono_literals;
  // [doc:breaker-classification]
  r4c::CircuitBreaker breaker(
      "search",
      r4c::CircuitBreakerConfig()
          .minimum_number_of_calls(2)
          .sliding_window_size(2)
          .wait_in_open(10s)
          .exponential_wait_in_open(2.0, 1min)  // 10 s, 20 s, 40 s, 1 min, ... while it reopens
          .record_on<HttpError>([](const HttpError& e) { return e.status >= 500; })
          .ignore_on<HttpError>([](const HttpError& e) { return e.status == 429; })
          .record_result<std::string>([](const std::string& body) { return body.empty(); }),
      clock);
  try {
    breaker.execute([]() -> std::string { throw HttpError(429); });  // ignored
  } catch (const HttpError&) {
  }
  std::string body = breaker.execute([] { return std::string(); });  // a failure, still returned
  body = breaker.execute([] { return std::string("hits"); });
  // 1 of 2 recorded calls failed: 50 % reaches the threshold, the breaker opens for 10 s
  // [/doc:breaker-classification]
  check(body == "hits", "the result is returned");
  const r4c::CircuitBreakerSnapshot snap = breaker.snapshot();
  check(snap.state == r4c::CircuitBreakerState::open, "opened by the empty result");
  check(snap.buffered_calls == 2 && snap.failed_calls == 1, "the 429 was ignored");
  clock->advance(10s);
  check(static_cast<bool>(breaker.try_acquire()), "a trial after 10 s");
}

void retry_features(const std::shared_ptr<r4c::ManualClock>& clock) {
  using namespace std::chrono_literals;
  int attempts = 0;
  auto fetch = [&attempts]() -> std::string {
    if (++attempts == 1) throw HttpError(503);
    return attempts < 3 ? "pending" : "ready";
  };
  // [doc:retry-features]
  r4c::Retry retry(
      "reports",
      r4c::RetryConfig()
          .max_attempts(4)
          .retry_on<HttpError>([](const HttpError& e) { return e.status >= 500; })
          .retry_on_result<std::string>([](const std::string& s) { return s == "pending"; })
          .fail_after_max_attempts(true)  // still "pending" at the last attempt: it throws
          .interval_function([](int attempt, const r4c::RetryOutcome& outcome) {
            // a failure waits longer than a result that is not ready yet
            return outcome.failure ? attempt * 100ms : 20ms;
          }),
      clock);
  std::vector<std::chrono::nanoseconds> waits;
  r4c::Subscription listening = retry.on_attempt([&](const r4c::RetryAttemptEvent& e) {
    if (e.retrying) waits.push_back(e.wait);
  });
  std::string report = retry.execute(fetch);
  // report == "ready" at the third attempt, after waits of 100 ms and 20 ms
  // [/doc:retry-features]
  check(report == "ready", "the third attempt is ready");
  check(waits == std::vector<std::chrono::nanoseconds>{100ms, 20ms}, "the waits");
  attempts = 1;  // from now on every attempt is "pending"
  bool exceeded = false;
  try {
    retry.execute([] { return std::string("pending"); });
  } catch (const r4c::MaxRetriesExceededException& e) {
    exceeded = e.attempts() == 4;
  }
  check(exceeded, "fail_after_max_attempts");
}

}  // namespace

int main() {
  auto clock = std::make_shared<r4c::ManualClock>();
  breaker_states(clock);
  breaker_classification(clock);
  {
    ClockDriver driver(clock);
    retry_features(clock);
  }
  for (const char* what : failed_checks) std::fprintf(stderr, "policies_docs: FAILED: %s\n", what);
  if (failed_checks.empty()) std::puts("policies_docs: all checks passed");
  return failed_checks.empty() ? 0 : 1;
}
