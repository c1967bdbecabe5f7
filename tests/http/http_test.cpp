// SPDX-License-Identifier: Apache-2.0
// r4c::http end to end: a real httplib server and real clients on 127.0.0.1. Real time, since
// sockets and httplib's threads do not read r4c's clock: the tests that need a limit to adapt
// run a few hundred milliseconds of traffic; the others use a ManualClock for the limit and wait
// only for the sockets.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../loopback_support.hpp"
#include "loopback_server.hpp"
#include "r4c/http.hpp"
#include "r4c/registry.hpp"

namespace {

using namespace std::chrono_literals;

// A gate a handler waits at until the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    --waiting_;
  }
  void wait_for_waiters(int count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return waiting_ >= count; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

using TestServer = r4c::test::LoopbackServer;

// A server behind `guard` whose /work requests wait at a gate and whose `quick` path answers at
// once, with one /work request held (on its own thread) until release().
class HeldServer {
 public:
  HeldServer(r4c::http::ServerGuard& guard, const char* quick) {
    server_.server().Get("/work",
                         [this](const httplib::Request&, httplib::Response&) { gate_.wait(); });
    server_.server().Get(quick, [](const httplib::Request&, httplib::Response& response) {
      response.set_content("ok", "text/plain");
    });
    guard.install(server_.server());
    port_ = server_.start();
    holder_ = std::thread([port = port_] { httplib::Client("127.0.0.1", port).Get("/work"); });
    gate_.wait_for_waiters(1);
  }
  HeldServer(const HeldServer&) = delete;
  HeldServer& operator=(const HeldServer&) = delete;
  ~HeldServer() { release(); }
  int port() const { return port_; }
  // Lets the held request finish, and waits until its client has its answer.
  void release() {
    if (holder_.joinable()) {
      gate_.open();
      holder_.join();
    }
  }

 private:
  TestServer server_;
  Gate gate_;
  std::thread holder_;
  int port_ = 0;
};

TEST(HttpServerGuardTest, AFullLimitAnswers503WithRetryAfterAndTheHandlerDoesNotRun) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("server", r4c::test::fixed_limit(1), clock);
  r4c::http::ServerGuard guard(limit, r4c::http::ServerGuardOptions().retry_after(3s));
  TestServer server;
  Gate gate;
  std::atomic<int> handled{0};
  server.server().Get("/work", [&](const httplib::Request&, httplib::Response& response) {
    handled.fetch_add(1);
    gate.wait();
    response.set_content("done", "text/plain");
  });
  guard.install(server.server());
  const int port = server.start();

  std::thread holder([&] {
    httplib::Client client("127.0.0.1", port);
    auto result = client.Get("/work");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200);
  });
  gate.wait_for_waiters(1);
  EXPECT_EQ(limit.in_flight(), 1);

  httplib::Client client("127.0.0.1", port);
  auto refused = client.Get("/work");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "3");
  EXPECT_EQ(handled.load(), 1);
  EXPECT_EQ(guard.refused(), 1u);

  gate.open();
  holder.join();
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().rejected, 1u);
}

TEST(HttpServerGuardTest, ABypassedPathIsServedWhileTheLimitIsFull) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("server", r4c::test::fixed_limit(1), clock);
  r4c::http::ServerGuard guard(limit, r4c::http::ServerGuardOptions().bypass("/health"));
  HeldServer server(guard, "/health");

  httplib::Client client("127.0.0.1", server.port());
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(guard.refused(), 0u);
  server.release();
  EXPECT_EQ(limit.in_flight(), 0);
}

// Under a limit of 2 with one request held, a request naming a class below critical finds no
// room (bulk's share 0.5, degraded's 0.9: room below 1) and a critical one does.
TEST(HttpServerGuardTest, ARequestIsAdmittedInTheClassItsHeaderNamesUpToTheHighestItIsTrusted) {
  for (const bool capped : {false, true}) {
    SCOPED_TRACE(capped ? "a guard that trusts requests up to degraded" : "the defaults");
    auto clock = std::make_shared<r4c::ManualClock>();
    r4c::AdaptiveLimit limit("server", r4c::test::fixed_limit(2), clock);
    r4c::http::ServerGuardOptions options;
    if (capped) options.call_class(r4c::ClassFromRequest().highest(r4c::CallClass::degraded));
    r4c::http::ServerGuard guard(limit, options);
    HeldServer server(guard, "/quick");

    httplib::Client client("127.0.0.1", server.port());
    const auto status_as = [&](const char* cls) {
      auto result = client.Get("/quick", httplib::Headers{{"R4C-Class", cls}});
      return result ? result->status : -1;
    };
    EXPECT_EQ(status_as("bulk"), 503);
    EXPECT_EQ(status_as("Degraded"), 503);
    EXPECT_EQ(status_as("critical"), capped ? 503 : 200);
    EXPECT_EQ(status_as("bypass"), 200);  // never taken from a request: as one naming none
    auto unnamed = client.Get("/quick");
    ASSERT_TRUE(unnamed);
    EXPECT_EQ(unnamed->status, 200);
    const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
    EXPECT_EQ(snap.rejected_by_class[static_cast<int>(r4c::CallClass::bulk)], 1u);
    EXPECT_EQ(snap.rejected_by_class[static_cast<int>(r4c::CallClass::degraded)], capped ? 2u : 1u);
    EXPECT_EQ(guard.refused(), capped ? 3u : 2u);
    server.release();
    EXPECT_EQ(limit.in_flight(), 0);
  }
}

TEST(HttpServerGuardTest, FiveHundredsThrownHandlersAndSlowHandlersAreDrops) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("server", r4c::test::fixed_limit(4), clock);
  r4c::http::ServerGuard guard(limit, r4c::http::ServerGuardOptions().handler_timeout(30ms));
  TestServer server;
  server.server().Get(
      "/fail", [](const httplib::Request&, httplib::Response& response) { response.status = 500; });
  server.server().Get("/throw", [](const httplib::Request&, httplib::Response&) {
    throw std::runtime_error("handler failed");
  });
  server.server().Get("/slow", [](const httplib::Request&, httplib::Response& response) {
    std::this_thread::sleep_for(40ms);  // past the guard's handler_timeout, in real time
    response.set_content("late", "text/plain");
  });
  server.server().Get("/ok", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok", "text/plain");
  });
  guard.install(server.server());
  const int port = server.start();
  httplib::Client client("127.0.0.1", port);

  // One window per request: each closes the one before, so window_dropped tells each apart.
  const auto dropped = [&](const std::string& path) {
    auto result = client.Get(path);
    EXPECT_TRUE(result) << path;
    clock->advance(2s);
    EXPECT_TRUE(client.Get("/ok"));  // closes the window of `path`
    return limit.snapshot().window_dropped;
  };
  EXPECT_TRUE(dropped("/fail"));
  EXPECT_TRUE(dropped("/throw"));
  EXPECT_TRUE(dropped("/slow"));
  EXPECT_FALSE(dropped("/ok"));
  EXPECT_EQ(limit.in_flight(), 0);
}

// A server whose capacity the test sets: a request beyond it is answered 503 at once, as an
// overloaded server behind its own guard would.
class CapacityServer {
 public:
  explicit CapacityServer(int capacity) : capacity_(capacity) {
    server_.server().Get("/work", [this](const httplib::Request&, httplib::Response& response) {
      if (running_.fetch_add(1) >= capacity_.load()) {
        running_.fetch_sub(1);
        response.status = 503;
        return;
      }
      std::this_thread::sleep_for(2ms);
      running_.fetch_sub(1);
      response.set_content("done", "text/plain");
    });
    port_ = server_.start();
  }
  void capacity(int value) { capacity_.store(value); }
  int port() const { return port_; }

 private:
  TestServer server_;
  std::atomic<int> capacity_;
  std::atomic<int> running_{0};
  int port_ = 0;
};

TEST(HttpClientTest, TheLimitFollowsTheServersCapacityDownAndUp) {
  CapacityServer backend(32);
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "backend")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a = r4c::test::capacity_run_limit();
                        r4c::http::count_overload_as_drop(a);
                      })
                      .build();
  r4c::http::Client client("127.0.0.1", backend.port(), pipeline);
  r4c::test::expect_limit_follows_capacity(
      *pipeline.adaptive_limit(), [&](int capacity) { backend.capacity(capacity); }, 32,
      [&] {
        try {
          (void)client.get("/work");
          return true;
        } catch (const std::exception&) {
          return false;  // refused at once, here or there
        }
      });
}

TEST(HttpClientTest, TheTimeoutStopsARequestInFlight) {
  TestServer server;
  Gate gate;
  server.server().Get("/stuck", [&](const httplib::Request&, httplib::Response&) { gate.wait(); });
  const int port = server.start();
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "stuck")
                      .adaptive_limit(r4c::http::count_overload_as_drop)
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(100ms); })
                      .build();
  r4c::http::Client client("127.0.0.1", port, pipeline);

  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW((void)client.get("/stuck"), r4c::CallTimeoutException);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // not httplib's 5 s read timeout
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  gate.open();
  server.stop();
}

TEST(HttpClientTest, ConnectionErrorsAnd503And429AreDropsAnd4xxIsReturnedWithoutASample) {
  auto clock = std::make_shared<r4c::ManualClock>();
  TestServer server;
  server.server().Get(
      "/busy", [](const httplib::Request&, httplib::Response& response) { response.status = 503; });
  server.server().Get("/slow-down", [](const httplib::Request&, httplib::Response& response) {
    response.status = 429;
  });
  server.server().Get("/ok", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok", "text/plain");
  });
  const int port = server.start();
  auto registry = r4c::testing::registry(clock).build();
  auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "backend")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a.min_window_samples(1);
                        r4c::http::count_overload_as_drop(a);
                      })
                      .build();
  r4c::http::Client client("127.0.0.1", port, pipeline);
  r4c::AdaptiveLimit& limit = *pipeline.adaptive_limit();

  for (const char* path : {"/busy", "/slow-down"}) {
    try {
      (void)client.get(path);
      ADD_FAILURE() << path << " did not throw";
    } catch (const r4c::http::OverloadException& e) {
      EXPECT_EQ(e.status(), std::string(path) == "/busy" ? 503 : 429);
      EXPECT_TRUE(limit.is_drop(std::current_exception()));
    }
  }
  const httplib::Response missing = client.get("/missing");
  EXPECT_EQ(missing.status, 404);
  clock->advance(2s);
  EXPECT_EQ(client.get("/ok").status, 200);  // closes the window
  const r4c::AdaptiveLimitSnapshot window = limit.snapshot();
  EXPECT_EQ(window.window_samples, 3u);  // 503, 429, 200: the 404 was no sample
  EXPECT_TRUE(window.window_dropped);

  server.stop();  // nothing listens on the port any more
  try {
    (void)client.get("/ok");
    ADD_FAILURE() << "a closed port did not throw";
  } catch (const r4c::http::OverloadException& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_NE(e.error(), httplib::Error::Success);
    EXPECT_TRUE(limit.is_drop(std::current_exception()));
  }
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(HttpServerGuardTest, ANegativeRetryAfterIsRefused) {
  r4c::AdaptiveLimit limit("server");
  EXPECT_THROW(r4c::http::ServerGuard(limit, r4c::http::ServerGuardOptions().retry_after(-1s)),
               std::invalid_argument);
}

}  // namespace
