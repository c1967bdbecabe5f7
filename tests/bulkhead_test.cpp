// SPDX-License-Identifier: Apache-2.0
#include "r4c/bulkhead.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using ::testing::HasSubstr;

TEST(BulkheadTest, AdmitsAtMostMaxConcurrentCalls) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
  r4c::BulkheadPermit a = bulkhead.try_acquire();
  r4c::BulkheadPermit b = bulkhead.try_acquire();
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(bulkhead.try_acquire());
  EXPECT_EQ(bulkhead.in_flight(), 2);
  a.release();
  EXPECT_EQ(bulkhead.in_flight(), 1);
  EXPECT_TRUE(bulkhead.try_acquire());  // a temporary: released at once
  EXPECT_EQ(bulkhead.in_flight(), 1);
}

TEST(BulkheadTest, AFullBulkheadThrowsAtOnceWithoutCallingTheMethod) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(1));
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  bool called = false;
  r4c::test::expect_one_preallocated_refusal<r4c::BulkheadFullException>(
      [&] { bulkhead.execute([&] { called = true; }); },
      [](const r4c::BulkheadFullException& e) {
        EXPECT_THAT(e.what(), HasSubstr("bulkhead 'pool' is full (max_concurrent 1)"));
      });
  EXPECT_FALSE(called);
  EXPECT_EQ(bulkhead.snapshot().rejected, 2u);
}

TEST(BulkheadTest, ExecuteReturnsTheSlotWhenTheCallReturnsOrThrows) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(1));
  EXPECT_EQ(bulkhead.execute([&] { return bulkhead.in_flight(); }), 1);
  EXPECT_THROW(bulkhead.execute([] { throw std::runtime_error("x"); }), std::runtime_error);
  EXPECT_EQ(bulkhead.in_flight(), 0);
}

TEST(BulkheadTest, ASnapshotShowsTheBulkhead) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(3));
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  const r4c::BulkheadSnapshot snap = bulkhead.handle().snapshot();
  EXPECT_EQ(snap.max_concurrent, 3);
  EXPECT_EQ(snap.in_flight, 1);
  EXPECT_EQ(snap.available, 2);
  EXPECT_EQ(snap.rejected, 0u);
  EXPECT_EQ(bulkhead.handle().instance_id(), "pool");
}

TEST(BulkheadTest, AMaxConcurrentBelowOneIsAtr003) {
  try {
    r4c::BulkheadConfig().max_concurrent(0);
    FAIL();
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-ATR-003");
    EXPECT_THAT(e.what(), HasSubstr("max_concurrent is 0; valid: an integer >= 1"));
  }
  EXPECT_EQ(r4c::BulkheadConfig().max_concurrent(), 25);
}

TEST(BulkheadTest, PermitsMoveTheirSlot) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
  r4c::BulkheadPermit a = bulkhead.try_acquire();
  r4c::BulkheadPermit b = std::move(a);
  EXPECT_FALSE(a);
  r4c::BulkheadPermit c = bulkhead.try_acquire();
  c = std::move(b);
  EXPECT_EQ(bulkhead.in_flight(), 1);
}

// Records what a bulkhead publishes, as "<type> <in_flight>/<max_concurrent>".
struct Heard {
  std::vector<std::string> lines;
  std::function<void(const r4c::BulkheadEvent&)> listener() {
    return [this](const r4c::BulkheadEvent& e) {
      static constexpr const char* kNames[] = {"permitted", "rejected", "finished"};
      EXPECT_EQ(e.instance_id, "pool");
      lines.push_back(std::string(kNames[static_cast<int>(e.type)]) + " " +
                      std::to_string(e.in_flight) + "/" + std::to_string(e.max_concurrent));
    };
  }
};

TEST(BulkheadEventsTest, EachCallPublishesItsPermissionRejectionAndEnd) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(1));
  Heard heard;
  const r4c::Subscription permitted = bulkhead.on_call_permitted(heard.listener());
  const r4c::Subscription rejected = bulkhead.on_call_rejected(heard.listener());
  const r4c::Subscription finished = bulkhead.on_call_finished(heard.listener());
  {
    r4c::BulkheadPermit permit = bulkhead.try_acquire();
    EXPECT_THROW(bulkhead.execute([] {}), r4c::BulkheadFullException);
  }
  bulkhead.execute([] {});
  EXPECT_THAT(heard.lines, ::testing::ElementsAre("permitted 1/1", "rejected 1/1", "finished 0/1",
                                                  "permitted 1/1", "finished 0/1"));
}

TEST(BulkheadEventsTest, AListenerHearsOnlyItsTypeAndNothingOnceReset) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(1));
  Heard heard;
  r4c::Subscription rejected = bulkhead.handle().on_call_rejected(heard.listener());
  r4c::BulkheadPermit permit = bulkhead.try_acquire();
  EXPECT_FALSE(bulkhead.try_acquire());
  permit.release();
  EXPECT_THAT(heard.lines, ::testing::ElementsAre("rejected 1/1"));
  rejected.reset();
  permit = bulkhead.try_acquire();
  EXPECT_FALSE(bulkhead.try_acquire());
  EXPECT_EQ(heard.lines.size(), 1u);
  EXPECT_EQ(bulkhead.snapshot().rejected, 2u);  // counted whether or not anyone listens
}

TEST(BulkheadEventsTest, AThrowingListenerLeavesTheCallAndTheSlotsAlone) {
  std::vector<std::string> reported;
  r4c::set_listener_error_hook([&](const r4c::ListenerError& error) {
    reported.push_back(std::string(error.kind) + " " + std::string(error.instance_id));
  });
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
  const r4c::Subscription permitted = bulkhead.on_call_permitted(
      [](const r4c::BulkheadEvent&) { throw std::runtime_error("listener"); });
  const r4c::Subscription finished = bulkhead.on_call_finished(
      [](const r4c::BulkheadEvent&) { throw std::runtime_error("listener"); });
  EXPECT_EQ(bulkhead.execute([] { return 7; }), 7);
  r4c::set_listener_error_hook({});
  EXPECT_EQ(bulkhead.in_flight(), 0);
  EXPECT_THAT(reported, ::testing::ElementsAre("bulkhead pool", "bulkhead pool"));
}

TEST(BulkheadEventsTest, AListenerMayCallTheBulkheadItListensTo) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
  std::vector<int> seen;
  const r4c::Subscription permitted = bulkhead.on_call_permitted([&](const r4c::BulkheadEvent&) {
    seen.push_back(bulkhead.snapshot().in_flight);  // the slot is already taken
  });
  bulkhead.execute([] {});
  EXPECT_THAT(seen, ::testing::ElementsAre(1));
}

TEST(BulkheadEventsTest, ASubscriptionAfterTheLastOneEndedHearsAgain) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
  Heard heard;
  r4c::Subscription first = bulkhead.on_call_finished(heard.listener());
  r4c::BulkheadPermit early = bulkhead.try_acquire();
  first.reset();
  bulkhead.execute([] {});  // nobody listens: this publication finds none and stops looking
  const r4c::Subscription second = bulkhead.on_call_finished(heard.listener());
  bulkhead.execute([] {});
  early.release();  // announced: it took its slot while someone listened
  EXPECT_THAT(heard.lines, ::testing::ElementsAre("finished 1/2", "finished 0/2"));
}

// A listened-to bulkhead sends its calls the long way round (the flag rides in the slot count):
// the count, the snapshot and the limit stay exact while it listens and once it stops, and a
// bulkhead of the largest size listens as any other.
TEST(BulkheadEventsTest, ListeningLeavesTheCountsExactAndStopsWithTheLastListener) {
  for (const int size : {2, std::numeric_limits<int>::max()}) {
    r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(size));
    Heard heard;
    r4c::Subscription permitted = bulkhead.on_call_permitted(heard.listener());
    r4c::BulkheadPermit first = bulkhead.try_acquire();
    r4c::BulkheadPermit second = bulkhead.try_acquire();
    EXPECT_EQ(bulkhead.in_flight(), 2);
    EXPECT_EQ(bulkhead.snapshot().in_flight, 2);
    EXPECT_EQ(bulkhead.snapshot().max_concurrent, size);
    EXPECT_EQ(bulkhead.snapshot().available, size - 2);
    EXPECT_EQ(static_cast<bool>(bulkhead.try_acquire()), size > 2);
    permitted.reset();
    second.release();
    r4c::BulkheadPermit third = bulkhead.try_acquire();  // finds nobody: clears the flag
    r4c::BulkheadPermit fourth = bulkhead.try_acquire();
    EXPECT_EQ(static_cast<bool>(fourth), size > 2);
    EXPECT_EQ(bulkhead.in_flight(), size > 2 ? 3 : 2);
    const std::string last = "permitted 2/" + std::to_string(size);
    ASSERT_EQ(heard.lines.size(), size > 2 ? 3u : 2u);
    EXPECT_EQ(heard.lines[1], last);
  }
}

TEST(BulkheadConcurrencyTest, NeverAdmitsMoreThanMaxConcurrentAndCountsEveryRejection) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(3));
  std::atomic<int> inside{0}, most{0};
  std::atomic<std::uint64_t> rejected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        r4c::BulkheadPermit permit = bulkhead.try_acquire();
        if (!permit) {
          rejected.fetch_add(1);
          continue;
        }
        const int now = inside.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(bulkhead.in_flight(), 0);
  EXPECT_EQ(bulkhead.snapshot().rejected, rejected.load());
}

}  // namespace
