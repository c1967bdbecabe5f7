// SPDX-License-Identifier: Apache-2.0
// The pipeline's asynchronous face: the same policies, in the same order, around an Asio
// operation; the async rules of resilience4cata 0.6.0's
// "Adaptive limit" page hold through the whole pipeline.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../wait_stress_support.hpp"
#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using r4c::testing::spawn;

using namespace std::chrono_literals;

class AsyncPipelineTest : public r4c::testing::AsyncRegistryTest {
 protected:
  // A callback on `io` for a call that must succeed: its value goes to `result`.
  static auto succeeds_into(asio::io_context& io, std::string& result) {
    return asio::bind_executor(io, [&result](std::exception_ptr e, std::string r) {
      EXPECT_FALSE(e);
      result = std::move(r);
    });
  }
};

// The ManualClock scenario of resilience4cata 0.6.0's "Adaptive limit" page, through a pipeline.
TEST_F(AsyncPipelineTest, TwoPendingCallsHoldTheSlotsTheThirdFailsAtOnceAndTheWindowEnds) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders-async")
                    .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(2); })
                    .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(10); })
                    .build();
  auto a = orders.async_execute(backend_.place("a"), asio::use_future);
  auto b = orders.async_execute(backend_.place("b"), asio::use_future);
  auto c = orders.async_execute(backend_.place("c"), asio::use_future);
  ASSERT_EQ(c.wait_for(0s), std::future_status::ready);
  EXPECT_THROW(c.get(), r4c::LimitExceededException);
  EXPECT_FALSE(backend_.has("c"));
  EXPECT_EQ(orders.bulkhead()->in_flight(), 2);
  place_a_and_b_after_one_second(a, b);
  EXPECT_EQ(orders.bulkhead()->in_flight(), 0);
}

// An async timeout inside the limit fires from the clock: the caller gets CallTimeoutException,
// the operation is cancelled, and the limit records a drop of the timeout's length.
TEST_F(AsyncPipelineTest, AnAsyncTimeoutInsideTheLimitIsADrop) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders")
                    .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                      a.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(10);
                    })
                    .timeout([](r4c::TimeoutConfig& t) { t.timeout(2s); })
                    .build();
  asio::io_context io;
  std::exception_ptr failure;
  orders.async_execute(
      backend_.place("a"),
      asio::bind_executor(io, [&](std::exception_ptr e, std::string) { failure = e; }));
  clock_->advance(2s);  // the deadline fires; its answer is posted to the io_context
  io.run();
  ASSERT_TRUE(failure);
  EXPECT_THROW(std::rethrow_exception(failure), r4c::CallTimeoutException);
  EXPECT_TRUE(backend_.cancelled("a"));
  const r4c::AdaptiveLimitSnapshot snapshot = orders.adaptive_limit()->snapshot();
  EXPECT_TRUE(snapshot.window_dropped);
  EXPECT_EQ(snapshot.window_latency, 2s);
  EXPECT_EQ(snapshot.limit, 9);
  EXPECT_EQ(orders.timeout()->snapshot().timed_out, 1u);
  backend_.complete("a", "late");  // ignored
  io.restart();
  io.run();
  EXPECT_EQ(orders.adaptive_limit()->in_flight(), 0);
}

// Cancelling the caller frees every slot at once without a sample and reaches the operation.
TEST_F(AsyncPipelineTest, CancellingFreesEverySlotAndReachesTheOperation) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders")
                    .circuit_breaker()
                    .adaptive_limit()
                    .timeout([](r4c::TimeoutConfig& t) { t.timeout(5s); })
                    .bulkhead()
                    .build();
  asio::io_context io;
  asio::cancellation_signal cancel;
  std::exception_ptr failure;
  int answers = 0;
  orders.async_execute(
      backend_.place("a"),
      asio::bind_cancellation_slot(cancel.slot(),
                                   asio::bind_executor(io, [&](std::exception_ptr e, std::string) {
                                     failure = e;
                                     ++answers;
                                   })));
  EXPECT_EQ(orders.adaptive_limit()->in_flight(), 1);
  EXPECT_EQ(orders.bulkhead()->in_flight(), 1);
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  ASSERT_EQ(answers, 1);
  EXPECT_TRUE(r4c::testing::aborted(failure));
  EXPECT_TRUE(backend_.cancelled("a"));
  EXPECT_EQ(orders.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(orders.bulkhead()->in_flight(), 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // the timeout's deadline is off the clock
  backend_.complete("a", "late");
  io.restart();
  io.run();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(orders.adaptive_limit()->snapshot().samples, 0u);
  EXPECT_EQ(orders.circuit_breaker()->snapshot().buffered_calls, 0u);
}

// A retry outside retries a full limit after its wait on the clock; each attempt passes the
// limit on its own, and the waiting call holds no slot.
TEST_F(AsyncPipelineTest, ARetryOutsideRetriesAFullLimitAfterItsWait) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders")
                    .retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(100ms); })
                    .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
                    .build();
  r4c::Permit held = orders.adaptive_limit()->try_acquire();
  asio::io_context io;
  std::string result;
  orders.async_execute(backend_.place("a"), succeeds_into(io, result));
  io.poll();  // the limit's refusal reaches the retry through the caller's executor
  EXPECT_EQ(orders.retry()->snapshot().waiting_calls, 1);
  EXPECT_EQ(orders.adaptive_limit()->in_flight(), 1);  // only the held permit
  held.on_ignore();
  clock_->advance(100ms);  // the wait ends; the second attempt starts on the caller's executor
  io.poll();
  ASSERT_TRUE(backend_.has("a"));
  backend_.complete("a", "placed");
  io.run();
  EXPECT_EQ(result, "placed");
  EXPECT_EQ(orders.adaptive_limit()->snapshot().rejected, 1u);
  EXPECT_EQ(orders.retry()->snapshot().successful_with_retry, 1u);
}

// A hedge stops launching attempts when the limit rejects one.
TEST_F(AsyncPipelineTest, AHedgeStopsLaunchingWhenTheLimitRejectsAnAttempt) {
  auto reads = r4c::Pipeline<std::string>::builder(registry_, "reads")
                   .hedge([](r4c::HedgeConfig& h) { h.delay(100ms).max_attempts(3); })
                   .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
                   .build();
  asio::io_context io;
  std::string result;
  reads.async_execute(backend_.place("a"), succeeds_into(io, result));
  io.poll();
  EXPECT_EQ(backend_.started("a"), 1);
  clock_->advance(100ms);  // attempt 2: the limit rejects it
  io.poll();
  clock_->advance(100ms);  // no attempt 3
  clock_->advance(1s);
  io.poll();
  EXPECT_EQ(backend_.started("a"), 1);
  backend_.complete("a", "read");
  io.run();
  EXPECT_EQ(result, "read");
  EXPECT_EQ(reads.hedge()->snapshot().hedges_launched, 1u);
  EXPECT_EQ(reads.adaptive_limit()->snapshot().rejected, 1u);
}

TEST_F(AsyncPipelineTest, CoExecuteRunsACoroutineThroughThePipeline) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders")
                    .retry([](r4c::RetryConfig& r) { r.max_attempts(2).wait(10ms); })
                    .adaptive_limit()
                    .build();
  asio::io_context io;
  int attempts = 0;
  std::string result;
  spawn(io, [&]() -> asio::awaitable<void> {
    result = co_await orders.co_execute([&]() -> asio::awaitable<std::string> {
      if (++attempts == 1) throw std::runtime_error("first attempt fails");
      co_return "placed";
    });
  });
  io.run_for(10ms);  // the first attempt fails; the retry waits on the ManualClock
  EXPECT_EQ(attempts, 1);
  clock_->advance(10ms);
  io.restart();
  io.run();
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(result, "placed");
  EXPECT_EQ(orders.adaptive_limit()->in_flight(), 0);
}

TEST_F(AsyncPipelineTest, AnOperationsFailurePassesThroughUnchanged) {
  auto orders = r4c::Pipeline<std::string>::builder(registry_, "orders").adaptive_limit().build();
  auto result = orders.async_execute(backend_.place("a"), asio::use_future);
  auto failure = std::make_exception_ptr(std::runtime_error("out of stock"));
  backend_.fail("a", failure);
  const auto passed = r4c::testing::exception_of<std::runtime_error>(result);
  ASSERT_TRUE(passed);
  EXPECT_STREQ(passed->what(), "out of stock");
}

// Thousands of concurrent async calls on a thread pool: operations complete, fail, report error
// codes or hang until cancelled, on pool threads; callers cancel some calls from their strands;
// deadlines fire from a driver thread advancing the ManualClock. Every call is answered exactly
// once, every slot comes back, every operation's handler is called or destroyed, and no timer is
// left on the clock.
TEST(AsyncPipelineStressTest, ThousandsOfCallsWithRandomOutcomesAndCancellationsFreeEverything) {
  constexpr int kCalls = 4000;
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                        r4c::test::aimd_per_millisecond(a, 3000, 5000, 5);
                      })
                      .build();
  auto pipeline = r4c::Pipeline<int>::builder(registry, "stress")
                      .adaptive_limit()
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(3ms); })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(5000); })
                      .build();
  asio::thread_pool pool(4);

  // One operation: completed once, by a pool task or by its cancellation.
  struct Operation {
    std::mutex mutex;
    // Calls the handler with an exception when there is one, else with the code.
    std::function<void(std::exception_ptr, std::error_code, int)> complete;  // empty once done
    void finish(std::exception_ptr failure, std::error_code code, int value) {
      std::function<void(std::exception_ptr, std::error_code, int)> handler;
      {
        std::lock_guard<std::mutex> lock(mutex);
        handler = std::move(complete);
        complete = nullptr;
      }
      if (handler) handler(std::move(failure), code, value);
    }
  };
  std::atomic<int> handlers_alive{0};  // handlers r4c gave operations, not yet called or gone
  struct HandlerGuard {
    std::atomic<int>* alive;
    explicit HandlerGuard(std::atomic<int>* a) : alive(a) { alive->fetch_add(1); }
    ~HandlerGuard() { alive->fetch_sub(1); }
  };

  std::vector<std::atomic<int>> answers(kCalls);
  std::atomic<int> answered{0}, results{0}, failures{0}, aborted{0}, timed_out{0}, rejected{0};
  std::atomic<bool> driving{true};
  // Time passes only while no quick operation is waiting for the pool, so those always finish
  // within their deadline (even in a slow sanitizer build) and hanging ones meet it.
  std::atomic<int> quick_pending{0};
  std::thread driver([&] {
    while (driving.load()) {
      if (quick_pending.load() == 0) clock->advance(100us);
      std::this_thread::sleep_for(1ms);
    }
  });

  std::vector<std::unique_ptr<asio::cancellation_signal>> signals(kCalls);
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  for (int i = 0; i < 16; ++i) strands.push_back(asio::make_strand(pool));
  std::mt19937 random(static_cast<std::uint32_t>(r4c::testing::test_seed()));
  for (int call = 0; call < kCalls; ++call) {
    const unsigned behaviour = random() % 6;  // 0-1 succeed, 2 throw, 3 error code, 4-5 hang
    const bool cancel = random() % 4 == 0;
    auto strand = strands[static_cast<std::size_t>(call) % strands.size()];
    signals[static_cast<std::size_t>(call)] = std::make_unique<asio::cancellation_signal>();
    asio::cancellation_signal& signal = *signals[static_cast<std::size_t>(call)];
    auto op = [&pool, &handlers_alive, &quick_pending, behaviour](auto handler) {
      auto operation = std::make_shared<Operation>();
      auto guarded = std::make_shared<std::pair<HandlerGuard, decltype(handler)>>(
          std::piecewise_construct, std::forward_as_tuple(&handlers_alive),
          std::forward_as_tuple(std::move(handler)));
      auto slot = asio::get_associated_cancellation_slot(guarded->second);
      operation->complete = [guarded](std::exception_ptr failure, std::error_code code,
                                      int value) mutable {
        if (failure) {
          std::move(guarded->second)(std::move(failure), value);
        } else {
          std::move(guarded->second)(code, value);
        }
      };
      if (slot.is_connected()) {
        slot.assign([operation, &pool](asio::cancellation_type) {
          asio::post(
              pool, [operation] { operation->finish(nullptr, asio::error::operation_aborted, 0); });
        });
      }
      if (behaviour >= 4) return;  // hangs until cancelled (by the caller or the deadline)
      quick_pending.fetch_add(1);
      asio::post(pool, [operation, behaviour, &quick_pending] {
        if (behaviour == 2) {
          operation->finish(std::make_exception_ptr(std::runtime_error("out of stock")), {}, 0);
        } else if (behaviour == 3) {
          operation->finish(nullptr, asio::error::timed_out, 0);
        } else {
          operation->finish(nullptr, std::error_code(), 1);
        }
        quick_pending.fetch_sub(1);
      });
    };
    asio::post(strand, [&, call, op, strand, cancel]() mutable {
      pipeline.async_execute(
          op, asio::bind_cancellation_slot(
                  signal.slot(),
                  asio::bind_executor(strand, [&, call](std::exception_ptr e, int value) {
                    answers[static_cast<std::size_t>(call)].fetch_add(1);
                    if (!e) {
                      results.fetch_add(value);
                    } else {
                      try {
                        std::rethrow_exception(e);
                      } catch (const r4c::CallTimeoutException&) {
                        timed_out.fetch_add(1);
                      } catch (const r4c::LimitExceededException&) {
                        rejected.fetch_add(1);
                      } catch (const r4c::BulkheadFullException&) {
                        rejected.fetch_add(1);
                      } catch (const asio::system_error& error) {
                        if (error.code() == asio::error::operation_aborted) {
                          aborted.fetch_add(1);
                        } else {
                          failures.fetch_add(1);
                        }
                      } catch (const std::runtime_error&) {
                        failures.fetch_add(1);
                      }
                    }
                    answered.fetch_add(1);
                  })));
      if (cancel) {
        asio::post(strand, [&signal] { signal.emit(asio::cancellation_type::terminal); });
      }
    });
  }
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (answered.load() < kCalls && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  // Operations cancelled by their deadline or caller end on the pool; wait for their handlers.
  while (handlers_alive.load() > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  driving.store(false);
  driver.join();
  pool.join();

  std::printf("async stress: %d results, %d failures, %d aborted, %d timed out, %d rejected\n",
              results.load(), failures.load(), aborted.load(), timed_out.load(), rejected.load());
  ASSERT_EQ(answered.load(), kCalls);
  for (int call = 0; call < kCalls; ++call) {
    EXPECT_EQ(answers[static_cast<std::size_t>(call)].load(), 1) << "call " << call;
  }
  EXPECT_EQ(results.load() + failures.load() + aborted.load() + timed_out.load() + rejected.load(),
            kCalls);
  EXPECT_EQ(handlers_alive.load(), 0);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  EXPECT_EQ(clock->pending_tasks(), 0u);
  EXPECT_GT(results.load(), 0);
  EXPECT_GT(aborted.load(), 0);
  EXPECT_GT(timed_out.load(), 0);
  EXPECT_GT(failures.load(), 0);
  EXPECT_GT(pipeline.adaptive_limit()->snapshot().windows, 0u);
}

}  // namespace
