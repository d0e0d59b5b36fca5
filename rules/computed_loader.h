// The `computed:` section of a rule file -> ComputedRule.
//
//   computed:
//     aggregates:                     # maintained fields of other documents
//       - target: posts               # "collection" (same database) or "db.collection"
//         link: {from: postId, to: _id}
//         create_target: false
//         fields:
//           commentCount: count
//           lastCommentAt: {max: createdAt}
//           lastCommentBy: {latest: author, by: createdAt}
//         derived:
//           avgStars: {divide: [starSum, commentCount]}
//     fields:                         # same-document computed fields
//       total: {sum: {each: items, of: {product: [price, qty]}}}
//     on_client_write: reject         # or overwrite
//
// Internal to rules/; errors are thrown as RuleError (rules/file_context.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include "rules/file_context.h"
#include "rules/rule.h"

namespace remold {

ComputedRule ParseComputed(const FileContext& ctx, const YAML::Node& root, const Namespace& logical);

}  // namespace remold
