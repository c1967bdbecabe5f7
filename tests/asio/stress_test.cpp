// SPDX-License-Identifier: Apache-2.0
// Randomised async calls through random pipelines: operations completing inline, on a pool
// thread through the handler's executor, or through an io_context; callers with no executor (a
// plain callback, asio::use_future; bound to the pool when the pipeline hedges) or a strand;
// cancellations emitted on the callers' strands from another thread; and rounds that end by
// destroying the io_context with calls in flight. Every caller's handler must be called at most
// once and destroyed exactly once, and every slot, wait and timer must be given back. Meant for
// TSan and ASan. The number of calls comes from R4C_ASYNC_STRESS_CALLS (a modest default for CI),
// its random seed from R4C_TEST_SEED (async_support).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "async_support.hpp"
#include "policy_cases.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;

// Counts operations whose handler (r4c's) is still alive: the test waits for none before it
// checks the policies' counts. Moved-from tickets count nothing.
class OpTicket {
 public:
  explicit OpTicket(std::atomic<long>* live) noexcept : live_(live) { live_->fetch_add(1); }
  OpTicket(OpTicket&& other) noexcept : live_(std::exchange(other.live_, nullptr)) {}
  OpTicket& operator=(OpTicket&&) = delete;
  ~OpTicket() {
    if (live_ != nullptr) live_->fetch_sub(1);
  }

 private:
  std::atomic<long>* live_;
};

enum class Completion { kInline, kPool, kContext };

// r4c's handler with its ticket; the handler is destroyed before the ticket (member order).
template <class Handler>
struct PendingOp {
  OpTicket ticket;
  Handler handler;
  asio::associated_cancellation_slot_t<Handler> slot;
  std::shared_ptr<std::atomic<bool>> cancelled;
  std::error_code code;
  std::chrono::nanoseconds spin;

  void complete() {
    const auto due = std::chrono::steady_clock::now() + spin;
    while (std::chrono::steady_clock::now() < due) std::this_thread::yield();
    if (slot.is_connected()) slot.clear();  // as Asio's operations do before completing
    const std::error_code outcome = cancelled->load() ? asio::error::operation_aborted : code;
    auto executor = asio::get_associated_executor(handler);
    asio::dispatch(executor, [handler = std::move(handler), outcome]() mutable {
      std::move(handler)(outcome, 1);
    });
  }
};

// Which policy a failure says refused the call (its position in the kind list), or that the
// call timed out (kTimedOut), or neither (kOther).
constexpr int kTimedOut = static_cast<int>(r4c::detail::kKindCount);
constexpr int kOther = kTimedOut + 1;
int answered_by(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const r4c::RejectedException& e) {
    const auto& names = r4c::detail::AllKinds::names;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i].metrics == e.kind()) return static_cast<int>(i);
    }
  } catch (const r4c::CallTimeoutException&) {
    return kTimedOut;
  } catch (...) {
  }
  return kOther;
}

// What one call's caller saw.
struct CallerLife {
  std::atomic<int> calls{0};
  std::atomic<int> destructions{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> aborted{false};
  std::atomic<int> failure_by{kOther};
};

struct TrackedHandler {
  explicit TrackedHandler(CallerLife* life) noexcept : life_(life) {}
  TrackedHandler(TrackedHandler&& other) noexcept : life_(std::exchange(other.life_, nullptr)) {}
  TrackedHandler& operator=(TrackedHandler&&) = delete;
  ~TrackedHandler() {
    if (life_ != nullptr) life_->destructions.fetch_add(1);
  }
  void operator()(std::exception_ptr failure, int) {
    if (failure) {
      life_->failed.store(true);
      life_->failure_by.store(answered_by(failure));
    }
    if (r4c::testing::aborted(failure)) life_->aborted.store(true);
    life_->calls.fetch_add(1);
  }

 private:
  CallerLife* life_;
};

// The machinery of a stress run over `pipelines_`: rounds of random calls, then the checks.
class AsyncStressRig : public ::testing::Test {
 protected:
  // Random pipelines, each policy present or not.
  void add_random_pipelines(int count) {
    std::bernoulli_distribution half(0.5);
    for (int i = 0; i < count; ++i) {
      auto builder = r4c::Pipeline<int>::builder(registry_, "stress-" + std::to_string(i));
      const bool small = half(random_);
      if (half(random_)) builder.retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(20us); });
      if (half(random_)) {
        builder.hedge([](r4c::HedgeConfig& h) { h.delay(30us).max_attempts(2); });
      }
      if (half(random_)) builder.circuit_breaker();
      if (half(random_)) {
        builder.rate_limiter([](r4c::RateLimiterConfig& r) {
          r.limit_for_period(20).refresh_period(1ms).timeout_duration(2ms);
        });
      }
      builder.adaptive_limit(
          [small](r4c::AdaptiveLimitConfig& a) { a.initial_limit(small ? 8 : 150); });
      if (half(random_)) builder.timeout([](r4c::TimeoutConfig& t) { t.timeout(60us); });
      if (half(random_)) {
        builder.bulkhead([small](r4c::BulkheadConfig& b) { b.max_concurrent(small ? 6 : 1000); });
      }
      pipelines_.push_back(std::make_unique<r4c::Pipeline<int>>(builder.build()));
    }
  }

  // An operation completing as `completion` says, `spin` after it started, with `code`.
  auto operation(Completion completion, std::error_code code, std::chrono::nanoseconds spin,
                 asio::io_context* io) {
    return [this, completion, code, spin, io](auto handler) {
      using Handler = decltype(handler);
      auto slot = asio::get_associated_cancellation_slot(handler);
      auto cancelled = std::make_shared<std::atomic<bool>>(false);
      if (slot.is_connected()) {
        slot.assign([cancelled](asio::cancellation_type) { cancelled->store(true); });
      }
      PendingOp<Handler> op{OpTicket(&live_ops_), std::move(handler), slot, cancelled, code, spin};
      switch (completion) {
        case Completion::kInline:
          op.spin = 0ns;
          op.complete();
          break;
        case Completion::kPool:
          asio::post(pool_, [op = std::move(op)]() mutable { op.complete(); });
          break;
        case Completion::kContext:
          asio::post(*io, [op = std::move(op)]() mutable { op.complete(); });
          break;
      }
    };
  }

  // Waits (a bounded real time) until `done` holds.
  template <class Predicate>
  static bool wait_until(Predicate done) {
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::sleep_for(50us);
    }
    return true;
  }

  // One round of `count` calls on one io_context, which is run to the end or, when `teardown`,
  // destroyed with calls in flight.
  void round(long count, bool teardown) {
    auto io = std::make_unique<asio::io_context>();
    std::optional<asio::strand<asio::io_context::executor_type>> strand(asio::make_strand(*io));
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work(
        io->get_executor());
    std::thread runner([&io] { io->run(); });

    std::vector<std::unique_ptr<CallerLife>> lives;
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
    std::vector<std::future<int>> futures;
    std::uniform_int_distribution<int> pick_pipeline(0, static_cast<int>(pipelines_.size()) - 1);
    std::uniform_int_distribution<int> pick(0, 99);
    std::uniform_int_distribution<int> spin_us(0, 80);
    for (long i = 0; i < count; ++i) {
      r4c::Pipeline<int>& pipeline = *pipelines_[pick_pipeline(random_)];
      const int caller = pick(random_);  // < 40 callback, < 60 future, else a strand
      const bool on_strand = caller >= 60;
      const int how = pick(random_);
      Completion completion = how < 20   ? Completion::kInline
                              : how < 60 ? Completion::kPool
                                         : Completion::kContext;
      // Completions from other threads through a strand, or into a context a teardown
      // destroys from a thread r4c started, are the operation's own misuse: not tested.
      if (teardown && on_strand && completion == Completion::kPool)
        completion = Completion::kContext;
      if (teardown && !on_strand && completion == Completion::kContext)
        completion = Completion::kPool;
      const int fate = pick(random_);
      const std::error_code code = fate < 70   ? std::error_code()
                                   : fate < 85 ? make_error_code(asio::error::connection_refused)
                                               : make_error_code(asio::error::timed_out);
      auto op = operation(completion, code, std::chrono::microseconds(spin_us(random_)), io.get());
      // A hedge may still cancel a losing attempt on its caller's executor after the answer
      // (docs/async.md): its callers without an executor of their own get the pool, which the
      // run joins before the registry goes; a system-executor thread cannot be joined.
      const bool hedged = pipeline.hedge() != nullptr;
      if (caller < 40) {
        lives.push_back(std::make_unique<CallerLife>());
        if (hedged) {
          pipeline.async_execute(op,
                                 asio::bind_executor(pool_, TrackedHandler(lives.back().get())));
        } else {
          pipeline.async_execute(op, TrackedHandler(lives.back().get()));
        }
      } else if (caller < 60) {
        futures.push_back(
            hedged ? pipeline.async_execute(op, asio::bind_executor(pool_, asio::use_future))
                   : pipeline.async_execute(op, asio::use_future));
      } else {
        lives.push_back(std::make_unique<CallerLife>());
        signals.push_back(std::make_unique<asio::cancellation_signal>());
        asio::cancellation_signal* signal = signals.back().get();
        pipeline.async_execute(
            op,
            asio::bind_cancellation_slot(
                signal->slot(), asio::bind_executor(*strand, TrackedHandler(lives.back().get()))));
        if (pick(random_) < 25) {  // cancelled from this thread, on the caller's strand
          ++cancels_emitted_;
          asio::post(*strand, [signal] { signal->emit(asio::cancellation_type::terminal); });
        }
      }
      ++calls_;
    }
    if (teardown) {
      std::this_thread::sleep_for(std::chrono::microseconds(spin_us(random_)));
      work.reset();
      io->stop();
      runner.join();
      strand.reset();
      io.reset();  // calls on its strand end without an answer
    }
    ASSERT_TRUE(wait_until([&] {
      for (auto& life : lives) {
        if (life->destructions.load() == 0) return false;
      }
      for (auto& future : futures) {
        if (future.wait_for(0s) != std::future_status::ready) return false;
      }
      return live_ops_.load() == 0;
    })) << "calls still in flight: "
        << live_ops_.load() << " operations";
    for (auto& life : lives) {
      EXPECT_EQ(life->destructions.load(), 1);
      EXPECT_LE(life->calls.load(), 1);
      if (!teardown) {
        EXPECT_EQ(life->calls.load(), 1);
      }
      if (life->calls.load() == 1) {
        ++answered_;
        if (life->aborted.load()) ++cancelled_;
        if (life->failed.load()) {
          ++failed_;
          ++answers_by_[life->failure_by.load()];
        }
      } else {
        ++destroyed_uncalled_;
      }
    }
    for (auto& future : futures) {
      ASSERT_EQ(future.wait_for(0s), std::future_status::ready);
      try {
        future.get();
        ++answered_;
      } catch (const std::future_error&) {
        ++destroyed_uncalled_;  // its promise went with its handler
      } catch (...) {
        ++answered_;
        ++failed_;
        ++answers_by_[answered_by(std::current_exception())];
      }
    }
    if (!teardown) {
      work.reset();
      io->stop();
      runner.join();
    }
  }

  // Rounds of at most kPerRound calls up to `total`, each torn down with probability
  // `teardown`; then every policy's count is checked and the figures printed.
  void run(long total, double teardown) {
    constexpr long kPerRound = 200;
    const auto started = std::chrono::steady_clock::now();
    std::bernoulli_distribution torn_down(teardown);
    for (long done = 0; done < total && !HasFatalFailure(); done += kPerRound) {
      const bool teardown_round = torn_down(random_);
      torn_down_any_ = torn_down_any_ || teardown_round;
      round(std::min(kPerRound, total - done), teardown_round);
    }
    pool_.join();
    for (auto& pipeline : pipelines_) r4c::testing::expect_released(*pipeline);
    if (pipelines_.size() == 1) expect_every_refusal_answered_is_counted(*pipelines_.front());
    EXPECT_TRUE(wait_until([&] { return registry_.clock()->pending_tasks() == 0; }));
    EXPECT_EQ(answered_ + destroyed_uncalled_, calls_);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf(
        "%ld calls in %.1f s: %ld answered (%ld failed, %ld of them cancelled), %ld destroyed "
        "uncalled by a teardown\n",
        calls_, seconds, answered_, failed_, cancelled_, destroyed_uncalled_);
  }

  // One pipeline without a retry or a hedge (which answer one call for several attempts), every
  // call run to the end: each policy counted every refusal and timeout its callers were answered
  // with, under concurrency, and no other but where the caller's cancellation answered first (an
  // outer layer answers a cancellation at once, while an inner one may already have counted).
  void expect_every_refusal_answered_is_counted(const r4c::Pipeline<int>& pipeline) {
    if (torn_down_any_ || pipeline.retry() != nullptr || pipeline.hedge() != nullptr) return;
    // What `policy` (null when the pipeline has none) counted in `field` of its snapshot.
    const auto expect_counted = [this](const auto* policy, auto field, int answered_by,
                                       const char* what) {
      if (policy == nullptr) return;
      const std::uint64_t counted = policy->snapshot().*field;
      EXPECT_GE(counted, answers_by_[answered_by]) << what;
      EXPECT_LE(counted, answers_by_[answered_by] + cancels_emitted_) << what;
    };
    using r4c::detail::kKindIndex;
    ASSERT_NE(pipeline.adaptive_limit(), nullptr);  // every pipeline here has one
    expect_counted(pipeline.adaptive_limit(), &r4c::AdaptiveLimitSnapshot::rejected,
                   kKindIndex<r4c::AdaptiveLimitKind>, "adaptive limit");
    expect_counted(pipeline.bulkhead(), &r4c::BulkheadSnapshot::rejected,
                   kKindIndex<r4c::BulkheadKind>, "bulkhead");
    expect_counted(pipeline.circuit_breaker(), &r4c::CircuitBreakerSnapshot::not_permitted_calls,
                   kKindIndex<r4c::CircuitBreakerKind>, "circuit breaker");
    expect_counted(pipeline.rate_limiter(), &r4c::RateLimiterSnapshot::rejected,
                   kKindIndex<r4c::RateLimiterKind>, "rate limiter");
    expect_counted(pipeline.timeout(), &r4c::TimeoutSnapshot::timed_out, kTimedOut, "timeout");
  }

  std::mt19937_64 random_{r4c::testing::test_seed()};
  r4c::ResilienceRegistry registry_ = r4c::ResilienceRegistry::builder().build();  // SystemClock
  std::vector<std::unique_ptr<r4c::Pipeline<int>>> pipelines_;
  asio::thread_pool pool_{2};
  std::atomic<long> live_ops_{0};
  long calls_ = 0;
  long answered_ = 0;
  long failed_ = 0;
  long cancelled_ = 0;
  long destroyed_uncalled_ = 0;
  std::array<std::uint64_t, kOther + 1> answers_by_{};  // failures answered, by answered_by()
  bool torn_down_any_ = false;
  std::uint64_t cancels_emitted_ = 0;
};

long stress_calls() { return r4c::testing::count_from_env("R4C_ASYNC_STRESS_CALLS", 6000); }

// Random pipelines: any policy may be present, the rounds may end in a teardown.
class AsyncStressTest : public AsyncStressRig {};

TEST_F(AsyncStressTest, EveryHandlerIsAnsweredOrDestroyedOnceAndEverythingIsGivenBack) {
  add_random_pipelines(12);
  run(stress_calls(), 0.3);
}

// Each policy alone inside a limit (a typed suite): the same random calls, run to the end or
// torn down, with real-time settings short enough for the calls to race them.
constexpr r4c::testing::CaseSettings kRealTimeSettings{50us, 20us, 20us, 10, 1ms, 5ms, 16};

template <class Policy>
class AsyncPolicyStressTest : public AsyncStressRig {
 protected:
  void SetUp() override {
    auto builder = r4c::Pipeline<int>::builder(registry_, "policy")
                       .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(150); });
    Policy::add(builder, kRealTimeSettings);
    pipelines_.push_back(std::make_unique<r4c::Pipeline<int>>(builder.build()));
  }
};

TYPED_TEST_SUITE(AsyncPolicyStressTest, r4c::testing::PolicyCases);

TYPED_TEST(AsyncPolicyStressTest, EveryCallRunToTheEndIsAnsweredOnceAndGivesEverythingBack) {
  this->run(stress_calls() / 14, 0.0);
}

TYPED_TEST(AsyncPolicyStressTest,
           EveryCallTornDownIsAnsweredOrDestroyedOnceAndGivesEverythingBack) {
  this->run(stress_calls() / 14, 1.0);
}

}  // namespace
