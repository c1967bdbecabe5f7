// SPDX-License-Identifier: Apache-2.0
// Subscriptions and the listener error hook.
#include "r4c/events.hpp"

#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

#include "r4c/detail/event_hub.hpp"

namespace r4c {
namespace {

std::mutex& hook_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Shared so that a hook replaced while another thread runs it stays alive until it returns.
std::shared_ptr<const std::function<void(const ListenerError&)>>& hook() {
  static std::shared_ptr<const std::function<void(const ListenerError&)>> current;
  return current;
}

void default_hook(const ListenerError& error) {
  std::string what = "an exception that is not a std::exception";
  try {
    std::rethrow_exception(error.exception);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::fprintf(stderr, "r4c: a listener of %.*s '%.*s' threw: %s\n",
               static_cast<int>(error.kind.size()), error.kind.data(),
               static_cast<int>(error.instance_id.size()), error.instance_id.data(), what.c_str());
}

}  // namespace

Subscription& Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    hub_ = std::move(other.hub_);
    id_ = other.id_;
  }
  return *this;
}

Subscription::~Subscription() { reset(); }

void Subscription::reset() noexcept {
  if (std::shared_ptr<detail::EventHubBase> hub = hub_.lock()) hub->unsubscribe(id_);
  hub_.reset();
}

void set_listener_error_hook(std::function<void(const ListenerError&)> hook_function) {
  std::shared_ptr<const std::function<void(const ListenerError&)>> next;
  if (hook_function) {
    next =
        std::make_shared<const std::function<void(const ListenerError&)>>(std::move(hook_function));
  }
  std::lock_guard lock(hook_mutex());
  hook() = std::move(next);
}

namespace detail {

void report_listener_error(std::string_view instance_id, std::string_view kind,
                           std::exception_ptr exception) noexcept {
  try {
    std::shared_ptr<const std::function<void(const ListenerError&)>> current;
    {
      std::lock_guard lock(hook_mutex());
      current = hook();
    }
    const ListenerError error{instance_id, kind, std::move(exception)};
    if (current) {
      (*current)(error);
    } else {
      default_hook(error);
    }
  } catch (...) {
    // A hook that throws is ignored: nothing may break the call that published.
  }
}

}  // namespace detail
}  // namespace r4c
