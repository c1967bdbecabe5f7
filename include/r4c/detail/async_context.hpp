// SPDX-License-Identifier: Apache-2.0
// What r4c does when an execution context (an io_context, a thread pool) is destroyed while calls
// on its executors wait on an r4c clock (<r4c/asio.hpp>).
//
// Asio's rule is that destroying a context destroys every handler it has not run. r4c's posted
// steps follow it (destroyed unrun, each gives its call's references back). A call that waits on
// a clock (a retry's backoff, a rate limiter's reservation, a timeout's deadline, a hedge's
// delay) has no handler in the context: only its timer on the clock, which would otherwise fire
// later and post into the dead context. ContextTimers is a service of the context with the list
// of such calls; when the context shuts down (its destructor, before it destroys the handlers it
// has not run), every timer on the list is taken off its clock, and the calls whose timer it
// removed end as their posted step would end destroyed unrun. A call that waits on a clock
// joins the list when it arms its timer and leaves it before it gives the timer's hold back.
//
// Executors that run their functions inline (the system executor, use_future's) belong to the
// process-wide system context, which lives until exit: their calls join no list.
#pragma once

#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/query.hpp>
#include <mutex>
#include <type_traits>

#include "r4c/detail/async_call.hpp"  // RunsInline

namespace r4c::detail {

/// One call's place in its context's list. `shut_down` runs under the list's lock, when the
/// context shuts down while the call is listed; returning true hands the call over to
/// `context_gone`, run after the lock is released (the call was unlisted and its timer, taken
/// off the clock, no longer holds it: the reference that held it is `context_gone`'s).
struct ContextLink {
  void* owner = nullptr;  // the call
  bool (*shut_down)(ContextLink& link) noexcept = nullptr;
  void (*context_gone)(ContextLink& link) noexcept = nullptr;
  ContextLink* prev = nullptr;
  ContextLink* next = nullptr;
  bool listed = false;
};

/// The calls of one context that wait on a clock.
class ContextTimers final : public asio::detail::execution_context_service_base<ContextTimers> {
 public:
  explicit ContextTimers(asio::execution_context& context)
      : asio::detail::execution_context_service_base<ContextTimers>(context) {}

  /// Lists `link`; false when the context has shut down (nothing may wait on it any more).
  bool list(ContextLink& link) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return false;
    link.prev = nullptr;
    link.next = head_;
    if (head_ != nullptr) head_->prev = &link;
    head_ = &link;
    link.listed = true;
    return true;
  }
  /// Unlists `link` if it is listed.
  void unlist(ContextLink& link) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    remove(link);
  }

 private:
  void remove(ContextLink& link) noexcept {
    if (!link.listed) return;
    if (link.prev != nullptr) link.prev->next = link.next;
    if (link.next != nullptr) link.next->prev = link.prev;
    if (head_ == &link) head_ = link.next;
    link.prev = link.next = nullptr;
    link.listed = false;
  }

  void shutdown() override {
    ContextLink* gone = nullptr;  // handed over, chained through `next`
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shut_down_ = true;
      for (ContextLink* link = head_; link != nullptr;) {
        ContextLink* next = link->next;
        if (link->shut_down(*link)) {
          remove(*link);
          link->next = gone;
          gone = link;
        }
        link = next;
      }
    }
    // Outside the lock: ending a call destroys its caller's handler, which may end other calls.
    while (gone != nullptr) {
      ContextLink* link = gone;
      gone = link->next;
      link->next = nullptr;
      link->context_gone(*link);
    }
  }

  std::mutex mutex_;
  ContextLink* head_ = nullptr;
  bool shut_down_ = false;
};

/// The list of the context `executor` belongs to, or null when it needs none (an inline
/// executor) or names no context.
template <class Executor>
ContextTimers* context_timers(const Executor& executor) {
  if constexpr (RunsInline<Executor>::value) {
    return nullptr;
  } else if constexpr (asio::can_query<const Executor&, asio::execution::context_t>::value) {
    auto&& context = asio::query(executor, asio::execution::context);
    if constexpr (std::is_convertible_v<decltype(context), asio::execution_context&>) {
      return &asio::use_service<ContextTimers>(static_cast<asio::execution_context&>(context));
    } else {
      return nullptr;
    }
  } else {
    return nullptr;
  }
}

/// A call's place in the list of its caller's context, if that context needs one (see
/// context_timers()).
class ContextListing {
 public:
  /// For the call `owner` from the caller's `executor`; `shut_down` and `context_gone` as
  /// ContextLink's (they find the call as `link.owner`).
  template <class Executor>
  ContextListing(const Executor& executor, void* owner,
                 bool (*shut_down)(ContextLink& link) noexcept,
                 void (*context_gone)(ContextLink& link) noexcept)
      : timers_(context_timers(executor)) {
    link_.owner = owner;
    link_.shut_down = shut_down;
    link_.context_gone = context_gone;
  }
  ContextListing(const ContextListing&) = delete;
  ContextListing& operator=(const ContextListing&) = delete;

  /// Lists the call (nothing to do without a list); false when its context has shut down
  /// (nothing may wait on it any more).
  bool list() noexcept { return timers_ == nullptr || timers_->list(link_); }
  /// Unlists the call if it is listed.
  void unlist() noexcept {
    if (timers_ != nullptr) timers_->unlist(link_);
  }

 private:
  ContextTimers* timers_;  // the caller's context's list; null for an inline executor
  ContextLink link_;
};

}  // namespace r4c::detail
