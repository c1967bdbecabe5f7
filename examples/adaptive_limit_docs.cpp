// SPDX-License-Identifier: Apache-2.0
// The code of docs/adaptive-limit.md. Every C++ block of that page is copied from a region
// between `// [doc:NAME]` and `// [/doc:NAME]` below (tests/docs checks it), so the page shows
// code that compiles and runs. Each region is followed by checks that it does what the page
// says; the program exits non-zero if one fails.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <r4c/r4c.hpp>

namespace {

int failures = 0;

void record_failure(const char* expression, int line) {
  std::fprintf(stderr, "adaptive_limit_docs.cpp:%d: FAILED: %s\n", line, expression);
  ++failures;
}

}  // namespace

// The page's test snippet is written with GoogleTest's assertions; these stand in for them here.
#define EXPECT_TRUE(condition)                              \
  do {                                                      \
    if (!(condition)) record_failure(#condition, __LINE__); \
  } while (false)
#define EXPECT_FALSE(condition)                                   \
  do {                                                            \
    if (condition) record_failure("!(" #condition ")", __LINE__); \
  } while (false)
#define EXPECT_EQ(a, b)                                        \
  do {                                                         \
    if (!((a) == (b))) record_failure(#a " == " #b, __LINE__); \
  } while (false)

namespace {

// [doc:exception-types]
// Your client library's overload signal: a drop when listed in drop_on.
struct SocketTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Matched by dynamic type, so a derived class is a drop too.
struct ConnectTimeout : SocketTimeout {
  using SocketTimeout::SocketTimeout;
};
// A drop with the default drop_on: it is a CallTimeoutException.
struct SlowReply : r4c::CallTimeoutException {
  using CallTimeoutException::CallTimeoutException;
};
// [/doc:exception-types]

struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A fake dependency: place() returns, or throws what the test asks for.
struct Backend {
  enum class Fails { kNever, kSocketTimeout, kConnectTimeout, kSlowReply, kNotFound };
  Fails fails = Fails::kNever;

  std::string place(const std::string& order) const {
    switch (fails) {
      case Fails::kNever:
        break;
      case Fails::kSocketTimeout:
        throw SocketTimeout("read timed out");
      case Fails::kConnectTimeout:
        throw ConnectTimeout("connect timed out");
      case Fails::kSlowReply:
        throw SlowReply("no reply within 2 s");
      case Fails::kNotFound:
        throw NotFound("no such order");
    }
    return "receipt for " + order;
  }
};

// What the snippets' request handler answered, for the checks.
std::vector<std::string> replies;
void reply(const std::string& receipt) { replies.push_back(receipt); }
void reply_unavailable() { replies.push_back("503"); }

std::vector<std::string> errors;
void log_error(std::string_view code, std::string_view message) {
  errors.push_back(std::string(code) + " | " + std::string(message));
}
void log_info(std::string_view message) {
  std::printf("%.*s\n", static_cast<int>(message.size()), message.data());
}

struct Exported {
  std::string name;
  double value;
};
std::vector<Exported> exported;
void gauge(std::string_view name, double value) { exported.push_back({std::string(name), value}); }
void counter(std::string_view name, std::uint64_t value) {
  exported.push_back({std::string(name), static_cast<double>(value)});
}

void quick_start() {
  Backend backend;
  const std::string order = "A-1";
  replies.clear();

  // [doc:quickstart]
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(10).max_limit(100).window(std::chrono::milliseconds(500));
  r4c::AdaptiveLimit limit("orders", config);  // shared by every thread that calls the backend

  try {
    std::string receipt = limit.execute([&] { return backend.place(order); });
    reply(receipt);
  } catch (const r4c::LimitExceededException&) {
    reply_unavailable();  // full: place() did not run; fail fast rather than queue
  }
  // [/doc:quickstart]

  EXPECT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies.back(), "receipt for A-1");
  EXPECT_EQ(limit.limit(), 10);
  EXPECT_EQ(limit.config().window(), std::chrono::milliseconds(500));
}

void reply_with_a_permit(r4c::AdaptiveLimit& limit, const Backend& backend,
                         const std::string& order) {
  // [doc:permit]
  if (r4c::Permit permit = limit.try_acquire()) {  // never throws, never allocates
    try {
      reply(backend.place(order));
      permit.on_success();  // a sample: its latency counts
    } catch (const SocketTimeout&) {
      permit.on_drop();  // an overload signal: a sample marked as a drop
      reply_unavailable();
    }  // anything else propagates; the permit's destructor frees the slot, no sample
  } else {
    reply_unavailable();  // rejected: counted in snapshot().rejected
  }
  // [/doc:permit]
}

void permit() {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(1).min_window_samples(1);
  r4c::AdaptiveLimit limit("orders", config, clock);
  Backend backend;
  replies.clear();

  reply_with_a_permit(limit, backend, "A-1");
  EXPECT_EQ(replies.back(), "receipt for A-1");

  backend.fails = Backend::Fails::kNotFound;
  bool propagated = false;
  try {
    reply_with_a_permit(limit, backend, "A-2");
  } catch (const NotFound&) {
    propagated = true;
  }
  EXPECT_TRUE(propagated);
  EXPECT_EQ(limit.in_flight(), 0);  // the destructor freed the slot

  backend.fails = Backend::Fails::kSocketTimeout;
  reply_with_a_permit(limit, backend, "A-3");
  EXPECT_EQ(replies.back(), "503");

  {
    r4c::Permit held = limit.try_acquire();  // fills the limit of 1
    backend.fails = Backend::Fails::kNever;
    reply_with_a_permit(limit, backend, "A-4");
    EXPECT_EQ(replies.back(), "503");
    held.on_ignore();
  }

  // The success and the timeout are samples, the NotFound is not; the timeout is a drop.
  clock->advance(std::chrono::seconds(1));
  r4c::Permit last = limit.try_acquire();
  last.on_ignore();  // not a sample, and does not end the window
  EXPECT_EQ(limit.snapshot().windows, 0u);
  reply_with_a_permit(limit, backend, "A-5");  // a 0 ns sample after the window's end closes it
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.windows, 1u);
  EXPECT_EQ(snapshot.window_samples, 3u);
  EXPECT_TRUE(snapshot.window_dropped);
  EXPECT_EQ(snapshot.rejected, 1u);
}

void drop_on() {
  // [doc:drop-on]
  r4c::AdaptiveLimitConfig config;  // drop_on is {CallTimeoutException, BulkheadFullException}
  config.drop_on<SocketTimeout, r4c::CallTimeoutException, r4c::BulkheadFullException>();
  // [/doc:drop-on]

  EXPECT_EQ(config.drop_on_types().size(), 3u);
  const r4c::AdaptiveLimitConfig defaults;
  EXPECT_EQ(defaults.drop_on_types().size(), 2u);

  // execute() classifies by dynamic type: each of these failures is a drop.
  const Backend::Fails drops[] = {Backend::Fails::kSocketTimeout, Backend::Fails::kConnectTimeout,
                                  Backend::Fails::kSlowReply};
  for (const Backend::Fails fails : drops) {
    auto clock = std::make_shared<r4c::ManualClock>();
    r4c::AdaptiveLimitConfig one = config;
    one.min_window_samples(1);
    r4c::AdaptiveLimit limit("orders", one, clock);
    Backend backend;
    backend.fails = fails;
    clock->advance(std::chrono::seconds(1));
    try {
      limit.execute([&] { return backend.place("A-1"); });
    } catch (const std::exception&) {
    }
    EXPECT_EQ(limit.snapshot().windows, 1u);
    EXPECT_TRUE(limit.snapshot().window_dropped);
  }

  // Anything else frees the slot only: no sample, so no window closes.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig one = config;
  one.min_window_samples(1);
  r4c::AdaptiveLimit limit("orders", one, clock);
  Backend backend;
  backend.fails = Backend::Fails::kNotFound;
  clock->advance(std::chrono::seconds(1));
  try {
    limit.execute([&] { return backend.place("A-1"); });
  } catch (const NotFound&) {
  }
  EXPECT_EQ(limit.snapshot().windows, 0u);
  EXPECT_EQ(limit.in_flight(), 0);
}

void rejection() {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(1);
  r4c::AdaptiveLimit limit("orders", config);
  r4c::Permit held = limit.try_acquire();

  // [doc:rejection]
  try {
    limit.execute([] { return 42; });
  } catch (const r4c::LimitExceededException& e) {  // by reference: one object per limit
    log_error("limit full", e.instance_id());       // "orders"
  }
  // [/doc:rejection]

  const r4c::LimitExceededException* first = nullptr;
  const r4c::LimitExceededException* second = nullptr;
  try {
    limit.execute([] { return 1; });
  } catch (const r4c::LimitExceededException& e) {
    first = &e;
  }
  try {
    limit.execute([] { return 1; });
  } catch (const r4c::LimitExceededException& e) {
    second = &e;
  }
  EXPECT_TRUE(first != nullptr && first == second);  // the same preallocated object
  EXPECT_EQ(errors.back(), "limit full | orders");
  EXPECT_EQ(limit.snapshot().rejected, 3u);
}

void aimd() {
  // [doc:aimd]
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd)
      .initial_limit(10)
      .backoff_ratio(0.8)
      .drop_on<SocketTimeout, r4c::CallTimeoutException>();
  r4c::AdaptiveLimit limit("orders-aimd", config);
  // [/doc:aimd]

  // One window with a drop: 10 x 0.8 = 8. Checked with a manual clock on a copy of the config.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig one = config;
  one.min_window_samples(1);
  r4c::AdaptiveLimit tested("orders-aimd", one, clock);
  r4c::Permit permit = tested.try_acquire();
  clock->advance(std::chrono::seconds(1));
  permit.on_drop();
  EXPECT_EQ(tested.limit(), 8);
  EXPECT_EQ(limit.limit(), 10);
}

void settings() {
  // [doc:settings]
  r4c::AdaptiveLimitConfig config;  // the defaults, spelled out
  config.algorithm(r4c::LimitAlgorithm::gradient2)
      .initial_limit(20)
      .min_limit(1)
      .max_limit(200)
      .window(std::chrono::seconds(1))
      .min_window_samples(10)
      .smoothing(0.2)      // gradient2 only
      .rtt_tolerance(1.5)  // gradient2 only
      .long_window(600)    // gradient2 only
      .queue_size(4)       // gradient2 only
      .backoff_ratio(0.9)  // aimd only
      .enabled(true)
      .drop_on<r4c::CallTimeoutException, r4c::BulkheadFullException>();
  // [/doc:settings]

  const r4c::AdaptiveLimitConfig defaults;
  EXPECT_TRUE(config.algorithm() == defaults.algorithm());
  EXPECT_EQ(config.initial_limit(), defaults.initial_limit());
  EXPECT_EQ(config.min_limit(), defaults.min_limit());
  EXPECT_EQ(config.max_limit(), defaults.max_limit());
  EXPECT_EQ(config.window(), defaults.window());
  EXPECT_EQ(config.min_window_samples(), defaults.min_window_samples());
  EXPECT_EQ(config.smoothing(), defaults.smoothing());
  EXPECT_EQ(config.rtt_tolerance(), defaults.rtt_tolerance());
  EXPECT_EQ(config.long_window(), defaults.long_window());
  EXPECT_EQ(config.queue_size(), defaults.queue_size());
  EXPECT_EQ(config.backoff_ratio(), defaults.backoff_ratio());
  EXPECT_EQ(config.enabled(), defaults.enabled());
  EXPECT_TRUE(config.drop_on_types() == defaults.drop_on_types());
}

void validation() {
  errors.clear();
  // [doc:validation]
  r4c::AdaptiveLimitConfig config;
  try {
    config.smoothing(1.5);  // invalid on its own: rejected at once, smoothing stays 0.2
  } catch (const r4c::ConfigException& e) {
    log_error(e.code(), e.what());  // R4C-REG-001: smoothing is 1.5; valid: (0, 1]
  }

  config.min_limit(30);  // valid on its own, but above initial_limit (20)
  try {
    config.validate();  // the AdaptiveLimit constructor runs the same checks
  } catch (const r4c::ConfigException& e) {
    log_error(e.code(), e.what());  // R4C-ATR-009: min_limit (30) is greater than initial_limit...
  }
  // [/doc:validation]

  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "R4C-REG-001 | R4C-REG-001: smoothing is 1.5; valid: (0, 1]");
  EXPECT_EQ(errors[1].rfind("R4C-ATR-009 | R4C-ATR-009: min_limit (30) is greater than "
                            "initial_limit (20)",
                            0),
            0u);
  EXPECT_EQ(config.smoothing(), 0.2);

  bool constructor_threw = false;
  try {
    r4c::AdaptiveLimit limit("orders", config);
  } catch (const r4c::ConfigException& e) {
    constructor_threw = e.code() == "R4C-ATR-009";
  }
  EXPECT_TRUE(constructor_threw);

  // One bad value of each kind, with its code.
  struct Case {
    void (*apply)(r4c::AdaptiveLimitConfig&);
    const char* code;
  };
  const Case cases[] = {
      {[](r4c::AdaptiveLimitConfig& c) { c.initial_limit(0); }, "R4C-ATR-003"},
      {[](r4c::AdaptiveLimitConfig& c) { c.min_limit(0); }, "R4C-ATR-003"},
      {[](r4c::AdaptiveLimitConfig& c) { c.max_limit(-1); }, "R4C-ATR-003"},
      {[](r4c::AdaptiveLimitConfig& c) { c.window(std::chrono::microseconds(999)); },
       "R4C-ATR-009"},
      {[](r4c::AdaptiveLimitConfig& c) { c.window(std::chrono::hours(2)); }, "R4C-ATR-009"},
      {[](r4c::AdaptiveLimitConfig& c) { c.initial_limit(300).validate(); }, "R4C-ATR-009"},
      {[](r4c::AdaptiveLimitConfig& c) { c.max_limit(10).min_limit(11).validate(); },
       "R4C-ATR-009"},
      {[](r4c::AdaptiveLimitConfig& c) { c.min_window_samples(0); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.smoothing(0.0); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.rtt_tolerance(0.9); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.long_window(0); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.queue_size(-1); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.backoff_ratio(1.0); }, "R4C-REG-001"},
      {[](r4c::AdaptiveLimitConfig& c) { c.algorithm(static_cast<r4c::LimitAlgorithm>(7)); },
       "R4C-REG-001"},
  };
  for (const Case& bad : cases) {
    r4c::AdaptiveLimitConfig c;
    std::string code;
    try {
      bad.apply(c);
    } catch (const r4c::ConfigException& e) {
      code = e.code();
    }
    EXPECT_EQ(code, bad.code);
  }
  r4c::AdaptiveLimitConfig edges;  // the ends of each range that are valid
  edges.window(std::chrono::milliseconds(1))
      .window(std::chrono::hours(1))
      .smoothing(1.0)
      .rtt_tolerance(1.0)
      .queue_size(0)
      .long_window(1)
      .min_window_samples(1);
  edges.validate();
}

void handle_and_snapshot() {
  r4c::AdaptiveLimit limit("orders");
  exported.clear();

  // [doc:handle]
  r4c::AdaptiveLimitHandle handle = limit.handle();  // copyable; valid while `limit` lives
  gauge("orders.limit", handle.limit());             // how many calls may run at once now
  gauge("orders.in_flight", handle.in_flight());     // calls holding a slot right now

  r4c::AdaptiveLimitSnapshot snapshot = handle.snapshot();  // one window's values, never mixed
  gauge("orders.window_latency_ms", snapshot.window_latency / std::chrono::milliseconds(1));
  counter("orders.rejected", snapshot.rejected);
  counter("orders.limit_changes", snapshot.limit_changes);
  // [/doc:handle]

  EXPECT_EQ(exported.size(), 5u);
  EXPECT_EQ(exported[0].value, 20.0);
  EXPECT_EQ(handle.instance_id(), "orders");
  EXPECT_EQ(snapshot.min_limit, 1);
  EXPECT_EQ(snapshot.max_limit, 200);
  EXPECT_TRUE(snapshot.enabled);
  EXPECT_EQ(snapshot.windows, 0u);
}

void manual_clock() {
  // [doc:manual-clock]
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(2).min_window_samples(1);  // end a window after a single call
  r4c::AdaptiveLimit limit("orders", config, clock);

  r4c::Permit a = limit.try_acquire();  // holds a slot
  r4c::Permit b = limit.try_acquire();  // holds the other
  EXPECT_FALSE(limit.try_acquire());    // full: rejected at once

  clock->advance(std::chrono::seconds(1));  // the calls took 1 s; the window is over
  a.on_success();                           // ends the window
  b.on_success();
  EXPECT_EQ(limit.snapshot().windows, 1u);
  EXPECT_EQ(limit.snapshot().window_latency, std::chrono::seconds(1));
  // [/doc:manual-clock]

  EXPECT_EQ(limit.snapshot().rejected, 1u);
  EXPECT_EQ(limit.snapshot().window_samples, 1u);  // b ended in the next window
}

void short_window() {
  // A window that ends with too few samples is extended and keeps them.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config;
  config.min_window_samples(3);
  r4c::AdaptiveLimit limit("orders", config, clock);
  for (int i = 0; i < 2; ++i) {
    r4c::Permit permit = limit.try_acquire();
    clock->advance(std::chrono::milliseconds(1500));
    permit.on_success();
  }
  EXPECT_EQ(limit.snapshot().windows, 0u);
  r4c::Permit third = limit.try_acquire();
  clock->advance(std::chrono::milliseconds(1500));
  third.on_success();
  EXPECT_EQ(limit.snapshot().windows, 1u);
  EXPECT_EQ(limit.snapshot().window_samples, 3u);
  EXPECT_EQ(limit.snapshot().window_latency, std::chrono::milliseconds(1500));
}

void disabled() {
  // [doc:disabled]
  r4c::AdaptiveLimitConfig config;
  config.enabled(false);  // every call passes; nothing is measured, nothing is rejected
  // [/doc:disabled]

  r4c::AdaptiveLimit limit("orders", config);
  std::vector<r4c::Permit> permits;
  for (int i = 0; i < 100; ++i) permits.push_back(limit.try_acquire());
  bool all_admitted = true;
  for (const r4c::Permit& p : permits) all_admitted = all_admitted && static_cast<bool>(p);
  EXPECT_TRUE(all_admitted);
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_FALSE(limit.snapshot().enabled);
}

void lower_below_in_flight() {
  // The limit drops below the calls in flight: nothing is interrupted, new calls wait it out.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(4).min_window_samples(1);
  r4c::AdaptiveLimit limit("orders", config, clock);
  std::vector<r4c::Permit> running;
  for (int i = 0; i < 4; ++i) running.push_back(limit.try_acquire());
  clock->advance(std::chrono::seconds(1));
  running.back().on_drop();  // the window closes with a drop: 4 x 0.9 = 3
  running.pop_back();
  EXPECT_EQ(limit.limit(), 3);
  EXPECT_EQ(limit.in_flight(), 3);
  EXPECT_FALSE(limit.try_acquire());
  running.back().on_ignore();
  EXPECT_TRUE(limit.try_acquire());
}

void clock_choice() {
  r4c::AdaptiveLimitConfig config;
  // [doc:clock]
  auto clock = std::make_shared<r4c::SystemClock>();  // what a null clock means
  log_info(clock->uses_tsc() ? "r4c reads the time stamp counter" : "r4c reads steady_clock");
  r4c::AdaptiveLimit limit("orders", config, clock);
  // [/doc:clock]
  EXPECT_EQ(limit.limit(), 20);
}

void waiting_and_classes() {
  auto clock = std::make_shared<r4c::ManualClock>();
  // [doc:waiting]
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(4)
      .max_wait(std::chrono::milliseconds(20))  // wait up to 20 ms for a slot (0: reject at once)
      .max_queue_factor(2.0)                    // at most 2 × limit waiters
      .queue_order(r4c::QueueOrder::fifo);
  r4c::AdaptiveLimit limit("orders", config, clock);

  r4c::Permit bulk = limit.try_acquire(r4c::CallClass::bulk);      // below 0.5 × 4: admitted
  r4c::Permit health = limit.try_acquire(r4c::CallClass::bypass);  // neither limited nor counted

  r4c::RejectReason reason = r4c::RejectReason::none;
  r4c::Permit permit = limit.acquire({.cls = r4c::CallClass::critical}, &reason);
  if (!permit) log_info(r4c::to_string(reason));  // limit, queue_full, wait_timeout, ...
  // [/doc:waiting]
  EXPECT_TRUE(bulk);
  EXPECT_TRUE(health);
  EXPECT_TRUE(permit);
  EXPECT_EQ(limit.in_flight(), 2);
}

void partitions() {
  auto clock = std::make_shared<r4c::ManualClock>();
  // [doc:partitions]
  r4c::AdaptiveLimitConfig config;
  config.partition("user", 0.7)
      .partition("prefetch", 0.3)  // shares sum to at most 1
      .partition_borrow(true);     // the default
  r4c::AdaptiveLimit limit("api", config, clock);
  const r4c::LimitPartition user = limit.partition("user");  // R4C-REG-012 for an unknown name

  r4c::Permit permit = limit.try_acquire(user);  // or try_acquire(user, r4c::CallClass::bulk)
  int rows = limit.execute(limit.partition("prefetch"), [] { return 42; });
  // [/doc:partitions]
  EXPECT_TRUE(permit);
  EXPECT_EQ(rows, 42);
  EXPECT_EQ(limit.in_flight(), 1);
  EXPECT_EQ(limit.snapshot().partitions[0].in_flight, 1);
}

}  // namespace

int main() {
  quick_start();
  permit();
  drop_on();
  rejection();
  aimd();
  settings();
  validation();
  handle_and_snapshot();
  manual_clock();
  short_window();
  disabled();
  lower_below_in_flight();
  clock_choice();
  waiting_and_classes();
  partitions();
  if (failures != 0) {
    std::fprintf(stderr, "adaptive_limit_docs: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("adaptive_limit_docs: ok\n");
  return 0;
}
