// SPDX-License-Identifier: Apache-2.0
#include "r4c/bulkhead.hpp"

#include "config_check.hpp"
#include "kind_settings.hpp"
#include "r4c/metrics.hpp"

namespace r4c {

BulkheadConfig& BulkheadConfig::max_concurrent(int value) {
  if (value < 1)
    detail::fail(detail::kLimitBelowOne, "max_concurrent", detail::show(value), "an integer >= 1");
  max_concurrent_ = value;
  return *this;
}

void BulkheadConfig::validate() const { BulkheadConfig().max_concurrent(max_concurrent_); }

std::optional<SettingDifference> first_difference(const BulkheadConfig& first,
                                                  const BulkheadConfig& second) {
  return detail::DifferenceFinder()
      .compare("max_concurrent", first.max_concurrent(), second.max_concurrent())
      .result();
}

Bulkhead::Bulkhead(std::string instance_id, BulkheadConfig config)
    : max_concurrent_(detail::validated(config).max_concurrent()),
      permitted_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      rejected_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      finished_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      instance_id_(std::move(instance_id)),
      config_(std::move(config)),
      full_(std::make_exception_ptr(BulkheadFullException(
          instance_id_, "bulkhead '" + instance_id_ + "' is full (max_concurrent " +
                            std::to_string(max_concurrent_) +
                            "): the call was rejected without running"))) {}

void Bulkhead::throw_full() const { std::rethrow_exception(full_); }

Subscription Bulkhead::subscribe(Listeners& listeners, std::uint8_t type,
                                 std::function<void(const BulkheadEvent&)> listener) const {
  Subscription subscription = listeners.subscribe(std::move(listener));
  // After the subscription: a publication that cleared the bit since sees it set again.
  listening_.fetch_or(type, std::memory_order_seq_cst);
  return subscription;
}

Subscription Bulkhead::on_call_permitted(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*permitted_listeners_, kPermitted, std::move(listener));
}

Subscription Bulkhead::on_call_rejected(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*rejected_listeners_, kRejected, std::move(listener));
}

Subscription Bulkhead::on_call_finished(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*finished_listeners_, kFinished, std::move(listener));
}

void Bulkhead::publish(const Listeners& listeners, std::uint8_t bit, BulkheadEventType type,
                       std::int32_t in_flight) const noexcept {
  if (!listeners.has_listeners()) {
    // The last listener left: clear the bit, then look again, so that a subscription racing
    // this one keeps its bit (seq_cst: the clear and the second look are not reordered).
    listening_.fetch_and(static_cast<std::uint8_t>(~bit), std::memory_order_seq_cst);
    if (listeners.has_listeners()) listening_.fetch_or(bit, std::memory_order_seq_cst);
    return;
  }
  listeners.publish(BulkheadEvent{instance_id_, type, in_flight, max_concurrent_});
}

BulkheadSnapshot Bulkhead::snapshot() const {
  BulkheadSnapshot snap;
  snap.max_concurrent = max_concurrent_;
  snap.in_flight = in_flight();
  snap.available = snap.in_flight < max_concurrent_ ? max_concurrent_ - snap.in_flight : 0;
  snap.rejected = rejected_.total();
  return snap;
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<BulkheadKind::Config>> BulkheadKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  using enum detail::SettingType;
  static constexpr detail::Setting<Config> kSettings[] = {R::row(
      "maxConcurrent", "max_concurrent", integer,
      [](auto& c, auto& v) { c.max_concurrent(v.integer); },
      [](const auto& c) { return detail::value_of(c.max_concurrent()); })};
  return kSettings;
}

void BulkheadKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  out.rejected(s.rejected);
  out.gauge("r4c.bulkhead.concurrent.calls", "Calls holding a slot of the bulkhead.", s.in_flight);
  out.gauge("r4c.bulkhead.available.concurrent.calls", "Free slots of the bulkhead.", s.available);
  out.gauge("r4c.bulkhead.max.allowed.concurrent.calls", "Slots of the bulkhead.",
            s.max_concurrent);
}

}  // namespace r4c
