// SPDX-License-Identifier: Apache-2.0
// The throttle (<r4c/throttle.hpp>): the SRE book's rejection probability at known counts, the
// draw against it, the window's expiry, what counts as a request, an accept and a refusal (the
// local rejections never a refusal), recovery, and the kind's registry keys, metrics and place
// in the pipeline.
#include "r4c/throttle.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "r4c/metrics.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/registry.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct Overloaded : std::runtime_error {
  Overloaded() : std::runtime_error("503") {}
};

class ThrottleTest : public ::testing::Test {
 protected:
  // A throttle whose draws are `draw_` (never below a probability under 1 by default).
  std::unique_ptr<r4c::Throttle> make(r4c::ThrottleConfig config = {}) {
    return std::make_unique<r4c::Throttle>("search", std::move(config), clock_,
                                           [this] { return draw_; });
  }
  // `n` calls the backend answers: accepted or refused (let through whatever the draw).
  static void answer(r4c::Throttle& throttle, int n, bool accepted) {
    for (int i = 0; i < n; ++i) {
      r4c::ThrottlePermit permit = throttle.try_acquire();
      ASSERT_TRUE(permit);
      if (accepted) {
        permit.on_accepted();
      } else {
        permit.on_refused();
      }
    }
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  double draw_ = 0.9999999;
};

TEST_F(ThrottleTest, TheRejectionProbabilityIsTheSreBooksFormulaAtKnownCounts) {
  auto throttle = make();
  EXPECT_EQ(throttle->rejection_probability(), 0.0);  // nothing yet
  answer(*throttle, 10, false);
  EXPECT_DOUBLE_EQ(throttle->rejection_probability(), 10.0 / 11.0);  // (10 - 2 * 0) / 11
  answer(*throttle, 3, true);
  EXPECT_DOUBLE_EQ(throttle->rejection_probability(), 7.0 / 14.0);  // (13 - 2 * 3) / 14
  answer(*throttle, 7, true);
  EXPECT_EQ(throttle->rejection_probability(), 0.0);  // 20 - 2 * 10 = 0
  answer(*throttle, 1, true);
  EXPECT_EQ(throttle->rejection_probability(), 0.0);  // never below 0
  EXPECT_EQ(throttle->snapshot().rejection_probability, 0.0);
}

TEST_F(ThrottleTest, KScalesWhatTheClientSendsPerAccept) {
  auto two = make();
  auto one_and_a_half = make(r4c::ThrottleConfig().k(1.5));
  for (r4c::Throttle* throttle : {two.get(), one_and_a_half.get()}) {
    answer(*throttle, 6, false);
    answer(*throttle, 4, true);
  }
  EXPECT_DOUBLE_EQ(two->rejection_probability(), 2.0 / 11.0);             // (10 - 8) / 11
  EXPECT_DOUBLE_EQ(one_and_a_half->rejection_probability(), 4.0 / 11.0);  // (10 - 6) / 11
  const r4c::ThrottleSnapshot s = one_and_a_half->snapshot();
  EXPECT_EQ(s.requests, 10u);
  EXPECT_EQ(s.accepts, 4u);
  EXPECT_EQ(s.refused, 6u);
  EXPECT_EQ(s.k, 1.5);
  EXPECT_EQ(s.window, 2min);
}

TEST_F(ThrottleTest, ACallIsRejectedLocallyWhenTheDrawFallsBelowTheProbability) {
  auto throttle = make();
  answer(*throttle, 10, false);  // p = 10 / 11 = 0.909...
  draw_ = 0.91;
  r4c::ThrottlePermit admitted = throttle->try_acquire();
  EXPECT_TRUE(admitted);
  admitted.on_refused();  // p = 11 / 12 = 0.9166...
  draw_ = 0.9166;
  EXPECT_FALSE(throttle->try_acquire());
  ASSERT_NO_FATAL_FAILURE(r4c::test::expect_refused<r4c::ThrottledException>(
      [&](auto method) { throttle->execute(method); }, "search",
      "throttle 'search' rejected the call locally", "throttle"));
  EXPECT_EQ(throttle->snapshot().throttled, 2u);
}

// The SRE book's requests are those the application attempted, the throttle's own rejections
// included; those are never the backend's refusals (the pitfall reported against go-zero,
// zeromicro/go-zero#5011) nor accepts.
TEST_F(ThrottleTest, ALocalRejectionIsARequestButNeitherARefusalNorAnAccept) {
  auto throttle = make();
  answer(*throttle, 10, false);
  draw_ = 0.0;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(throttle->try_acquire());
  const r4c::ThrottleSnapshot s = throttle->snapshot();
  EXPECT_EQ(s.requests, 15u);
  EXPECT_EQ(s.accepts, 0u);
  EXPECT_EQ(s.refused, 10u);  // the backend's only
  EXPECT_EQ(s.throttled, 5u);
  EXPECT_DOUBLE_EQ(s.rejection_probability, 15.0 / 16.0);
}

TEST_F(ThrottleTest, CountsAgeOutOfTheWindowABucketAtATime) {
  auto throttle = make(r4c::ThrottleConfig().window(20s));  // buckets of 1 s
  answer(*throttle, 4, false);                              // bucket 0
  clock_->advance(10s);
  answer(*throttle, 6, false);  // bucket 10
  clock_->advance(9999ms);      // 19.999 s: both still in the window
  EXPECT_EQ(throttle->snapshot().requests, 10u);
  clock_->advance(1ms);  // 20 s: bucket 0 is out
  EXPECT_EQ(throttle->snapshot().requests, 6u);
  EXPECT_DOUBLE_EQ(throttle->rejection_probability(), 6.0 / 7.0);
  answer(*throttle, 1, true);  // bucket 20, in the slot bucket 0 had
  EXPECT_EQ(throttle->snapshot().requests, 7u);
  EXPECT_EQ(throttle->snapshot().accepts, 1u);
  clock_->advance(10s);  // 30 s: bucket 10 is out
  EXPECT_EQ(throttle->snapshot().requests, 1u);
  clock_->advance(1h);  // a silence longer than the window forgets everything
  EXPECT_EQ(throttle->snapshot().requests, 0u);
  EXPECT_EQ(throttle->rejection_probability(), 0.0);
  EXPECT_TRUE(throttle->try_acquire());
}

TEST_F(ThrottleTest, ACallCountsInTheBucketItWasAdmittedIn) {
  auto throttle = make(r4c::ThrottleConfig().window(20s));
  r4c::ThrottlePermit slow = throttle->try_acquire();
  ASSERT_TRUE(slow);
  clock_->advance(5s);
  answer(*throttle, 2, false);  // rolls the window past the slow call's bucket
  slow.on_accepted();           // counted in bucket 0, and in the window's earlier buckets
  EXPECT_EQ(throttle->snapshot().requests, 3u);
  EXPECT_EQ(throttle->snapshot().accepts, 1u);
  EXPECT_EQ(throttle->rejection_probability(), 1.0 / 4.0);  // what admissions see too
  clock_->advance(15s);                                     // bucket 0 ages out
  EXPECT_EQ(throttle->snapshot().requests, 2u);
  EXPECT_EQ(throttle->snapshot().accepts, 0u);
  r4c::ThrottlePermit late = throttle->try_acquire();
  clock_->advance(20s);
  late.on_accepted();  // its bucket left the window: counts as nothing
  EXPECT_EQ(throttle->snapshot().requests, 0u);
}

TEST_F(ThrottleTest, ACallWithoutAnAnswerCountsAsNothing) {
  auto throttle = make();
  { r4c::ThrottlePermit abandoned = throttle->try_acquire(); }
  EXPECT_EQ(throttle->snapshot().requests, 0u);
}

TEST_F(ThrottleTest, ByDefaultEveryFailureButAnInnerRejectionIsTheBackendsRefusal) {
  auto throttle = make();
  EXPECT_THROW(throttle->execute([]() -> int { throw Overloaded(); }), Overloaded);
  EXPECT_THROW(throttle->execute([] { throw std::logic_error("bug"); }), std::logic_error);
  // Refusals of policies inside the throttle: the backend never saw these calls.
  EXPECT_THROW(throttle->execute([] { throw r4c::BulkheadFullException("full"); }),
               r4c::BulkheadFullException);
  EXPECT_THROW(throttle->execute([] { throw r4c::CallNotPermittedException("open"); }),
               r4c::CallNotPermittedException);
  EXPECT_EQ(throttle->execute([] { return 7; }), 7);
  const r4c::ThrottleSnapshot s = throttle->snapshot();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.accepts, 1u);
  EXPECT_EQ(s.refused, 2u);
}

TEST_F(ThrottleTest, RefusedOnNamesTheRefusalsAndOtherFailuresAreAccepts) {
  auto throttle =
      make(r4c::ThrottleConfig().refused_on<Overloaded, r4c::CallNotPermittedException>());
  EXPECT_THROW(throttle->execute([] { throw Overloaded(); }), Overloaded);
  EXPECT_THROW(throttle->execute([] { throw std::logic_error("404"); }), std::logic_error);
  EXPECT_THROW(throttle->execute([] { throw r4c::CallNotPermittedException("open"); }),
               r4c::CallNotPermittedException);  // named: a refusal
  EXPECT_THROW(throttle->execute([] { throw r4c::BulkheadFullException("full"); }),
               r4c::BulkheadFullException);  // not named: nothing
  const r4c::ThrottleSnapshot s = throttle->snapshot();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.accepts, 1u);  // the backend answered the 404
  EXPECT_EQ(s.refused, 2u);
}

struct HttpError : std::runtime_error {
  explicit HttpError(int code) : std::runtime_error("http"), status(code) {}
  int status;
};

// The overview's order: refused_on (type or predicate) first, then an inner policy's refusal
// (nothing), then an accept because refused_on says what a refusal is.
TEST_F(ThrottleTest, ARefusedOnPredicateNamesRefusalsBesideTheTypesInTheDocumentedOrder) {
  auto throttle = make(r4c::ThrottleConfig().refused_on<Overloaded>().refused_on<HttpError>(
      [](const HttpError& e) { return e.status == 503 || e.status == 429; }));
  EXPECT_THROW(throttle->execute([] { throw HttpError(503); }), HttpError);  // 1: refusal
  EXPECT_THROW(throttle->execute([] { throw Overloaded(); }), Overloaded);   // 1: by type
  EXPECT_THROW(throttle->execute([] { throw r4c::BulkheadFullException("full"); }),
               r4c::BulkheadFullException);                                  // 2: nothing
  EXPECT_THROW(throttle->execute([] { throw HttpError(404); }), HttpError);  // 3: an accept
  EXPECT_THROW(throttle->execute([] { throw std::logic_error("bug"); }), std::logic_error);  // 3
  r4c::ThrottleSnapshot s = throttle->snapshot();
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.accepts, 2u);
  EXPECT_EQ(s.refused, 2u);

  // A predicate alone also makes the failures it does not match accepts; one that names an
  // inner refusal makes it a refusal; one that throws answers false.
  auto by_predicate = make(r4c::ThrottleConfig().refused_on([](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const r4c::CallNotPermittedException&) {
      return true;
    } catch (const Overloaded&) {
      throw std::runtime_error("predicate");
    } catch (...) {
      return false;
    }
  }));
  EXPECT_THROW(by_predicate->execute([] { throw r4c::CallNotPermittedException("open"); }),
               r4c::CallNotPermittedException);
  EXPECT_THROW(by_predicate->execute([] { throw Overloaded(); }), Overloaded);  // false: accept
  EXPECT_THROW(by_predicate->execute([] { throw std::logic_error("bug"); }), std::logic_error);
  s = by_predicate->snapshot();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.accepts, 2u);
  EXPECT_EQ(s.refused, 1u);
}

// A result can be the backend's refusal (a 503 returned, not thrown): it is returned, counted
// as a refusal, and moves the probability as a thrown refusal does.
TEST_F(ThrottleTest, ARefusedResultIsReturnedAndCountsAsTheBackendsRefusal) {
  auto throttle = make(
      r4c::ThrottleConfig().refused_result<int>([](const int& status) { return status == 503; }));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(throttle->execute([] { return 503; }), 503);
  EXPECT_DOUBLE_EQ(throttle->rejection_probability(), 10.0 / 11.0);
  EXPECT_EQ(throttle->execute([] { return 200; }), 200);
  throttle->execute([] {});  // no result of type int: an accept
  EXPECT_EQ(throttle->execute([] { return std::string("503"); }), "503");  // other type: accept
  const r4c::ThrottleSnapshot s = throttle->snapshot();
  EXPECT_EQ(s.requests, 13u);
  EXPECT_EQ(s.accepts, 3u);
  EXPECT_EQ(s.refused, 10u);
  EXPECT_DOUBLE_EQ(s.rejection_probability, (13.0 - 2.0 * 3.0) / 14.0);
}

TEST_F(ThrottleTest, AThrowingResultPredicateEndsTheCallAndCountsNothing) {
  auto throttle = make(r4c::ThrottleConfig().refused_result<int>(
      [](const int&) -> bool { throw std::runtime_error("predicate"); }));
  EXPECT_THROW(throttle->execute([] { return 1; }), std::runtime_error);
  EXPECT_EQ(throttle->snapshot().requests, 0u);
  EXPECT_EQ(throttle->snapshot().refused, 0u);
  EXPECT_THAT(r4c::test::config_error([] {
                r4c::ThrottleConfig().refused_on(std::function<bool(const std::exception_ptr&)>());
              }).what(),
              HasSubstr("R4C-REG-001: refused_on is an empty function"));
  EXPECT_THAT(r4c::test::config_error([] {
                r4c::ThrottleConfig().refused_result<int>(std::function<bool(const int&)>());
              }).what(),
              HasSubstr("R4C-REG-001: refused_result is an empty function"));
}

TEST_F(ThrottleTest, OnFailureClassifiesAnExceptionPtrAsExecuteDoes) {
  auto throttle = make();
  throttle->try_acquire().on_failure(std::make_exception_ptr(Overloaded()));
  throttle->try_acquire().on_failure(std::make_exception_ptr(r4c::ThrottledException("inner")));
  throttle->try_acquire().on_failure(nullptr);  // no failure: an accept
  EXPECT_EQ(throttle->snapshot().requests, 2u);
  EXPECT_EQ(throttle->snapshot().refused, 1u);
  EXPECT_EQ(throttle->snapshot().accepts, 1u);
}

// A backend that refuses everything gets few calls: a throttle's own draws, seeded, always the
// same ones.
TEST(ThrottleSeedTest, ARefusingBackendGetsFewCallsAndTheSameSeedRejectsTheSameCalls) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto run = [&](std::int64_t seed) {
    r4c::Throttle throttle("search", r4c::ThrottleConfig().seed(seed), clock);
    std::vector<int> forwarded;
    for (int i = 0; i < 1000; ++i) {
      r4c::ThrottlePermit permit = throttle.try_acquire();
      if (!permit) continue;
      forwarded.push_back(i);
      permit.on_refused();
    }
    EXPECT_EQ(throttle.snapshot().requests, 1000u);
    EXPECT_EQ(throttle.snapshot().refused, forwarded.size());
    EXPECT_EQ(throttle.snapshot().throttled, 1000u - forwarded.size());
    return forwarded;
  };
  const std::vector<int> first = run(7);
  // The n-th call goes through with probability 1 / n: about ln(1000) + 0.58 = 7.5 of 1000.
  EXPECT_LE(first.size(), 25u);
  EXPECT_GE(first.size(), 2u);
  EXPECT_THAT(first, ::testing::ElementsAreArray(run(7)));
  EXPECT_NE(first, run(8));
}

// Counting the local rejections as requests does not trap the client: once the backend
// accepts again, what the client sends grows about k-fold per window until nothing is shed.
TEST(ThrottleRecoveryTest, ABackendThatAcceptsAgainIsSentEverythingWithinAFewWindows) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::Throttle throttle("search", r4c::ThrottleConfig().window(20s), clock);
  bool backend_up = false;
  auto second_of_calls = [&] {  // 10 calls, 100 ms apart
    for (int i = 0; i < 10; ++i) {
      if (r4c::ThrottlePermit permit = throttle.try_acquire()) {
        backend_up ? permit.on_accepted() : permit.on_refused();
      }
      clock->advance(100ms);
    }
  };
  for (int s = 0; s < 20; ++s) second_of_calls();
  EXPECT_GT(throttle.rejection_probability(), 0.9);
  backend_up = true;
  int seconds = 0;
  while (throttle.rejection_probability() > 0.0 && seconds < 300) {
    second_of_calls();
    ++seconds;
  }
  // What gets through grows k-fold per window from about 1 of the 200 requests a window
  // holds: fewer than log2(200) < 8 windows (about 5 in this run).
  EXPECT_LE(seconds, 8 * 20);
  EXPECT_GE(seconds, 20);  // and not at once: the window still remembers the refusals
  const std::uint64_t shed = throttle.snapshot().throttled;
  for (int s = 0; s < 20; ++s) second_of_calls();
  EXPECT_EQ(throttle.snapshot().throttled, shed);  // a healthy backend gets every call
}

TEST(ThrottleConfigTest, InvalidSettingsNameTheSettingAndTheRange) {
  auto error_of = [](const std::function<void()>& call) {
    return std::string(r4c::test::config_error(call).what());
  };
  EXPECT_EQ(error_of([] { r4c::ThrottleConfig().k(0.5); }),
            "R4C-REG-001: k is 0.5; valid: 1 .. 100");
  EXPECT_THAT(error_of([] { r4c::ThrottleConfig().window(5ms); }),
              HasSubstr("R4C-REG-001: window is"));
  EXPECT_THAT(error_of([] { r4c::ThrottleConfig().window(2h); }), HasSubstr("10 ms .. 1 h"));
  const r4c::ThrottleConfig defaults;
  EXPECT_EQ(defaults.k(), 2.0);
  EXPECT_EQ(defaults.window(), 2min);
  EXPECT_TRUE(defaults.refused_on_types().empty());
}

using Counts = std::pair<std::uint64_t, std::uint64_t>;  // requests, accepts

TEST(ThrottleReconfigureTest, ANewWindowCarriesTheCountsThatBeganInsideIt) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::Throttle throttle("search", r4c::ThrottleConfig().window(20s), clock);  // 1 s buckets
  auto counts = [&] {
    const r4c::ThrottleSnapshot s = throttle.snapshot();
    return Counts{s.requests, s.accepts};
  };
  for (int i = 0; i < 5; ++i) throttle.try_acquire().on_accepted();  // bucket 0 s
  clock->advance(10s);
  for (int i = 0; i < 5; ++i) throttle.try_acquire().on_refused();  // 10 s
  clock->advance(5s);
  for (int i = 0; i < 2; ++i) throttle.try_acquire().on_accepted();  // 15 s
  r4c::ThrottlePermit under_way = throttle.try_acquire();
  ASSERT_TRUE(under_way);
  EXPECT_EQ(counts(), Counts(12, 7));
  clock->advance(500ms);
  // 10 s: the buckets that began at 10 s and 15 s are in it (0.5 s buckets), the 0 s one not.
  throttle.reconfigure(r4c::ThrottleConfig().window(10s));
  EXPECT_EQ(throttle.snapshot().window, 10s);
  EXPECT_EQ(counts(), Counts(7, 2));
  under_way.on_accepted();  // admitted into the old buckets: counted in the current one
  EXPECT_EQ(counts(), Counts(8, 3));
  // A longer window keeps all there is (the 0 s bucket went for good); 2 s buckets.
  throttle.reconfigure(r4c::ThrottleConfig().window(40s));
  EXPECT_EQ(counts(), Counts(8, 3));
  EXPECT_EQ(throttle.snapshot().refused, 5u);  // since creation, unchanged
  // Each carried count ages out with the new window's bucket of its beginning.
  clock->advance(50s - 15500ms);  // 50 s: the 10 s bucket (new 10-12 s) is out
  EXPECT_EQ(counts(), Counts(3, 3));
  clock->advance(4s);  // 54 s: the 14-16 s bucket too
  EXPECT_EQ(counts(), Counts(0, 0));
  throttle.try_acquire().on_accepted();  // the new buckets roll as the first did
  EXPECT_EQ(counts(), Counts(1, 1));
}

// A text with one more line.
std::string with_k(std::string base, const std::string& more) { return base + more; }

class ThrottleRegistryTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(ThrottleRegistryTest, TheFileSetsEveryKeyAndNamesTheRefusalsByClassName) {
  auto registry = r4c::testing::registry(clock_)
                      .exception_type<Overloaded>("Overloaded")
                      .config_text(R"(
defaults.throttle.k=3
defaults.throttle.window=30s
instances.search.throttle.refusedOn=Overloaded, ThrottledException
instances.search.throttle.seed=42
)")
                      .build();
  r4c::Throttle& throttle = registry.throttle_policy("shop::Search#find(int)", "search");
  EXPECT_EQ(throttle.config().k(), 3.0);
  EXPECT_EQ(throttle.config().window(), 30s);
  EXPECT_EQ(throttle.config().seed(), 42);
  ASSERT_EQ(throttle.config().refused_on_types().size(), 2u);
  EXPECT_EQ(throttle.config().refused_on_types()[1],
            r4c::ExceptionType::of<r4c::ThrottledException>());
  EXPECT_EQ(registry.throttle("search").instance_id(), "search");
  EXPECT_EQ(registry.snapshot().throttles().count("search"), 1u);
}

TEST_F(ThrottleRegistryTest, ABadValueOrKeyIsRefusedWithItsCode) {
  auto code_of = [&](const std::string& text) {
    return std::string(r4c::test::config_error([&] {
                         r4c::testing::registry(clock_).config_text(text).build();
                       }).what());
  };
  EXPECT_THAT(code_of("defaults.throttle.k=0"), HasSubstr("R4C-REG-001"));
  EXPECT_THAT(code_of("defaults.throttle.windw=1m"),
              ::testing::AllOf(HasSubstr("R4C-CFG-003"), HasSubstr("did you mean 'window'")));
  EXPECT_THAT(code_of("defaults.throttle.refusedOn=Nope"), HasSubstr("R4C-CFG-003"));
}

TEST_F(ThrottleRegistryTest, MetricsNameTheWindowTheProbabilityAndTheBackendsRefusals) {
  auto registry = r4c::testing::registry(clock_).build();
  r4c::Throttle& throttle = registry.throttle_policy("m", "search");
  for (int i = 0; i < 3; ++i) {
    throttle.try_acquire().on_refused();  // seeded draws: p is 0 for the first call only
  }
  const r4c::ThrottleSnapshot s = throttle.snapshot();
  std::map<std::string, double> values;
  for (const r4c::metrics::Metric& m : r4c::metrics::collect(registry)) {
    if (m.labels.empty() || m.labels[0].value != "throttle") continue;
    values[m.name] = m.value;
    EXPECT_EQ(m.type, m.name == "r4c.calls.rejected" || m.name == "r4c.throttle.backend.refused"
                          ? r4c::metrics::MetricType::counter
                          : r4c::metrics::MetricType::gauge)
        << m.name;
  }
  EXPECT_THAT(values,
              ::testing::UnorderedElementsAre(
                  ::testing::Pair("r4c.calls.rejected", static_cast<double>(s.throttled)),
                  ::testing::Pair("r4c.throttle.requests", static_cast<double>(s.requests)),
                  ::testing::Pair("r4c.throttle.accepts", 0.0),
                  ::testing::Pair("r4c.throttle.rejection.probability", s.rejection_probability),
                  ::testing::Pair("r4c.throttle.backend.refused", static_cast<double>(s.refused))));
}

TEST_F(ThrottleRegistryTest, ANewRefusedOnListClassifiesTheNextOutcomeAndTheWindowStays) {
  const std::string base = "instances.search.throttle.k = 2\n";
  auto registry = r4c::testing::registry(clock_)
                      .exception_type<Overloaded>("Overloaded")
                      .config_text(base)
                      .build();
  r4c::Throttle& throttle = registry.throttle_policy("m", "search");
  auto overloaded = [&] {
    ASSERT_THROW(throttle.execute([]() -> int { throw Overloaded(); }), Overloaded);
  };
  for (int i = 0; i < 5; ++i) throttle.try_acquire().on_accepted();  // no rejection below
  overloaded();  // without refused_on every failure is a refusal
  EXPECT_EQ(throttle.snapshot().refused, 1u);
  EXPECT_EQ(throttle.snapshot().accepts, 5u);
  // Refusals are ThrottledExceptions now: Overloaded is the backend's answer, an accept.
  (void)registry.reconfigure(
      with_k(base, "instances.search.throttle.refusedOn = ThrottledException\n"));
  overloaded();
  // A call under way is classified when it ends, by the list then.
  r4c::ThrottlePermit under_way = throttle.try_acquire();
  ASSERT_TRUE(under_way);
  (void)registry.reconfigure(with_k(base, "instances.search.throttle.refusedOn = Overloaded\n"));
  under_way.on_failure(std::make_exception_ptr(Overloaded()));
  const r4c::ThrottleSnapshot s = throttle.snapshot();
  EXPECT_EQ(s.requests, 8u);  // the window kept its counts
  EXPECT_EQ(s.accepts, 6u);
  EXPECT_EQ(s.refused, 2u);
}

TEST_F(ThrottleRegistryTest, ANewSeedRestartsTheDrawsOnItsSequence) {
  // Three throttles fed the same history with k 100 (no draws), then at k 2: "a" built with
  // seed 42, "b" given 42 live, "c" keeping seed 1. Who is rejected follows the draws.
  auto text = [](int k, int seed_b) {
    return "defaults.throttle.k = " + std::to_string(k) +
           "\ninstances.a.throttle.seed = 42\ninstances.b.throttle.seed = " +
           std::to_string(seed_b) + "\ninstances.c.throttle.seed = 1\n";
  };
  auto registry = r4c::testing::registry(clock_).config_text(text(100, 1)).build();
  r4c::Throttle* throttles[] = {&registry.throttle_policy("m", "a"),
                                &registry.throttle_policy("m", "b"),
                                &registry.throttle_policy("m", "c")};
  for (r4c::Throttle* throttle : throttles) {
    for (int i = 0; i < 10; ++i) throttle->try_acquire().on_accepted();
    for (int i = 0; i < 30; ++i) throttle->try_acquire().on_refused();
    ASSERT_EQ(throttle->snapshot().throttled, 0u);
  }
  (void)registry.reconfigure(text(2, 42));
  ASSERT_EQ(throttles[1]->config().seed(), 42);
  std::vector<bool> rejected[3];
  for (int t = 0; t < 3; ++t) {
    ASSERT_GT(throttles[t]->rejection_probability(), 0.4);
    for (int i = 0; i < 64; ++i) rejected[t].push_back(!throttles[t]->try_acquire());
  }
  EXPECT_EQ(rejected[1], rejected[0]);
  EXPECT_NE(rejected[2], rejected[0]);
  EXPECT_GT(throttles[1]->snapshot().throttled, 0u);
}

TEST(ThrottleKindTest, TheThrottleSitsOutsideTheCircuitBreakerAndTheRateLimiter) {
  using r4c::detail::kKindIndex;
  static_assert(kKindIndex<r4c::HedgeKind> < kKindIndex<r4c::ThrottleKind>);
  static_assert(kKindIndex<r4c::ThrottleKind> < kKindIndex<r4c::CircuitBreakerKind>);
  static_assert(kKindIndex<r4c::ThrottleKind> < kKindIndex<r4c::RateLimiterKind>);
  EXPECT_EQ(r4c::detail::find_kind(&r4c::KindNames::file, "throttle"),
            kKindIndex<r4c::ThrottleKind>);
}

TEST(ThrottlePipelineTest, AShedCallTakesNoPermitAndAnInnerRefusalCountsAsNothing) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).build();
  auto pipeline = r4c::Pipeline<int>::builder(registry, "search")
                      .rate_limiter([](r4c::RateLimiterConfig& r) {
                        r.limit_for_period(20).refresh_period(1h);
                      })
                      .throttle()
                      .build();
  r4c::RateLimiter& limiter = *pipeline.rate_limiter();
  r4c::Throttle& throttle = *pipeline.throttle();
  int refused = 0;
  int shed = 0;
  for (int i = 0; i < 40; ++i) {
    const int permits = limiter.snapshot().available_permissions;
    try {
      pipeline.execute([]() -> int { throw Overloaded(); });
    } catch (const Overloaded&) {
      ++refused;
      EXPECT_EQ(limiter.snapshot().available_permissions, permits - 1);
    } catch (const r4c::ThrottledException&) {
      ++shed;
      EXPECT_EQ(limiter.snapshot().available_permissions, permits);  // no permit taken
    } catch (const r4c::RequestNotPermittedException&) {
      ADD_FAILURE() << "the throttle sheds long before the 20 permits run out";
    }
  }
  EXPECT_GT(shed, 30);
  EXPECT_EQ(throttle.snapshot().refused, static_cast<std::uint64_t>(refused));
  EXPECT_EQ(throttle.snapshot().throttled, static_cast<std::uint64_t>(shed));
  // The rate limiter's refusals reach the throttle as an inner rejection: nothing.
  limiter.drain();
  const std::uint64_t requests = throttle.snapshot().requests;
  for (int i = 0; i < 5; ++i) {
    try {
      pipeline.execute([] { return 1; });
    } catch (const r4c::RejectedException&) {
    }
  }
  EXPECT_EQ(throttle.snapshot().refused, static_cast<std::uint64_t>(refused));
  EXPECT_EQ(throttle.snapshot().requests - requests, throttle.snapshot().throttled - shed);
}

}  // namespace
