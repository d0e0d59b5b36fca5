#include "tools/migrate/checkpoint.h"

#include <chrono>

namespace remold {
namespace {

Doc ById(const std::string& rule) {
  Doc filter;
  AppendString(filter.mut(), "_id", rule);
  return filter;
}

}  // namespace

std::string DirectionName(MigrationDirection direction) {
  return direction == MigrationDirection::kToRule ? "to_rule" : "to_flat";
}

Namespace CheckpointCollection(const Namespace& ns) { return Namespace{ns.db, "remold_migrations"}; }

Checkpoint LoadCheckpoint(BackendClient& backend, const std::string& rule, const Namespace& ns,
                          MigrationDirection direction) {
  Checkpoint checkpoint;
  checkpoint.rule = rule;
  checkpoint.ns = ns;
  checkpoint.direction = direction;
  const Doc filter = ById(rule);
  backend.Find(CheckpointCollection(ns), filter.get(), nullptr, [&](DocumentView view) {
    const bool same = FindString(view.bson, "namespace") == ns.full() &&
                      FindString(view.bson, "direction") == DirectionName(direction) &&
                      !Find(view.bson, "finished");
    if (!same) return;
    checkpoint.resumed = checkpoint.stored = true;
    checkpoint.converted = FindInteger(view.bson, "converted").value_or(0);
    checkpoint.failed = FindInteger(view.bson, "failed").value_or(0);
    if (auto after = Find(view.bson, "after")) {
      Doc id;
      AppendValue(id.mut(), "_id", *after);
      checkpoint.after = std::move(id);
    }
  });
  return checkpoint;
}

void SaveCheckpoint(BackendClient& backend, Checkpoint& checkpoint, bool finished) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  Doc set, update;
  AppendString(set.mut(), "namespace", checkpoint.ns.full());
  AppendString(set.mut(), "direction", DirectionName(checkpoint.direction));
  if (checkpoint.after) AppendValue(set.mut(), "after", *Find(checkpoint.after->get(), "_id"));
  BSON_APPEND_INT64(set.mut(), "converted", checkpoint.converted);
  BSON_APPEND_INT64(set.mut(), "failed", checkpoint.failed);
  BSON_APPEND_DATE_TIME(set.mut(), "updated", now_ms);
  if (finished) BSON_APPEND_DATE_TIME(set.mut(), "finished", now_ms);
  if (!checkpoint.stored) BSON_APPEND_DATE_TIME(set.mut(), "started", now_ms);
  AppendDoc(update.mut(), "$set", set);
  if (!checkpoint.stored && !finished) {  // a new run: a previous run's end no longer holds
    Doc unset;
    BSON_APPEND_UTF8(unset.mut(), "finished", "");
    AppendDoc(update.mut(), "$unset", unset);
  }
  const Doc filter = ById(checkpoint.rule);
  backend.UpdateOne(CheckpointCollection(checkpoint.ns), filter.get(), update.get(), true);
  checkpoint.stored = true;
}

namespace {

// {<op>: {written: <value>}} on the rule's checkpoint.
void ChangeWritten(BackendClient& backend, const Checkpoint& checkpoint, const char* op, const std::string& value) {
  Doc field, update;
  AppendString(field.mut(), "written", value);
  AppendDoc(update.mut(), op, field);
  const Doc filter = ById(checkpoint.rule);
  backend.UpdateOne(CheckpointCollection(checkpoint.ns), filter.get(), update.get(), false);
}

}  // namespace

void MarkBatchWritten(BackendClient& backend, Checkpoint& checkpoint, const std::string& token) {
  if (!checkpoint.stored) SaveCheckpoint(backend, checkpoint, false);
  ChangeWritten(backend, checkpoint, "$addToSet", token);
}

void ForgetBatches(BackendClient& backend, const Checkpoint& checkpoint) {
  ChangeWritten(backend, checkpoint, "$unset", "");
}

bool BatchWritten(BackendClient& backend, const Checkpoint& checkpoint, const std::string& token) {
  Doc filter = ById(checkpoint.rule);
  AppendString(filter.mut(), "written", token);
  return backend.CountDocuments(CheckpointCollection(checkpoint.ns), filter.get(), 1) > 0;
}

}  // namespace remold
