// SPDX-License-Identifier: Apache-2.0
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

void Emitter::counter(std::string_view name, std::string_view help, double value,
                      std::vector<Label> extra) {
  add(name, MetricType::counter, help, value, std::move(extra));
}

void Emitter::gauge(std::string_view name, std::string_view help, double value,
                    std::vector<Label> extra) {
  add(name, MetricType::gauge, help, value, std::move(extra));
}

void Emitter::histogram(std::string_view name, std::string_view help,
                        const LatencyDistribution& latency) {
  if (!latency.enabled) return;
  const auto bucket = [&](std::string le, std::uint64_t value) {
    add(name, MetricType::histogram, help, count(value), {{"le", std::move(le)}});
    out_.back().part = "_bucket";
  };
  for (int i = 0; i < kLatencyBounds; ++i) {
    char text[32];
    const auto [end, error] = std::to_chars(text, text + sizeof text, seconds(latency_bound(i)));
    bucket(std::string(text, error == std::errc() ? end : text), latency.buckets[i]);
  }
  bucket("+Inf", latency.total.count);
  add(name, MetricType::histogram, help, seconds(latency.sum), {});
  out_.back().part = "_sum";
  add(name, MetricType::histogram, help, count(latency.total.count), {});
  out_.back().part = "_count";
}

void Emitter::rejected(std::uint64_t count) {
  counter("r4c.calls.rejected", "Calls a policy rejected without running them.",
          static_cast<double>(count));
}

void Emitter::add(std::string_view name, MetricType type, std::string_view help, double value,
                  std::vector<Label> extra) {
  Metric metric{std::string(name), type, std::string(help), {}, value};
  metric.labels.reserve(2 + extra.size());
  metric.labels.push_back(Label{"kind", std::string(kind_)});
  metric.labels.push_back(Label{"name", id_});
  for (Label& label : extra) metric.labels.push_back(std::move(label));
  out_.push_back(std::move(metric));
}

namespace {

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
  // The kinds in a fixed order (the list's), each by instance id; what each metric is, is the
  // kind's own business (Kind::metrics, beside its policy).
  detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
    for (const auto& [id, s] : snapshot.of<Kind>()) {
      Emitter emitter(out, Kind::kNames.metrics, id);
      Kind::metrics(s, emitter);
    }
  });
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
    out += first.type == MetricType::counter     ? " counter\n"
           : first.type == MetricType::histogram ? " histogram\n"
                                                 : " gauge\n";
    for (const Metric* metric : values) {
      out += name;
      out += metric->part;
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
