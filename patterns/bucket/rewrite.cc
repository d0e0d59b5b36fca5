#include "patterns/bucket/rewrite.h"

#include <string>

namespace remold {
namespace {

Doc IndexKey(const BucketRule& rule) {
  Doc key;
  for (const auto& meta : rule.meta_fields) BSON_APPEND_INT32(key.mut(), meta.c_str(), 1);
  BSON_APPEND_INT32(key.mut(), rule.bucket_time_field.c_str(), 1);
  return key;
}

}  // namespace

bool PassesThrough(const BucketRule& rule, std::string_view field) {
  for (const std::string& meta : rule.meta_fields)
    if (meta == field) return true;
  return false;
}

BackendCommand EnsureBucketIndex(const BucketRule& rule) {
  // Not unique: a full bucket (max_bytes, max_count) makes room for a new
  // one with the same meta values and start. The name says so: an index
  // of the same keys by the unique name comes from an older remold.
  Doc index;
  AppendDoc(index.mut(), "key", IndexKey(rule));
  std::string name = "remold_bucket";
  for (const auto& meta : rule.meta_fields) name += "_" + meta;
  name += "_" + rule.bucket_time_field + "_multi";
  AppendString(index.mut(), "name", name);

  BackendCommand command;
  AppendString(command.body.mut(), "createIndexes", rule.buckets.collection);
  AppendArray(command.body.mut(), "indexes", {index});
  AppendString(command.body.mut(), "$db", rule.buckets.db);
  return command;
}

std::string FlatReadingsLeft(const std::string& rule_name, const BucketRule& bucket) {
  return "is refused while " + bucket.logical.full() +
         " holds readings written before the rule, which reads of the buckets in " + bucket.buckets.full() +
         " would miss: `remold migrate --rule " + rule_name + "` moves them (the rule's `migrating: false` "
         "says there are none, and serves the buckets alone)";
}

std::string BucketRuleLabel(const RuleContext& rule, const BucketRule& bucket) {
  return "bucket rule '" + rule.name + "' for " + bucket.logical.full();
}

std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule,
                                   const BucketRule& bucket, const Capabilities& caps) {
  const std::string& name = command.name;
  const std::string who = BucketRuleLabel(rule, bucket);
  if (bucket.flat_readings_left &&
      (name == "find" || name == "aggregate" || name == "count" || name == "distinct" || name == "delete"))
    return ImmediateReply(ErrorReply(error_codes::kConflictingOperationInProgress,
                                     who + ": " + name + " " + FlatReadingsLeft(rule.name, bucket)));
  if (name == "insert") return RewriteBucketInsert(command, bucket, who, caps);
  if (name == "find") return RewriteBucketFind(command, bucket, who);
  if (name == "aggregate") return RewriteBucketAggregate(command, bucket, who);
  if (name == "count") return RewriteBucketCount(command, bucket);
  if (name == "distinct") return RewriteBucketDistinct(command, bucket);
  if (name == "getMore") return RewriteBucketGetMore(command, bucket);
  if (name == "killCursors") return RewriteBucketKillCursors(command, bucket);
  if (name == "delete") return RewriteBucketDelete(command, bucket, who);
  if (name == "update" || name == "findAndModify" || name == "findandmodify")
    return ImmediateReply(ErrorReply(error_codes::kInvalidOptions,
        "bucket rule '" + rule.name + "' for " + bucket.logical.full() +
            ": " + name + " of individual readings is not supported (they are stored inside buckets in " +
            bucket.buckets.full() + "); delete whole buckets and insert again, or update the "
            "bucket documents directly"));
  if (name == "create") return RewriteBucketCreate(command, bucket, who);
  if (name == "listIndexes") return RewriteBucketListIndexes(command, bucket);
  if (name == "createIndexes" || name == "dropIndexes" || name == "deleteIndexes" ||
      name == "collStats" || name == "validate" || name == "collMod" || name == "dataSize")
    return RefuseBucketCatalogCommand(command, bucket, who);
  if (name == "drop") {
    Plan plan;
    BackendCommand drop;
    AppendString(drop.body.mut(), "drop", bucket.buckets.collection);
    SealCommand(command, ArgumentTarget::kWrite, bucket.buckets.db, drop.body.mut());
    plan.commands.push_back(std::move(drop));
    plan.shape = [logical = bucket.logical.full()](std::span<const Doc> replies) {
      ShapedReply out;
      bson_iter_t it;
      bson_iter_init(&it, replies.front().get());
      while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "ns") AppendString(out.reply.mut(), "ns", logical);
        else AppendValue(out.reply.mut(), key, it);
      }
      return out;
    };
    return plan;
  }
  return ImmediateReply(ErrorReply(error_codes::kCommandNotSupported,
      "bucket rule '" + rule.name + "' for " + bucket.logical.full() + ": command '" + name +
          "' is not supported on a bucketed collection (supported: insert, find, getMore, "
          "killCursors, aggregate, count, distinct, delete of whole buckets, create, "
          "listIndexes, drop)"));
}

}  // namespace remold
