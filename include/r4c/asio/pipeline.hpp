// SPDX-License-Identifier: Apache-2.0
// The pipeline's asynchronous face: async_execute (any Asio completion token) and co_execute (a
// coroutine), through the same policies in the same order as execute() (detail::AllKinds's).
//
// Each policy present wraps the next one's initiation with its own async_execute, so each
// attempt of the retry and of the hedge passes every inner policy and is measured on its own.
// Included by <r4c/asio.hpp>.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "r4c/asio/adaptive_limit.hpp"
#include "r4c/asio/bulkhead.hpp"
#include "r4c/asio/circuit_breaker.hpp"
#include "r4c/asio/hedge.hpp"
#include "r4c/asio/rate_limiter.hpp"
#include "r4c/asio/retry.hpp"
#include "r4c/asio/throttle.hpp"
#include "r4c/asio/timeout.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/pipeline.hpp"

namespace r4c {
namespace detail {

// One policy around the initiation `inner`: an initiation itself. Without the policy (null) it
// is `inner`. Policies that start their inner operation at once take it by reference; those that
// start it later or several times (rate limiter, retry, hedge) copy it into their call's state.
template <class T, class Policy, class Inner>
struct AsyncLayer {
  Policy* policy;
  Inner inner;

  template <class Handler>
  void operator()(Handler&& handler) {
    if (policy == nullptr) {
      inner(std::forward<Handler>(handler));
    } else {
      policy->template async_execute<T>(inner, std::forward<Handler>(handler));
    }
  }
};

// The adaptive limit's layer says the call's class (Pipeline::async_execute(CallClass, ...)).
template <class T, class Inner>
struct AsyncLayer<T, AdaptiveLimit, Inner> {
  AdaptiveLimit* policy;
  Inner inner;
  CallClass cls = CallClass::critical;
  LimitPartition partition = {};

  template <class Handler>
  void operator()(Handler&& handler) {
    if (policy == nullptr) {
      inner(std::forward<Handler>(handler));
    } else {
      policy->template async_execute<T>(cls, partition, inner, std::forward<Handler>(handler));
    }
  }
};

template <class T, class Policy, class Inner>
AsyncLayer<T, Policy, std::decay_t<Inner>> layer(Policy* policy, Inner&& inner, CallClass cls,
                                                 LimitPartition partition) {
  if constexpr (std::is_same_v<Policy, AdaptiveLimit>) {
    return {policy, std::forward<Inner>(inner), cls, partition};
  } else {
    return {policy, std::forward<Inner>(inner)};
  }
}

// The pipeline's own hold: none. Its call only turns the caller's handler into r4c's, so that
// every layer, present or not, sees one handler type, and the operation always gets a handler
// that accepts error codes.
template <class T>
struct NoHold {
  void completed(const AsyncOutcome<T>&) noexcept {}
  void cancelled() noexcept {}
};

template <class T>
struct PipelineInitiation {
  PipelineStages<T> stages;

  template <class Handler, class Op>
  void operator()(Handler&& handler, Op&& op) const {
    auto chain = layers_from<0>(std::forward<Op>(op));
    using Call = GuardedCall<T, std::decay_t<Handler>, NoHold<T>>;
    Call::start(std::forward<Handler>(handler), chain, NoHold<T>{});
  }

  // The layers from position I of the list inward, around `op`: the outermost first.
  template <std::size_t I, class Op>
  auto layers_from(Op&& op) const {
    if constexpr (I == kKindCount) {
      return std::decay_t<Op>(std::forward<Op>(op));
    } else {
      return layer<T>(std::get<I>(stages.policies), layers_from<I + 1>(std::forward<Op>(op)),
                      stages.cls, stages.partition);
    }
  }
};

template <class T, class F>
asio::awaitable<T> co_execute_through(PipelineStages<T> stages, F f) {
  auto executor = co_await asio::this_coro::executor;
  // Each attempt runs f()'s coroutine on this coroutine's executor; the handler r4c gives it
  // carries the cancellation slot that co_spawn listens to.
  auto op = [f = std::move(f), executor](auto handler) mutable {
    asio::co_spawn(executor, f(), std::move(handler));
  };
  co_return co_await initiate<T>(PipelineInitiation<T>{stages}, asio::use_awaitable, std::move(op));
}

}  // namespace detail

template <class T>
template <class Op, class Token>
auto Pipeline<T>::async_execute(Op&& op, Token&& token) const {
  return detail::initiate<T>(detail::PipelineInitiation<T>{stages_}, std::forward<Token>(token),
                             std::forward<Op>(op));
}

template <class T>
template <class Op, class Token>
auto Pipeline<T>::async_execute(CallClass cls, Op&& op, Token&& token) const {
  return detail::initiate<T>(detail::PipelineInitiation<T>{with_class(cls)},
                             std::forward<Token>(token), std::forward<Op>(op));
}

template <class T>
template <class Op, class Token>
auto Pipeline<T>::async_execute(CallClass cls, LimitPartition partition, Op&& op,
                                Token&& token) const {
  return detail::initiate<T>(detail::PipelineInitiation<T>{with_class(cls, partition)},
                             std::forward<Token>(token), std::forward<Op>(op));
}

template <class T>
template <class F>
auto Pipeline<T>::co_execute(F f) const {
  return detail::co_execute_through<T>(stages_, std::move(f));
}

}  // namespace r4c
