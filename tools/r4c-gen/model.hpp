// SPDX-License-Identifier: Apache-2.0
// What r4c-gen learns from a header: the classes to wrap, their methods and each method's
// policies. Filled by scan.cpp (libclang), written out by emit.cpp.
#pragma once

#include <string>
#include <vector>

#include "attributes.hpp"
#include "diagnostics.hpp"

namespace r4c::gen {

struct Parameter {
  enum class Passing { value, lvalue_reference, rvalue_reference };
  std::string type;  // fully qualified, as in the method id: "const std::string&"
  Passing passing = Passing::value;
  bool const_lvalue_reference = false;
  bool needs_type_identity = false;  // a function pointer or array type: no simple declarator
  bool scalar = false;               // passed on as is: moving it would change nothing
};

struct Method {
  std::string name;  // "search", "operator()"
  std::string id;    // "shop::SearchClient#search(const std::string&)"
  Location where;
  std::string result;  // the return type, fully qualified
  bool returns_void = false;
  bool async = false;       // returns asio::awaitable<T>
  std::string async_value;  // T
  std::vector<Parameter> parameters;
  bool is_const = false;
  bool lvalue_ref_qualified = false;
  bool rvalue_ref_qualified = false;
  std::string exception_spec;  // "", "noexcept" or "noexcept(<expression>)"
  bool pure = false;
  bool conversion = false;       // operator T(): declared without a return type
  bool is_explicit = false;      // explicit operator T()
  std::vector<Policy> policies;  // in the pipeline's order, at most one of each kind
  std::string member;            // the wrapper's member holding its PipelineStages

  bool has(PolicyKind kind) const {
    for (const Policy& p : policies) {
      if (p.kind == kind) return true;
    }
    return false;
  }
};

struct Namespace {
  std::string name;  // "" for an anonymous namespace
  bool is_inline = false;
};

struct Class {
  std::string name;                   // "SearchClient"
  std::string qualified;              // "shop::SearchClient"
  std::vector<Namespace> namespaces;  // where the class and its wrapper live
  Location where;
  // An interface (some method is pure virtual): the wrapper forwards to a delegate. Otherwise
  // it derives from the class and calls the class's own implementation.
  bool delegates = false;
  std::vector<Method> methods;

  std::string wrapper() const { return name + "_Resilient"; }
  bool any_async() const {
    for (const Method& m : methods) {
      if (m.async) return true;
    }
    return false;
  }
};

struct Header {
  std::string path;  // as given on the command line
  std::vector<Class> classes;
  std::vector<std::string> dependencies;  // the header and every file it includes
};

}  // namespace r4c::gen
