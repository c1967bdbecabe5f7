// SPDX-License-Identifier: Apache-2.0
// What the hedge's sync and Asio tests share: the failures their replicas throw and the hedge's
// counters as one comparable value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "r4c/errors.hpp"
#include "r4c/hedge.hpp"

namespace r4c::test {

struct SlowReplica : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A refusal by an inner policy, of a type the hedge knows only as a RejectedException.
struct ShardFull : r4c::BulkheadFullException {
  using BulkheadFullException::BulkheadFullException;
};

// A hedge's counters: calls, hedges launched, won by a hedge, failed.
inline std::vector<std::uint64_t> counts(const r4c::HedgeSnapshot& s) {
  return {s.calls, s.hedges_launched, s.won_by_hedge, s.failed};
}

}  // namespace r4c::test
