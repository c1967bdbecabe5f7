// SPDX-License-Identifier: Apache-2.0
// capacity_demo: an adaptive limit finding, then following, a dependency whose capacity changes.
//
// The dependency is an in-process server with a number of workers. A call that finds a free
// worker is served in a fixed service time; calls beyond the workers wait their turn, so latency
// grows with the queue. Client threads call it through a real r4c::AdaptiveLimit (SystemClock,
// real threads) and retry shortly after a rejection. Halfway through, the server loses most of
// its workers; later it gets most of them back. Every half second the demo prints the limit
// beside the server's workers: the limit climbs until the server queues, drops when the workers
// drop, and climbs again when they come back.
//
//   r4c_capacity_demo [--seconds N]   (default 24; 3 .. 600)
//
// The exit status never depends on timing: on a busy machine the numbers move less cleanly, but
// the demo still ends by itself with status 0.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <r4c/r4c.hpp>

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr int kDefaultSeconds = 24;
constexpr int kMinSeconds = 3;
constexpr int kMaxSeconds = 600;
constexpr microseconds kServiceTime = milliseconds(5);
constexpr int kClients = 48;  // more than the limit ever needs, fewer than r4c's 64 thread slots
constexpr microseconds kRetryPause = milliseconds(1);
constexpr milliseconds kReportEvery = milliseconds(500);

// The server's capacity over the run: from a fraction of the run on, this many workers.
struct Phase {
  double from;
  int workers;
};
constexpr Phase kPhases[] = {{0.0, 16}, {1.0 / 3.0, 4}, {2.0 / 3.0, 12}};
constexpr int kPhaseCount = static_cast<int>(std::size(kPhases));

// A dependency with `workers` workers serving one call each in kServiceTime, first come first
// served. Each call books the worker that frees first and sleeps until its booked finish, so the
// queueing is exact and costs no CPU: a real queue of sleeping threads would add scheduler noise.
class Server {
 public:
  explicit Server(int workers) : free_at_(workers, SteadyClock::now()) {}

  void call() {
    SteadyClock::time_point finish;
    {
      std::lock_guard lock(mutex_);
      auto worker = std::min_element(free_at_.begin(), free_at_.end());
      finish = std::max(SteadyClock::now(), *worker) + kServiceTime;
      *worker = finish;
    }
    std::this_thread::sleep_until(finish);
    served_.fetch_add(1, std::memory_order_relaxed);
  }

  // Calls already booked on a removed worker are still served: capacity shrinks, work survives.
  void set_workers(int workers) {
    std::lock_guard lock(mutex_);
    free_at_.resize(static_cast<std::size_t>(workers), SteadyClock::now());
  }

  int workers() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(free_at_.size());
  }

  std::uint64_t served() const { return served_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::vector<SteadyClock::time_point> free_at_;  // when each worker is next free
  std::atomic<std::uint64_t> served_{0};
};

void run_client(r4c::AdaptiveLimit& limit, Server& server, const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed)) {
    try {
      limit.execute([&] { server.call(); });
    } catch (const r4c::LimitExceededException&) {
      std::this_thread::sleep_for(kRetryPause);  // shed at once; a caller would retry later
    }
  }
}

// What one capacity phase looked like, for the summary.
struct PhaseStats {
  int workers = 0;
  bool tracked = false;  // whether min_limit and max_limit hold a value yet
  int min_limit = 0;     // over the second half of the phase, once the limit had time to move
  int max_limit = 0;
  int end_limit = 0;
  std::uint64_t served = 0;
  std::uint64_t rejected = 0;
  double seconds = 0;
  std::chrono::nanoseconds end_latency{0};
};

double ms(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e6; }

int parse_seconds(int argc, char** argv) {
  int seconds = kDefaultSeconds;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      char* end = nullptr;
      const long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value < kMinSeconds || value > kMaxSeconds) return -1;
      seconds = static_cast<int>(value);
    } else {
      return -1;
    }
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = parse_seconds(argc, argv);
  if (seconds < 0) {
    std::fprintf(stderr, "usage: %s [--seconds N]   (N: whole seconds, %d .. %d; default %d)\n",
                 argv[0], kMinSeconds, kMaxSeconds, kDefaultSeconds);
    return 2;
  }

  // Short windows so the limit moves several times a second. long_window 6000 keeps the
  // long-term latency average's memory near ten minutes of 100 ms windows (600 one-second windows
  // by default), so the server's usual latency stays the reference through the run. A small
  // queue_size because Gradient2 does not cut much below 2 x queue_size from latency alone: with
  // the default 4 it would hold near 8 even when the server has 4 workers.
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(10)
      .window(milliseconds(100))
      .min_window_samples(10)
      .long_window(6000)
      .queue_size(2);
  r4c::AdaptiveLimit limit("capacity-demo", config);
  const r4c::AdaptiveLimitHandle handle = limit.handle();
  Server server(kPhases[0].workers);

  std::printf(
      "r4c capacity demo: %d client threads call a server through an adaptive limit for %d s.\n"
      "  server:  each worker serves a call in %lld ms, extra calls queue; workers %d, then %d, "
      "then %d\n"
      "  limit:   gradient2, initial_limit %d, window %lld ms, min_window_samples %d,\n"
      "           long_window %d, queue_size %d (Gradient2's floor is about 2 x queue_size),\n"
      "           rtt_tolerance %.1f\n"
      "  clients: call again at once after a reply, %lld ms after a rejection\n"
      "Gradient2 lets the server queue until latency reaches rtt_tolerance x its long-term\n"
      "average, so the limit should settle near %.1f x workers (plus queue_size), fall when the\n"
      "workers fall and climb again when they return.\n\n",
      kClients, seconds, static_cast<long long>(kServiceTime.count() / 1000), kPhases[0].workers,
      kPhases[1].workers, kPhases[2].workers, config.initial_limit(),
      static_cast<long long>(duration_cast<milliseconds>(config.window()).count()),
      config.min_window_samples(), config.long_window(), config.queue_size(),
      config.rtt_tolerance(), static_cast<long long>(kRetryPause.count() / 1000),
      config.rtt_tolerance());
  std::printf("%7s %8s %6s %10s %8s %15s %10s %9s %9s\n", "time", "workers", "limit", "in flight",
              "windows", "window latency", "long-term", "served/s", "rejected");

  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back(run_client, std::ref(limit), std::ref(server), std::cref(stop));
  }

  const auto start = SteadyClock::now();
  const auto total = std::chrono::seconds(seconds);
  PhaseStats phases[kPhaseCount];
  int phase = 0;
  phases[0].workers = kPhases[0].workers;
  std::uint64_t phase_served_at = 0;
  std::uint64_t phase_rejected_at = 0;
  auto phase_started = start;
  std::uint64_t last_served = 0;
  auto last_tick = start;

  auto close_phase = [&](SteadyClock::time_point now, const r4c::AdaptiveLimitSnapshot& snap) {
    PhaseStats& stats = phases[phase];
    stats.end_limit = snap.limit;
    stats.end_latency = snap.window_latency;
    stats.served = server.served() - phase_served_at;
    stats.rejected = snap.rejected - phase_rejected_at;
    stats.seconds = std::chrono::duration<double>(now - phase_started).count();
    phase_served_at = server.served();
    phase_rejected_at = snap.rejected;
    phase_started = now;
  };

  for (int tick = 1;; ++tick) {
    const auto due = start + tick * kReportEvery;
    if (due > start + total) break;
    std::this_thread::sleep_until(due);
    const auto now = SteadyClock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const r4c::AdaptiveLimitSnapshot snap = handle.snapshot();

    // Track the limit over the second half of the phase, then switch capacity when it is time.
    const double phase_end =
        (phase + 1 < kPhaseCount ? kPhases[phase + 1].from : 1.0) * static_cast<double>(seconds);
    const double phase_mid = (kPhases[phase].from * seconds + phase_end) / 2.0;
    if (elapsed >= phase_mid) {
      PhaseStats& stats = phases[phase];
      if (!stats.tracked) {
        stats.tracked = true;
        stats.min_limit = stats.max_limit = snap.limit;
      }
      stats.min_limit = std::min(stats.min_limit, snap.limit);
      stats.max_limit = std::max(stats.max_limit, snap.limit);
    }

    const std::uint64_t served = server.served();
    std::printf("%6.1fs %8d %6d %10d %8llu %12.1f ms %7.1f ms %9.0f %9llu\n", elapsed,
                server.workers(), snap.limit, snap.in_flight,
                static_cast<unsigned long long>(snap.windows), ms(snap.window_latency),
                ms(snap.long_latency),
                static_cast<double>(served - last_served) /
                    std::chrono::duration<double>(now - last_tick).count(),
                static_cast<unsigned long long>(snap.rejected));
    std::fflush(stdout);
    last_served = served;
    last_tick = now;

    if (phase + 1 < kPhaseCount && elapsed + 0.25 >= kPhases[phase + 1].from * seconds) {
      close_phase(now, snap);
      ++phase;
      server.set_workers(kPhases[phase].workers);
      phases[phase].workers = kPhases[phase].workers;
      std::printf("        --- the server now has %d workers ---\n", kPhases[phase].workers);
    }
  }

  stop.store(true, std::memory_order_relaxed);
  for (std::thread& client : clients) client.join();
  const r4c::AdaptiveLimitSnapshot snap = handle.snapshot();
  close_phase(SteadyClock::now(), snap);

  std::printf("\nsummary (the limit's range over the second half of each phase):\n");
  std::printf("%8s %11s %13s %10s %9s %15s %9s\n", "workers", "capacity/s", "limit range",
              "end limit", "served/s", "window latency", "rejected");
  for (const PhaseStats& stats : phases) {
    if (stats.workers == 0) continue;
    char range[32];
    std::snprintf(range, sizeof range, "%d..%d", stats.min_limit, stats.max_limit);
    std::printf("%8d %11lld %13s %10d %9.0f %12.1f ms %9llu\n", stats.workers,
                static_cast<long long>(stats.workers * (std::chrono::seconds(1) / kServiceTime)),
                range, stats.end_limit,
                stats.seconds > 0 ? static_cast<double>(stats.served) / stats.seconds : 0.0,
                ms(stats.end_latency), static_cast<unsigned long long>(stats.rejected));
  }
  std::printf(
      "\n%llu windows, %llu of them moved the limit; %llu samples; %llu calls rejected without "
      "reaching the server.\n",
      static_cast<unsigned long long>(snap.windows),
      static_cast<unsigned long long>(snap.limit_changes),
      static_cast<unsigned long long>(snap.samples),
      static_cast<unsigned long long>(snap.rejected));
  return 0;
}
