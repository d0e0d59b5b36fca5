// Documents read as stored, made whole after the read (pure): how a find
// that selects and sorts by other fields than the array is served, so that
// documents without the marker cost what a plain find costs.
//
// The find (or a getMore of its cursor) runs as sent, with the marker kept;
// when its batch holds marked documents, their pages are read
//   {find: <aside>, filter: {$or: [{<key field>: <key>, seq: {$lt: pages}}...]}}
// and each is put together as the view would: the embedded elements (when
// the array starts the whole), the pages in order, the tail, the marker
// gone. A document that would be
// larger than a BSON document may be is refused (BSONObjectTooLarge), as
// MongoDB could not have returned it.
#pragma once

#include <string>

#include "common/doc.h"
#include "patterns/array_aside/layout.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

// `plan`, one command whose reply is a cursor reply of stored documents,
// with its documents made whole before the client gets them.
Plan WithDocumentsMadeWhole(Plan plan, const Command& client, const std::string& rule_name, const AsideLayout& rule,
                            int32_t max_bson_object_size);

}  // namespace remold
