// SPDX-License-Identifier: Apache-2.0
// A user of r4c::http through the package: a guarded server answering one request on loopback.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <r4c/http.hpp>

int main() {
  r4c::AdaptiveLimit limit("consumer");
  r4c::http::ServerGuard guard(limit);
  httplib::Server server;
  guard.install(server);
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&server] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  httplib::Client client("127.0.0.1", port);
  const httplib::Result result = client.Get("/");
  server.stop();
  listener.join();
  const bool ok = result && result->status == 200 && limit.in_flight() == 0;
  std::printf("r4c::http consumer: %s\n", ok ? "ok" : "failed");
  return ok ? 0 : 1;
}
