// SPDX-License-Identifier: Apache-2.0
// r4c: resilience policies for C++ services, with an adaptive concurrency limit at the centre.
// Umbrella header: includes every public header that needs no third-party library.
#pragma once

#include "r4c/adaptive_limit.hpp"
#include "r4c/adaptive_limit_config.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/call_class.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/clock.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/executor.hpp"
#include "r4c/hedge.hpp"
#include "r4c/metrics.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"
#include "r4c/throttle.hpp"
#include "r4c/timeout.hpp"
