// SPDX-License-Identifier: Apache-2.0
#include "scan.hpp"

#include <clang-c/Index.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

namespace r4c::gen {

namespace {

// ---- small libclang helpers --------------------------------------------------------------

std::string take(CXString s) {
  const char* c = clang_getCString(s);
  std::string text = c != nullptr ? c : "";
  clang_disposeString(s);
  return text;
}

std::string spelling(CXCursor c) { return take(clang_getCursorSpelling(c)); }
std::string usr(CXCursor c) { return take(clang_getCursorUSR(c)); }
std::string type_spelling(CXType t) { return take(clang_getTypeSpelling(t)); }

template <class F>
void for_each_child(CXCursor parent, F&& f) {
  clang_visitChildren(
      parent,
      [](CXCursor c, CXCursor, CXClientData data) {
        (*static_cast<F*>(data))(c);
        return CXChildVisit_Continue;
      },
      &f);
}

bool has_child(CXCursor parent, CXCursorKind kind) {
  bool found = false;
  for_each_child(parent, [&](CXCursor c) { found = found || clang_getCursorKind(c) == kind; });
  return found;
}

unsigned offset_of(CXSourceLocation location) {
  unsigned offset = 0;
  clang_getSpellingLocation(location, nullptr, nullptr, nullptr, &offset);
  return offset;
}

bool is_class_kind(CXCursorKind kind) {
  return kind == CXCursor_ClassDecl || kind == CXCursor_StructDecl ||
         kind == CXCursor_ClassTemplate || kind == CXCursor_ClassTemplatePartialSpecialization;
}

// ---- fully qualified type names ------------------------------------------------------------
//
// The method id spells parameter types fully qualified, keeping the names the header wrote
// (std::string, not std::basic_string<char>). clang 14's own printer qualifies a type only
// where the source did (and not the arguments of a qualified template), so types are printed
// here, part by part, falling back to clang's canonical spelling (fully qualified, but without
// typedef names) where a part has no simpler form.

std::optional<std::string> qualified_name(CXCursor decl) {
  std::vector<std::string> parts{spelling(decl)};
  for (CXCursor c = clang_getCursorSemanticParent(decl); !clang_Cursor_isNull(c);
       c = clang_getCursorSemanticParent(c)) {
    const CXCursorKind kind = clang_getCursorKind(c);
    if (kind == CXCursor_TranslationUnit) break;
    if (kind == CXCursor_Namespace) {
      if (clang_Cursor_isInlineNamespace(c) || clang_Cursor_isAnonymous(c)) continue;
      parts.push_back(spelling(c));
    } else if (kind == CXCursor_ClassDecl || kind == CXCursor_StructDecl ||
               kind == CXCursor_UnionDecl || kind == CXCursor_EnumDecl) {
      if (clang_Cursor_isAnonymous(c)) return std::nullopt;
      parts.push_back(spelling(c));
    } else if (kind == CXCursor_LinkageSpec) {
      continue;
    } else {
      return std::nullopt;  // a template's member, a local class: no plain name
    }
  }
  std::string name;
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    if (!name.empty()) name += "::";
    name += *part;
  }
  return name;
}

std::string strip_leading_cv(std::string text) {
  for (std::string_view cv : {"const ", "volatile "}) {
    if (text.rfind(cv, 0) == 0) text.erase(0, cv.size());
  }
  return text;
}

std::string print_type(CXType type);

std::string canonical(CXType type) {
  return strip_leading_cv(type_spelling(clang_getCanonicalType(type)));
}

// The type without its own top-level const/volatile.
std::string print_unqualified(CXType type) {
  switch (type.kind) {
    case CXType_Elaborated:
      return print_unqualified(clang_Type_getNamedType(type));
    case CXType_Typedef: {
      auto name = qualified_name(clang_getTypeDeclaration(type));
      return name ? *name : canonical(type);
    }
    case CXType_Record:
    case CXType_Enum: {
      if (clang_Type_getNumTemplateArguments(type) > 0) return canonical(type);
      auto name = qualified_name(clang_getTypeDeclaration(type));
      return name ? *name : canonical(type);
    }
    case CXType_Unexposed: {
      // A template specialization as written: its template's name and the arguments written.
      const int count = clang_Type_getNumTemplateArguments(type);
      const CXCursor decl = clang_getTypeDeclaration(type);
      if (count <= 0 || clang_Cursor_isNull(decl)) return canonical(type);
      CXCursor primary = clang_getSpecializedCursorTemplate(decl);
      if (clang_Cursor_isNull(primary)) primary = decl;
      auto name = qualified_name(primary);
      if (!name) return canonical(type);
      std::string text = *name + "<";
      for (int i = 0; i < count; ++i) {
        const CXType argument =
            clang_Type_getTemplateArgumentAsType(type, static_cast<unsigned>(i));
        if (argument.kind == CXType_Invalid) return canonical(type);  // a value argument
        if (i > 0) text += ", ";
        text += print_type(argument);
      }
      return text + ">";
    }
    default:
      if (type.kind >= CXType_FirstBuiltin && type.kind <= CXType_LastBuiltin) {
        return strip_leading_cv(type_spelling(type));
      }
      return canonical(type);
  }
}

std::string print_type(CXType type) {
  const bool is_const = clang_isConstQualifiedType(type) != 0;
  const bool is_volatile = clang_isVolatileQualifiedType(type) != 0;
  std::string suffix;
  switch (type.kind) {
    case CXType_Pointer:
      suffix = "*";
      break;
    case CXType_LValueReference:
      suffix = "&";
      break;
    case CXType_RValueReference:
      suffix = "&&";
      break;
    default: {
      std::string text;
      if (is_const) text += "const ";
      if (is_volatile) text += "volatile ";
      return text + print_unqualified(type);
    }
  }
  const CXType pointee = clang_getPointeeType(type);
  if (pointee.kind == CXType_FunctionProto || pointee.kind == CXType_ConstantArray ||
      pointee.kind == CXType_IncompleteArray) {
    std::string text = type_spelling(clang_getCanonicalType(type));  // "int (*)(int)"
    return text;
  }
  std::string text = print_type(pointee) + suffix;
  if (is_const) text += " const";
  if (is_volatile) text += " volatile";
  return text;
}

// ---- tokens, without the code the preprocessor skipped ------------------------------------

struct Source {
  std::string display_path;  // as given, for messages
  std::vector<Token> tokens;
  std::vector<unsigned> offsets;  // of each token, ascending

  // Index of the first token at or after `offset`.
  std::size_t at(unsigned offset) const {
    return static_cast<std::size_t>(std::lower_bound(offsets.begin(), offsets.end(), offset) -
                                    offsets.begin());
  }
};

Token::Kind kind_of(CXTokenKind kind) {
  switch (kind) {
    case CXToken_Keyword:
      return Token::Kind::keyword;
    case CXToken_Identifier:
      return Token::Kind::identifier;
    case CXToken_Literal:
      return Token::Kind::literal;
    default:
      return Token::Kind::punctuation;
  }
}

Source read_tokens(CXTranslationUnit tu, CXFile file, const std::string& display_path) {
  Source source;
  source.display_path = display_path;
  std::size_t size = 0;
  const char* contents = clang_getFileContents(tu, file, &size);
  if (contents == nullptr) return source;
  const std::string_view text(contents, size);

  // Ranges the preprocessor skipped (inactive #if branches, directives included).
  std::vector<std::pair<unsigned, unsigned>> skipped;
  if (CXSourceRangeList* ranges = clang_getSkippedRanges(tu, file)) {
    for (unsigned i = 0; i < ranges->count; ++i) {
      skipped.emplace_back(offset_of(clang_getRangeStart(ranges->ranges[i])),
                           offset_of(clang_getRangeEnd(ranges->ranges[i])));
    }
    clang_disposeSourceRangeList(ranges);
  }
  auto in_skipped = [&](unsigned offset) {
    return std::any_of(skipped.begin(), skipped.end(),
                       [&](const auto& r) { return offset >= r.first && offset < r.second; });
  };
  // Directive lines (#if 1, #else, #define ...), continuation lines included.
  auto line_end = [&](unsigned offset) {
    std::size_t end = offset;
    while (true) {
      end = text.find('\n', end);
      if (end == std::string_view::npos) return static_cast<unsigned>(text.size());
      std::size_t last = end;
      while (last > 0 &&
             (text[last - 1] == ' ' || text[last - 1] == '\t' || text[last - 1] == '\r')) {
        --last;
      }
      if (last == 0 || text[last - 1] != '\\') return static_cast<unsigned>(end);
      ++end;
    }
  };

  const CXSourceRange whole =
      clang_getRange(clang_getLocationForOffset(tu, file, 0),
                     clang_getLocationForOffset(tu, file, static_cast<unsigned>(size)));
  CXToken* tokens = nullptr;
  unsigned count = 0;
  clang_tokenize(tu, whole, &tokens, &count);
  unsigned directive_end = 0;
  unsigned previous_line = 0;
  for (unsigned i = 0; i < count; ++i) {
    const CXTokenKind kind = clang_getTokenKind(tokens[i]);
    unsigned line = 0;
    unsigned column = 0;
    unsigned offset = 0;
    clang_getSpellingLocation(clang_getTokenLocation(tu, tokens[i]), nullptr, &line, &column,
                              &offset);
    const bool first_on_line = line != previous_line;
    previous_line = line;
    if (kind == CXToken_Comment || offset < directive_end || in_skipped(offset)) continue;
    std::string spelled = take(clang_getTokenSpelling(tu, tokens[i]));
    if (first_on_line && spelled == "#") {
      directive_end = line_end(offset);
      continue;
    }
    source.tokens.push_back(
        Token{kind_of(kind), std::move(spelled), Location{display_path, line, column}});
    source.offsets.push_back(offset);
  }
  clang_disposeTokens(tu, tokens, count);
  return source;
}

// ---- the classes -------------------------------------------------------------------------

struct Annotated {
  std::vector<Policy> policies;
  Location where;
  bool bypass = false;  // [[r4c::bypass]]
};

// The qualified name of the class a pointer type points to ("grpc::ServerContext"), or "".
std::string pointee_class(CXType type) {
  const CXType canonical_type = clang_getCanonicalType(type);
  if (canonical_type.kind != CXType_Pointer) return "";
  return qualified_name(clang_getTypeDeclaration(clang_getPointeeType(canonical_type)))
      .value_or("");
}

std::string record_name(CXType type) {
  const CXType canonical_type = clang_getCanonicalType(type);
  if (canonical_type.kind != CXType_Record) return "";
  return qualified_name(clang_getTypeDeclaration(canonical_type)).value_or("");
}

class Scanner {
 public:
  Scanner(CXTranslationUnit tu, CXFile main, Source source, Diagnostics& diagnostics)
      : tu_(tu), main_(main), source_(std::move(source)), diagnostics_(diagnostics) {
    // Every attribute-specifier of the header, r4c's checked once here.
    for (std::size_t i = 0; i + 1 < source_.tokens.size(); ++i) {
      if (auto group = parse_attribute_group(source_.tokens, i, diagnostics_)) {
        if (group->has_r4c) {
          by_end_[group->end] = groups_.size();
          by_begin_[group->begin] = groups_.size();
          groups_.push_back(std::move(*group));
          used_.push_back(false);
        } else {
          other_begin_by_end_[group->end] = group->begin;
          other_end_by_begin_[group->begin] = group->end;
        }
        i = group->end - 1;
      }
    }
  }

  Header run() {
    Header header;
    header.path = source_.display_path;
    visit_scope(clang_getTranslationUnitCursor(tu_), header);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      if (used_[g]) continue;
      const Token& first = source_.tokens[groups_[g].begin];
      diagnostics_.error(
          first.where, kNotWrappable,
          "this [[r4c::...]] attribute applies to nothing r4c-gen can wrap; put it "
          "on a virtual method, or between 'class' (or 'struct') and a class's name");
    }
    return header;
  }

 private:
  bool in_main_file(CXCursor c) const {
    CXFile file = nullptr;
    clang_getSpellingLocation(clang_getCursorLocation(c), &file, nullptr, nullptr, nullptr);
    return file != nullptr && clang_File_isEqual(file, main_) != 0;
  }

  Location location(CXCursor c) const {
    unsigned line = 0;
    unsigned column = 0;
    clang_getSpellingLocation(clang_getCursorLocation(c), nullptr, &line, &column, nullptr);
    return Location{source_.display_path, line, column};
  }

  // The r4c attribute-specifiers right before token `index` (other attributes between them
  // are stepped over); marks them used.
  std::vector<Policy> attributes_before(std::size_t index, Location* where = nullptr,
                                        bool* bypass = nullptr) {
    std::vector<Policy> policies;
    collect_groups(index, true, policies, where, bypass);
    return policies;
  }

  std::size_t first_token(CXCursor c) const {
    return source_.at(offset_of(clang_getRangeStart(clang_getCursorExtent(c))));
  }

  // The r4c attributes of a declaration: in front of its first token, and among the attribute
  // groups its extent may start with (clang counts some known attributes in it).
  std::vector<Policy> declaration_attributes(CXCursor c, Location* where = nullptr,
                                             bool* bypass = nullptr) {
    const std::size_t first = first_token(c);
    std::vector<Policy> policies = attributes_before(first, where, bypass);
    collect_groups(first, false, policies, where, bypass);
    return policies;
  }

  // Walks the attribute groups next to token `at`, backward (the groups ending there, then
  // those ending where each began) or forward, stepping over other attributes; marks the r4c
  // ones used and adds their policies to `policies` in source order. `where` ends at the first
  // group in the source: backward, the last one met; forward, only while it is still unset.
  void collect_groups(std::size_t at, bool backward, std::vector<Policy>& policies, Location* where,
                      bool* bypass) {
    const std::map<std::size_t, std::size_t>& groups_at = backward ? by_end_ : by_begin_;
    const std::map<std::size_t, std::size_t>& others_at =
        backward ? other_begin_by_end_ : other_end_by_begin_;
    while (!backward || at > 0) {
      if (auto g = groups_at.find(at); g != groups_at.end()) {
        used_[g->second] = true;
        const AttributeGroup& group = groups_[g->second];
        if (bypass != nullptr && group.bypass) *bypass = true;
        policies.insert(backward ? policies.begin() : policies.end(), group.policies.begin(),
                        group.policies.end());
        if (where != nullptr && (backward || where->file.empty())) {
          *where = source_.tokens[group.begin].where;
        }
        at = backward ? group.begin : group.end;
      } else if (auto other = others_at.find(at); other != others_at.end()) {
        at = other->second;
      } else {
        break;
      }
    }
  }

  void visit_scope(CXCursor scope, Header& header) {
    for_each_child(scope, [&](CXCursor c) {
      const CXCursorKind kind = clang_getCursorKind(c);
      if (kind == CXCursor_Namespace || kind == CXCursor_LinkageSpec) {
        visit_scope(c, header);
      } else if (is_class_kind(kind) && in_main_file(c) && clang_isCursorDefinition(c)) {
        visit_class(c, header);
      }
    });
  }

  // Attributes one policy of each kind: a second one of the same kind is an error.
  std::vector<Policy> one_of_each(std::vector<Policy> policies, const std::string& what) {
    std::vector<Policy> unique;
    for (Policy& policy : policies) {
      auto same = std::find_if(unique.begin(), unique.end(),
                               [&](const Policy& p) { return p.kind == policy.kind; });
      if (same != unique.end()) {
        diagnostics_.error(policy.where, kMalformed,
                           "[[r4c::" + std::string(attribute_name(policy.kind)) +
                               "]] is given twice on " + what + "; give each policy once");
        continue;
      }
      unique.push_back(std::move(policy));
    }
    return unique;
  }

  void visit_class(CXCursor cls, Header& header) {
    const CXCursorKind kind = clang_getCursorKind(cls);
    const std::string name = spelling(cls);
    // Class attributes sit between the class-key and the name, where the cursor points.
    const std::size_t name_index = source_.at(offset_of(clang_getCursorLocation(cls)));
    Location class_where;
    std::vector<Policy> class_policies =
        one_of_each(attributes_before(name_index, &class_where), "class '" + name + "'");
    // The methods declared here, with their own attributes; nested classes on their own.
    std::map<std::string, Annotated> own;
    bool any = !class_policies.empty();
    for_each_child(cls, [&](CXCursor c) {
      const CXCursorKind k = clang_getCursorKind(c);
      if (is_class_kind(k) && clang_isCursorDefinition(c)) {
        visit_class(c, header);
        return;
      }
      if (k != CXCursor_CXXMethod && k != CXCursor_ConversionFunction) return;
      Location where;
      bool bypass = false;
      std::vector<Policy> policies = declaration_attributes(c, &where, &bypass);
      if (policies.empty() && !bypass) return;
      const std::string method = spelling(c);
      if (bypass && !policies.empty()) {
        diagnostics_.error(where, kMalformed,
                           "'" + method +
                               "' has [[r4c::bypass]] and a policy: bypass leaves the method out "
                               "of every policy; give one or the other");
        return;
      }
      any = any || !policies.empty();
      policies = one_of_each(std::move(policies), "'" + method + "'");
      if (!clang_CXXMethod_isVirtual(c)) {
        diagnostics_.error(location(c), kNotWrappable,
                           "'" + method + "' has [[r4c::" +
                               std::string(attribute_name(
                                   policies.empty() ? kAdaptiveLimit : policies.front().kind)) +
                               "]] but is not virtual: r4c-gen wraps a method by overriding it; "
                               "make it virtual or remove the attribute");
        return;
      }
      own[usr(c)] = Annotated{std::move(policies), where, bypass};
    });
    if (!any) return;

    if (kind != CXCursor_ClassDecl && kind != CXCursor_StructDecl) {
      diagnostics_.error(
          location(cls), kNotWrappable,
          "'" + name + "' is a class template: r4c-gen wraps classes, not templates");
      return;
    }
    if (has_child(cls, CXCursor_CXXFinalAttr)) {
      diagnostics_.error(location(cls), kNotWrappable,
                         "'" + name + "' is final: the generated wrapper must derive from it");
      return;
    }
    auto qualified = qualified_name(cls);
    if (!qualified || clang_Cursor_isAnonymous(cls)) {
      diagnostics_.error(location(cls), kNotWrappable,
                         "'" + name +
                             "' has no name that code outside it can spell (a local or "
                             "unnamed class)");
      return;
    }

    Class model;
    model.name = name;
    model.qualified = *qualified;
    model.where = location(cls);
    model.delegates = clang_CXXRecord_isAbstract(cls) != 0;
    for (CXCursor c = clang_getCursorSemanticParent(cls); !clang_Cursor_isNull(c);
         c = clang_getCursorSemanticParent(c)) {
      if (clang_getCursorKind(c) == CXCursor_Namespace) {
        model.namespaces.insert(model.namespaces.begin(),
                                Namespace{clang_Cursor_isAnonymous(c) ? "" : spelling(c),
                                          clang_Cursor_isInlineNamespace(c) != 0});
      } else if (clang_getCursorKind(c) == CXCursor_TranslationUnit) {
        break;
      }
    }

    std::vector<CXCursor> methods;
    std::set<std::string> covered;
    std::set<std::string> seen_classes;
    collect_virtual_methods(cls, methods, covered, seen_classes);
    std::map<std::string, int> overloads;
    for (CXCursor m : methods) {
      auto annotated = own.find(usr(m));
      std::vector<Policy> method_policies;
      const bool bypassed = annotated != own.end() && annotated->second.bypass;
      if (annotated != own.end()) {
        method_policies = annotated->second.policies;
      } else if (in_main_file(m)) {                   // declared in a base class of this header
        method_policies = declaration_attributes(m);  // checked when its own class was
      }
      if (method_policies.empty()) method_policies = inherited_attributes(m);
      // A method's attribute overrides its class's for the same policy.
      std::vector<Policy> policies;
      for (PolicyKind k = 0; k < kKindCount; ++k) {
        auto pick = [&](const std::vector<Policy>& from) -> const Policy* {
          for (const Policy& p : from) {
            if (p.kind == k) return &p;
          }
          return nullptr;
        };
        if (const Policy* p = pick(method_policies)) {
          policies.push_back(*p);
        } else if (const Policy* q = pick(class_policies); q != nullptr && !bypassed) {
          policies.push_back(*q);
        }
      }
      const std::string method_name = spelling(m);
      const bool from_method = !method_policies.empty();
      if (clang_getCXXAccessSpecifier(m) != CX_CXXPublic) {
        if (from_method) {
          diagnostics_.error(
              location(m), kNotWrappable,
              "'" + method_name + "' is not public: the wrapper's callers could not call it");
        } else if (model.delegates && clang_CXXMethod_isPureVirtual(m)) {
          diagnostics_.error(location(m), kNotWrappable,
                             "'" + method_name +
                                 "' is a non-public pure virtual method: the wrapper "
                                 "cannot forward it to its delegate");
        }
        continue;
      }
      if (has_child(m, CXCursor_CXXFinalAttr)) {
        if (model.delegates || !policies.empty()) {
          diagnostics_.error(location(m), kNotWrappable,
                             "'" + method_name + "' is final: the wrapper cannot override it");
        }
        continue;
      }
      if (!model.delegates && policies.empty()) continue;  // runs as the class wrote it
      Method method = describe(m, model, std::move(policies));
      const int index = overloads[method.name]++;
      method.member = member_name(method.name, index);
      check(method, m, from_method);
      model.methods.push_back(std::move(method));
    }
    if (model.methods.empty()) {
      diagnostics_.error(model.where, kNotWrappable,
                         "'" + name +
                             "' has [[r4c::...]] attributes but no public virtual method "
                             "for them to apply to");
      return;
    }
    header.classes.push_back(std::move(model));
  }

  // Method-level attributes of the nearest overridden declaration in this header that has some.
  std::vector<Policy> inherited_attributes(CXCursor method) {
    CXCursor* overridden = nullptr;
    unsigned count = 0;
    clang_getOverriddenCursors(method, &overridden, &count);
    std::vector<Policy> found;
    for (unsigned i = 0; i < count && found.empty(); ++i) {
      if (in_main_file(overridden[i])) {
        found = declaration_attributes(overridden[i]);
      }
      if (found.empty()) found = inherited_attributes(overridden[i]);
    }
    if (overridden != nullptr) clang_disposeOverriddenCursors(overridden);
    return found;
  }

  void mark_overridden(CXCursor method, std::set<std::string>& covered) {
    CXCursor* overridden = nullptr;
    unsigned count = 0;
    clang_getOverriddenCursors(method, &overridden, &count);
    for (unsigned i = 0; i < count; ++i) {
      if (covered.insert(usr(overridden[i])).second) mark_overridden(overridden[i], covered);
    }
    if (overridden != nullptr) clang_disposeOverriddenCursors(overridden);
  }

  // The final overriders of every virtual method of `cls`, its own first, then its bases'.
  void collect_virtual_methods(CXCursor cls, std::vector<CXCursor>& out,
                               std::set<std::string>& covered, std::set<std::string>& seen) {
    if (!seen.insert(usr(cls)).second) return;
    std::vector<CXCursor> bases;
    for_each_child(cls, [&](CXCursor c) {
      const CXCursorKind k = clang_getCursorKind(c);
      if (k == CXCursor_CXXBaseSpecifier) {
        CXCursor base = clang_getCursorDefinition(clang_getTypeDeclaration(clang_getCursorType(c)));
        if (!clang_Cursor_isNull(base)) bases.push_back(base);
        return;
      }
      if ((k != CXCursor_CXXMethod && k != CXCursor_ConversionFunction) ||
          !clang_CXXMethod_isVirtual(c))
        return;
      if (!covered.insert(usr(c)).second) return;
      mark_overridden(c, covered);
      out.push_back(c);
    });
    for (CXCursor base : bases) collect_virtual_methods(base, out, covered, seen);
  }

  static std::string member_name(const std::string& method, int index) {
    std::string member;
    const bool identifier = method.rfind("operator", 0) != 0;
    member = identifier ? method : "operator";
    if (!identifier || index > 0) member += "_" + std::to_string(index);
    return member + "_";
  }

  // The exception specification as the override must repeat it.
  std::string exception_spec(CXCursor m) {
    switch (clang_getCursorExceptionSpecificationType(m)) {
      case CXCursor_ExceptionSpecificationKind_BasicNoexcept:
      case CXCursor_ExceptionSpecificationKind_DynamicNone:
      case CXCursor_ExceptionSpecificationKind_NoThrow:
        return "noexcept";
      case CXCursor_ExceptionSpecificationKind_ComputedNoexcept: {
        // noexcept(<expression>), copied from the declaration's tokens.
        const CXSourceRange extent = clang_getCursorExtent(m);
        std::size_t i = source_.at(offset_of(clang_getRangeStart(extent)));
        const std::size_t end = source_.at(offset_of(clang_getRangeEnd(extent)));
        for (; i < end && source_.tokens[i].text != "noexcept"; ++i) {
        }
        std::string text = "noexcept";
        int depth = 0;
        for (++i; i < end; ++i) {
          const std::string& t = source_.tokens[i].text;
          if (t == "(") ++depth;
          if (t == ")") --depth;
          text += t;
          if (depth == 0) break;
        }
        return text;
      }
      default:
        return "";
    }
  }

  Method describe(CXCursor m, const Class& cls, std::vector<Policy> policies) {
    Method method;
    method.name = spelling(m);
    method.where = location(m);
    method.policies = std::move(policies);
    method.pure = clang_CXXMethod_isPureVirtual(m) != 0;
    method.conversion = clang_getCursorKind(m) == CXCursor_ConversionFunction;
    if (method.conversion) {
      for (std::size_t i = first_token(m); i < source_.tokens.size(); ++i) {
        if (source_.tokens[i].text == "operator") break;
        method.is_explicit = method.is_explicit || source_.tokens[i].text == "explicit";
      }
    }
    method.is_const = clang_CXXMethod_isConst(m) != 0;
    const CXType type = clang_getCursorType(m);
    const CXRefQualifierKind ref = clang_Type_getCXXRefQualifier(type);
    method.lvalue_ref_qualified = ref == CXRefQualifier_LValue;
    method.rvalue_ref_qualified = ref == CXRefQualifier_RValue;
    method.exception_spec = exception_spec(m);
    const CXType result = clang_getResultType(type);
    method.result = print_type(result);
    method.returns_void = clang_getCanonicalType(result).kind == CXType_Void;

    // asio::awaitable<T>: as written, or through a typedef.
    CXType awaitable = result;
    CXCursor decl = clang_getTypeDeclaration(clang_getCanonicalType(result));
    CXCursor primary = clang_getSpecializedCursorTemplate(decl);
    if (!clang_Cursor_isNull(primary) &&
        qualified_name(primary) == std::optional<std::string>("asio::awaitable")) {
      method.async = true;
      while (awaitable.kind == CXType_Elaborated) awaitable = clang_Type_getNamedType(awaitable);
      CXType value = clang_Type_getTemplateArgumentAsType(awaitable, 0);
      if (value.kind == CXType_Invalid) {
        value = clang_Type_getTemplateArgumentAsType(clang_getCanonicalType(result), 0);
      }
      method.async_value = print_type(value);
    }

    // A gRPC handler, by the types grpc_cpp_plugin's services declare it with.
    const int count = clang_Cursor_getNumArguments(m);
    if (count >= 1) {
      const std::string context =
          pointee_class(clang_getCursorType(clang_Cursor_getArgument(m, 0)));
      if (context == "grpc::ServerContext" && record_name(result) == "grpc::Status") {
        method.grpc = GrpcHandler::sync;
      } else if (context == "grpc::CallbackServerContext") {
        method.grpc = pointee_class(result) == "grpc::ServerUnaryReactor"
                          ? GrpcHandler::callback
                          : GrpcHandler::callback_stream;
      }
    }

    std::string id = cls.qualified + "#" + method.name + "(";
    for (int i = 0; i < count; ++i) {
      const CXType t = clang_getCursorType(clang_Cursor_getArgument(m, static_cast<unsigned>(i)));
      Parameter p;
      p.type = print_type(t);
      if (t.kind == CXType_LValueReference) {
        p.passing = Parameter::Passing::lvalue_reference;
        p.const_lvalue_reference = clang_isConstQualifiedType(clang_getPointeeType(t)) != 0;
      } else if (t.kind == CXType_RValueReference) {
        p.passing = Parameter::Passing::rvalue_reference;
      }
      p.needs_type_identity = p.type.find_first_of("([") != std::string::npos;
      const CXTypeKind canonical_kind = clang_getCanonicalType(t).kind;
      p.scalar = (canonical_kind >= CXType_FirstBuiltin && canonical_kind <= CXType_LastBuiltin) ||
                 canonical_kind == CXType_Pointer || canonical_kind == CXType_Enum ||
                 canonical_kind == CXType_MemberPointer;
      if (i > 0) id += ", ";
      id += p.type;
      method.parameters.push_back(std::move(p));
    }
    id += ")";
    if (method.is_const) id += " const";
    if (method.lvalue_ref_qualified) id += " &";
    if (method.rvalue_ref_qualified) id += " &&";
    method.id = std::move(id);
    return method;
  }

  // The rules of a gRPC handler: the server's admission is an adaptive limit, nothing else.
  void check_grpc(const Method& method) {
    if (method.grpc == GrpcHandler::callback_stream) {
      diagnostics_.error(method.where, kNotWrappable,
                         "'" + method.name +
                             "' is a streaming callback handler: r4c-gen guards the unary "
                             "ones (grpc::ServerUnaryReactor*), whose refusal is a finished "
                             "default reactor; guard a stream in its reactor with "
                             "r4c::grpc::admit()");
    }
    for (const Policy& p : method.policies) {
      if (p.kind == kAdaptiveLimit && !p.call_class.empty()) {
        diagnostics_.error(
            p.where, kNotWrappable,
            "'" + method.name + "' is a gRPC handler: its class comes from the " +
                "request's metadata, not from call_class in [[r4c::adaptive_limit]]");
      }
      if (p.kind == kAdaptiveLimit) continue;
      diagnostics_.error(p.where, kNotWrappable,
                         "'" + method.name + "' is a gRPC handler, which r4c-gen guards with " +
                             "the server's admission ([[r4c::adaptive_limit]]) only; [[r4c::" +
                             std::string(attribute_name(p.kind)) +
                             "]] belongs on the client's calls, not on the server's handler");
    }
  }

  // The rules a method must meet for its policies.
  void check(const Method& method, CXCursor m, bool from_method) {
    if (method.grpc != GrpcHandler::none) {
      check_grpc(method);
      return;
    }
    if (clang_isFunctionTypeVariadic(clang_getCursorType(m))) {
      diagnostics_.error(method.where, kNotWrappable,
                         "'" + method.name +
                             "' takes C variadic arguments (...), which a wrapper "
                             "cannot pass on");
    }
    const bool noexcept_method =
        !method.exception_spec.empty() && method.exception_spec != "noexcept(false)";
    if (noexcept_method && !method.async) {
      for (const Policy& p : method.policies) {
        if (!can_throw(p.kind)) continue;
        std::string message = "'" + method.name + "' is " + method.exception_spec +
                              " but [[r4c::" + std::string(attribute_name(p.kind)) +
                              "]] can reject a call by throwing";
        message += from_method
                       ? "; remove the policy or the noexcept"
                       : " (the class's attribute applies to every virtual method); remove "
                         "noexcept, or annotate the methods one by one instead of the class";
        diagnostics_.error(method.where, kNoexceptThrows, message);
        diagnostics_.note(p.where, "the policy is set here");
      }
    }
    const bool retried = method.has(kRetry);
    const bool hedged = method.has(kHedge);
    for (std::size_t i = 0; i < method.parameters.size(); ++i) {
      const Parameter& p = method.parameters[i];
      const std::string which =
          "parameter " + std::to_string(i + 1) + " of '" + method.name + "' (" + p.type + ")";
      if (p.passing == Parameter::Passing::rvalue_reference && (retried || hedged)) {
        diagnostics_.error(method.where, kArgumentsNotRepeatable,
                           which + " is an rvalue reference: a " +
                               std::string(label(retried ? kRetry : kHedge)) +
                               " passes the arguments again after an attempt may have moved from "
                               "them; take it by value or by const reference");
      }
      if (p.passing == Parameter::Passing::lvalue_reference && !p.const_lvalue_reference &&
          hedged) {
        diagnostics_.error(
            method.where, kArgumentsNotRepeatable,
            which +
                " is a non-const reference: a hedge runs attempts at once on "
                "other threads, each on a copy of the arguments; take it by value or by "
                "const reference");
      }
    }
  }

  CXTranslationUnit tu_;
  CXFile main_;
  Source source_;
  Diagnostics& diagnostics_;
  std::vector<AttributeGroup> groups_;
  std::vector<bool> used_;
  std::map<std::size_t, std::size_t> by_end_;
  std::map<std::size_t, std::size_t> by_begin_;
  std::map<std::size_t, std::size_t> other_begin_by_end_;
  std::map<std::size_t, std::size_t> other_end_by_begin_;
};

struct IndexDeleter {
  void operator()(void* index) const { clang_disposeIndex(index); }
};

struct UnitDeleter {
  void operator()(CXTranslationUnitImpl* unit) const { clang_disposeTranslationUnit(unit); }
};

}  // namespace

std::optional<Header> scan(const std::string& path, const std::vector<std::string>& clang_args,
                           Diagnostics& diagnostics) {
  if (!std::ifstream(path)) {
    diagnostics.error(Location{path, 0, 0}, kInput,
                      "cannot read the header: no such readable file");
    return std::nullopt;
  }
  // Parsed as C++20, like r4c's users; the caller's flags come after, so they win.
  std::vector<std::string> args = {"-x", "c++", "-std=c++20", "-Wno-unknown-attributes",
                                   "-Wno-pragma-once-outside-header",
                                   // Asio enables co_await for clang only with
                                   // <experimental/coroutine>; libstdc++'s <coroutine> is there.
                                   "-DASIO_HAS_CO_AWAIT=1"};
  args.insert(args.end(), clang_args.begin(), clang_args.end());
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  std::unique_ptr<void, IndexDeleter> index(clang_createIndex(0, 0));
  CXTranslationUnit raw_unit = nullptr;
  const CXErrorCode error = clang_parseTranslationUnit2(
      index.get(), path.c_str(), argv.data(), static_cast<int>(argv.size()), nullptr, 0,
      CXTranslationUnit_SkipFunctionBodies | CXTranslationUnit_KeepGoing |
          CXTranslationUnit_DetailedPreprocessingRecord,  // for the skipped #if ranges
      &raw_unit);
  std::unique_ptr<CXTranslationUnitImpl, UnitDeleter> unit(raw_unit);
  if (error != CXError_Success || !unit) {
    diagnostics.error(Location{path, 0, 0}, kInput,
                      "libclang could not parse the header (error " +
                          std::to_string(static_cast<int>(error)) + ")");
    return std::nullopt;
  }
  bool failed = false;
  const unsigned count = clang_getNumDiagnostics(unit.get());
  for (unsigned i = 0; i < count; ++i) {
    CXDiagnostic d = clang_getDiagnostic(unit.get(), i);
    const CXDiagnosticSeverity severity = clang_getDiagnosticSeverity(d);
    if (severity >= CXDiagnostic_Error) {
      diagnostics.raw(take(clang_formatDiagnostic(d, clang_defaultDiagnosticDisplayOptions())),
                      true);
      failed = true;
    }
    clang_disposeDiagnostic(d);
  }
  if (failed) {
    diagnostics.error(Location{path, 0, 0}, kInput,
                      "the header does not compile as C++20 with the given include paths and "
                      "definitions (clang's errors above); fix them first");
    return std::nullopt;
  }

  CXFile main = clang_getFile(unit.get(), path.c_str());
  Scanner scanner(unit.get(), main, read_tokens(unit.get(), main, path), diagnostics);
  Header header = scanner.run();
  // Every file the header includes, for the depfile: a change to any regenerates.
  clang_getInclusions(
      unit.get(),
      [](CXFile file, CXSourceLocation*, unsigned, CXClientData data) {
        static_cast<std::vector<std::string>*>(data)->push_back(take(clang_getFileName(file)));
      },
      &header.dependencies);
  return header;
}

}  // namespace r4c::gen
