// `remold migrate` for a rule whose form is the same documents in another
// shape (patterns/migration.h, DocumentMigration: attributes as pairs):
// runs the document pass (tools/migrate/document_pass.h) from the rule's
// checkpoint and reports what it converted, what cannot be, and what is
// left.
#pragma once

#include <string>

#include "tools/migrate/document_pass.h"
#include "tools/migrate/migration_request.h"

namespace remold {

// `note`: a line to print after the header (a rule that is not migrating).
// The exit status; throws BackendError.
int MigrateDocuments(const MigrationRequest& request, const DocumentConverter& converter, const std::string& note);

}  // namespace remold
