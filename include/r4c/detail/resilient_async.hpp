// SPDX-License-Identifier: Apache-2.0
// The asynchronous half of a generated wrapper: a method returning asio::awaitable<T> runs each
// attempt's coroutine through the async pipeline (<r4c/asio.hpp>). Included by the generated
// headers of classes with such methods; see docs/declarative.md.
#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <type_traits>
#include <utility>

#include "r4c/asio.hpp"
#include "r4c/resilient.hpp"

namespace r4c::detail {

// The async pipeline copies a call's attempt factory (its retry, hedge and rate limiter layers
// keep it to start it later), so what the factory captures must be copyable. A move-only
// argument of a call that makes one attempt is captured in a shared box instead (one allocation
// per call, beside the coroutine frames an async call allocates anyway): every copy shares it,
// and the one attempt moves the argument out.
template <class T>
struct SharedArgument {
  std::shared_ptr<T> value;
};

template <class T>
auto capture_argument(T&& argument) {
  using Value = std::decay_t<T>;
  if constexpr (std::is_copy_constructible_v<Value>) {
    return Value(std::forward<T>(argument));
  } else {
    return SharedArgument<Value>{std::make_shared<Value>(std::forward<T>(argument))};
  }
}

template <class T>
T&& release_argument(T& captured) noexcept {
  return std::move(captured);
}

template <class T>
T&& release_argument(SharedArgument<T>& captured) noexcept {
  return std::move(*captured.value);
}

// `make_attempt()` returns one attempt's asio::awaitable<T>; it is called again by a retry or a
// hedge. The call holds each policy's slot until its attempt completes; cancelling the awaiting
// coroutine frees them without a sample, as Pipeline<T>::co_execute does.
template <class T, class F>
asio::awaitable<T> co_call_through(const PipelineStages<T>& stages, F make_attempt) {
  return co_execute_through<T>(stages, std::move(make_attempt));
}

}  // namespace r4c::detail
