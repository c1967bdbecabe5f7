// SPDX-License-Identifier: Apache-2.0
// registry.describe(): what every policy resolved to and where each setting came from; and a
// configuration's mistakes, reported all at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "r4c/detail/kinds.hpp"
#include "r4c/registry.hpp"
#include "test_support.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const r4c::ResolvedSetting& setting(const r4c::ResolvedPolicy& policy, std::string_view key) {
  for (const r4c::ResolvedSetting& s : policy.settings) {
    if (s.key == key) return s;
  }
  ADD_FAILURE() << "no setting " << key;
  static const r4c::ResolvedSetting kNone;
  return kNone;
}

const r4c::ResolvedPolicy& policy(const r4c::ResolvedConfiguration& resolved, std::string_view kind,
                                  std::string_view scope) {
  for (const r4c::ResolvedPolicy& p : resolved.policies) {
    if (p.kind == kind && p.scope == scope) return p;
  }
  ADD_FAILURE() << "no " << kind << " " << scope;
  static const r4c::ResolvedPolicy kNone;
  return kNone;
}

constexpr std::string_view kFile =
    "defaults.adaptiveLimit.maxLimit = 300\n"
    "configs.backend.adaptiveLimit.algorithm = aimd\n"
    "\n"
    "instances.orders.adaptiveLimit.initialLimit = 40\n"
    "instances.lonely.timeout.timeout = 250ms\n";

r4c::ResilienceRegistry described_registry() {
  auto registry =
      r4c::ResilienceRegistry::builder()
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.min_limit(2); })
          .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig& a) { a.backoff_ratio(0.8); })
          .config_text(std::string(kFile))
          .build();
  (void)registry.adaptive_limit_policy(
      "shop::Orders#place", "orders", "backend", {.window = 2s},
      [](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(5); });
  return registry;
}

TEST(RegistryDescribeTest, NamesTheSourceOfEverySettingOfALiveInstance) {
  const auto registry = described_registry();
  const r4c::ResolvedConfiguration resolved = registry.describe();
  const r4c::ResolvedPolicy& orders = policy(resolved, "adaptiveLimit", "instances.orders");
  EXPECT_TRUE(orders.live);
  EXPECT_THAT(orders.used_by, ElementsAre("shop::Orders#place"));
  EXPECT_EQ(orders.named_config, "backend");

  EXPECT_EQ(setting(orders, "enabled").source, r4c::SettingSource::default_value);
  EXPECT_EQ(setting(orders, "enabled").value, "true");
  EXPECT_EQ(setting(orders, "minLimit").source, r4c::SettingSource::builder_defaults);
  EXPECT_EQ(setting(orders, "minLimit").value, "2");
  EXPECT_EQ(setting(orders, "backoffRatio").source, r4c::SettingSource::named_config);
  EXPECT_EQ(setting(orders, "backoffRatio").origin, "backend");
  EXPECT_EQ(setting(orders, "backoffRatio").value, "0.8");
  EXPECT_EQ(setting(orders, "window").source, r4c::SettingSource::call_site);
  EXPECT_EQ(setting(orders, "window").value, "2s");
  EXPECT_EQ(setting(orders, "minWindowSamples").source, r4c::SettingSource::instance);
  EXPECT_EQ(setting(orders, "minWindowSamples").value, "5");

  const r4c::ResolvedSetting& max = setting(orders, "maxLimit");
  EXPECT_EQ(max.source, r4c::SettingSource::file);
  EXPECT_EQ(max.origin, "config text:1");
  EXPECT_EQ(max.file_key, "defaults.adaptiveLimit.maxLimit");
  EXPECT_EQ(max.value, "300");
  EXPECT_EQ(setting(orders, "algorithm").origin, "config text:2");
  EXPECT_EQ(setting(orders, "algorithm").value, "aimd");
  EXPECT_EQ(setting(orders, "initialLimit").origin, "config text:4");
  EXPECT_EQ(setting(orders, "dropOn").value, "CallTimeoutException, BulkheadFullException");
}

TEST(RegistryDescribeTest, ShowsTheDefaultsTheNamedConfigsAndTheInstancesOnlyTheFileNames) {
  const auto registry = described_registry();
  const r4c::ResolvedConfiguration resolved = registry.describe();
  EXPECT_EQ(setting(policy(resolved, "bulkhead", "defaults"), "maxConcurrent").value, "25");
  const r4c::ResolvedPolicy& backend = policy(resolved, "adaptiveLimit", "configs.backend");
  EXPECT_EQ(backend.id, "backend");
  EXPECT_EQ(setting(backend, "algorithm").source, r4c::SettingSource::file);
  EXPECT_EQ(setting(backend, "backoffRatio").source, r4c::SettingSource::named_config);
  const r4c::ResolvedPolicy& lonely = policy(resolved, "timeout", "instances.lonely");
  EXPECT_FALSE(lonely.live);
  EXPECT_TRUE(lonely.used_by.empty());
  EXPECT_EQ(setting(lonely, "timeout").value, "250ms");
  EXPECT_EQ(setting(lonely, "timeout").origin, "config text:5");
}

TEST(RegistryDescribeTest, GroupsAPipelinesPoliciesUnderItsId) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  (void)registry.timeout_policy("pipeline 'checkout'", "checkout", "",
                                [](r4c::TimeoutConfig& t) { t.timeout(3s); });
  (void)registry.bulkhead_policy("pipeline 'checkout'", "checkout");
  const r4c::ResolvedConfiguration resolved = registry.describe();
  const auto checkout = resolved.instance("checkout");
  ASSERT_EQ(checkout.size(), 2u);
  EXPECT_EQ(checkout[0]->kind, "timeout");  // pipeline order: the timeout before the bulkhead
  EXPECT_EQ(checkout[1]->kind, "bulkhead");
  EXPECT_EQ(setting(*checkout[0], "timeout").value, "3s");
  EXPECT_EQ(setting(*checkout[0], "timeout").source, r4c::SettingSource::instance);
  EXPECT_TRUE(resolved.instance("nothing").empty());
}

TEST(RegistryDescribeTest, ListsEveryUserOfASharedInstance) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  (void)registry.bulkhead_policy("shop::A#a", "shared");
  (void)registry.bulkhead_policy("shop::B#b", "shared");
  (void)registry.bulkhead_policy("shop::A#a", "shared");
  EXPECT_THAT(registry.describe().instance("shared").front()->used_by,
              ElementsAre("shop::A#a", "shop::B#b"));
}

TEST(RegistryDescribeTest, RendersTextInTheFilesSyntaxWithEachSource) {
  const std::string text = described_registry().describe().text();
  EXPECT_THAT(text, HasSubstr("# adaptiveLimit instances.orders: live, used by shop::Orders#place, "
                              "named config 'backend'\n"));
  EXPECT_THAT(text, HasSubstr("instances.orders.adaptiveLimit.maxLimit = 300"));
  EXPECT_THAT(text, HasSubstr("# config text:1 defaults.adaptiveLimit.maxLimit\n"));
  EXPECT_THAT(text, HasSubstr("# named config 'backend' (code)\n"));
  EXPECT_THAT(text, HasSubstr("# timeout instances.lonely: not created yet"));
}

TEST(RegistryDescribeTest, RendersJsonWithEscapedStrings) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  (void)registry.bulkhead_policy("shop::\"Quoted\"\\#a", "q\"b");
  const std::string json = registry.describe().json();
  EXPECT_THAT(json, HasSubstr(R"({"kind":"bulkhead","scope":"instances.q\"b","id":"q\"b",)"
                              R"("live":true,"usedBy":["shop::\"Quoted\"\\#a"],"namedConfig":"",)"
                              R"("settings":[{"key":"maxConcurrent","value":"25",)"
                              R"("source":"default","origin":"","fileKey":""},)"
                              R"({"key":"maxWait","value":"0s","source":"default",)"
                              R"("origin":"","fileKey":""},)"
                              R"({"key":"latencyHistogram","value":"false","source":"default",)"
                              R"("origin":"","fileKey":""},)"
                              R"({"key":"mode","value":"enforce","source":"default",)"
                              R"("origin":"","fileKey":""}]})"));
  EXPECT_EQ(json.rfind("{\"policies\":[", 0), 0u);
  EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");
}

TEST(RegistryDescribeTest, BuildReportsEveryBadLineAtOnceTheFirstAsBefore) {
  const r4c::ConfigException e = r4c::test::config_error([] {
    (void)r4c::ResilienceRegistry::builder()
        .config_text(
            "defaults.adaptiveLimit.maxLimit = lots\n"
            "defaults.adaptiveLimt.maxLimit = 3\n"
            "instances.orders.timeout.timeout = 250\n"
            "no equals here\n"
            "instances.orders.adaptiveLimit.minLimit = 50\n"
            "instances.orders.adaptiveLimit.initialLimit = 10\n")
        .build();
  });
  // The parse of every line first, then each kind's values and complete configs.
  ASSERT_EQ(e.errors().size(), 5u);
  EXPECT_EQ(e.code(), "R4C-CFG-003");
  EXPECT_EQ(e.errors()[0].code, "R4C-CFG-003");
  EXPECT_THAT(e.errors()[0].message, HasSubstr("config text:2: unknown policy kind"));
  EXPECT_EQ(e.errors()[1].code, "R4C-CFG-002");
  EXPECT_THAT(e.errors()[1].message, HasSubstr("config text:4:"));
  EXPECT_EQ(e.errors()[2].code, "R4C-CFG-004");
  EXPECT_THAT(e.errors()[2].message, HasSubstr("config text:1: key defaults.adaptiveLimit"));
  EXPECT_EQ(e.errors()[3].code, "R4C-ATR-009");
  EXPECT_THAT(e.errors()[3].message, HasSubstr("config text:5: adaptive limit 'orders'"));
  EXPECT_EQ(e.errors()[4].code, "R4C-ATR-001");
  EXPECT_THAT(e.errors()[4].message, HasSubstr("config text:3: key instances.orders.timeout"));
  // what(): every message, one a line, the first first.
  EXPECT_EQ(std::string(e.what()).rfind(e.errors()[0].message + "\n", 0), 0u);
  EXPECT_THAT(std::string(e.what()), HasSubstr("\n" + e.errors()[4].message));
}

TEST(RegistryDescribeTest, ADefaultsMistakeNamesTheScopesFirstLine) {
  const r4c::ConfigException e = r4c::test::config_error([] {
    (void)r4c::ResilienceRegistry::builder()
        .config_text("# comment\ndefaults.adaptiveLimit.minLimit = 300\n")
        .build();
  });
  ASSERT_EQ(e.errors().size(), 1u);
  EXPECT_THAT(e.what(), HasSubstr("config text:2: adaptive limit defaults: "));
}

// Values of the same type as `value` and different from it.
std::vector<r4c::detail::SettingValue> other_values(const r4c::detail::SettingValue& value) {
  const int integers[] = {value.integer + 1, value.integer - 1, 2, 10, 100};
  // value / 2: a share that must stay at or below the share of the class above it.
  const double numbers[] = {value.number / 2 + 0.25, value.number + 1, 0.5, 1.5, value.number / 2};
  const std::chrono::nanoseconds durations[] = {value.duration * 2 + 1ms, value.duration / 2 + 1ms,
                                                1s, 10ms, 100ms};
  std::vector<r4c::detail::SettingValue> others;
  for (int i = 0; i < 5; ++i) {
    // Only the type's member: a read value leaves the others at their defaults.
    r4c::detail::SettingValue other = value;
    using enum r4c::detail::SettingType;
    if (value.type == integer) other.integer = integers[i];
    if (value.type == number) other.number = numbers[i];
    if (value.type == boolean) other.boolean = !value.boolean;
    if (value.type == duration) other.duration = durations[i];
    if (value.type == choice) other.choice = value.choice == 0 ? 1 : 0;  // two names at least
    // append: GCC 12 at -O3 warns falsely on "literal" + std::string&& (-Wstringop-overflow).
    if (value.type == named_numbers)
      other.named_numbers = {{std::string("p").append(std::to_string(i)), 0.125 * (i + 1)}};
    if (!r4c::detail::same_value(other, value)) others.push_back(other);
  }
  return others;
}

// Every kind's descriptor reads each of its settings back, and what describe() writes reads in
// as the same value: a setting added without its getter, or with another setting's, fails here.
TEST(RegistryDescribeTest, EverySettingOfEveryKindReadsBackWhatTheFileWrites) {
  r4c::detail::for_each_kind([]<class Kind>(std::type_identity<Kind>) {
    const typename Kind::Config defaults;
    for (const auto& setting : Kind::settings()) {
      SCOPED_TRACE(std::string(Kind::kNames.file) + "." + std::string(setting.key));
      ASSERT_NE(setting.read, nullptr);
      const r4c::detail::SettingValue value = setting.read(defaults);
      EXPECT_EQ(value.type, setting.type);
      if (setting.type == r4c::detail::SettingType::exception_types) continue;  // by name
      const std::string text = r4c::detail::format_value(value, setting.choice_name);
      const auto parsed = r4c::detail::parse(setting, text);
      ASSERT_TRUE(parsed.has_value()) << text;
      typename Kind::Config config;
      setting.apply(config, *parsed);
      EXPECT_TRUE(r4c::detail::same_value(setting.read(config), value)) << text;

      // Another value the setter takes reads back as itself (not as another setting's).
      int taken = 0;
      for (r4c::detail::SettingValue other : other_values(value)) {
        typename Kind::Config changed;
        try {
          setting.apply(changed, other);
        } catch (const r4c::ConfigException&) {
          continue;  // out of this setting's range
        }
        ++taken;
        EXPECT_TRUE(r4c::detail::same_value(setting.read(changed), other))
            << r4c::detail::format_value(other, setting.choice_name);
      }
      EXPECT_GT(taken, 0);
    }
  });
}

TEST(RegistryDescribeTest, AnExceptionOfOneMistakeListsIt) {
  const r4c::ConfigException e("R4C-CFG-002", "bad");
  ASSERT_EQ(e.errors().size(), 1u);
  EXPECT_EQ(e.errors()[0].code, "R4C-CFG-002");
  EXPECT_EQ(e.errors()[0].message, "R4C-CFG-002: bad");
}

}  // namespace
