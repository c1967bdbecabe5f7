// SPDX-License-Identifier: Apache-2.0
// The fakes' asynchronous call: pending until the program completes it, as a real I/O operation
// is until its reply arrives. Shared by declarative_docs.cpp and tests/gen's FakeSearch.
#pragma once

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace shop_fakes {

// Awaits the result that `completion` (set here, called later by the program) is given. The
// initiation captures a pointer only: with g++ 12, an initiation capturing a std::string, given
// to async_initiate with use_awaitable, frees a pointer it never allocated when Asio destroys it
// (seen under ASan in a program of a few lines).
inline asio::awaitable<std::string> completed_later(std::function<void(std::string)>& completion) {
  std::function<void(std::string)>* slot = &completion;
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::string)>(
      [slot](auto handler) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        *slot = [shared](std::string result) {
          // Completed through the coroutine's executor, as a real I/O object would.
          auto executor = asio::get_associated_executor(*shared);
          asio::post(executor, [shared, result]() mutable { (*shared)(std::move(result)); });
        };
      },
      asio::use_awaitable);
}

}  // namespace shop_fakes
