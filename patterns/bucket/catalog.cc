// Catalog commands on a bucketed namespace (see rewrite.h): create prepares
// the bucket collection and its index; listIndexes lists the bucket
// collection's indexes (what serves the logical collection); index builds,
// index drops, collStats, validate, collMod and dataSize are refused, naming the
// bucket collection to run them on.
#include <string>
#include <string_view>

#include "patterns/bucket/rewrite.h"
#include "rewrite/cursor_reply.h"
#include "rewrite/stored_elsewhere.h"

namespace remold {

Plan RewriteBucketCreate(const Command& command, const BucketRule& rule, const std::string& who) {
  bson_iter_t it;
  bson_iter_init(&it, command.body.get());
  bson_iter_next(&it);  // the command name
  while (bson_iter_next(&it)) {
    std::string_view key = bson_iter_key(&it);
    if (!IsGenericArgument(key))
      return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
          who + ": create option '" + std::string(key) + "' is not supported on a bucketed "
          "collection (its readings are stored in " + rule.buckets.full() + "); create it "
          "without options"));
  }
  if (InTransaction(command))
    return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
        who + ": create of a bucketed collection is not supported in a transaction"));

  // The bucket collection (NamespaceExists, as create gives, when it is
  // there already), then its index, whatever the first step answered.
  BackendCommand create;
  AppendString(create.body.mut(), "create", rule.buckets.collection);
  SealCommand(command, ArgumentTarget::kWrite, rule.buckets.db, create.body.mut());
  create.may_fail = true;
  BackendCommand index = EnsureBucketIndex(rule);
  Doc sealed;
  bson_iter_t field;
  bson_iter_init(&field, index.body.get());
  while (bson_iter_next(&field))
    if (std::string_view(bson_iter_key(&field)) != "$db") AppendValue(sealed.mut(), bson_iter_key(&field), field);
  SealCommand(command, ArgumentTarget::kAdmin, rule.buckets.db, sealed.mut());
  index.body = std::move(sealed);

  Plan plan;
  plan.commands.push_back(std::move(create));
  plan.commands.push_back(std::move(index));
  plan.shape = [buckets = rule.buckets.full(), logical = rule.logical.full()](
                   std::span<const Doc> replies) {
    ShapedReply out;
    if (!IsOkReply(replies.front())) {
      // The client created `logical`: the error names that namespace.
      out.reply = ErrorNamingLogical(replies.front(), buckets, logical);
      return out;
    }
    BSON_APPEND_DOUBLE(out.reply.mut(), "ok", 1.0);
    CopyClusterFields(replies.back(), out.reply.mut());
    return out;
  };
  return plan;
}

Plan RewriteBucketListIndexes(const Command& command, const BucketRule& rule) {
  Plan plan;
  plan.commands.push_back(RedirectedToBuckets(command, rule, "listIndexes"));
  plan.commands.back().may_fail = true;  // its error is shaped below
  plan.shape = [buckets = rule.buckets.full(), logical = rule.logical.full()](
                   std::span<const Doc> replies) {
    ShapedReply out;
    if (!IsOkReply(replies.front())) out.reply = ErrorNamingLogical(replies.front(), buckets, logical);
    else out.reply = WithCursor(replies.front(), logical, std::nullopt);
    return out;
  };
  return plan;
}

Plan RefuseBucketCatalogCommand(const Command& command, const BucketRule& rule,
                                const std::string& who) {
  const std::string& name = command.name;
  std::string why;
  if (name == "createIndexes" || name == "dropIndexes" || name == "deleteIndexes")
    why = "indexes of the logical collection cannot be built or dropped: its readings are stored "
          "inside bucket documents in " + rule.buckets.full() + ", whose index on the meta fields "
          "and '" + rule.bucket_time_field + "' remold maintains; run " + name +
          " on the bucket collection itself (on its fields: the meta fields, '" +
          rule.bucket_time_field + "', '" + rule.measurements_field + ".<field>')";
  else
    why = "the readings are stored in bucket documents in " + rule.buckets.full() + "; run " +
          name + " on the bucket collection itself";
  return ImmediateReply(ErrorReply(error_codes::kCommandNotSupported,
                                   who + ": command '" + name + "' is not supported on a "
                                   "bucketed collection: " + why));
}

}  // namespace remold
