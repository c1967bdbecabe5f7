// SPDX-License-Identifier: Apache-2.0
// Metrics: every counter and gauge of every policy of a registry, pulled on demand.
//
//   for (const r4c::metrics::Metric& m : r4c::metrics::collect(registry)) ...
//   std::string body = r4c::metrics::prometheus_text(registry);   // serve it at /metrics
//
// Values come from the policies' snapshots (exact counters, consistent pictures): collecting
// adds nothing to the call path. Names follow resilience4cata 0.6.0's "Adaptive limit" page
// ("r4c.calls.rejected" with
// kind = adaptivelimit, "r4c.adaptivelimit.limit.changes", "r4c.adaptivelimit.limit",
// "r4c.adaptivelimit.concurrent.calls") and the same scheme for the other policies; every
// metric carries the labels `kind` (the policy's kind) and `name` (its instance id). The
// Prometheus text maps them the Prometheus way: dots become underscores and counters end in
// `_total` (r4c_calls_rejected_total{kind="adaptivelimit",name="orders"}). The full list is in
// docs/observability.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/latency_histogram.hpp"

namespace r4c {

class ResilienceRegistry;
class RegistrySnapshot;

namespace metrics {

/// histogram: one value of a Prometheus histogram (a `_bucket` with its `le` label, the `_sum`
/// or the `_count`; Metric::part says which).
enum class MetricType { counter, gauge, histogram };

struct Label {
  std::string name;
  std::string value;
  friend bool operator==(const Label&, const Label&) = default;
};

/// One value of one metric.
struct Metric {
  std::string name;  // dotted, e.g. "r4c.calls.rejected"
  MetricType type = MetricType::gauge;
  std::string help;           // one sentence, the same for every value of the name
  std::vector<Label> labels;  // sorted by name: kind, name, then any other (result, state)
  double value = 0;
  /// A histogram's values: "_bucket", "_sum" or "_count" after the family's name; empty for the
  /// other types.
  std::string part = {};
};

/// Appends one policy instance's metrics to a list, each labelled with the instance's kind and
/// id: what a kind's descriptor (AdaptiveLimitKind::metrics, ...) writes its snapshot to.
class Emitter {
 public:
  /// `kind` is the kind's metrics name ("adaptivelimit"); `out` and `id` must outlive this.
  Emitter(std::vector<Metric>& out, std::string_view kind, const std::string& id)
      : out_(out), kind_(kind), id_(id) {}

  void counter(std::string_view name, std::string_view help, double value,
               std::vector<Label> extra = {});
  void gauge(std::string_view name, std::string_view help, double value,
             std::vector<Label> extra = {});
  /// A latency histogram (in seconds): a `_bucket` per bound of <r4c/latency_histogram.hpp> and
  /// +Inf, cumulative, then `_sum` and `_count`; nothing when `latency` is not enabled.
  void histogram(std::string_view name, std::string_view help, const LatencyDistribution& latency);
  /// "r4c.calls.rejected", the counter every policy that refuses calls shares.
  void rejected(std::uint64_t count);

 private:
  void add(std::string_view name, MetricType type, std::string_view help, double value,
           std::vector<Label> extra);

  std::vector<Metric>& out_;
  std::string_view kind_;
  const std::string& id_;
};

/// A counter's value as a metric's.
inline double count(std::uint64_t value) noexcept { return static_cast<double>(value); }
/// A span in seconds, the unit of every duration metric.
inline double seconds(std::chrono::nanoseconds span) noexcept {
  return static_cast<double>(span.count()) / 1e9;
}

/// Every metric of every policy in `registry`, grouped by policy kind, then instance id.
std::vector<Metric> collect(const ResilienceRegistry& registry);
/// The same from a snapshot taken earlier.
std::vector<Metric> collect(const RegistrySnapshot& snapshot);

/// The Prometheus name of a dotted metric name: dots and other characters Prometheus does not
/// allow become underscores, and a counter gets `_total`.
std::string prometheus_name(std::string_view name, MetricType type);

/// The Prometheus text exposition format, version 0.0.4 (Content-Type
/// "text/plain; version=0.0.4; charset=utf-8"): a `# HELP` and a `# TYPE` line per metric,
/// then its values, metrics in name order; label values and help escaped as the format says.
std::string prometheus_text(const std::vector<Metric>& metrics);
std::string prometheus_text(const ResilienceRegistry& registry);

/// The Content-Type to serve prometheus_text() with.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace metrics
}  // namespace r4c
