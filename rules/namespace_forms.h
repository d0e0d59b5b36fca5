// NamespaceForms: how a rule stores the documents of one collection, for
// sidecars that must agree (app/sidecars.h): the form its writes store, and
// the forms its reads serve without a wrong answer (as the documents were
// written, or by refusing them). A collection without a rule is "plain": it
// writes plain documents and reads any form stored as written ("plain", or
// "plain+<what a rule maintains beside them>").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/namespace.h"

namespace remold {

inline constexpr std::string_view kPlainForm = "plain";

struct NamespaceForms {
  Namespace ns;
  std::string writes;
  std::vector<std::string> reads;
};

// A form whose documents are stored as written (every layer of a stack
// too): a collection without a rule reads it as the application wrote it.
inline bool StoredAsWritten(std::string_view form) {
  while (true) {
    if (form.substr(0, kPlainForm.size()) != kPlainForm) return false;
    const size_t over = form.find(" over ");
    if (over == std::string_view::npos) return true;
    form.remove_prefix(over + 6);
  }
}

}  // namespace remold
