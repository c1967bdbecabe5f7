// SPDX-License-Identifier: Apache-2.0
// The code of docs/async.md's "Owning captures in co_execute" section, in a [doc:NAME] region
// (tests/docs checks the page against it): the shape of a co_execute call whose lambda owns what
// it captures that is safe on every supported compiler, g++ 12 included. It exits non-zero when
// the capture was not released exactly once. tests/asio/coroutine_capture_test.cpp runs this
// shape and its variants under ASan.
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include <r4c/asio.hpp>
#include <r4c/r4c.hpp>

int main() {
  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  auto pipeline = r4c::Pipeline<std::string>::builder(registry, "orders").adaptive_limit().build();
  asio::io_context io;
  auto order = std::make_shared<std::string>("order 7");

  std::future<std::string> placed = asio::co_spawn(
      io,
      [&]() -> asio::awaitable<std::string> {
        // [doc:owning-capture]
        // the call is a named local; the lambda is a temporary of this declaration only
        auto call = pipeline.co_execute(
            [order]() -> asio::awaitable<std::string> { co_return "placed " + *order; });
        std::string result = co_await std::move(call);
        // not: co_await pipeline.co_execute([order]() -> asio::awaitable<std::string> {...});
        // [/doc:owning-capture]
        co_return result;
      },
      asio::use_future);
  io.run();
  const std::string result = placed.get();
  std::printf("%s; the capture's use count is back to %ld\n", result.c_str(), order.use_count());
  return result == "placed order 7" && order.use_count() == 1 ? 0 : 1;
}
