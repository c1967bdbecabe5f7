// SPDX-License-Identifier: Apache-2.0
#include "r4c/bulkhead.hpp"

#include <algorithm>

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
    : max_concurrent_(std::min(detail::validated(config).max_concurrent(), kListened - 1)),
      permitted_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      rejected_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      finished_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      instance_id_(std::move(instance_id)),
      config_(std::move(config)),
      full_(std::make_exception_ptr(BulkheadFullException(
          instance_id_, "bulkhead '" + instance_id_ + "' is full (max_concurrent " +
                            std::to_string(config_.max_concurrent()) +
                            "): the call was rejected without running"))) {}

void Bulkhead::throw_full() const { std::rethrow_exception(full_); }

Subscription Bulkhead::subscribe(Listeners& listeners, std::uint8_t type,
                                 std::function<void(const BulkheadEvent&)> listener) const {
  Subscription subscription = listeners.subscribe(std::move(listener));
  // After the subscription: a publication that cleared the bits since sees them set again.
  // A rejection is off the admitted path already; permissions and ends send the calls there.
  listening_.fetch_or(type, std::memory_order_seq_cst);
  if (type != kRejected) in_flight_.fetch_or(kListened, std::memory_order_seq_cst);
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

BulkheadPermit Bulkhead::acquire_slowly() noexcept {
  std::int32_t state = in_flight_.load(std::memory_order_relaxed);
  for (;;) {
    const std::int32_t running = state & (kListened - 1);
    if (running >= max_concurrent_) {
      rejected_.increment();
      if (listening(kRejected))
        publish(*rejected_listeners_, kRejected, BulkheadEventType::call_rejected, running);
      return BulkheadPermit();
    }
    // relaxed: a slot guards no data; kListened stays as it is.
    if (in_flight_.compare_exchange_weak(state, state + 1, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
      const std::uint8_t listening = listening_.load(std::memory_order_relaxed);
      if ((listening & kPermitted) != 0)
        publish(*permitted_listeners_, kPermitted, BulkheadEventType::call_permitted, running + 1);
      bool announce = (listening & kFinished) != 0 && !forget(*finished_listeners_, kFinished);
      return BulkheadPermit(this, announce);
    }
  }
}

void Bulkhead::finish_announced() noexcept {
  const std::int32_t left =
      (in_flight_.fetch_sub(1, std::memory_order_relaxed) - 1) & (kListened - 1);
  publish(*finished_listeners_, kFinished, BulkheadEventType::call_finished, left);
}

bool Bulkhead::forget(const Listeners& listeners, std::uint8_t bit) const noexcept {
  if (listeners.has_listeners()) return false;
  // The last listener left: clear the bit, then look again, so that a subscription racing
  // this one keeps its bit (seq_cst: the clear and the second look are not reordered).
  const std::uint8_t before =
      listening_.fetch_and(static_cast<std::uint8_t>(~bit), std::memory_order_seq_cst);
  if (listeners.has_listeners()) {
    listening_.fetch_or(bit, std::memory_order_seq_cst);
    return false;
  }
  if ((before & ~bit & (kPermitted | kFinished)) == 0) {
    // Nothing on the admitted path is listened to any more: its calls go the short way
    // again, unless a subscription came meanwhile (it sets its bit, then kListened again).
    in_flight_.fetch_and(~kListened, std::memory_order_seq_cst);
    if ((listening_.load(std::memory_order_seq_cst) & (kPermitted | kFinished)) != 0)
      in_flight_.fetch_or(kListened, std::memory_order_seq_cst);
  }
  return true;
}

void Bulkhead::publish(const Listeners& listeners, std::uint8_t bit, BulkheadEventType type,
                       std::int32_t in_flight) const noexcept {
  if (forget(listeners, bit)) return;
  listeners.publish(BulkheadEvent{instance_id_, type, in_flight, config_.max_concurrent()});
}

BulkheadSnapshot Bulkhead::snapshot() const {
  BulkheadSnapshot snap;
  snap.max_concurrent = config_.max_concurrent();
  snap.in_flight = in_flight();
  snap.available = snap.in_flight < snap.max_concurrent ? snap.max_concurrent - snap.in_flight : 0;
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
