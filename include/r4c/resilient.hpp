// SPDX-License-Identifier: Apache-2.0
// Declarative policies: the runtime half of r4c-gen.
//
// Annotate a C++ interface with [[r4c::...]] attributes, let the CMake function
// r4c_generate_resilient() run r4c-gen over its header, include the generated
// `<header>.resilient.hpp`, and ask for the wrapper:
//
//   namespace shop {
//   class SearchClient {
//    public:
//     virtual ~SearchClient() = default;
//     [[r4c::adaptive_limit]]
//     virtual std::string search(const std::string& query) = 0;
//   };
//   }
//
//   #include "search_client.resilient.hpp"
//   std::unique_ptr<shop::SearchClient> client =
//       r4c::make_resilient<shop::SearchClient>(backend, registry);   // backend: shared_ptr
//   client->search("c++");   // through the adaptive limit "shop::SearchClient#search(...)"
//
// The generated class resolves every method's policies once, in its constructor, through the
// registry; a call then runs through them in the pipeline's order (<r4c/pipeline.hpp>) with no
// allocation, no lookup and no std::function of its own. See docs/declarative.md.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "r4c/pipeline.hpp"
#include "r4c/registry.hpp"

namespace r4c {

/// Names the wrapper r4c-gen generated for `T` (`using type = T_Resilient;`). Each generated
/// header specializes it for the classes it wraps; the primary template is left undefined.
template <class T>
struct ResilientWrapper;

namespace detail {

template <class T>
concept HasResilientWrapper = requires {
  typename ResilientWrapper<T>::type;
};

// The pipeline's synchronous order over stages resolved by a wrapper's constructor: what
// Pipeline<T>::execute does, for a callable that needs no stop token.
template <class T, class F>
T call_through(const PipelineStages<T>& stages, F&& f) {
  if (stages.cls != CallClass::critical) [[unlikely]] {
    // [[r4c::adaptive_limit(call_class = ...)]]: the call says its class to the limit.
    ClassedCall<std::decay_t<F>> call{std::forward<F>(f), stages.cls};
    return stages.execute(call);
  }
  return stages.execute(f);
}

// A delegate-mode wrapper's constructor refuses a null delegate at once, naming the class.
template <class T>
std::shared_ptr<T> checked_delegate(std::shared_ptr<T> delegate, const char* class_name) {
  if (!delegate) {
    throw std::invalid_argument(std::string("r4c::make_resilient<") + class_name +
                                ">: the delegate is null");
  }
  return delegate;
}

}  // namespace detail

/// Wraps `delegate` in the class r4c-gen generated for the interface `T` (include its
/// `.resilient.hpp`): every call goes through the policies of T's [[r4c::...]] attributes,
/// then to `delegate`. The policies are resolved now, through `registry`, which must outlive
/// the wrapper; invalid or conflicting settings throw ConfigException (R4C-REG-008 when a
/// shared `name` resolves to different settings). Like resilience4cata 0.6.0's
/// `Resilient.of(OrderClient.class, backend, registry)`.
/// Thread safety: the wrapper's methods may be called from any thread when the delegate's may.
template <class T>
std::unique_ptr<T> make_resilient(std::shared_ptr<T> delegate, ResilienceRegistry& registry) {
  static_assert(detail::HasResilientWrapper<T>,
                "r4c::make_resilient<T>: no wrapper was generated for T; include the "
                "<header>.resilient.hpp that r4c_generate_resilient() made from T's header");
  if constexpr (detail::HasResilientWrapper<T>) {  // one error at a time
    using Wrapper = typename ResilientWrapper<T>::type;
    static_assert(std::is_constructible_v<Wrapper, std::shared_ptr<T>, ResilienceRegistry&>,
                  "r4c::make_resilient<T>(delegate, registry) wraps an interface (a class with a "
                  "pure virtual method); for a class whose methods have bodies, use "
                  "make_resilient<T>(registry, constructor arguments...)");
    static_assert(std::has_virtual_destructor_v<T>,
                  "r4c::make_resilient<T> returns a std::unique_ptr<T>: T needs a virtual "
                  "destructor");
    return std::make_unique<Wrapper>(std::move(delegate), registry);
  } else {
    return nullptr;
  }
}

/// Builds the class r4c-gen generated for `T`, a class whose virtual methods have bodies: it
/// derives from T, is constructed with `args`, and runs each annotated method's body (T's own
/// implementation) through its policies, resolved now through `registry` (which must outlive
/// it). Throws ConfigException as the other overload does.
template <class T, class... Args>
std::unique_ptr<T> make_resilient(ResilienceRegistry& registry, Args&&... args) {
  static_assert(detail::HasResilientWrapper<T>,
                "r4c::make_resilient<T>: no wrapper was generated for T; include the "
                "<header>.resilient.hpp that r4c_generate_resilient() made from T's header");
  if constexpr (detail::HasResilientWrapper<T>) {  // one error at a time
    using Wrapper = typename ResilientWrapper<T>::type;
    static_assert(std::is_constructible_v<Wrapper, ResilienceRegistry&, Args&&...>,
                  "r4c::make_resilient<T>(registry, args...) builds a class whose virtual "
                  "methods have bodies, from T's constructor arguments; for an interface, use "
                  "make_resilient<T>(delegate, registry)");
    static_assert(std::has_virtual_destructor_v<T>,
                  "r4c::make_resilient<T> returns a std::unique_ptr<T>: T needs a virtual "
                  "destructor");
    return std::make_unique<Wrapper>(registry, std::forward<Args>(args)...);
  } else {
    return nullptr;
  }
}

}  // namespace r4c
