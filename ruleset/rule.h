// The rules remold applies, as validated, immutable values.
//
// A rule belongs to one logical namespace ("db.collection") and holds the
// rule of its pattern, one of the list in ruleset/patterns.h. Rules are
// built only by the loader (ruleset/loader.h), which has checked every field;
// code that receives a Rule may rely on it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rules/rule_context.h"
#include "ruleset/patterns.h"

namespace remold {

struct Rule : RuleContext {
  PatternRule pattern;  // in a stack, the upper rule
  // A stack (`pattern: [upper, lower]`, ruleset/loader.h): the rules under
  // `pattern`, top first, each storing what the one above writes. Empty
  // for a rule of one pattern (RuleContext::stacked says which).
  std::vector<PatternRule> below;

  const Namespace& logical() const {
    return std::visit([](const auto& p) -> const Namespace& { return p.logical; }, pattern);
  }
  // Every layer, top first: `pattern`, then `below`.
  std::vector<const PatternRule*> layers() const {
    std::vector<const PatternRule*> out{&pattern};
    for (const PatternRule& layer : below) out.push_back(&layer);
    return out;
  }
  // The pattern's name ("bucket", "attribute", ...); a stack's names its
  // layers from the top: "versioned over attribute".
  std::string pattern_name() const {
    std::string out;
    for (const PatternRule* layer : layers())
      out += (out.empty() ? "" : " over ") + std::string(PatternName(*layer));
    return out;
  }
  // Whether one of the layers is a rule of the pattern `name`.
  bool Has(std::string_view name) const {
    for (const PatternRule* layer : layers())
      if (PatternName(*layer) == name) return true;
    return false;
  }

  // The rule part of patterns/pattern.h, over every layer: a stack's
  // describes its layers from the top, "<upper> over <lower>".
  std::string Describe() const {
    return Joined([](const auto& p) { return p.Describe(); }, " over ");
  }
  std::string OnRemoval() const {
    return Joined([](const auto& p) { return p.OnRemoval(); }, "; ");
  }
  std::string OnAddition() const {
    return Joined([](const auto& p) { return p.OnAddition(); }, "; ");
  }
  // The collections besides the logical one whose commands the rule's
  // plans follow (patterns/pattern.h, "Watching").
  std::vector<Namespace> Watches() const {
    std::vector<Namespace> out;
    for (const PatternRule* layer : layers())
      std::visit(
          [&]<typename R>(const R& p) {
            if constexpr (WatchingRule<R>)
              for (Namespace& ns : p.Watches()) out.push_back(std::move(ns));
          },
          *layer);
    return out;
  }
  // The fields of other collections' documents the rule writes.
  std::vector<std::pair<Namespace, std::string>> FieldsWrittenElsewhere() const {
    std::vector<std::pair<Namespace, std::string>> out;
    for (const PatternRule* layer : layers())
      std::visit(
          [&]<typename R>(const R& p) {
            if constexpr (WritesFieldsElsewhere<R>)
              for (auto& field : p.FieldsWrittenElsewhere()) out.push_back(std::move(field));
          },
          *layer);
    return out;
  }
  // How the rule stores the documents of each collection it concerns, as
  // it serves now (patterns/pattern.h, "Sidecars"). A stack's forms of the
  // logical collection name its layers from the top, "<upper> over
  // <lower>": it reads what it writes, and each combination of what its
  // layers read.
  std::vector<NamespaceForms> Forms() const {
    std::vector<NamespaceForms> out;
    std::optional<NamespaceForms> own;
    for (const PatternRule* layer : layers()) {
      for (NamespaceForms& forms : std::visit([](const auto& p) { return p.Forms(); }, *layer)) {
        if (!(forms.ns == logical())) {
          out.push_back(std::move(forms));
        } else if (!own) {
          own = std::move(forms);
        } else {
          std::vector<std::string> reads;
          for (const std::string& upper : own->reads)
            for (const std::string& lower : forms.reads) reads.push_back(upper + " over " + lower);
          own = NamespaceForms{own->ns, own->writes + " over " + forms.writes, std::move(reads)};
        }
      }
    }
    if (own) out.insert(out.begin(), std::move(*own));
    return out;
  }
  std::vector<WrittenNamespace> Writes() const {
    std::vector<WrittenNamespace> out;
    for (const PatternRule* layer : layers())
      for (WrittenNamespace& w : std::visit([](const auto& p) { return p.Writes(); }, *layer))
        out.push_back(std::move(w));
    return out;
  }

 private:
  template <typename Fn>
  std::string Joined(Fn&& text, std::string_view separator) const {
    std::string out;
    for (const PatternRule* layer : layers()) {
      if (!out.empty()) out += separator;
      out += std::visit(text, *layer);
    }
    return out;
  }
};

}  // namespace remold
