// SPDX-License-Identifier: Apache-2.0
// Metrics (<r4c/metrics.hpp>): what collect() reports for every policy, and the Prometheus
// text exposition of it.
#include "r4c/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "r4c/registry.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::metrics::Label;
using r4c::metrics::Metric;
using r4c::metrics::MetricType;

struct Unavailable : std::runtime_error {
  Unavailable() : std::runtime_error("unavailable") {}
};

// The value of `name` with labels kind/name (and `extra`, if given), or nothing.
std::optional<double> value_of(const std::vector<Metric>& metrics, const std::string& name,
                               const std::string& kind, const std::string& id,
                               std::optional<Label> extra = std::nullopt) {
  std::vector<Label> labels{{"kind", kind}, {"name", id}};
  if (extra) labels.push_back(*extra);
  for (const Metric& m : metrics) {
    if (m.name == name && m.labels == labels) return m.value;
  }
  return std::nullopt;
}

// That each of `expected`, a metric's name and value, has that value for policy kind/id.
void expect_values(const std::vector<Metric>& metrics, const std::string& kind,
                   const std::string& id,
                   const std::vector<std::pair<std::string, double>>& expected) {
  for (const auto& [name, value] : expected) {
    EXPECT_EQ(value_of(metrics, name, kind, id), value) << name;
  }
}

using MetricsTest = r4c::test::AimdRegistryTest;

TEST_F(MetricsTest, TheAdaptiveLimitReportsTheProductDocumentsMetrics) {
  r4c::AdaptiveLimit& limit = registry_.adaptive_limit_policy("shop::Orders#place(int)", "orders",
                                                              "", {.initial_limit = 10});
  {
    r4c::Permit permit = limit.try_acquire();
    clock_->advance(1500ms);
    permit.on_drop();  // ends the 1 s window with a drop: 10 -> 9
  }
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 9; ++i) held.push_back(limit.try_acquire());
  EXPECT_FALSE(limit.try_acquire());
  EXPECT_FALSE(limit.try_acquire());

  const auto m = r4c::metrics::collect(registry_);
  expect_values(m, "adaptivelimit", "orders",
                {{"r4c.calls.rejected", 2},
                 {"r4c.adaptivelimit.limit.changes", 1},
                 {"r4c.adaptivelimit.limit", 9},
                 {"r4c.adaptivelimit.concurrent.calls", 9},
                 {"r4c.adaptivelimit.min.limit", 1},
                 {"r4c.adaptivelimit.max.limit", 200},
                 {"r4c.adaptivelimit.windows", 1},
                 {"r4c.adaptivelimit.window.latency.seconds", 1.5}});
  for (const Metric& metric : m) {
    const bool counter = metric.name == "r4c.calls.rejected" ||
                         metric.name == "r4c.adaptivelimit.limit.changes" ||
                         metric.name == "r4c.adaptivelimit.windows";
    EXPECT_EQ(metric.type, counter ? MetricType::counter : MetricType::gauge) << metric.name;
    EXPECT_FALSE(metric.help.empty()) << metric.name;
  }
}

TEST_F(MetricsTest, EveryOtherPolicyReportsItsCountersAndGauges) {
  r4c::Bulkhead& bulkhead = registry_.bulkhead_policy(
      "m", "pool", "", [](r4c::BulkheadConfig& b) { b.max_concurrent(1); });
  r4c::RateLimiter& rate = registry_.rate_limiter_policy(
      "m", "quota", "",
      [](r4c::RateLimiterConfig& r) { r.limit_for_period(1).refresh_period(1s); });
  r4c::Timeout& timeout =
      registry_.timeout_policy("m", "deadline", "", [](r4c::TimeoutConfig& t) { t.timeout(1s); });
  r4c::Retry& retry = registry_.retry_policy(
      "m", "again", "", [](r4c::RetryConfig& r) { r.max_attempts(2).wait(0ns); });
  r4c::CircuitBreaker& breaker = registry_.circuit_breaker_policy(
      "m", "fuse", "",
      [](r4c::CircuitBreakerConfig& c) { c.sliding_window_size(2).minimum_number_of_calls(2); });
  registry_.hedge_policy("m", "twice");

  auto slot = bulkhead.try_acquire();
  EXPECT_FALSE(bulkhead.try_acquire());
  EXPECT_THROW(timeout.execute([&](std::stop_token) {
    clock_->advance(2s);
    return 1;
  }),
               r4c::CallTimeoutException);
  EXPECT_TRUE(rate.try_acquire());  // after the timeout's advance: in the period of "now"
  EXPECT_FALSE(rate.try_acquire());
  EXPECT_THROW(retry.execute([]() -> int { throw Unavailable(); }), Unavailable);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(breaker.execute([]() -> int { throw Unavailable(); }), Unavailable);
  }
  EXPECT_THROW(breaker.execute([] { return 1; }), r4c::CallNotPermittedException);

  const auto m = r4c::metrics::collect(registry_);
  expect_values(m, "bulkhead", "pool",
                {{"r4c.calls.rejected", 1},
                 {"r4c.bulkhead.concurrent.calls", 1},
                 {"r4c.bulkhead.available.concurrent.calls", 0},
                 {"r4c.bulkhead.max.allowed.concurrent.calls", 1}});
  expect_values(m, "ratelimiter", "quota",
                {{"r4c.calls.rejected", 1},
                 {"r4c.ratelimiter.available.permissions", 0},
                 {"r4c.ratelimiter.waiting.calls", 0}});
  expect_values(m, "timeout", "deadline", {{"r4c.timeout.calls.timed.out", 1}});
  EXPECT_EQ(value_of(m, "r4c.retry.calls", "retry", "again", Label{"result", "failed_with_retry"}),
            1);
  EXPECT_EQ(
      value_of(m, "r4c.retry.calls", "retry", "again", Label{"result", "successful_without_retry"}),
      0);
  EXPECT_EQ(value_of(m, "r4c.retry.retries", "retry", "again"), 1);
  EXPECT_EQ(value_of(m, "r4c.calls.rejected", "circuitbreaker", "fuse"), 1);
  EXPECT_EQ(
      value_of(m, "r4c.circuitbreaker.state", "circuitbreaker", "fuse", Label{"state", "open"}), 1);
  EXPECT_EQ(
      value_of(m, "r4c.circuitbreaker.state", "circuitbreaker", "fuse", Label{"state", "closed"}),
      0);
  EXPECT_EQ(value_of(m, "r4c.circuitbreaker.state", "circuitbreaker", "fuse",
                     Label{"state", "half_open"}),
            0);
  EXPECT_EQ(value_of(m, "r4c.circuitbreaker.transitions", "circuitbreaker", "fuse"), 1);
  expect_values(m, "hedge", "twice", {{"r4c.hedge.calls", 0}, {"r4c.hedge.hedges.launched", 0}});
}

TEST_F(MetricsTest, ThePrometheusTextIsTheExpositionFormat) {
  r4c::AdaptiveLimit& limit = registry_.adaptive_limit_policy("shop::Orders#place(int)", "orders",
                                                              "", {.initial_limit = 2});
  r4c::Permit a = limit.try_acquire();
  r4c::Permit b = limit.try_acquire();
  EXPECT_FALSE(limit.try_acquire());
  EXPECT_EQ(r4c::metrics::prometheus_text(registry_),
            R"(# HELP r4c_adaptivelimit_concurrent_calls Calls holding a slot of the adaptive limit.
# TYPE r4c_adaptivelimit_concurrent_calls gauge
r4c_adaptivelimit_concurrent_calls{kind="adaptivelimit",name="orders"} 2
# HELP r4c_adaptivelimit_limit How many calls the adaptive limit lets run at once.
# TYPE r4c_adaptivelimit_limit gauge
r4c_adaptivelimit_limit{kind="adaptivelimit",name="orders"} 2
# HELP r4c_adaptivelimit_limit_changes_total Windows that changed the adaptive limit.
# TYPE r4c_adaptivelimit_limit_changes_total counter
r4c_adaptivelimit_limit_changes_total{kind="adaptivelimit",name="orders"} 0
# HELP r4c_adaptivelimit_max_limit The highest value the adaptive limit may take.
# TYPE r4c_adaptivelimit_max_limit gauge
r4c_adaptivelimit_max_limit{kind="adaptivelimit",name="orders"} 200
# HELP r4c_adaptivelimit_min_limit The lowest value the adaptive limit may take.
# TYPE r4c_adaptivelimit_min_limit gauge
r4c_adaptivelimit_min_limit{kind="adaptivelimit",name="orders"} 1
# HELP r4c_adaptivelimit_window_latency_seconds Average latency of the last window that recomputed the adaptive limit.
# TYPE r4c_adaptivelimit_window_latency_seconds gauge
r4c_adaptivelimit_window_latency_seconds{kind="adaptivelimit",name="orders"} 0
# HELP r4c_adaptivelimit_windows_total Windows that recomputed the adaptive limit.
# TYPE r4c_adaptivelimit_windows_total counter
r4c_adaptivelimit_windows_total{kind="adaptivelimit",name="orders"} 0
# HELP r4c_calls_rejected_total Calls a policy rejected without running them.
# TYPE r4c_calls_rejected_total counter
r4c_calls_rejected_total{kind="adaptivelimit",name="orders"} 1
)");
}

TEST(PrometheusTextTest, LabelValuesAndHelpAreEscaped) {
  const std::vector<Metric> metrics{
      {"r4c.x", MetricType::gauge, "a \\ back\nslash", {{"name", "a\"b\\c\nd"}}, 1.5}};
  EXPECT_EQ(r4c::metrics::prometheus_text(metrics),
            "# HELP r4c_x a \\\\ back\\nslash\n"
            "# TYPE r4c_x gauge\n"
            "r4c_x{name=\"a\\\"b\\\\c\\nd\"} 1.5\n");
}

TEST(PrometheusTextTest, ValuesPrintExactlyAndSpecialValuesAsTheFormatSpells) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Metric> metrics{{"g", MetricType::gauge, "h", {}, -1},
                                    {"g", MetricType::gauge, "h", {}, 0.1},
                                    {"g", MetricType::gauge, "h", {}, 12345678901234.0},
                                    {"g", MetricType::gauge, "h", {}, inf},
                                    {"g", MetricType::gauge, "h", {}, -inf},
                                    {"g", MetricType::gauge, "h", {}, std::nan("")}};
  EXPECT_EQ(r4c::metrics::prometheus_text(metrics),
            "# HELP g h\n# TYPE g gauge\ng -1\ng 0.1\ng 12345678901234\ng +Inf\ng -Inf\ng NaN\n");
}

TEST(PrometheusTextTest, NamesAreMappedThePrometheusWay) {
  EXPECT_EQ(r4c::metrics::prometheus_name("r4c.calls.rejected", MetricType::counter),
            "r4c_calls_rejected_total");
  EXPECT_EQ(r4c::metrics::prometheus_name("r4c.adaptivelimit.limit", MetricType::gauge),
            "r4c_adaptivelimit_limit");
  EXPECT_EQ(r4c::metrics::prometheus_name("requests_total", MetricType::counter), "requests_total");
  EXPECT_EQ(r4c::metrics::prometheus_name("9lives-now", MetricType::gauge), "_lives_now");
  EXPECT_EQ(r4c::metrics::prometheus_name("", MetricType::gauge), "_");
}

TEST(PrometheusTextTest, AnEmptyRegistryExposesNothing) {
  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  EXPECT_EQ(r4c::metrics::prometheus_text(registry), "");
  EXPECT_TRUE(r4c::metrics::collect(registry).empty());
}

}  // namespace
