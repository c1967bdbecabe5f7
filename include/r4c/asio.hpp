// SPDX-License-Identifier: Apache-2.0
// r4c's asynchronous face, for Asio (standalone Asio, header-only; Debian: libasio-dev).
//
//   auto op = [&](auto handler) { backend.async_place(order, std::move(handler)); };
//   pipeline.async_execute(op, [](std::exception_ptr e, std::string r) { ... });   // callback
//   std::future<std::string> f = pipeline.async_execute(op, asio::use_future);       // future
//   std::string r = co_await pipeline.async_execute(op, asio::use_awaitable);        // coroutine
//
// An operation is any Asio initiation: a callable taking a completion handler. The handler r4c
// gives it accepts (std::exception_ptr, T) and (asio::error_code, T); the caller's completion
// signature is always void(std::exception_ptr, T). See docs/async.md.
#pragma once

#include "r4c/asio/adaptive_limit.hpp"
#include "r4c/asio/bulkhead.hpp"
#include "r4c/asio/circuit_breaker.hpp"
#include "r4c/asio/hedge.hpp"
#include "r4c/asio/rate_limiter.hpp"
#include "r4c/asio/retry.hpp"
#include "r4c/asio/throttle.hpp"
#include "r4c/asio/timeout.hpp"
// Last: the pipeline composes the others.
#include "r4c/asio/pipeline.hpp"
