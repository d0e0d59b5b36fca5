// Helpers for the patterns whose logical collection is stored in another
// collection (bucket, polymorphic), to answer catalog commands on the
// logical name from what the stored collection answers (pure).
#pragma once

#include <string>
#include <string_view>

#include "common/doc.h"

namespace remold {

// Whether a key of a command is one of the generic arguments every
// command may carry (so not an option of the command itself).
bool IsGenericArgument(std::string_view key);

// A backend error about the stored collection, as the client's: every
// string naming `stored` names `logical` instead.
Doc ErrorNamingLogical(const Doc& reply, const std::string& stored, const std::string& logical);

// Copies $clusterTime and operationTime of a backend reply.
void CopyClusterFields(const Doc& from, bson_t* to);

}  // namespace remold
