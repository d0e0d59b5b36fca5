// Every namespace a command references, at any depth, and how it uses each:
// the collection it addresses, the collections its pipeline stages read or
// write (rewrite/pipeline_references.h), the source and target of a rename,
// the namespaces of a MongoDB 8.0 bulkWrite, a view's viewOn, the scope of a
// change stream, the output of a mapReduce, the database dropDatabase drops.
//
// Reads of a namespace for which `view_of` gives a view are rewritten to go
// through it: pipeline stages as pipeline_references.h says, and a view
// created on it ({create, viewOn, pipeline}) as a view on the view's source
// with the view's stages first. An explain is read by the engine, which
// calls this for the explained command.
//
// Pure: the command alone, and the lookup, decide the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"
#include "rewrite/command.h"
#include "rewrite/pipeline_references.h"
#include "rules/namespace.h"

namespace remold {

enum class ReferenceKind {
  kTarget,         // the collection the command addresses
  kRead,           // $lookup, $unionWith
  kRecursiveRead,  // $graphLookup
  kWrite,          // $out, $merge, mapReduce's out
  kRename,         // renameCollection: source and target
  kViewOn,         // create {viewOn}
  kChangeStream,   // $changeStream: a collection, a database (collection ""),
                   // or the cluster (db and collection "")
  kMetadata,       // $collStats, $indexStats on the target
  kBulkWrite,      // an entry of bulkWrite's nsInfo
  kDropDatabase,   // the database (collection "")
};

struct CommandReference {
  Namespace ns;
  ReferenceKind kind;
  std::string via;  // the command or stage that names it: "$lookup", "renameCollection"...
};

struct CommandReferences {
  std::vector<CommandReference> references;
  // The command with its reads rewritten through views; nullopt when
  // nothing was.
  std::optional<Command> rewritten;
};

CommandReferences ReferencesOf(const Command& command, const ViewLookup& view_of = {});

}  // namespace remold
