// SPDX-License-Identifier: Apache-2.0
// A randomized stress test of a pipeline with seven policies, all but the throttle (issue 6):
//
//   retry -> hedge -> circuit breaker -> rate limiter -> adaptive limit -> timeout -> bulkhead
//
// Eight threads call through one pipeline while a driver thread advances the ManualClock in
// small steps. Every attempt draws its behaviour (a quick or slow success, a user failure, a
// CallTimeoutException of its own, running until its token stops, a slow success that gives up
// when stopped) from the call's seed, so one call may be hedged, won by a hedge, retried, timed
// out or refused on the way. Afterwards every slot, permit, waiting call, executor task and timer
// must be back, every call must have ended exactly once with its own result or its own failure,
// and the interesting paths must have been taken.
//
// Its random seed is fixed unless R4C_TEST_SEED says otherwise (a number, or `random`;
// test_seed.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "r4c/pipeline.hpp"
#include "test_seed.hpp"
#include "wait_stress_support.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kThreads = 8;
constexpr int kCallsPerThread = 1000;
constexpr int kStormEvery = 25;                    // calls per thread between storm changes
constexpr std::chrono::nanoseconds kStep = 100us;  // the driver's step
constexpr std::chrono::nanoseconds kHedgeDelay = 2ms;
constexpr std::chrono::nanoseconds kTimeout = 6ms;
constexpr std::chrono::nanoseconds kSlow = 3ms;           // > the hedge delay, < the timeout
constexpr std::chrono::nanoseconds kSlowStoppable = 4ms;  // likewise
constexpr std::chrono::nanoseconds kHangSafetyNet = 1s;   // a hang whose token never stops
constexpr std::chrono::seconds kQuiescenceBudget{60};     // real time, for the losers to end
constexpr std::chrono::seconds kWatchdog{120};            // real time without any progress

// The failures an attempt throws; each names its call, so a failure delivered to the wrong
// caller is seen.
struct Boom : std::runtime_error {
  explicit Boom(std::uint64_t call) : std::runtime_error("boom"), call(call) {}
  std::uint64_t call;
};
struct SlowReply : r4c::CallTimeoutException {
  explicit SlowReply(std::uint64_t call) : r4c::CallTimeoutException("slow reply"), call(call) {}
  std::uint64_t call;
};
// Thrown by an attempt whose token stopped: a hedge loser (discarded) or past its deadline
// (replaced by the timeout's CallTimeoutException). It must never reach a caller.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};

// Sleeps on the manual clock until a deadline or until a token stops, whichever comes first
// (Clock::sleep_until cannot be stopped). Blocks: the driver's advance wakes it.
class Alarm final : public r4c::detail::TimerTask {
 public:
  void fire() noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    fired_ = true;
    woken_.notify_all();
  }

  // True when the deadline came, false when `stop` stopped first. Which came first is read on
  // the clock when the stop is requested: by the time a stopped sleeper runs again the driver
  // may have moved the clock past the deadline too, and the wait's predicate then holds as well.
  static bool sleep(r4c::Clock& clock, std::chrono::nanoseconds duration, std::stop_token stop) {
    Alarm alarm;
    const std::chrono::nanoseconds deadline = clock.now() + duration;
    std::atomic<bool> stopped_first{false};
    auto on_stop = [&]() noexcept {
      if (clock.now() < deadline) stopped_first.store(true);
    };
    const std::stop_callback<decltype(on_stop)> watch(stop, on_stop);
    clock.schedule(alarm, deadline);
    bool fired = false;
    {
      std::unique_lock<std::mutex> lock(alarm.mutex_);
      fired = alarm.woken_.wait(lock, stop, [&] { return alarm.fired_; });
    }
    clock.cancel(alarm);  // waits for a fire in progress
    return fired && !stopped_first.load();
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any woken_;
  bool fired_ = false;
};

enum class Act { ok, slow_ok, boom, slow_reply, hang, slow_or_cancel };

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// What attempt `attempt` (0-based over the call's retries and hedges) of a call does. In a
// storm most attempts fail, which opens the breaker; between storms it closes again.
Act act_of(std::uint64_t seed, int attempt, bool storm) {
  const std::uint64_t roll = splitmix64(seed + static_cast<std::uint64_t>(attempt) * 7919) % 100;
  if (storm && roll % 5 != 0) return Act::boom;
  if (roll < 52) return Act::ok;
  if (roll < 64) return Act::slow_ok;
  if (roll < 72) return Act::boom;
  if (roll < 76) return Act::slow_reply;
  if (roll < 84) return Act::hang;
  return Act::slow_or_cancel;
}

// Longer than the small string buffer: results live on the heap, and a loser's is destroyed
// on its executor thread.
std::string result_of(std::uint64_t call) { return "the result of call #" + std::to_string(call); }

// Set on the threads that call the pipeline (not on the executor's).
thread_local bool is_caller_thread = false;

// What the test and every attempt share; attempts may outlive their call, so they hold it by
// shared_ptr.
struct Shared {
  std::shared_ptr<r4c::ManualClock> clock;
  std::atomic<std::uint64_t> started{0};          // attempts that entered the callable
  std::atomic<std::uint64_t> ended{0};            // attempts that left it
  std::atomic<std::uint64_t> unstopped_hangs{0};  // hangs that met their safety net
  std::atomic<std::uint64_t> finished_calls{0};   // for the watchdog
  // Attempts run by a caller's own thread: the first attempt of a call the executor refused.
  std::atomic<std::uint64_t> on_caller_thread{0};
};

struct Call {
  std::uint64_t id = 0;
  std::uint64_t seed = 0;
  bool healthy = false;      // every attempt succeeds at once
  bool storm = false;        // most attempts fail
  std::atomic<int> next{0};  // the next attempt's number
};

// The callable: copied by the hedge into its shared state, run from several threads at once.
struct Attempt {
  std::shared_ptr<Shared> shared;
  std::shared_ptr<Call> call;

  std::string operator()(std::stop_token stop) const {
    shared->started.fetch_add(1);
    struct Ended {
      Shared& shared;
      ~Ended() { shared.ended.fetch_add(1); }
    } ended{*shared};
    if (is_caller_thread) shared->on_caller_thread.fetch_add(1);
    const int attempt = call->next.fetch_add(1);
    const Act act = call->healthy ? Act::ok : act_of(call->seed, attempt, call->storm);
    switch (act) {
      case Act::ok:
        break;
      case Act::slow_ok:  // deaf to its token: a loser runs on after its call returned
        Alarm::sleep(*shared->clock, kSlow, std::stop_token());
        break;
      case Act::boom:
        throw Boom(call->id);
      case Act::slow_reply:
        throw SlowReply(call->id);
      case Act::hang:  // until the deadline or a win elsewhere stops it
        if (Alarm::sleep(*shared->clock, kHangSafetyNet, stop))
          shared->unstopped_hangs.fetch_add(1);
        break;
      case Act::slow_or_cancel:
        if (!Alarm::sleep(*shared->clock, kSlowStoppable, stop)) throw Cancelled();
        break;
    }
    return result_of(call->id);
  }
};

// How the calls of one thread ended; written by that thread only.
struct Tally {
  std::uint64_t results = 0;
  std::uint64_t boom = 0;
  std::uint64_t slow_reply = 0;
  std::uint64_t timed_out = 0;  // the timeout's own CallTimeoutException
  std::uint64_t not_permitted = 0;
  std::uint64_t limit_exceeded = 0;
  std::uint64_t bulkhead_full = 0;
  std::uint64_t rate_limited = 0;
  std::uint64_t cancelled = 0;   // must stay 0
  std::uint64_t unexpected = 0;  // must stay 0
  std::uint64_t wrong_call = 0;  // a result or failure of another call; must stay 0

  std::uint64_t failures() const {
    return boom + slow_reply + timed_out + not_permitted + limit_exceeded + bulkhead_full +
           rate_limited + cancelled + unexpected;
  }
  Tally& operator+=(const Tally& o) {
    results += o.results;
    boom += o.boom;
    slow_reply += o.slow_reply;
    timed_out += o.timed_out;
    not_permitted += o.not_permitted;
    limit_exceeded += o.limit_exceeded;
    bulkhead_full += o.bulkhead_full;
    rate_limited += o.rate_limited;
    cancelled += o.cancelled;
    unexpected += o.unexpected;
    wrong_call += o.wrong_call;
    return *this;
  }
};

// Makes one call and files its outcome; returns 1, the number of outcomes a call has.
int call_once(const r4c::Pipeline<std::string>& pipeline, const Attempt& attempt, Tally& tally) {
  const std::uint64_t id = attempt.call->id;
  try {
    const std::string result = pipeline.execute(attempt);
    if (result != result_of(id)) ++tally.wrong_call;
    ++tally.results;
  } catch (const Boom& e) {
    if (e.call != id) ++tally.wrong_call;
    ++tally.boom;
  } catch (const SlowReply& e) {
    if (e.call != id) ++tally.wrong_call;
    ++tally.slow_reply;
  } catch (const Cancelled&) {
    ++tally.cancelled;
  } catch (const r4c::CallTimeoutException&) {
    ++tally.timed_out;
  } catch (const r4c::CallNotPermittedException&) {
    ++tally.not_permitted;
  } catch (const r4c::LimitExceededException&) {
    ++tally.limit_exceeded;
  } catch (const r4c::BulkheadFullException&) {
    ++tally.bulkhead_full;
  } catch (const r4c::RequestNotPermittedException&) {
    ++tally.rate_limited;
  } catch (...) {
    ++tally.unexpected;
  }
  attempt.shared->finished_calls.fetch_add(1);
  return 1;
}

// Waits until every task posted to `executor` so far has completed, and returns how many tasks
// it has completed then (nullopt past `give_up`). Posts one gate task per thread that waits until
// all of them run: the queue is FIFO and a thread takes a task only after its last one ended.
std::optional<std::uint64_t> drain(r4c::Executor& executor,
                                   std::chrono::steady_clock::time_point give_up) {
  struct Gate {
    std::atomic<int> arrived{0};
    std::atomic<bool> open{false};
  };
  auto gate = std::make_shared<Gate>();
  struct Opener {
    Gate& gate;
    ~Opener() { gate.open.store(true); }
  } opener{*gate};
  const auto expired = [&] { return std::chrono::steady_clock::now() > give_up; };
  for (int posted = 0; posted < executor.threads();) {
    if (executor.try_post([gate] {
          gate->arrived.fetch_add(1);
          while (!gate->open.load()) std::this_thread::yield();
        })) {
      ++posted;
    } else if (expired()) {
      return std::nullopt;
    } else {
      std::this_thread::yield();
    }
  }
  while (gate->arrived.load() < executor.threads()) {
    if (expired()) return std::nullopt;
    std::this_thread::yield();
  }
  return executor.completed();
}

// The executor's size: roomy (it never refuses an attempt) or tight (a refused first attempt
// runs on the caller's thread, a refused hedge ends the launching).
struct ExecutorSize {
  int threads;
  int max_queued;
  bool refuses;
};

void PrintTo(const ExecutorSize& size, std::ostream* out) {
  *out << size.threads << " threads, at most " << size.max_queued << " queued";
}

class PipelineStressTest : public ::testing::TestWithParam<ExecutorSize> {};

TEST_P(PipelineStressTest, EightThreadsThroughAllSevenPoliciesGiveEverythingBack) {
  const ExecutorSize size = GetParam();
  const std::uint64_t seed = r4c::test::test_seed();
  SCOPED_TRACE("R4C_TEST_SEED=" + std::to_string(seed));

  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry =
      r4c::testing::registry(clock).hedge_executor(size.threads, size.max_queued).build();
  auto pipeline =
      r4c::Pipeline<std::string>::builder(registry, "stress")
          .retry([](r4c::RetryConfig& r) {
            r.max_attempts(3).wait(1ms).exponential_backoff(2.0, 4ms).randomized_wait(0.5);
          })
          .hedge([](r4c::HedgeConfig& h) { h.delay(kHedgeDelay).max_attempts(3); })
          .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
            c.sliding_window_type(r4c::SlidingWindowType::count_based)
                .sliding_window_size(20)
                .minimum_number_of_calls(10)
                .failure_rate_threshold(50)
                .wait_in_open(2ms)
                .permitted_calls_in_half_open(3)
                .ignore_on<r4c::LimitExceededException>();  // gives half-open trials back
          })
          .rate_limiter([](r4c::RateLimiterConfig& r) {
            r.limit_for_period(6).refresh_period(1ms).timeout_duration(1ms);
          })
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
            r4c::test::aimd_per_millisecond(a, 4, 8, 3).min_limit(3);
          })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(kTimeout); })
          .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(3); })
          .build();
  r4c::CircuitBreaker& breaker = *pipeline.circuit_breaker();
  const std::shared_ptr<r4c::Executor> executor = pipeline.hedge()->executor();
  ASSERT_EQ(executor->threads(), size.threads);
  ASSERT_EQ(executor->max_queued(), size.max_queued);

  auto shared = std::make_shared<Shared>();
  shared->clock = clock;

  // The driver: moves the clock until told to stop, and gives up loudly when nothing moves for
  // a long time (a hang would otherwise end in a bare CTest timeout).
  std::atomic<bool> stop_driver{false};
  std::atomic<bool> saw_reclosed{false};   // closed after a transition (sampled)
  std::atomic<bool> saw_rate_wait{false};  // a call waited for a rate-limiter permit
  std::thread driver([&] {
    auto last_change = std::chrono::steady_clock::now();
    std::uint64_t last_progress = 0;
    for (std::uint64_t step = 0; !stop_driver.load(); ++step) {
      clock->advance(kStep);
      if (step % 4 == 0) {
        const r4c::CircuitBreakerSnapshot snap = breaker.snapshot();
        if (snap.state == r4c::CircuitBreakerState::closed && snap.transitions > 0) {
          saw_reclosed.store(true);
        }
        if (pipeline.rate_limiter()->snapshot().waiting_calls > 0) saw_rate_wait.store(true);
      }
      const std::uint64_t progress = shared->finished_calls.load() + shared->ended.load();
      const auto now = std::chrono::steady_clock::now();
      if (progress != last_progress) {
        last_progress = progress;
        last_change = now;
      } else if (now - last_change > kWatchdog) {
        std::fprintf(stderr,
                     "pipeline_stress_test: no progress for %lld s (seed %llu): clock %lld ns, "
                     "calls finished %llu, attempts started %llu ended %llu, limit in flight "
                     "%d, bulkhead in flight %d, breaker %s\n",
                     static_cast<long long>(kWatchdog.count()),
                     static_cast<unsigned long long>(seed),
                     static_cast<long long>(clock->now().count()),
                     static_cast<unsigned long long>(shared->finished_calls.load()),
                     static_cast<unsigned long long>(shared->started.load()),
                     static_cast<unsigned long long>(shared->ended.load()),
                     pipeline.adaptive_limit()->in_flight(), pipeline.bulkhead()->in_flight(),
                     std::string(r4c::to_string(breaker.state())).c_str());
        std::fflush(stderr);
        std::abort();
      }
      std::this_thread::yield();
    }
  });

  std::vector<Tally> tallies(kThreads);
  std::vector<std::vector<int>> outcomes(kThreads, std::vector<int>(kCallsPerThread, 0));
  std::vector<std::thread> callers;
  const auto started = std::chrono::steady_clock::now();
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      is_caller_thread = true;
      std::mt19937_64 random(seed + static_cast<std::uint64_t>(t) * 1'000'003);
      for (int i = 0; i < kCallsPerThread; ++i) {
        auto call = std::make_shared<Call>();
        call->id = static_cast<std::uint64_t>(t) * kCallsPerThread + static_cast<std::uint64_t>(i);
        call->seed = random();
        call->storm = (i / kStormEvery) % 4 == 3;  // a quarter of each thread's calls
        outcomes[t][i] += call_once(pipeline, Attempt{shared, std::move(call)}, tallies[t]);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  const auto calls_done = std::chrono::steady_clock::now();

  // Every caller has returned: the counters of the outer policies are final.
  Tally total;
  for (const Tally& tally : tallies) total += tally;
  const r4c::RetrySnapshot retry = registry.retry("stress").snapshot();
  const r4c::HedgeSnapshot hedge = registry.hedge("stress").snapshot();
  const r4c::CircuitBreakerSnapshot breaker_after_stress = breaker.snapshot();
  const bool reclosed_under_load = saw_reclosed.load();

  // The breaker must close again once its dependency is healthy: no trial permit may have
  // leaked. The driver keeps moving the clock past wait_in_open.
  auto healthy = std::make_shared<Call>();
  healthy->healthy = true;
  healthy->id = static_cast<std::uint64_t>(kThreads) * kCallsPerThread;
  Tally heal;
  is_caller_thread = true;
  int heal_calls = 0;
  for (; heal_calls < 5000 && breaker.state() != r4c::CircuitBreakerState::closed; ++heal_calls) {
    call_once(pipeline, Attempt{shared, healthy}, heal);
  }
  const r4c::CircuitBreakerSnapshot breaker_healed = breaker.snapshot();
  const r4c::HedgeSnapshot hedge_healed = registry.hedge("stress").snapshot();

  // Hedge losers may still run (the driver keeps waking them): wait, bounded, until every task
  // posted so far has completed.
  const auto give_up = std::chrono::steady_clock::now() + kQuiescenceBudget;
  const std::optional<std::uint64_t> hedge_tasks = drain(*executor, give_up);
  const std::uint64_t queued_after_drain = executor->queued();
  stop_driver.store(true);
  driver.join();
  const auto quiet = std::chrono::steady_clock::now();

  const auto ms = [](auto span) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(span).count());
  };
  std::printf(
      "seed %llu: %lld ms of calls, %lld ms until quiet, %lld ms on the clock\n"
      "  outcomes: %llu results, %llu boom, %llu slow reply, %llu timed out, %llu not permitted, "
      "%llu limit, %llu bulkhead, %llu rate\n"
      "  retry: %llu retries; hedge: %llu calls, %llu hedges, %llu won by hedge, %llu refused, "
      "%llu first attempts on the caller\n"
      "  breaker: %llu transitions, %llu not permitted, reclosed seen %d, %d heal calls, rate wait "
      "seen %d\n"
      "  limit rejected %llu, bulkhead rejected %llu, rate rejected %llu, timed out %llu\n",
      static_cast<unsigned long long>(seed), ms(calls_done - started), ms(quiet - calls_done),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(clock->now()).count()),
      static_cast<unsigned long long>(total.results), static_cast<unsigned long long>(total.boom),
      static_cast<unsigned long long>(total.slow_reply),
      static_cast<unsigned long long>(total.timed_out),
      static_cast<unsigned long long>(total.not_permitted),
      static_cast<unsigned long long>(total.limit_exceeded),
      static_cast<unsigned long long>(total.bulkhead_full),
      static_cast<unsigned long long>(total.rate_limited),
      static_cast<unsigned long long>(retry.retries), static_cast<unsigned long long>(hedge.calls),
      static_cast<unsigned long long>(hedge.hedges_launched),
      static_cast<unsigned long long>(hedge.won_by_hedge),
      static_cast<unsigned long long>(hedge.executor_refusals),
      static_cast<unsigned long long>(shared->on_caller_thread.load()),
      static_cast<unsigned long long>(breaker_after_stress.transitions),
      static_cast<unsigned long long>(breaker_after_stress.not_permitted_calls),
      reclosed_under_load ? 1 : 0, heal_calls, saw_rate_wait.load() ? 1 : 0,
      static_cast<unsigned long long>(pipeline.adaptive_limit()->snapshot().rejected),
      static_cast<unsigned long long>(pipeline.bulkhead()->snapshot().rejected),
      static_cast<unsigned long long>(pipeline.rate_limiter()->snapshot().rejected),
      static_cast<unsigned long long>(pipeline.timeout()->snapshot().timed_out));

  // Every call ended exactly once, with its own result or its own failure.
  constexpr std::uint64_t kCalls = static_cast<std::uint64_t>(kThreads) * kCallsPerThread;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCallsPerThread; ++i) {
      ASSERT_EQ(outcomes[t][i], 1) << "thread " << t << " call " << i;
    }
  }
  EXPECT_EQ(total.results + total.failures(), kCalls);
  EXPECT_EQ(total.wrong_call, 0u);
  EXPECT_EQ(total.cancelled, 0u) << "a hedge loser's failure reached its caller";
  EXPECT_EQ(total.unexpected, 0u);
  EXPECT_EQ(heal.wrong_call + heal.cancelled + heal.unexpected, 0u);
  EXPECT_EQ(shared->unstopped_hangs.load(), 0u) << "a token was never stopped";

  // The outer policies saw each call end once, and each retry attempt is one hedged call.
  EXPECT_EQ(retry.successful_without_retry + retry.successful_with_retry, total.results);
  EXPECT_EQ(retry.failed_without_retry + retry.failed_with_retry, total.failures());
  EXPECT_EQ(retry.waiting_calls, 0);
  EXPECT_EQ(hedge.calls, kCalls + retry.retries);
  EXPECT_EQ(hedge.calls - hedge.failed, total.results);
  if (size.refuses) {
    EXPECT_GT(shared->on_caller_thread.load(), 0u) << "no first attempt ran on its caller";
    EXPECT_GE(hedge_healed.executor_refusals, shared->on_caller_thread.load());
  } else {
    EXPECT_EQ(hedge_healed.executor_refusals, 0u);
    EXPECT_EQ(shared->on_caller_thread.load(), 0u);
  }

  // Everything is given back.
  EXPECT_EQ(shared->started.load(), shared->ended.load()) << "attempts still running";
  ASSERT_TRUE(hedge_tasks.has_value()) << "the executor did not drain";
  EXPECT_EQ(queued_after_drain, 0u);
  // Each hedged call posted its first attempt, unless the executor refused it (then it ran on
  // the caller's thread, and reached the callable unless a policy refused it first), and each
  // hedge it launched; only those tasks ran on the executor.
  const std::uint64_t most_posted =
      hedge_healed.calls - shared->on_caller_thread.load() + hedge_healed.hedges_launched;
  EXPECT_LE(*hedge_tasks, most_posted) << "the executor ran tasks no hedge posted";
  EXPECT_GE(*hedge_tasks, most_posted - (hedge_healed.executor_refusals -
                                         std::min(hedge_healed.executor_refusals,
                                                  shared->on_caller_thread.load())))
      << "tasks posted to the executor were lost";
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  EXPECT_EQ(pipeline.rate_limiter()->snapshot().waiting_calls, 0);
  EXPECT_EQ(registry.retry("stress").snapshot().waiting_calls, 0);
  EXPECT_EQ(clock->pending_tasks(), 0u) << "a policy left a task on the clock";
  EXPECT_EQ(breaker_healed.state, r4c::CircuitBreakerState::closed)
      << "the breaker did not close again with a healthy dependency";

  // The interesting paths were taken.
  EXPECT_GT(total.results, 0u);
  EXPECT_GT(total.boom, 0u);
  EXPECT_GT(total.slow_reply, 0u);
  EXPECT_GT(retry.retries, 0u);
  EXPECT_GT(retry.successful_with_retry, 0u);
  EXPECT_GT(hedge.hedges_launched, 0u);
  EXPECT_GT(hedge.won_by_hedge, 0u);
  EXPECT_GT(pipeline.timeout()->snapshot().timed_out, 0u);
  // Opened, half-opened and moved on under load, rejecting calls while open, and was seen
  // closed again (the driver samples it) before the callers were done.
  EXPECT_GE(breaker_after_stress.transitions, 3u);
  EXPECT_GT(breaker_after_stress.not_permitted_calls, 0u);
  EXPECT_TRUE(reclosed_under_load);
  // Closed with transitions behind it: it went open -> half-open -> closed at least once.
  EXPECT_GE(breaker_healed.transitions, 3u);
  EXPECT_GT(
      pipeline.adaptive_limit()->snapshot().rejected + pipeline.bulkhead()->snapshot().rejected,
      0u);
}

INSTANTIATE_TEST_SUITE_P(Executors, PipelineStressTest,
                         ::testing::Values(ExecutorSize{4, r4c::Executor::kDefaultMaxQueued, false},
                                           ExecutorSize{2, 2, true}),
                         [](const ::testing::TestParamInfo<ExecutorSize>& info) {
                           return info.param.refuses ? std::string("TightExecutor")
                                                     : std::string("RoomyExecutor");
                         });

}  // namespace
