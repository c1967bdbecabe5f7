// SPDX-License-Identifier: Apache-2.0
// What r4c::grpc adds to a unary RPC on loopback (r4c's echo service, an empty request, a
// synchronous stub on one thread), each beside the same RPC without it:
//
//   BM_GrpcPlain             no interceptor anywhere (the baseline)
//   BM_GrpcNoopInterceptor   a client interceptor that only calls Proceed(): the cost of gRPC's
//                            interception machinery itself, which any interceptor pays
//   BM_GrpcClientLimit       r4c's client interceptor (an adaptive limit that never fills)
//   BM_GrpcServerLimit       r4c's server guard (admit() in the handler) and server interceptor
//   BM_GrpcServerNoop        a server interceptor that only calls Proceed(): gRPC's server-side
//                            interception machinery, which r4c's server interceptor turns on
//   BM_GrpcBothSides         both
//
// Every benchmark has its own server and channel, built before its timing starts.
//
// A loopback RPC's wall time varies by 10-20% from run to run on a shared machine, far more than
// the 2% the interceptor may cost, so each benchmark also reports CPU: `cpu_time` is the whole
// process's CPU per RPC (MeasureProcessCPUTime: the calling thread, the server's threads and
// gRPC's pollers, i.e. everything the RPC costs), and the counter `caller_cpu_ns` the calling
// thread's alone. Run with repetitions and random interleaving, so that the variants share the
// machine's moods, and compare medians:
//
//   r4c_grpc_bench --benchmark_repetitions=20 --benchmark_enable_random_interleaving=true
//                  --benchmark_report_aggregates_only=true   (one command line)
//
// BM_ServerAdmission measures the server-side admission alone on the calling thread (admit()
// and the permit's end, the path of a handler without the interceptor), to set against a
// unary call's CPU.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "r4c/grpc.hpp"
#include "r4c/testing/echo.grpc.pb.h"

namespace {

using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

class EchoService final : public Echo::Service {
 public:
  explicit EchoService(r4c::AdaptiveLimit* limit) : limit_(limit) {}
  ::grpc::Status Echo(::grpc::ServerContext* context, const EchoRequest* request,
                      EchoReply* reply) override {
    if (limit_ == nullptr) {
      reply->set_message(request->message());
      return ::grpc::Status::OK;
    }
    r4c::grpc::ServerPermit permit = r4c::grpc::admit(context, *limit_);
    if (!permit) return r4c::grpc::rejected(context, *limit_);
    reply->set_message(request->message());
    return ::grpc::Status::OK;
  }

 private:
  r4c::AdaptiveLimit* limit_;
};

class NoopInterceptor final : public ::grpc::experimental::Interceptor {
 public:
  void Intercept(::grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }
};
class NoopFactory final : public ::grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  ::grpc::experimental::Interceptor* CreateClientInterceptor(
      ::grpc::experimental::ClientRpcInfo*) override {
    return new NoopInterceptor();
  }
};

class NoopServerFactory final : public ::grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  ::grpc::experimental::Interceptor* CreateServerInterceptor(
      ::grpc::experimental::ServerRpcInfo*) override {
    return new NoopInterceptor();
  }
};

r4c::AdaptiveLimitConfig roomy() {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(100).max_limit(1000);
  return config;
}

enum class Client { plain, noop, limited };
enum class Server { plain, noop, limited };

void run_echo(benchmark::State& state, Client client_side, Server server_side) {
  r4c::AdaptiveLimit server_limit("bench-server", roomy());
  r4c::AdaptiveLimit client_limit("bench-client", roomy());
  EchoService service(server_side == Server::limited ? &server_limit : nullptr);
  int port = 0;
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  if (server_side == Server::limited)
    builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
  if (server_side == Server::noop) {
    std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>> noop;
    noop.push_back(std::make_unique<NoopServerFactory>());
    builder.experimental().SetInterceptorCreators(std::move(noop));
  }
  std::unique_ptr<::grpc::Server> server = builder.BuildAndStart();
  const std::string target = "127.0.0.1:" + std::to_string(port);

  std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>> chain;
  if (client_side == Client::noop) chain.push_back(std::make_unique<NoopFactory>());
  if (client_side == Client::limited)
    chain = r4c::grpc::client_interceptors(
        r4c::grpc::ClientInterceptorFactory::per_channel(client_limit));
  auto channel = chain.empty() ? ::grpc::CreateChannel(target, ::grpc::InsecureChannelCredentials())
                               : ::grpc::experimental::CreateCustomChannelWithInterceptors(
                                     target, ::grpc::InsecureChannelCredentials(),
                                     ::grpc::ChannelArguments(), std::move(chain));
  auto stub = Echo::NewStub(channel);
  EchoRequest request;
  request.set_message("ping");
  {
    ::grpc::ClientContext warm;
    EchoReply reply;
    if (!stub->Echo(&warm, request, &reply).ok()) state.SkipWithError("the echo server failed");
  }
  const auto caller_cpu = [] {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
  };
  const double caller_start = caller_cpu();
  for (auto _ : state) {
    ::grpc::ClientContext context;
    EchoReply reply;
    const ::grpc::Status status = stub->Echo(&context, request, &reply);
    if (!status.ok()) {
      state.SkipWithError("an echo call failed");
      break;
    }
    benchmark::DoNotOptimize(reply);
  }
  state.counters["caller_cpu_ns"] =
      benchmark::Counter(caller_cpu() - caller_start, benchmark::Counter::kAvgIterations);
  server->Shutdown();
}

// admit() and the permit's end on a context no call owns: the table lookup (no interceptor),
// try_acquire, and the end's deadline and cancellation checks with on_success.
void BM_ServerAdmission(benchmark::State& state) {
  r4c::AdaptiveLimit limit("bench-admission", roomy());
  ::grpc::ServerContext context;
  for (auto _ : state) {
    r4c::grpc::ServerPermit permit = r4c::grpc::admit(&context, limit);
    benchmark::DoNotOptimize(permit);
  }
}

void BM_GrpcPlain(benchmark::State& state) { run_echo(state, Client::plain, Server::plain); }
void BM_GrpcNoopInterceptor(benchmark::State& state) {
  run_echo(state, Client::noop, Server::plain);
}
void BM_GrpcClientLimit(benchmark::State& state) {
  run_echo(state, Client::limited, Server::plain);
}
void BM_GrpcServerNoop(benchmark::State& state) { run_echo(state, Client::plain, Server::noop); }
void BM_GrpcServerLimit(benchmark::State& state) {
  run_echo(state, Client::plain, Server::limited);
}
void BM_GrpcBothSides(benchmark::State& state) {
  run_echo(state, Client::limited, Server::limited);
}

BENCHMARK(BM_GrpcPlain)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GrpcNoopInterceptor)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GrpcClientLimit)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GrpcServerNoop)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GrpcServerLimit)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GrpcBothSides)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_ServerAdmission);

}  // namespace

BENCHMARK_MAIN();
