// SPDX-License-Identifier: Apache-2.0
// Annotated classes for r4c-gen's tests: every kind of method the wrappers must handle, every
// policy, sharing, inheritance, class attributes and the preprocessor. tests/gen/CMakeLists.txt
// generates cases.resilient.hpp from this header.
#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "r4c/errors.hpp"

namespace gen_test {

struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Order {
  std::string item;
};

// clang-format 14 would pull each attribute onto its declaration's line.
// clang-format off

/// The method shapes: const, noexcept, ref-qualified, overloaded, void, move-only, references,
/// a conversion operator.
class Catalog {
 public:
  virtual ~Catalog() = default;

  [[r4c::bulkhead(max_concurrent = 1)]]
  virtual std::string describe(int sku) const = 0;

  [[r4c::retry(max_attempts = 2, wait = "0ns")]]  // a retry throws nothing of its own
  virtual int size() const noexcept = 0;

  [[r4c::adaptive_limit]]
  virtual std::string name() & = 0;
  [[r4c::adaptive_limit]]
  virtual std::string name() && = 0;

  [[r4c::adaptive_limit(name = "lookup")]]
  virtual std::string find(int sku) = 0;
  [[r4c::adaptive_limit(name = "lookup")]]
  virtual std::string find(const std::string& title) = 0;

  [[r4c::bulkhead]]
  virtual void erase(int sku) = 0;

  [[r4c::adaptive_limit]]
  virtual std::unique_ptr<Order> place(std::unique_ptr<Order> order) = 0;

  [[r4c::adaptive_limit]]
  virtual void append(std::vector<std::string>& into, std::string&& item) = 0;

  [[r4c::adaptive_limit]]
  virtual const std::string& title() const = 0;

  [[r4c::bulkhead]]
  virtual explicit operator bool() const = 0;

  virtual std::string unguarded(int sku) = 0;  // no policy: forwarded as it is
};

/// All seven policies on one method.
class Everything {
 public:
  virtual ~Everything() = default;

  [[r4c::bulkhead(max_concurrent = 5)]] [[r4c::timeout("1s")]]
  [[r4c::adaptive_limit(initial_limit = 1, max_limit = 1)]]
  [[r4c::rate_limiter(limit_for_period = 100, refresh_period = "1h")]]
  [[r4c::circuit_breaker(minimum_number_of_calls = 100, ignore_on = {gen_test::NotFound})]]
  [[r4c::hedge(delay = "1h")]]
  [[r4c::retry(max_attempts = 2, wait = "0ns", abort_on = {gen_test::NotFound})]]
  virtual std::string call(const std::string& what) = 0;
};

/// Methods saying their priority class to one shared limit: prefetches are bulk.
class Feeds {
 public:
  virtual ~Feeds() = default;
  [[r4c::adaptive_limit(name = "feeds", initial_limit = 2, min_limit = 2, max_limit = 2)]]
  virtual int user(int n) = 0;
  [[r4c::adaptive_limit(name = "feeds", initial_limit = 2, min_limit = 2, max_limit = 2, call_class = bulk)]]
  virtual int prefetch(int n) = 0;
};

/// Every policy but the hedge (which allocates per call by design): the lean per-call path.
/// Also the other spellings of attributes: a `using` prefix, several in one [[...]].
class Lean {
 public:
  virtual ~Lean() = default;

  [[using r4c: retry(max_attempts = 2), circuit_breaker, rate_limiter(limit_for_period = 8388607)]]
  [[r4c::adaptive_limit(max_limit = 1000), r4c::timeout("1h"), r4c::bulkhead(max_concurrent = 100)]]
  virtual int add(int a, const std::string& b) = 0;
};

/// Methods sharing one limit by name (same settings), and a named config.
class Orders {
 public:
  virtual ~Orders() = default;
  [[r4c::adaptive_limit(name = "orders", max_limit = 100)]]
  virtual std::string place(const std::string& item) = 0;
  [[r4c::adaptive_limit(name = "orders", max_limit = 100)]]
  virtual std::string cancel(const std::string& item) = 0;
  [[r4c::adaptive_limit(config = "backend")]]
  virtual std::string status(const std::string& item) = 0;
};

/// A shared name with different settings: its wrapper's constructor fails with R4C-REG-008.
class Conflicting {
 public:
  virtual ~Conflicting() = default;
  [[r4c::adaptive_limit(name = "stock", max_limit = 100)]]
  virtual int reserve(int count) = 0;
  [[r4c::adaptive_limit(name = "stock", max_limit = 50)]]
  virtual int release(int count) = 0;
};

/// A class whose methods have bodies: the wrapper derives from it and calls them. The class's
/// attributes reach every virtual method; a method's own replaces the class's of its kind.
struct [[r4c::adaptive_limit(max_limit = 50)]] [[r4c::bulkhead(max_concurrent = 3)]] Warehouse {
  explicit Warehouse(int initial) : units(initial) {}
  virtual ~Warehouse() = default;

  virtual int stock(const std::string& sku) { return sku.empty() ? 0 : units; }

  [[r4c::adaptive_limit(initial_limit = 5, max_limit = 10)]]
  virtual int reserve(const std::string& sku, int count) {
    units -= count;
    return sku.empty() ? 0 : units;
  }

  int peek() const { return units; }  // not virtual: untouched

  int units;
};

/// Inherited methods keep their attributes; the wrapper of the derived class forwards them.
class Readable {
 public:
  virtual ~Readable() = default;
  [[r4c::bulkhead(max_concurrent = 4)]]
  virtual std::string read(int key) = 0;
};

class Store : public Readable {
 public:
  [[r4c::adaptive_limit]]
  virtual void write(int key, std::string value) = 0;
};

/// Attributes in inactive #if branches do not count; -D definitions reach r4c-gen.
class Preprocessed {
 public:
  virtual ~Preprocessed() = default;
#if 0
  [[r4c::bulkhead(max_concurrent = 1)]]
#endif
#ifdef GEN_TEST_DEFINED_BY_CMAKE
  [[r4c::adaptive_limit(name = "preprocessed")]]
#else
  [[r4c::adaptive_limit(name = "wrong-branch")]]
#endif
  virtual int value() = 0;
};

/// Asynchronous methods: retried ones (their argument passed again on each attempt), a void one
/// in a bulkhead, and one taking a move-only argument.
class Jobs {
 public:
  virtual ~Jobs() = default;
  [[r4c::retry(max_attempts = 3, wait = "10ms")]]
  virtual asio::awaitable<std::string> run(const std::string& job) = 0;
  [[r4c::bulkhead(max_concurrent = 1)]]
  virtual asio::awaitable<void> ping() = 0;
  [[r4c::retry(max_attempts = 2, wait = "0ns")]]
  virtual asio::awaitable<std::string> echo(std::string text) = 0;
  [[r4c::rate_limiter]]  // keeps the call to start it later: the move-only argument is boxed
  virtual asio::awaitable<std::string> upload(std::unique_ptr<Order> order) = 0;
};

// clang-format on

}  // namespace gen_test
