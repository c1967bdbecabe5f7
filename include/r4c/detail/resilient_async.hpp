// The asynchronous half of a generated wrapper: a method returning asio::awaitable<T> runs each
// attempt's coroutine through the async pipeline (<r4c/asio.hpp>). Included by the generated
// headers of classes with such methods; see docs/declarative.md.
#pragma once

#include <asio/awaitable.hpp>
#include <utility>

#include "r4c/asio.hpp"
#include "r4c/resilient.hpp"

namespace r4c::detail {

// `make_attempt()` returns one attempt's asio::awaitable<T>; it is called again by a retry or a
// hedge. The call holds each policy's slot until its attempt completes; cancelling the awaiting
// coroutine frees them without a sample, as Pipeline<T>::co_execute does.
template <class T, class F>
asio::awaitable<T> co_call_through(const PipelineStages<T>& stages, F make_attempt) {
  return co_execute_through<T>(stages, std::move(make_attempt));
}

}  // namespace r4c::detail
