// SPDX-License-Identifier: Apache-2.0
#include "sim.hpp"

#include <algorithm>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <cmath>
#include <deque>
#include <exception>
#include <memory>
#include <queue>
#include <system_error>
#include <utility>
#include <vector>

#include "policy.hpp"
#include "r4c/asio.hpp"
#include "r4c/clock.hpp"
#include "r4c/errors.hpp"
#include "r4c/registry.hpp"
#include "random.hpp"

namespace r4c::sim {
namespace {

// An operation's completion handler, kept by the server while it holds the call. The handler's
// type is r4c's; the server only completes it (or, at the end of a run, drops it).
class PendingHandler {
 public:
  virtual ~PendingHandler() = default;
  virtual void complete(std::error_code code) = 0;
};

template <class Handler>
class HandlerBox final : public PendingHandler {
 public:
  explicit HandlerBox(Handler handler) : handler_(std::move(handler)) {}
  void complete(std::error_code code) override { std::move(handler_)(code); }

 private:
  Handler handler_;
};

struct Server;

// One offered call, from its arrival until both its client was answered and the server let go
// of it (a call whose client gave up may still be served).
struct Call {
  int group = 0;
  Nanos start{0};
  double size = 1.0;  // the standardized service time draw
  Server* server = nullptr;
  std::unique_ptr<PendingHandler> handler;  // while the server holds the call
  asio::cancellation_slot slot;
  bool admitted = false;  // the policy let it through: it reached the server
  bool answered = false;  // its client's handler ran
  bool at_server = false;
};

struct Server {
  ServerState state;
  int busy = 0;
  std::deque<Call*> queue;
  int waiting = 0;  // the queue's length
};

enum class Kind : std::uint8_t { change, arrival, service_done, respond, fail, wake, sample };

struct Event {
  std::int64_t time;
  std::uint8_t order;  // at one time: changes first, samples last
  std::uint64_t seq;   // then in the order they were scheduled
  Kind kind;
  int group;                 // arrival: the group; change: the change's index
  std::uint64_t generation;  // arrival: the group's arrival stream it belongs to
  Call* call;
  std::error_code code;  // fail: what the call fails with

  bool operator>(const Event& other) const noexcept {
    if (time != other.time) return time > other.time;
    if (order != other.order) return order > other.order;
    return seq > other.seq;
  }
};

// The schedule's changes, server and group ones, in time order.
struct Change {
  Nanos at;
  int group;  // -1: the server's
  std::size_t index;
};

class Simulation {
 public:
  Simulation(const Scenario& scenario, Recorder& recorder)
      : scenario_(scenario),
        recorder_(recorder),
        clock_(std::make_shared<ManualClock>()),
        registry_(ResilienceRegistry::builder().clock(clock_).build()),
        io_(ASIO_CONCURRENCY_HINT_UNSAFE),  // one thread: no locking
        work_(asio::make_work_guard(io_)) {
    servers_.resize(static_cast<std::size_t>(scenario.server_count()));
    for (Server& server : servers_) server.state = scenario.server.state_at(Nanos(0));
    for (std::size_t g = 0; g < scenario.groups.size(); ++g) {
      const GroupSpec& spec = scenario.groups[g];
      // Isolated groups see the same offered calls, for a like-for-like comparison; groups
      // sharing a server get independent streams.
      // Each limit's own random source (VEGAS's jitter, delay_target's pacing) is seeded from
      // the scenario's seed, so that a run is reproducible.
      GroupSpec seeded = spec;
      if (seeded.limit.random_seed() == 0) {
        // Groups sharing a limit build it alike: the random seed of the first of them.
        std::size_t first = 0;
        while (first < g && (spec.shared_limit.empty() ||
                             scenario.groups[first].shared_limit != spec.shared_limit)) {
          ++first;
        }
        seeded.limit.random_seed(scenario.seed * 0x9e3779b97f4a7c15ULL + first + 1);
      }
      groups_.emplace_back(build_pipeline(registry_, seeded),
                           Rng(scenario.seed, scenario.stream_of(static_cast<int>(g))));
    }
    for (std::size_t i = 0; i < scenario.server.changes.size(); ++i) {
      changes_.push_back({scenario.server.changes[i].at, -1, i});
    }
    for (std::size_t g = 0; g < scenario.groups.size(); ++g) {
      for (std::size_t i = 0; i < scenario.groups[g].changes.size(); ++i) {
        changes_.push_back({scenario.groups[g].changes[i].at, static_cast<int>(g), i});
      }
    }
  }

  ~Simulation() {
    // Drops whatever is still pending (r4c's handlers are destroyed uncalled, which frees their
    // state) before the io_context, the registry and the clock go.
    stopping_ = true;
    for (auto& call : calls_) {
      if (!call->handler) continue;
      call->slot.clear();
      call->slot = asio::cancellation_slot();
      call->handler.reset();
    }
    work_.reset();
    io_.poll();
  }

  SimStats run() {
    for (std::size_t i = 0; i < changes_.size(); ++i) {
      push(changes_[i].at, Kind::change, static_cast<int>(i), nullptr);
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) schedule_arrival(static_cast<int>(g));
    push(scenario_.interval, Kind::sample, 0, nullptr);

    const std::int64_t end = scenario_.duration.count();
    while (!events_.empty() && events_.top().time <= end) {
      const Event event = events_.top();
      events_.pop();
      // The run covers [0, duration): at its end only the last sample is taken.
      if (event.time == end && event.kind != Kind::sample) continue;
      if (event.time > now_) {
        // Every deadline r4c armed has an event of its own (a wake), so this advance passes
        // none: each fires, and its answer runs, at its own time.
        clock_->advance(Nanos(event.time - now_));
        now_ = event.time;
        io_.poll();
      }
      handle(event);
      io_.poll();
      ++stats_.events;
    }
    if (now_ < end) {
      clock_->advance(Nanos(end - now_));
      now_ = end;
      io_.poll();
    }
    for (const auto& call : calls_) {
      if (call->admitted && !call->answered && call->start <= Nanos(end)) {
        recorder_.unfinished(call->group, call->start, Nanos(end));
      }
    }
    return stats_;
  }

  // The operation each call's pipeline starts: the call queues at its server.
  template <class Handler>
  void submit(Call* call, Handler&& handler) {
    const GroupSpec& spec = scenario_.groups[static_cast<std::size_t>(call->group)];
    if (spec.timeout && call->start < Nanos(now_)) {
      // Granted after a wait: its timeout starts now (arrive() armed those admitted at once).
      push(Nanos(now_) + *spec.timeout, Kind::wake, call->group, nullptr);
    }
    call->admitted = true;
    call->at_server = true;
    ++groups_[static_cast<std::size_t>(call->group)].in_flight;
    call->slot = asio::get_associated_cancellation_slot(handler);
    call->handler = std::make_unique<HandlerBox<std::decay_t<Handler>>>(std::move(handler));
    if (call->slot.is_connected()) {
      call->slot.assign([this, call](asio::cancellation_type) { cancelled(call); });
    }
    Server& server = *call->server;
    if (server.busy < server.state.workers) {
      begin_service(call);
    } else if (scenario_.server.queue_limit > 0 && server.waiting >= scenario_.server.queue_limit) {
      // Refused by the server (a 503): answered now, as its own event, not inside the call.
      push(now_, Kind::fail, 0, call, 0,
           std::make_error_code(std::errc::resource_unavailable_try_again));
    } else {
      server.queue.push_back(call);
      ++server.waiting;
    }
  }

  // The client's side: the pipeline answered.
  void answered(Call* call, const std::exception_ptr& failure) {
    if (stopping_) return;
    call->answered = true;
    GroupState& group = groups_[static_cast<std::size_t>(call->group)];
    if (!call->admitted) {
      recorder_.rejected(call->group, Nanos(now_));
    } else {
      --group.in_flight;
      Outcome outcome = Outcome::success;
      if (failure) outcome = is_timeout(group, failure) ? Outcome::timeout : Outcome::error;
      recorder_.answered(call->group, call->start, Nanos(now_), outcome);
    }
    // A window closes only when a call ends, and at most one per instant (the next one ends a
    // whole window later): looking after each answer sees every window.
    if (const AdaptiveLimit* limit = group.pipeline.adaptive_limit()) {
      const AdaptiveLimitSnapshot snapshot = limit->snapshot();
      if (snapshot.windows != group.windows) {
        const auto missed = static_cast<std::int64_t>(snapshot.windows - group.windows - 1);
        group.windows = snapshot.windows;
        recorder_.window(
            call->group,
            WindowRow{Nanos(now_), snapshot.window_latency.count(), snapshot.window_max_in_flight,
                      snapshot.window_dropped, snapshot.limit},
            missed);
      }
    }
    release_if_done(call);
  }

 private:
  struct GroupState {
    GroupState(Pipeline<void> p, Rng r) : pipeline(std::move(p)), rng(r) {}
    Pipeline<void> pipeline;
    Rng rng;
    int in_flight = 0;
    std::uint64_t generation = 0;  // of its arrival stream: a rate change starts a new one
    std::exception_ptr timeout;    // its timeout's exception object, once seen
    std::uint64_t windows = 0;     // its limit's windows recorded so far
  };

  // The operation given to the pipeline.
  struct Operation {
    Simulation* sim;
    Call* call;
    template <class Handler>
    void operator()(Handler&& handler) const {
      sim->submit(call, std::forward<Handler>(handler));
    }
  };
  // The caller's completion handler.
  struct Answer {
    Simulation* sim;
    Call* call;
    void operator()(std::exception_ptr failure) const { sim->answered(call, failure); }
  };

  void push(std::int64_t time, Kind kind, int group, Call* call, std::uint64_t generation = 0,
            std::error_code code = {}) {
    std::uint8_t order = 1;
    if (kind == Kind::change) order = 0;
    if (kind == Kind::sample) order = 2;
    events_.push(Event{time, order, seq_++, kind, group, generation, call, code});
  }
  void push(Nanos time, Kind kind, int group, Call* call) { push(time.count(), kind, group, call); }

  void handle(const Event& event) {
    switch (event.kind) {
      case Kind::change:
        apply_change(changes_[static_cast<std::size_t>(event.group)]);
        break;
      case Kind::arrival:
        if (event.generation == groups_[static_cast<std::size_t>(event.group)].generation) {
          arrive(event.group);
        }
        break;
      case Kind::service_done:
        service_done(event.call);
        break;
      case Kind::respond:
        respond(event.call, {});
        break;
      case Kind::fail:
        respond(event.call, event.code);
        break;
      case Kind::wake:
        break;  // the clock has reached a deadline: r4c's timer fired in advance()
      case Kind::sample:
        sample();
        break;
    }
  }

  void schedule_arrival(int g) {
    GroupState& group = groups_[static_cast<std::size_t>(g)];
    const double rate = scenario_.groups[static_cast<std::size_t>(g)].rate_at(Nanos(now_));
    if (!(rate > 0.0)) return;
    const double gap_ns = group.rng.exponential() / rate * 1e9;
    const auto at = now_ + static_cast<std::int64_t>(std::llround(gap_ns));
    if (at > scenario_.duration.count()) return;
    push(at, Kind::arrival, g, nullptr, group.generation);
  }

  void arrive(int g) {
    GroupState& group = groups_[static_cast<std::size_t>(g)];
    const GroupSpec& spec = scenario_.groups[static_cast<std::size_t>(g)];
    Call* call = new_call();
    call->group = g;
    call->start = Nanos(now_);
    call->size = standard_draw(group.rng, scenario_.server.service);
    // The heavy tail draws only when there is one, so that other scenarios keep their streams.
    if (scenario_.server.service.tail_share > 0.0 &&
        group.rng.uniform() < scenario_.server.service.tail_share) {
      call->size *= scenario_.server.service.tail_factor;
    }
    call->server = &servers_[static_cast<std::size_t>(scenario_.server_of(g))];
    ++stats_.calls;
    recorder_.offered(g, Nanos(now_));
    schedule_arrival(g);
    group.pipeline.async_execute(spec.cls, spec.limit_partition(), Operation{this, call},
                                 asio::bind_executor(io_, Answer{this, call}));
    if (spec.timeout && call->admitted) push(Nanos(now_) + *spec.timeout, Kind::wake, g, nullptr);
    if (!call->admitted && !call->answered && spec.limit.max_wait() > Nanos(0)) {
      // It waits for a slot: its wait's deadline gets an event (a grant comes with a release).
      push(Nanos(now_) + spec.limit.max_wait(), Kind::wake, g, nullptr);
    }
  }

  void begin_service(Call* call) {
    Server& server = *call->server;
    ++server.busy;
    const double mean_ns = static_cast<double>(scenario_.server.service.mean.count());
    const double ns = call->size * mean_ns * server.state.service_scale *
                      scenario_.server.contention_at(server.busy);
    push(now_ + static_cast<std::int64_t>(std::llround(ns)), Kind::service_done, 0, call);
  }

  void service_done(Call* call) {
    Server& server = *call->server;
    --server.busy;
    if (server.state.extra_latency > Nanos(0)) {
      push(Nanos(now_) + server.state.extra_latency, Kind::respond, 0, call);
    } else {
      respond(call, {});
    }
    start_waiting(server);
  }

  void start_waiting(Server& server) {
    while (server.busy < server.state.workers && !server.queue.empty()) {
      Call* next = server.queue.front();
      server.queue.pop_front();
      --server.waiting;
      begin_service(next);
    }
  }

  // The server answers the call (or refuses it, or lets a dropped one go).
  void respond(Call* call, std::error_code code) {
    call->at_server = false;
    // The slot belongs to r4c's call state, which completing the handler may free.
    call->slot.clear();
    call->slot = asio::cancellation_slot();
    std::unique_ptr<PendingHandler> handler = std::move(call->handler);
    handler->complete(code);
    release_if_done(call);
  }

  // Its client gave up (the timeout fired). The server keeps serving it, unless it is still
  // queued and the server drops abandoned calls: then it leaves the queue, and its operation
  // completes with operation_aborted as its own event (not inside r4c's cancellation).
  void cancelled(Call* call) {
    if (scenario_.server.abandoned != Abandoned::drop) return;
    Server& server = *call->server;
    const auto it = std::find(server.queue.begin(), server.queue.end(), call);
    if (it == server.queue.end()) return;  // in service: it is served
    server.queue.erase(it);
    --server.waiting;
    push(now_, Kind::fail, 0, call, 0, asio::error::operation_aborted);
  }

  void apply_change(const Change& change) {
    if (change.group >= 0) {
      GroupState& group = groups_[static_cast<std::size_t>(change.group)];
      ++group.generation;  // Poisson arrivals are memoryless: draw the next at the new rate
      schedule_arrival(change.group);
      return;
    }
    for (Server& server : servers_) {
      server.state = scenario_.server.state_at(Nanos(now_));
      start_waiting(server);
    }
  }

  void sample() {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const GroupState& group = groups_[g];
      const Server& server =
          servers_[static_cast<std::size_t>(scenario_.server_of(static_cast<int>(g)))];
      recorder_.sample(static_cast<int>(g), Nanos(now_),
                       current_limit(group.pipeline, scenario_.groups[g]), group.in_flight,
                       server.waiting);
    }
    const std::int64_t next = now_ + scenario_.interval.count();
    if (next <= scenario_.duration.count()) push(next, Kind::sample, 0, nullptr);
  }

  bool is_timeout(GroupState& group, const std::exception_ptr& failure) {
    if (failure == group.timeout) return true;
    try {
      std::rethrow_exception(failure);
    } catch (const CallTimeoutException&) {
      group.timeout = failure;  // one object per timeout: later ones compare by pointer
      return true;
    } catch (...) {
      return false;
    }
  }

  Call* new_call() {
    if (free_.empty()) {
      calls_.push_back(std::make_unique<Call>());
      return calls_.back().get();
    }
    Call* call = free_.back();
    free_.pop_back();
    *call = Call{};
    return call;
  }

  void release_if_done(Call* call) {
    if (call->answered && !call->at_server) free_.push_back(call);
  }

  using EventQueue = std::priority_queue<Event, std::vector<Event>, std::greater<>>;

  const Scenario& scenario_;
  Recorder& recorder_;
  std::shared_ptr<ManualClock> clock_;
  ResilienceRegistry registry_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<Server> servers_;
  std::vector<GroupState> groups_;
  std::vector<Change> changes_;
  std::vector<std::unique_ptr<Call>> calls_;
  std::vector<Call*> free_;
  EventQueue events_;
  std::int64_t now_ = 0;
  std::uint64_t seq_ = 0;
  SimStats stats_;
  bool stopping_ = false;
};

}  // namespace

SimStats simulate(const Scenario& scenario, Recorder& recorder) {
  Simulation simulation(scenario, recorder);
  return simulation.run();
}

}  // namespace r4c::sim
