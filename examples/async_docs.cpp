// SPDX-License-Identifier: Apache-2.0
// The code of docs/async.md, in // [doc:NAME] regions (tests/docs checks the page against them),
// and a small program of its own: an Asio service calling a slow backend through a pipeline in
// the three styles. Each region is followed by checks; the program exits non-zero if one fails.
#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include <r4c/asio.hpp>
#include <r4c/r4c.hpp>

#include "example_checks.hpp"

namespace {

using r4c_example::check;

// A stand-in for an Asio client: places an order after `latency`, reporting with an error
// code as most Asio code does; cancellable through the handler's cancellation slot.
class OrderBackend {
 public:
  OrderBackend(asio::any_io_executor executor, std::chrono::milliseconds latency)
      : executor_(std::move(executor)), latency_(latency) {}

  template <class Handler>  // void(asio::error_code, std::string)
  void async_place(std::string order, Handler handler) {
    auto timer = std::make_shared<asio::steady_timer>(executor_, latency_);
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
      slot.assign([timer](asio::cancellation_type) { timer->cancel(); });
    }
    timer->async_wait([timer, order = std::move(order),
                       handler = std::move(handler)](asio::error_code ec) mutable {
      std::move(handler)(ec, ec ? std::string() : "placed " + order);
    });
  }

  asio::awaitable<std::string> place(std::string order) {
    asio::steady_timer timer(executor_, latency_);
    co_await timer.async_wait(asio::use_awaitable);
    co_return "placed " + order;
  }

 private:
  asio::any_io_executor executor_;
  std::chrono::milliseconds latency_;
};

}  // namespace

int main() {
  r4c_example::example_name = "async_docs";
  using namespace std::chrono_literals;

  {
    asio::thread_pool pool(2);
    OrderBackend backend(pool.get_executor(), 5ms);
    auto registry = r4c::ResilienceRegistry::builder().build();
    auto pipeline = r4c::Pipeline<std::string>::builder(registry, "orders")
                        .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(10); })
                        .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
                        .build();
    std::string order = "book";
    // [doc:three-styles]
    // an async operation is any Asio-style initiation: a callable taking a completion handler
    auto op = [&](auto handler) { backend.async_place(order, std::move(handler)); };

    std::promise<std::string> done;  // callback
    pipeline.async_execute(op, [&done](std::exception_ptr e, std::string r) {
      if (e) {
        done.set_exception(e);
      } else {
        done.set_value(std::move(r));
      }
    });

    std::future<std::string> f = pipeline.async_execute(op, asio::use_future);  // future

    std::future<std::string> c = asio::co_spawn(  // coroutine
        pool,
        [&]() -> asio::awaitable<std::string> {
          std::string r = co_await pipeline.async_execute(op, asio::use_awaitable);
          std::string r2 = co_await pipeline.co_execute(
              [&]() -> asio::awaitable<std::string> { co_return co_await backend.place(order); });
          co_return r + ", " + r2;
        },
        asio::use_future);
    // [/doc:three-styles]
    check(done.get_future().get() == "placed book", "the callback gets the result");
    check(f.get() == "placed book", "the future gets the result");
    check(c.get() == "placed book, placed book", "the coroutine gets both results");
    check(pipeline.adaptive_limit()->in_flight() == 0, "every slot is back");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:manual-clock]
    auto registry = r4c::testing::registry(clock)
                        .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                          a.min_window_samples(1);  // end a window after a single call
                        })
                        .build();
    auto orders = r4c::Pipeline<std::string>::builder(registry, "orders-async")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(2); })
                      .build();
    std::map<std::string, std::function<void(std::string)>> pending;  // the test's backend
    auto place = [&](std::string order) {
      return [&pending, order](auto handler) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        pending[order] = [shared](std::string r) { std::move (*shared)(std::exception_ptr(), r); };
      };
    };
    std::future<std::string> a =
        orders.async_execute(place("a"), asio::use_future);  // holds a slot
    std::future<std::string> b = orders.async_execute(place("b"), asio::use_future);  // the other
    std::future<std::string> c = orders.async_execute(place("c"), asio::use_future);
    // c is ready at once: c.get() throws r4c::LimitExceededException

    clock->advance(std::chrono::seconds(1));  // the calls took 1 s; the window is over
    pending.at("a")("placed a");              // ends the window
    pending.at("b")("placed b");
    r4c::AdaptiveLimitSnapshot snap = registry.adaptive_limit("orders-async").snapshot();
    // snap.windows == 1, snap.window_latency == 1 s, clock->pending_tasks() == 0
    // [/doc:manual-clock]
    check(r4c_example::throws<r4c::LimitExceededException>([&] { c.get(); }),
          "the third call is rejected at once");
    check(a.get() == "placed a" && b.get() == "placed b", "the pending calls complete");
    check(snap.windows == 1 && snap.window_latency == 1s, "one window of 1 s");
    check(clock->pending_tasks() == 0, "the limit schedules nothing");
  }

  {
    asio::io_context io;
    OrderBackend backend(io.get_executor(), 50ms);
    auto registry = r4c::ResilienceRegistry::builder().build();
    auto pipeline =
        r4c::Pipeline<std::string>::builder(registry, "orders").adaptive_limit().build();
    std::string order = "book";
    auto op = [&](auto handler) { backend.async_place(order, std::move(handler)); };
    bool timer_won = false;
    // [doc:cancellation]
    using namespace asio::experimental::awaitable_operators;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer deadline(io, std::chrono::milliseconds(5));
          // whichever ends first cancels the other: here the timer wins, the pipeline's call
          // completes at once with operation_aborted, its slot is freed without a sample, and
          // the backend's own operation is cancelled through the handler r4c gave it
          auto winner = co_await (pipeline.async_execute(op, asio::use_awaitable) ||
                                  deadline.async_wait(asio::use_awaitable));
          timer_won = winner.index() == 1;
        },
        asio::detached);
    io.run();
    // [/doc:cancellation]
    check(timer_won, "the timer wins the race");
    check(pipeline.adaptive_limit()->in_flight() == 0, "the cancelled call's slot is freed");
    check(pipeline.adaptive_limit()->snapshot().samples == 0, "a cancelled call is no sample");
  }

  {
    // [doc:drop-on-error]
    r4c::AdaptiveLimitConfig config;
    config.drop_on_error([](const std::error_code& code) {
      return code == asio::error::timed_out || code == asio::error::connection_refused;
    });
    // [/doc:drop-on-error]
    r4c::AdaptiveLimit limit("refused", config);
    check(limit.is_drop(asio::error::make_error_code(asio::error::connection_refused)),
          "a refused connection is a drop");
    check(!limit.is_drop(asio::error::make_error_code(asio::error::operation_aborted)),
          "an aborted operation is not");
    r4c::AdaptiveLimit plain("plain");
    check(plain.is_drop(asio::error::make_error_code(asio::error::timed_out)),
          "timed_out is a drop by default");
  }

  return r4c_example::finish("async_docs: every example did what docs/async.md says");
}
