// Metrics from snapshots, and their Prometheus text.
#include "r4c/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include "r4c/registry.hpp"

namespace r4c::metrics {
namespace {

// Appends one policy instance's metrics, each labelled with its kind and instance id.
class Emitter {
 public:
  Emitter(std::vector<Metric>& out, std::string_view kind, const std::string& id)
      : out_(out), kind_(kind), id_(id) {}

  void counter(std::string_view name, std::string_view help, double value,
               std::vector<Label> extra = {}) {
    add(name, MetricType::counter, help, value, std::move(extra));
  }
  void gauge(std::string_view name, std::string_view help, double value,
             std::vector<Label> extra = {}) {
    add(name, MetricType::gauge, help, value, std::move(extra));
  }
  // The metric every rejecting policy shares.
  void rejected(std::uint64_t count) {
    counter("r4c.calls.rejected", "Calls a policy rejected without running them.",
            static_cast<double>(count));
  }

 private:
  void add(std::string_view name, MetricType type, std::string_view help, double value,
           std::vector<Label> extra) {
    Metric metric{std::string(name), type, std::string(help), {}, value};
    metric.labels.reserve(2 + extra.size());
    metric.labels.push_back(Label{"kind", std::string(kind_)});
    metric.labels.push_back(Label{"name", id_});
    for (Label& label : extra) metric.labels.push_back(std::move(label));
    out_.push_back(std::move(metric));
  }

  std::vector<Metric>& out_;
  std::string_view kind_;
  const std::string& id_;
};

double seconds(std::chrono::nanoseconds span) { return static_cast<double>(span.count()) / 1e9; }
double count(std::uint64_t value) { return static_cast<double>(value); }

void add_adaptive_limits(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  for (const auto& [id, s] : snapshot.adaptive_limits()) {
    Emitter e(out, "adaptivelimit", id);
    e.rejected(s.rejected);
    e.counter("r4c.adaptivelimit.limit.changes", "Windows that changed the adaptive limit.",
              count(s.limit_changes));
    e.gauge("r4c.adaptivelimit.limit", "How many calls the adaptive limit lets run at once.",
            s.limit);
    e.gauge("r4c.adaptivelimit.concurrent.calls", "Calls holding a slot of the adaptive limit.",
            s.in_flight);
    e.gauge("r4c.adaptivelimit.min.limit", "The lowest value the adaptive limit may take.",
            s.min_limit);
    e.gauge("r4c.adaptivelimit.max.limit", "The highest value the adaptive limit may take.",
            s.max_limit);
    e.counter("r4c.adaptivelimit.windows", "Windows that recomputed the adaptive limit.",
              count(s.windows));
    e.gauge("r4c.adaptivelimit.window.latency.seconds",
            "Average latency of the last window that recomputed the adaptive limit.",
            seconds(s.window_latency));
  }
}

void add_bulkheads(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  for (const auto& [id, s] : snapshot.bulkheads()) {
    Emitter e(out, "bulkhead", id);
    e.rejected(s.rejected);
    e.gauge("r4c.bulkhead.concurrent.calls", "Calls holding a slot of the bulkhead.", s.in_flight);
    e.gauge("r4c.bulkhead.available.concurrent.calls", "Free slots of the bulkhead.", s.available);
    e.gauge("r4c.bulkhead.max.allowed.concurrent.calls", "Slots of the bulkhead.",
            s.max_concurrent);
  }
}

void add_rate_limiters(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  for (const auto& [id, s] : snapshot.rate_limiters()) {
    Emitter e(out, "ratelimiter", id);
    e.rejected(s.rejected);
    e.gauge("r4c.ratelimiter.available.permissions",
            "Permits left in the rate limiter's period; negative while calls wait for reserved "
            "permits.",
            s.available_permissions);
    e.gauge("r4c.ratelimiter.waiting.calls", "Calls waiting for a permit of the rate limiter.",
            s.waiting_calls);
  }
}

void add_timeouts(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  for (const auto& [id, s] : snapshot.timeouts()) {
    Emitter e(out, "timeout", id);
    e.counter("r4c.timeout.calls.timed.out", "Calls that failed with CallTimeoutException.",
              count(s.timed_out));
  }
}

void add_retries(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  static constexpr std::string_view kHelp = "Retried calls that ended, by result.";
  for (const auto& [id, s] : snapshot.retries()) {
    Emitter e(out, "retry", id);
    e.counter("r4c.retry.calls", kHelp, count(s.failed_with_retry),
              {Label{"result", "failed_with_retry"}});
    e.counter("r4c.retry.calls", kHelp, count(s.failed_without_retry),
              {Label{"result", "failed_without_retry"}});
    e.counter("r4c.retry.calls", kHelp, count(s.successful_with_retry),
              {Label{"result", "successful_with_retry"}});
    e.counter("r4c.retry.calls", kHelp, count(s.successful_without_retry),
              {Label{"result", "successful_without_retry"}});
    e.counter("r4c.retry.retries", "Attempts after the first, over every call.", count(s.retries));
    e.gauge("r4c.retry.waiting.calls", "Calls waiting between attempts.", s.waiting_calls);
  }
}

void add_circuit_breakers(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  static constexpr std::string_view kStateHelp =
      "1 for the circuit breaker's current state, 0 for the others.";
  for (const auto& [id, s] : snapshot.circuit_breakers()) {
    Emitter e(out, "circuitbreaker", id);
    e.rejected(s.not_permitted_calls);
    for (CircuitBreakerState state :
         {CircuitBreakerState::closed, CircuitBreakerState::half_open, CircuitBreakerState::open}) {
      e.gauge("r4c.circuitbreaker.state", kStateHelp, s.state == state ? 1 : 0,
              {Label{"state", std::string(to_string(state))}});
    }
    e.gauge("r4c.circuitbreaker.failure.rate",
            "Percent of recorded calls that failed; -1 while fewer than the minimum are recorded.",
            s.failure_rate);
    e.gauge("r4c.circuitbreaker.slow.call.rate",
            "Percent of recorded calls that were slow; -1 while fewer than the minimum are "
            "recorded.",
            s.slow_call_rate);
    e.gauge("r4c.circuitbreaker.buffered.calls", "Calls in the circuit breaker's window.",
            count(s.buffered_calls));
    e.counter("r4c.circuitbreaker.transitions", "State changes of the circuit breaker.",
              count(s.transitions));
  }
}

void add_hedges(std::vector<Metric>& out, const RegistrySnapshot& snapshot) {
  for (const auto& [id, s] : snapshot.hedges()) {
    Emitter e(out, "hedge", id);
    e.counter("r4c.hedge.calls", "Hedged calls that ended.", count(s.calls));
    e.counter("r4c.hedge.failed.calls", "Hedged calls that ended with a failure.", count(s.failed));
    e.counter("r4c.hedge.hedges.launched", "Attempts after the first, over every call.",
              count(s.hedges_launched));
    e.counter("r4c.hedge.won.by.hedge", "Calls whose result came from an attempt after the first.",
              count(s.won_by_hedge));
    e.counter("r4c.hedge.executor.refusals", "Attempts the executor refused.",
              count(s.executor_refusals));
  }
}

// Label values: backslash, double quote and line feed escaped.
void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

// Help text: backslash and line feed escaped.
void append_help(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_value(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[32];
    // Shortest text that reads back as the same double; integers print without a point.
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
    out.append(buffer, error == std::errc() ? end : buffer);
  }
}

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

}  // namespace

std::vector<Metric> collect(const RegistrySnapshot& snapshot) {
  std::vector<Metric> out;
  add_adaptive_limits(out, snapshot);
  add_bulkheads(out, snapshot);
  add_rate_limiters(out, snapshot);
  add_timeouts(out, snapshot);
  add_retries(out, snapshot);
  add_circuit_breakers(out, snapshot);
  add_hedges(out, snapshot);
  return out;
}

std::vector<Metric> collect(const ResilienceRegistry& registry) {
  return collect(registry.snapshot());
}

std::string prometheus_name(std::string_view name, MetricType type) {
  std::string out;
  out.reserve(name.size() + 6);
  for (char c : name) out += is_name_char(c, out.empty()) ? c : '_';
  if (out.empty()) out.push_back('_');  // not `out = "_"`: a false -Wrestrict in g++ 12 -O3
  if (type == MetricType::counter &&
      (out.size() < 6 || out.compare(out.size() - 6, 6, "_total") != 0)) {
    out += "_total";
  }
  return out;
}

std::string prometheus_text(const std::vector<Metric>& metrics) {
  // Families in name order, values in collection order; a family's HELP and TYPE are its
  // first value's.
  std::map<std::string, std::vector<const Metric*>> families;
  for (const Metric& metric : metrics) {
    families[prometheus_name(metric.name, metric.type)].push_back(&metric);
  }
  std::string out;
  for (const auto& [name, values] : families) {
    const Metric& first = *values.front();
    out += "# HELP ";
    out += name;
    out += ' ';
    append_help(out, first.help);
    out += "\n# TYPE ";
    out += name;
    out += first.type == MetricType::counter ? " counter\n" : " gauge\n";
    for (const Metric* metric : values) {
      out += name;
      if (!metric->labels.empty()) {
        out += '{';
        bool comma = false;
        for (const Label& label : metric->labels) {
          if (comma) out += ',';
          comma = true;
          out += label.name;
          out += "=\"";
          append_label_value(out, label.value);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_value(out, metric->value);
      out += '\n';
    }
  }
  return out;
}

std::string prometheus_text(const ResilienceRegistry& registry) {
  return prometheus_text(collect(registry));
}

}  // namespace r4c::metrics
