// SPDX-License-Identifier: Apache-2.0
#include "live.hpp"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "live_grpc.hpp"
#include "policy.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/errors.hpp"
#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "random.hpp"

namespace r4c::sim {
namespace {

using Steady = std::chrono::steady_clock;

// A server copy's workers: a request takes one, first come first served, and gives it back.
// Resizing it is the schedule's capacity change; requests already served keep their worker.
class WorkerGate {
 public:
  explicit WorkerGate(int workers) : workers_(workers) {}

  /// Waits for a worker. False, at once, when the queue is full (`queue_limit` > 0) or the
  /// gate is closed (the run is ending).
  bool acquire(int queue_limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_) return false;
    if (queue_limit > 0 && (busy_ >= workers_ || waiting_ > 0) && waiting_ >= queue_limit) {
      return false;
    }
    const std::uint64_t ticket = next_ticket_++;
    ++waiting_;
    changed_.wait(lock, [&] { return closed_ || (ticket == serving_ && busy_ < workers_); });
    --waiting_;
    if (closed_) return false;
    ++serving_;
    ++busy_;
    changed_.notify_all();  // the next ticket may fit too
    return true;
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_;
    changed_.notify_all();
  }

  void set_workers(int workers) {
    std::lock_guard<std::mutex> lock(mutex_);
    workers_ = workers;
    changed_.notify_all();
  }

  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }

  int waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return waiting_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int workers_;
  int busy_ = 0;
  int waiting_ = 0;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t serving_ = 0;
  bool closed_ = false;
};

// The metrics of the policies a group owns (their instance id is the group's name), with
// their Prometheus names, as a scrape of the run would see them.
std::vector<MetricRow> metrics_of(const std::vector<metrics::Metric>& all,
                                  const std::string& group) {
  std::vector<MetricRow> rows;
  for (const metrics::Metric& metric : all) {
    MetricRow row;
    bool mine = false;
    for (const metrics::Label& label : metric.labels) {
      if (label.name == "name") {
        mine = label.value == group;
      } else if (label.name == "kind") {
        row.kind = label.value;
      } else {
        if (!row.labels.empty()) row.labels += ';';
        row.labels += label.name + "=" + label.value;
      }
    }
    if (!mine) continue;
    row.name = metrics::prometheus_name(metric.name, metric.type);
    row.value = metric.value;
    rows.push_back(std::move(row));
  }
  return rows;
}

// One offered call handed to a client thread.
struct Task {
  Nanos arrival{0};  // since the start
  double size = 1.0;
};

class LiveRun;

// A client thread with its own keep-alive connection.
struct ClientThread {
  std::mutex mutex;
  std::condition_variable wake;
  std::optional<Task> task;
  bool quit = false;
  bool busy = false;  // guarded by the group's idle mutex
  Nanos read_timeout{0};
  std::unique_ptr<httplib::Client> client;  // the HTTP transport's
  std::unique_ptr<LiveGrpcClient> grpc;     // the gRPC transport's
  std::thread thread;
};

class LiveRun {
 public:
  LiveRun(const Scenario& scenario, Recorder& recorder, LiveTransport transport,
          const std::string& watch)
      : scenario_(scenario),
        recorder_(recorder),
        transport_(transport),
        registry_(ResilienceRegistry::builder().build()) {
    for (int s = 0; s < scenario.server_count(); ++s) {
      gates_.push_back(std::make_unique<WorkerGate>(scenario.server.workers));
    }
    for (const GroupSpec& spec : scenario.groups) {
      auto group = std::make_unique<Group>(build_pipeline(registry_, spec));
      groups_.push_back(std::move(group));
    }
    if (!watch.empty()) {
      // The file's text now applies from the start; later changes are polled by control().
      watch_.emplace(registry_.watch_file(watch));
      (void)registry_.reconfigure_file(watch);
    }
  }

  LiveStats run() {
    start_server();
    start_ = Steady::now();
    for (std::size_t g = 0; g < groups_.size(); ++g) start_clients(static_cast<int>(g));
    std::vector<std::thread> dispatchers;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      dispatchers.emplace_back([this, g] { dispatch(static_cast<int>(g)); });
    }
    control();
    for (std::thread& t : dispatchers) t.join();
    drain_and_stop();
    LiveStats stats;
    stats.wall_s = std::chrono::duration<double>(Steady::now() - start_).count();
    stats.port = port_;
    stats.calls = calls_.load();
    stats.client_overflow = overflow_.load();
    stats.reconfigurations = std::move(reconfigurations_);
    return stats;
  }

 private:
  struct Group {
    explicit Group(Pipeline<void> p) : pipeline(std::move(p)) {}
    Pipeline<void> pipeline;
    std::atomic<int> in_flight{0};
    std::uint64_t windows = 0;  // its limit's windows recorded so far (under the recorder lock)
    std::mutex idle_mutex;
    std::vector<ClientThread*> idle;
    std::vector<std::unique_ptr<ClientThread>> clients;
  };

  Nanos elapsed() const { return std::chrono::duration_cast<Nanos>(Steady::now() - start_); }

  void start_server() {
    if (transport_ == LiveTransport::grpc) {
      grpc_server_ = start_live_grpc_server([this](int copy, double size) {
        return copy >= 0 && copy < static_cast<int>(gates_.size()) && serve_call(copy, size);
      });
      port_ = grpc_server_->port();
      return;
    }
    const int threads = static_cast<int>(scenario_.groups.size()) * scenario_.live.clients + 4;
    server_.new_task_queue = [threads] {
      return new httplib::ThreadPool(static_cast<std::size_t>(threads));
    };
    server_.set_keep_alive_max_count(std::numeric_limits<int>::max());
    server_.set_keep_alive_timeout(60);
    server_.set_tcp_nodelay(true);
    server_.Get("/call", [this](const httplib::Request& request, httplib::Response& response) {
      serve(request, response);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw OutputError("cannot listen on 127.0.0.1 (an ephemeral port)");
    listener_ = std::thread([this] { server_.listen_after_bind(); });
  }

  void serve(const httplib::Request& request, httplib::Response& response) {
    int copy = -1;
    double size = 0.0;
    const std::string copy_text = request.get_param_value("server");
    const std::string size_text = request.get_param_value("size");
    if (parse_number(copy_text, copy) != NumberStatus::kOk || copy < 0 ||
        copy >= static_cast<int>(gates_.size()) ||
        parse_number(size_text, size) != NumberStatus::kOk || !(size >= 0.0) || size > 1e6) {
      response.status = 400;
      return;
    }
    if (!serve_call(copy, size)) {
      response.status = 503;
      return;
    }
    response.set_content("ok", "text/plain");
  }

  // One call on server copy `copy`, whichever the transport: false when its queue is full.
  bool serve_call(int copy, double size) {
    WorkerGate& gate = *gates_[static_cast<std::size_t>(copy)];
    if (!gate.acquire(scenario_.server.queue_limit)) return false;
    const ServerState state = scenario_.server.state_at(elapsed());
    const double ns =
        size * static_cast<double>(scenario_.server.service.mean.count()) * state.service_scale;
    std::this_thread::sleep_for(Nanos(static_cast<std::int64_t>(ns)));
    gate.release();
    if (state.extra_latency > Nanos(0)) std::this_thread::sleep_for(state.extra_latency);
    return true;
  }

  void start_clients(int g) {
    Group& group = *groups_[static_cast<std::size_t>(g)];
    const GroupSpec& spec = scenario_.groups[static_cast<std::size_t>(g)];
    // Every read is bounded: the call's own timeout plus a second, or 10 s without one.
    const Nanos read_timeout =
        spec.timeout ? *spec.timeout + std::chrono::seconds(1) : Nanos(std::chrono::seconds(10));
    for (int i = 0; i < scenario_.live.clients; ++i) {
      auto client = std::make_unique<ClientThread>();
      client->read_timeout = read_timeout;
      if (transport_ == LiveTransport::grpc) {
        client->grpc = grpc_server_->client();
        ClientThread* raw = client.get();
        group.idle.push_back(raw);
        group.clients.push_back(std::move(client));
        raw->thread = std::thread([this, g, raw] { client_loop(g, *raw); });
        continue;
      }
      client->client = std::make_unique<httplib::Client>("127.0.0.1", port_);
      client->client->set_keep_alive(true);
      client->client->set_tcp_nodelay(true);
      client->client->set_connection_timeout(std::chrono::seconds(2));
      client->client->set_write_timeout(std::chrono::seconds(2));
      client->client->set_read_timeout(
          std::chrono::duration_cast<std::chrono::microseconds>(read_timeout));
      ClientThread* raw = client.get();
      group.idle.push_back(raw);
      group.clients.push_back(std::move(client));
      raw->thread = std::thread([this, g, raw] { client_loop(g, *raw); });
    }
  }

  void client_loop(int g, ClientThread& self) {
    Group& group = *groups_[static_cast<std::size_t>(g)];
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(self.mutex);
        self.wake.wait(lock, [&] { return self.task.has_value() || self.quit; });
        if (!self.task) return;
        task = *self.task;
        self.task.reset();
      }
      call(g, self, task);
      std::lock_guard<std::mutex> lock(group.idle_mutex);
      self.busy = false;
      group.idle.push_back(&self);
    }
  }

  // One call through the group's pipeline: the policy first, then a GET over the thread's
  // connection (or a unary gRPC call). The timeout's token closes the connection (cancels the
  // gRPC call) when the deadline passes.
  void call(int g, ClientThread& self, const Task& task) {
    Group& group = *groups_[static_cast<std::size_t>(g)];
    const std::string path =
        "/call?server=" + std::to_string(scenario_.server_of(g)) + "&size=" + shortest(task.size);
    bool admitted = false;
    Outcome outcome = Outcome::success;
    try {
      group.pipeline.execute(
          scenario_.groups[static_cast<std::size_t>(g)].cls,
          scenario_.groups[static_cast<std::size_t>(g)].limit_partition(),
          [&](std::stop_token stop) {
            admitted = true;
            group.in_flight.fetch_add(1, std::memory_order_relaxed);
            if (self.grpc) {
              self.grpc->call(scenario_.server_of(g), task.size, stop, self.read_timeout);
              return;
            }
            std::stop_callback on_deadline(stop, [&self] { self.client->stop(); });
            httplib::Result result = self.client->Get(path);
            if (!result)
              throw std::runtime_error("transport: " + httplib::to_string(result.error()));
            if (result->status != 200) {
              throw std::runtime_error("HTTP status " + std::to_string(result->status));
            }
          });
    } catch (const CallTimeoutException&) {
      outcome = Outcome::timeout;
    } catch (...) {
      outcome = Outcome::error;
    }
    const Nanos end = elapsed();
    if (admitted) group.in_flight.fetch_sub(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    if (!admitted) {
      recorder_.rejected(g, task.arrival);
    } else if (stopping_.load()) {
      recorder_.unfinished(g, task.arrival, end);
    } else {
      recorder_.answered(g, task.arrival, end, outcome);
    }
    // Client threads end calls concurrently: a window that closes between this snapshot and
    // the previous one's is counted as missed.
    if (const AdaptiveLimit* limit = group.pipeline.adaptive_limit()) {
      const AdaptiveLimitSnapshot snapshot = limit->snapshot();
      if (snapshot.windows > group.windows) {
        const auto missed = static_cast<std::int64_t>(snapshot.windows - group.windows - 1);
        group.windows = snapshot.windows;
        recorder_.window(
            g,
            WindowRow{end, snapshot.window_latency.count(), snapshot.window_max_in_flight,
                      snapshot.window_dropped, snapshot.limit},
            missed);
      }
    }
  }

  // Open-loop Poisson arrivals, drawn exactly as the simulation draws them.
  void dispatch(int g) {
    Group& group = *groups_[static_cast<std::size_t>(g)];
    const GroupSpec& spec = scenario_.groups[static_cast<std::size_t>(g)];
    Rng rng(scenario_.seed, scenario_.isolated ? 0 : static_cast<std::uint64_t>(g));
    const std::int64_t end = scenario_.duration.count();
    std::size_t next_change = 0;
    std::int64_t now = 0;
    constexpr std::int64_t kNone = -1;
    std::int64_t next = kNone;  // the next arrival
    auto draw = [&] {
      next = kNone;
      const double rate = spec.rate_at(Nanos(now));
      if (!(rate > 0.0)) return;
      const auto at = now + static_cast<std::int64_t>(std::llround(rng.exponential() / rate * 1e9));
      if (at <= end) next = at;
    };
    draw();
    for (;;) {
      const std::int64_t change_at = next_change < spec.changes.size()
                                         ? spec.changes[next_change].at.count()
                                         : std::numeric_limits<std::int64_t>::max();
      // Changes come first at equal times, as in the simulation.
      if (change_at <= end && (next == kNone || change_at <= next)) {
        now = change_at;
        ++next_change;
        draw();
        continue;
      }
      if (next == kNone) return;
      now = next;
      std::this_thread::sleep_until(start_ + Nanos(now));
      if (offered_.fetch_add(1) >= scenario_.live.max_calls) return;
      Task task{elapsed(), standard_draw(rng, scenario_.server.service)};
      draw();
      calls_.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(recorder_mutex_);
        recorder_.offered(g, task.arrival);
      }
      ClientThread* client = nullptr;
      {
        std::lock_guard<std::mutex> lock(group.idle_mutex);
        if (!group.idle.empty()) {
          client = group.idle.back();
          group.idle.pop_back();
          client->busy = true;
        }
      }
      if (client == nullptr) {
        overflow_.fetch_add(1);
        std::lock_guard<std::mutex> lock(recorder_mutex_);
        recorder_.rejected(g, task.arrival);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(client->mutex);
        client->task = task;
      }
      client->wake.notify_one();
    }
  }

  // Applies the server's changes at their times and samples every group each interval, until
  // the duration.
  void control() {
    const std::int64_t end = scenario_.duration.count();
    const std::int64_t interval = scenario_.interval.count();
    std::size_t next_change = 0;
    std::int64_t next_sample = interval;
    const auto& changes = scenario_.server.changes;
    while (next_sample <= end) {
      const std::int64_t change_at = next_change < changes.size()
                                         ? changes[next_change].at.count()
                                         : std::numeric_limits<std::int64_t>::max();
      if (change_at <= next_sample) {
        std::this_thread::sleep_until(start_ + Nanos(change_at));
        const int workers = scenario_.server.state_at(Nanos(change_at)).workers;
        for (auto& gate : gates_) gate->set_workers(workers);
        ++next_change;
        continue;
      }
      std::this_thread::sleep_until(start_ + Nanos(next_sample));
      poll_watch();
      // The timeline's limit is the metric a Prometheus scrape would read at this instant.
      const std::vector<metrics::Metric> all = metrics::collect(registry_);
      // The adaptive limit's gauge (docs/observability.md), under the kind's metrics name.
      static const std::string kLimitGauge = metrics::prometheus_name(
          "r4c." + std::string(AdaptiveLimitKind::kNames.metrics) + ".limit",
          metrics::MetricType::gauge);
      std::lock_guard<std::mutex> lock(recorder_mutex_);
      for (std::size_t g = 0; g < groups_.size(); ++g) {
        const Group& group = *groups_[g];
        std::vector<MetricRow> rows = metrics_of(all, scenario_.groups[g].name);
        std::optional<int> limit;
        for (const MetricRow& row : rows) {
          if (row.name == kLimitGauge) limit = static_cast<int>(row.value);
        }
        recorder_.sample(
            static_cast<int>(g), Nanos(next_sample), limit,
            group.in_flight.load(std::memory_order_relaxed),
            gates_[static_cast<std::size_t>(scenario_.server_of(static_cast<int>(g)))]->waiting());
        recorder_.metrics(static_cast<int>(g), Nanos(next_sample), std::move(rows));
      }
      next_sample += interval;
    }
  }

  // A change of the watched file reconfigures the registry while the calls go on.
  void poll_watch() {
    if (!watch_) return;
    const std::string at =
        "at " + shortest(std::chrono::duration<double>(elapsed()).count()) + " s: ";
    try {
      if (const auto changes = watch_->poll()) {
        for (const SettingChange& c : *changes) {
          reconfigurations_.push_back(at + c.kind + " " + c.id + " " + c.key + " " + c.old_value +
                                      " -> " + c.new_value);
        }
        if (changes->empty()) reconfigurations_.push_back(at + "no live setting changed");
      }
    } catch (const ConfigException& e) {
      reconfigurations_.push_back(at + "rejected: " + e.what());
    }
  }

  bool all_idle() {
    for (auto& group : groups_) {
      std::lock_guard<std::mutex> lock(group->idle_mutex);
      if (group->idle.size() != group->clients.size()) return false;
    }
    return true;
  }

  void drain_and_stop() {
    const auto deadline = Steady::now() + scenario_.live.drain;
    while (!all_idle() && Steady::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Calls still running are cut short and counted as unfinished.
    stopping_.store(true);
    for (auto& gate : gates_) gate->close();
    for (auto& group : groups_) {
      for (auto& client : group->clients) {
        {
          std::lock_guard<std::mutex> lock(client->mutex);
          client->quit = true;
        }
        client->wake.notify_one();
        if (client->grpc) {
          client->grpc->cancel();
        } else {
          client->client->stop();
        }
      }
    }
    for (auto& group : groups_) {
      for (auto& client : group->clients) client->thread.join();
    }
    if (grpc_server_) {
      grpc_server_->stop();
    } else {
      server_.stop();
      listener_.join();
    }
  }

  const Scenario& scenario_;
  Recorder& recorder_;
  const LiveTransport transport_;
  ResilienceRegistry registry_;
  std::optional<ConfigFileWatch> watch_;
  std::vector<std::string> reconfigurations_;  // control()'s thread only
  std::vector<std::unique_ptr<WorkerGate>> gates_;
  std::vector<std::unique_ptr<Group>> groups_;
  httplib::Server server_;
  std::thread listener_;
  std::unique_ptr<LiveGrpcServer> grpc_server_;
  int port_ = 0;
  Steady::time_point start_;
  std::mutex recorder_mutex_;
  std::atomic<std::int64_t> offered_{0};
  std::atomic<std::int64_t> calls_{0};
  std::atomic<std::int64_t> overflow_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace

LiveStats run_live_scenario(const Scenario& scenario, Recorder& recorder, LiveTransport transport,
                            const std::string& watch) {
  LiveRun run(scenario, recorder, transport, watch);
  return run.run();
}

}  // namespace r4c::sim
