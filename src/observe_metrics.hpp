// SPDX-License-Identifier: Apache-2.0
// What the metrics of every policy with an observe mode share. Internal to src/.
#pragma once

#include <string_view>

#include "r4c/adaptive_limit_config.hpp"  // PolicyMode
#include "r4c/metrics.hpp"

namespace r4c::detail {

/// The counter "r4c.<kind>.would.reject" (`name`) of the calls an observing policy would have
/// refused, from its snapshot's `mode` and `would_have_rejected`. Only in observe mode, or after
/// it (once it counted any), so that an enforcing policy's metrics stay as they were.
template <class Snapshot>
void emit_would_reject(metrics::Emitter& out, const Snapshot& s, std::string_view name,
                       std::string_view help) {
  if (s.mode == PolicyMode::observe || s.would_have_rejected != 0) {
    out.counter(name, help, metrics::count(s.would_have_rejected));
  }
}

}  // namespace r4c::detail
