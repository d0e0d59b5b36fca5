// A distinct answered by an aggregate (pure): the client's reply
//   {values: [...], ok: 1}
// built from the reply of an aggregate ending in
//   {$group: {_id: null, values: {$addToSet: <key>}}}
// and, when a second reply is given, a plain distinct's `values` merged in.
// Values come once each, in BSON order.
#pragma once

#include <span>

#include "common/doc.h"

namespace remold {

Doc DistinctReply(std::span<const Doc> replies);

// The stages that end such an aggregate for the distinct of `key`: each
// element of an array value counts, as distinct counts them, and so does
// each element of an array on the way to it.
std::vector<Doc> DistinctStages(const std::string& key);

}  // namespace remold
