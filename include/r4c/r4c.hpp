// r4c: resilience policies for C++ services, with an adaptive concurrency limit at the centre.
// Umbrella header: includes every public header that needs no third-party library.
#pragma once

#include "r4c/adaptive_limit.hpp"
#include "r4c/adaptive_limit_config.hpp"
#include "r4c/clock.hpp"
#include "r4c/errors.hpp"
#include "r4c/registry.hpp"
