// SPDX-License-Identifier: Apache-2.0
#include "emit.hpp"

#include <sstream>
#include <string_view>

namespace r4c::gen {

namespace {

std::string quoted(std::string_view text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string argument_name(std::size_t i) { return "p" + std::to_string(i); }

// A setting's continuation lines (exception types) indented under it.
std::string indented(const std::string& setting, const std::string& indent) {
  std::string text;
  for (char c : setting) {
    text += c;
    if (c == '\n') text += indent + "    ";
  }
  return text;
}

// The registry call that resolves one policy, e.g.
//   &registry.timeout_policy(
//       "shop::X#f()", "", "",
//       [](r4c::TimeoutConfig& c) { c.timeout(std::chrono::seconds{2}); })
std::string resolve(const Method& method, const Policy& policy, const std::string& indent) {
  std::string call = "&registry." + std::string(attribute_name(policy.kind)) + "_policy(\n" +
                     indent + quoted(method.id) + ", " + quoted(policy.name) + ", " +
                     quoted(policy.config);
  if (policy.settings.empty()) return call + ")";
  if (policy.kind == kAdaptiveLimit) {
    call += ",\n" + indent + "{";
    for (std::size_t i = 0; i < policy.settings.size(); ++i) {
      call += (i > 0 ? ",\n" + indent + " " : "") + indented(policy.settings[i], indent + " ");
    }
    return call + "})";
  }
  call += ",\n" + indent + "[](" + policy.config_type + "& c) {";
  if (policy.settings.size() == 1 && policy.settings[0].find('\n') == std::string::npos) {
    return call + " " + policy.settings[0] + "; })";
  }
  for (const std::string& setting : policy.settings) {
    call += "\n" + indent + "  " + indented(setting, indent + "  ") + ";";
  }
  return call + "\n" + indent + "})";
}

// The parameter list of the override, e.g. "const std::string& p0, int p1".
std::string parameters(const Method& method) {
  std::string list;
  for (std::size_t i = 0; i < method.parameters.size(); ++i) {
    const Parameter& p = method.parameters[i];
    if (i > 0) list += ", ";
    list += (p.needs_type_identity ? "std::type_identity_t<" + p.type + ">" : p.type) + " " +
            argument_name(i);
  }
  return list;
}

std::string qualifiers(const Method& method) {
  std::string text;
  if (method.is_const) text += " const";
  if (method.lvalue_ref_qualified) text += " &";
  if (method.rvalue_ref_qualified) text += " &&";
  if (!method.exception_spec.empty()) text += " " + method.exception_spec;
  return text;
}

// How an attempt passes argument i on. `once`: the attempt runs at most once, so what the
// method owns may be moved on; `boxed`: an async attempt takes it out of its capture.
std::string pass(const Parameter& p, std::size_t i, bool once, bool boxed) {
  const std::string name = argument_name(i);
  const std::string moved =
      boxed ? "r4c::detail::release_argument(" + name + ")" : "std::move(" + name + ")";
  switch (p.passing) {
    case Parameter::Passing::value:
      return once && !p.scalar ? moved : name;
    case Parameter::Passing::rvalue_reference:
      return moved;
    case Parameter::Passing::lvalue_reference:
      return name;
  }
  return name;
}

// The call that ends an attempt: the delegate's method, or the class's own.
std::string target_call(const Class& cls, const Method& method, const std::string& object,
                        bool once, bool boxed = false) {
  std::string call;
  if (cls.delegates) {
    if (!method.is_const && !method.rvalue_ref_qualified) {
      call = object + "->" + method.name + "(";
    } else {
      // The overload with the same qualifiers, should the interface have several.
      std::string target = "*" + object;
      if (method.is_const) target = "std::as_const(" + target + ")";
      if (method.rvalue_ref_qualified) target = "std::move(" + target + ")";
      call = target + "." + method.name + "(";
    }
  } else if (method.rvalue_ref_qualified) {
    call = "std::move(*this)." + cls.qualified + "::" + method.name + "(";
  } else {
    call = "this->" + cls.qualified + "::" + method.name + "(";
  }
  for (std::size_t i = 0; i < method.parameters.size(); ++i) {
    call += (i > 0 ? ", " : "") + pass(method.parameters[i], i, once, boxed);
  }
  return call + ")";
}

void static_asserts(std::ostringstream& out, const Method& method, bool repeated) {
  if (!repeated) return;
  const std::string why = "a " + std::string(label(method.has(kRetry) ? kRetry : kHedge)) +
                          " passes the arguments again on each attempt; take it by const reference";
  for (std::size_t i = 0; i < method.parameters.size(); ++i) {
    const Parameter& p = method.parameters[i];
    if (p.passing != Parameter::Passing::value || p.scalar) continue;
    out << "    static_assert(std::is_copy_constructible_v<" << p.type << ">,\n"
        << "                  "
        << quoted(method.id + ": parameter " + std::to_string(i + 1) + " (" + p.type +
                  ") cannot be copied, but " + why)
        << ");\n";
  }
}

// A gRPC handler under its adaptive limit: admitted through r4c::grpc's server-side admission
// in the class the call's metadata names (server_options_.call_class()), or refused with its status
// and trailer before the service's own handler runs. The slot ends with the call
// (r4c::grpc::server_interceptors(), or the permit's scope for a sync handler).
void emit_grpc_body(std::ostringstream& out, const Class& cls, const Method& method,
                    const std::string& object) {
  const std::string limit = "*" + method.member;
  const std::string call = target_call(cls, method, object, true);
  if (method.grpc == GrpcHandler::sync) {
    out << "    const r4c::grpc::ServerPermit permit = r4c::grpc::admit(p0, " << limit
        << ", server_options_);\n"
        << "    if (!permit) return r4c::grpc::rejected(p0, " << limit << ", server_options_);\n"
        << "    return " << call << ";\n  }\n";
    return;
  }
  // A callback handler returns before its call ends: the interceptor holds the slot.
  out << "    if (const r4c::grpc::ServerPermit permit = r4c::grpc::admit(p0, " << limit
      << ", server_options_); !permit) {\n"
      << "      ::grpc::ServerUnaryReactor* refused = p0->DefaultReactor();\n"
      << "      refused->Finish(r4c::grpc::rejected(p0, " << limit << ", server_options_));\n"
      << "      return refused;\n"
      << "    }\n"
      << "    return " << call << ";\n  }\n";
}

void emit_method(std::ostringstream& out, const Class& cls, const Method& method) {
  out << "\n  // " << method.id << "\n";
  for (const Policy& policy : method.policies) out << "  // [[" << policy.written << "]]\n";
  out << "  " << (method.is_explicit ? "explicit " : "")
      << (method.conversion ? "" : method.result + " ") << method.name << "(" << parameters(method)
      << ")" << qualifiers(method) << " override {\n";
  const std::string object = cls.delegates ? "delegate_" : "this";
  if (method.grpc != GrpcHandler::none && !method.policies.empty()) {
    emit_grpc_body(out, cls, method, object);
    return;
  }

  if (method.policies.empty()) {  // forwarded as it is
    out << "    return " << target_call(cls, method, object, true) << ";\n  }\n";
    return;
  }
  const bool retried = method.has(kRetry);
  const bool hedged = method.has(kHedge);

  if (method.async) {
    // Each attempt's coroutine is made by the lambda, which outlives this call: it owns what
    // the method got by value; references stay references, as for a direct call, except under
    // a hedge, whose attempts may outlive the call. The async pipeline copies the lambda, so a
    // call that makes one attempt captures move-only arguments in a shared box.
    const bool repeated = retried || hedged;
    static_asserts(out, method, repeated);
    std::string captures = "this";
    for (std::size_t i = 0; i < method.parameters.size(); ++i) {
      const Parameter& p = method.parameters[i];
      const std::string name = argument_name(i);
      if (p.passing == Parameter::Passing::lvalue_reference && !hedged) {
        captures += ", &" + name;
      } else if (p.passing == Parameter::Passing::lvalue_reference || p.scalar) {
        captures += ", " + name;
      } else if (repeated) {
        captures += ", " + name + " = std::move(" + name + ")";
      } else {
        captures += ", " + name + " = r4c::detail::capture_argument(std::move(" + name + "))";
      }
    }
    // The one attempt of a call that makes one takes the arguments out of the lambda.
    const std::string call = target_call(cls, method, object, !repeated, !repeated);
    out << "    return r4c::detail::co_call_through(\n"
        << "        " << method.member << ", [" << captures << "]()" << (repeated ? "" : " mutable")
        << " -> " << method.result << " {\n"
        << "          return " << call << ";\n"
        << "        });\n  }\n";
    return;
  }

  std::string captures = "&";
  std::string call_object = object;
  if (hedged) {
    // Hedged attempts run on the registry's executor and a loser may outlive this call: they
    // share copies of the arguments and of the delegate pointer.
    captures = cls.delegates ? "delegate = delegate_" : "this";
    if (cls.delegates) call_object = "delegate";
    for (std::size_t i = 0; i < method.parameters.size(); ++i) {
      const Parameter& p = method.parameters[i];
      const std::string name = argument_name(i);
      captures += ", " + name;
      if (p.passing == Parameter::Passing::value && !p.scalar)
        captures += " = std::move(" + name + ")";
    }
  }
  static_asserts(out, method, retried || hedged);
  out << "    return r4c::detail::call_through(" << method.member << ", [" << captures << "]() -> "
      << method.result << " {\n"
      << "      return " << target_call(cls, method, call_object, !(retried || hedged)) << ";\n"
      << "    });\n  }\n";
}

// What the stages' calls return: the method's result, or T of its asio::awaitable<T>.
std::string stages_value(const Method& method) {
  return method.async ? method.async_value : method.result;
}

std::string stages_type(const Method& method) {
  if (method.grpc != GrpcHandler::none) return "r4c::AdaptiveLimit*";
  return "r4c::detail::PipelineStages<" + stages_value(method) + ">";
}

void emit_class(std::ostringstream& out, const Class& cls) {
  const std::string wrapper = cls.wrapper();
  for (const Namespace& ns : cls.namespaces) {
    out << (ns.is_inline ? "inline " : "") << "namespace " << (ns.name.empty() ? "" : ns.name + " ")
        << "{\n";
  }
  out << "\n";
  if (cls.delegates) {
    out << "/// " << cls.qualified << " with the policies of its [[r4c::...]] attributes around "
        << "every call to a\n/// delegate. Build it with r4c::make_resilient<" << cls.qualified
        << ">(delegate, registry).\n";
  } else {
    out << "/// " << cls.qualified << ", its annotated methods run through the policies of their "
        << "[[r4c::...]]\n/// attributes. Build it with r4c::make_resilient<" << cls.qualified
        << ">(registry, constructor arguments...).\n";
  }
  out << "class " << wrapper << " final : public " << cls.qualified << " {\n public:\n";

  // The constructor: every policy resolved once, here, in the pipeline's order.
  std::ostringstream init;
  for (const Method& method : cls.methods) {
    if (method.policies.empty()) continue;
    if (method.grpc != GrpcHandler::none) {  // its adaptive limit alone
      init << ",\n        " << method.member << "{\n            "
           << resolve(method, method.policies.front(), std::string(16, ' ')) << "}";
      continue;
    }
    // make_stages puts each policy at its kind's place in the library's list of kinds.
    std::string call_class;  // the adaptive limit's call_class, if it has one
    for (const Policy& policy : method.policies) {
      if (!policy.call_class.empty()) call_class = policy.call_class;
    }
    init << ",\n        " << method.member << "{"
         << (call_class.empty() ? "" : "r4c::detail::with_call_class(")
         << "r4c::detail::make_stages<" << stages_value(method) << ">(";
    for (std::size_t i = 0; i < method.policies.size(); ++i) {
      init << (i > 0 ? "," : "") << "\n            "
           << resolve(method, method.policies[i], std::string(16, ' '));
    }
    init << ")" << (call_class.empty() ? "" : ", " + call_class + ")") << "}";
  }
  if (cls.delegates) {
    out << "  " << wrapper << "(std::shared_ptr<" << cls.qualified << "> delegate,\n"
        << std::string(wrapper.size() + 3, ' ') << "r4c::ResilienceRegistry& registry)\n"
        << "      : delegate_(r4c::detail::checked_delegate(std::move(delegate), "
        << quoted(cls.qualified) << "))" << init.str() << " {}\n";
  } else if (cls.any_grpc()) {
    // A gRPC service: the second constructor says how a refused call answers.
    const std::string requires_line =
        "    requires std::is_constructible_v<" + cls.qualified + ", Args&&...>\n";
    out << "  template <class... Args>\n"
        << requires_line << "  explicit " << wrapper
        << "(r4c::ResilienceRegistry& registry, Args&&... args)\n"
        << "      : " << wrapper
        << "(registry, r4c::grpc::ServerOptions(), std::forward<Args>(args)...) {}\n"
        << "  template <class... Args>\n"
        << requires_line << "  " << wrapper
        << "(r4c::ResilienceRegistry& registry, r4c::grpc::ServerOptions server_options,\n"
        << std::string(wrapper.size() + 3, ' ') << "Args&&... args)\n"
        << "      : " << cls.qualified << "(std::forward<Args>(args)...),\n"
        << "        server_options_(server_options)" << init.str() << " {}\n";
  } else {
    out << "  template <class... Args>\n"
        << "    requires std::is_constructible_v<" << cls.qualified << ", Args&&...>\n"
        << "  explicit " << wrapper << "(r4c::ResilienceRegistry& registry, Args&&... args)\n"
        << "      : " << cls.qualified << "(std::forward<Args>(args)...)" << init.str() << " {}\n";
  }
  for (const Method& method : cls.methods) emit_method(out, cls, method);

  out << "\n private:\n";
  if (cls.delegates) out << "  std::shared_ptr<" << cls.qualified << "> delegate_;\n";
  // An interface's wrapper refuses with the default status: its constructor takes no options.
  if (cls.any_grpc()) out << "  r4c::grpc::ServerOptions server_options_;\n";
  for (const Method& method : cls.methods) {
    if (!method.policies.empty())
      out << "  " << stages_type(method) << " " << method.member << ";\n";
  }
  out << "};\n\n";
  for (auto ns = cls.namespaces.rbegin(); ns != cls.namespaces.rend(); ++ns) {
    out << "}  // namespace" << (ns->name.empty() ? "" : " " + ns->name) << "\n";
  }
  out << "\ntemplate <>\nstruct r4c::ResilientWrapper<" << cls.qualified << "> {\n"
      << "  using type = ";
  std::string qualified_wrapper;
  for (const Namespace& ns : cls.namespaces) {
    if (!ns.name.empty() && !ns.is_inline) qualified_wrapper += ns.name + "::";
  }
  out << qualified_wrapper << wrapper << ";\n};\n";
}

}  // namespace

std::string emit(const Header& header, const std::string& include) {
  bool any_async = false;
  bool any_grpc = false;
  for (const Class& cls : header.classes) {
    any_async = any_async || cls.any_async();
    any_grpc = any_grpc || cls.any_grpc();
  }
  std::ostringstream out;
  out << "// Generated by r4c-gen from " << header.path << ". Do not edit: change the\n"
      << "// [[r4c::...]] attributes there and rebuild. See docs/declarative.md.\n"
      << "#pragma once\n\n"
      << "#include <chrono>\n#include <memory>\n#include <type_traits>\n#include <utility>\n"
      << "#include <vector>\n\n"
      << "#include \"r4c/resilient.hpp\"\n";
  if (any_async) out << "#include \"r4c/detail/resilient_async.hpp\"\n";
  if (any_grpc) out << "#include \"r4c/grpc.hpp\"\n";
  out << "#include " << quoted(include) << "\n";
  for (const Class& cls : header.classes) {
    out << "\n";
    emit_class(out, cls);
  }
  return out.str();
}

}  // namespace r4c::gen
