// The commands a mongos answers itself about the cluster, answered by remold
// where the backend is not a sharded cluster: the backend (a replica set or
// a standalone) is one shard. Behind mongos backends they go through.
//
//   listShards (admin)        {shards: [{_id, host, state: 1}]}
//   find on config.shards     the same documents, as a cursor
//   isdbgrid                  {isdbgrid: 1, hostname}
//
// Pure: the request and the topology in, a reply document out.
#pragma once

#include <optional>

#include "common/doc.h"
#include "proxy/routing/topology_view.h"
#include "proxy/wire/backend_uri.h"
#include "proxy/wire/request.h"

namespace remold {

// The reply remold gives in a mongos's place, or nullopt when the request
// is not one of those above or the backend is itself sharded. `view` is
// null with directConnection=true.
std::optional<Doc> AnswerAsMongos(const wire::Request& request, const TopologyView* view,
                                  const BackendOptions& backend);

}  // namespace remold
