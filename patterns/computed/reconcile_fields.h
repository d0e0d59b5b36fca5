// Reconciling same-document computed fields (patterns/computed/rule.h,
// ComputedRule::fields; part of patterns/computed/reconcile.h): the rule's collection is streamed, each field's expression
// evaluated over the document, and the stored value compared.
//
// With --fix a drifted document is updated with a filter guarded on its
// _id, the inputs of the drifted fields and the drifted values as read: a
// document changed in between is left alone and reported as such. A field
// whose expression fails ("cannot compute") is drift that no fix repairs.
#pragma once

#include <string>

#include "patterns/computed/rule.h"
#include "patterns/reconcile/context.h"

namespace remold {

Summary CheckFields(const ReconcileContext& context, const std::string& rule, const ComputedRule& computed);

}  // namespace remold
