// SPDX-License-Identifier: Apache-2.0
// What the circuit breaker and the retry classify outcomes with, besides exception types: a
// predicate on the failure, and a predicate on results of one type. Both are configs' values,
// shared by copies of a config (they are never modified once set).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "r4c/exception_type.hpp"

namespace r4c::detail {

/// A predicate on a failure; empty when none was set.
using ExceptionPredicate = std::function<bool(const std::exception_ptr&)>;

/// An ExceptionPredicate that applies `predicate` to failures of dynamic type Exception (derived
/// classes included) and answers false for any other failure.
template <class Exception, class Predicate>
ExceptionPredicate exception_predicate(Predicate predicate) {
  static_assert(std::is_invocable_r_v<bool, Predicate&, const Exception&>,
                "the predicate takes const Exception& and returns bool");
  return [predicate = std::move(predicate)](const std::exception_ptr& failure) mutable -> bool {
    try {
      std::rethrow_exception(failure);
    } catch (const Exception& e) {
      return predicate(e);
    } catch (...) {
      return false;
    }
  };
}

/// Inside a catch: whether the exception being handled is one of `types` or satisfies
/// `predicate`. A predicate that throws answers false (a classification never fails a call).
inline bool matches_current(const std::vector<ExceptionType>& types,
                            const ExceptionPredicate& predicate) noexcept {
  for (const ExceptionType& type : types) {
    if (type.matches_current()) return true;
  }
  if (!predicate) return false;
  try {
    return predicate(std::current_exception());
  } catch (...) {
    return false;
  }
}

/// A predicate on results of one type, type-erased. Copies share the predicate.
class ResultPredicate {
 public:
  template <class T>
  void set(std::function<bool(const T&)> predicate) {
    predicate_ = std::make_shared<const std::function<bool(const T&)>>(std::move(predicate));
    type_ = typeid(T);
  }
  /// The predicate when it applies to results of type T, else nullptr.
  template <class T>
  const std::function<bool(const T&)>* get() const noexcept {
    if (!predicate_ || type_ != std::type_index(typeid(T))) return nullptr;
    return static_cast<const std::function<bool(const T&)>*>(predicate_.get());
  }
  /// The result type it applies to, or nullopt without a predicate.
  std::optional<std::type_index> type() const noexcept {
    if (!predicate_) return std::nullopt;
    return type_;
  }

 private:
  std::shared_ptr<const void> predicate_;
  std::type_index type_ = typeid(void);
};

}  // namespace r4c::detail
