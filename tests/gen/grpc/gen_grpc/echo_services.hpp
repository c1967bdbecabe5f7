// SPDX-License-Identifier: Apache-2.0
// r4c's echo service (proto/r4c/testing/echo.proto) under r4c-gen's gRPC guard, synchronous and
// callback. r4c-gen makes echo_services.resilient.hpp from this header; tests/gen/grpc/
// echo_services.expected is what it must make.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <vector>

#include "r4c/testing/echo.grpc.pb.h"

namespace gen_grpc {

// Where "hold" calls wait until the test lets them go: synchronous handlers block in wait(),
// callback ones leave their reactor here.
class Gate {
 public:
  // A synchronous handler's wait; gRPC has no wake-up for a cancelled sync call, so it looks.
  void wait(::grpc::ServerContext* context) {
    std::unique_lock lock(mutex_);
    ++holding_;
    changed_.notify_all();
    while (!open_ && !context->IsCancelled()) changed_.wait_for(lock, std::chrono::milliseconds(5));
    --holding_;
    changed_.notify_all();
  }
  void hold(::grpc::ServerUnaryReactor* reactor) {
    const std::lock_guard lock(mutex_);
    held_.insert(reactor);
    ++holding_;
    changed_.notify_all();
  }
  void forget(::grpc::ServerUnaryReactor* reactor) {
    const std::lock_guard lock(mutex_);
    if (held_.erase(reactor) > 0) --holding_;
    changed_.notify_all();
  }
  // Lets every waiting call go on; the held reactors finish with `status`. Under the lock: a
  // reactor deletes itself in OnDone, which forget()s it first (on this thread or another).
  template <class Finish>
  void open(Finish&& finish) {
    const std::lock_guard lock(mutex_);
    open_ = true;
    const std::vector<::grpc::ServerUnaryReactor*> held(held_.begin(), held_.end());
    for (::grpc::ServerUnaryReactor* reactor : held) finish(reactor);
    changed_.notify_all();
  }
  void wait_for_holders(int count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return holding_ >= count; });
  }
  int holding() {
    const std::lock_guard lock(mutex_);
    return holding_;
  }

 private:
  std::recursive_mutex mutex_;
  std::condition_variable_any changed_;
  bool open_ = false;
  int holding_ = 0;
  std::set<::grpc::ServerUnaryReactor*> held_;
};

// clang-format off
// Every method of the service under the server's limit "echo-server", the health check aside.
class [[r4c::adaptive_limit(name = "echo-server", algorithm = aimd, initial_limit = 1, min_limit = 1, max_limit = 1)]]
SyncEcho : public r4c::testing::Echo::Service {
 public:
  explicit SyncEcho(Gate& gate) : gate_(gate) {}

  ::grpc::Status Echo(::grpc::ServerContext* context, const r4c::testing::EchoRequest* request,
                      r4c::testing::EchoReply* reply) override {
    served_.fetch_add(1);
    if (request->message() == "hold") gate_.wait(context);
    reply->set_message(request->message());
    return ::grpc::Status::OK;
  }

  [[r4c::bypass]]
  ::grpc::Status Health(::grpc::ServerContext*, const r4c::testing::EchoRequest*,
                        r4c::testing::EchoReply* reply) override {
    reply->set_message("ok");
    return ::grpc::Status::OK;
  }

  int served() const { return served_.load(); }

 private:
  Gate& gate_;
  std::atomic<int> served_{0};
};
// clang-format on

// A held callback call: finished by the test (Gate::open), by the client's cancellation or by
// the server's shutdown, whichever comes first.
class HeldReactor final : public ::grpc::ServerUnaryReactor {
 public:
  explicit HeldReactor(Gate& gate) : gate_(gate) { gate_.hold(this); }
  void finish(const ::grpc::Status& status) {
    if (!finished_.exchange(true)) Finish(status);
  }
  void OnCancel() override { finish(::grpc::Status::CANCELLED); }
  void OnDone() override {
    gate_.forget(this);
    delete this;
  }

 private:
  Gate& gate_;
  std::atomic<bool> finished_{false};
};

// Echo alone under "echo-callback"; Health, without an attribute, is not guarded.
class CallbackEcho : public r4c::testing::Echo::CallbackService {
 public:
  explicit CallbackEcho(Gate& gate) : gate_(gate) {}

  // clang-format off
  [[r4c::adaptive_limit(name = "echo-callback", algorithm = aimd, initial_limit = 1, min_limit = 1, max_limit = 1)]]
  ::grpc::ServerUnaryReactor* Echo(::grpc::CallbackServerContext* context,
                                   const r4c::testing::EchoRequest* request,
                                   r4c::testing::EchoReply* reply) override {
    // clang-format on
    served_.fetch_add(1);
    reply->set_message(request->message());
    if (request->message() == "hold") return new HeldReactor(gate_);
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }

  ::grpc::ServerUnaryReactor* Health(::grpc::CallbackServerContext* context,
                                     const r4c::testing::EchoRequest*,
                                     r4c::testing::EchoReply* reply) override {
    reply->set_message("ok");
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }

  int served() const { return served_.load(); }

 private:
  Gate& gate_;
  std::atomic<int> served_{0};
};

}  // namespace gen_grpc
