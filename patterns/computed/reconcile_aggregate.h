// Reconciling one cross-collection aggregate (patterns/computed/rule.h,
// ComputedAggregate; part of patterns/computed/reconcile.h): the
// maintained fields of the target documents against the source documents
// that link to them.
//
// 1. One aggregate on the source counts per link value:
//      [$match {<from>: {$exists: true, $ne: null}},
//       $group {_id: "$<from>", <count>: {$sum: 1}, <sum>: {$sum: "$of"}, <min>/<max>: ...}]
//    plus, per `by` field of the `latest` fields, a $sort {by: -1} and a
//    $group of $first. The results are held in memory, one entry per link
//    value.
// 2. The target collection is streamed and each document compared; the
//    ones that differ are suspects.
// 3. Suspects are confirmed in batches: their targets are read again, then
//    their sources recounted (in that order, so that a source write landing
//    meanwhile shows up as drift only if its maintenance is still missing),
//    and `latest` ties resolved: any source whose `by` equals the maximum is
//    an acceptable latest.
// 4. What is still drifted is reported and, with --fix, repaired by an
//    update guarded on the drifted values as read: a document that changed
//    in between is left alone and reported as such.
// Source link values without a target are orphan links (informational),
// or drift ("target missing") when the aggregate creates its targets;
// --fix then inserts the target with an upsert that only ever inserts.
#pragma once

#include <string>

#include "patterns/computed/rule.h"
#include "patterns/reconcile/context.h"

namespace remold {

Summary CheckAggregate(const ReconcileContext& context, const std::string& rule, const Namespace& source,
                       const ComputedAggregate& aggregate);

}  // namespace remold
