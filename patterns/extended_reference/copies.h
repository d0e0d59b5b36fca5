// What the extended reference pattern's flows share: reading the
// referenced documents, the copy each one makes, and keeping the copies of
// one referenced document in step with it (synced mode).
// Pure: commands are built and queued; nothing is sent.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "patterns/extended_reference/rule.h"
#include "patterns/source_writes/source_rule.h"
#include "rewrite/command.h"
#include "rewrite/command_queue.h"

namespace remold {

// A reference that names one document: present, not null, not an array.
std::optional<bson_iter_t> ReferenceOf(const bson_t* doc, const std::string& field);

// The copy a referenced document makes: {_id, <fields> in its own order}.
Doc CopyOf(const ExtendedReferenceRule& rule, const bson_t* referenced);

// {find: referenced, filter: {_id: {$in: refs}}, projection: {_id, fields},
// singleBatch}: the documents the references (each {v: value}) name (a
// regular expression names none and is left out).
BackendCommand ReadReferenced(const ExtendedReferenceRule& rule, const std::vector<Doc>& refs,
                              const Command& client);

// The copies a ReadReferenced reply holds, by reference.
class CopyTable {
 public:
  explicit CopyTable(const ExtendedReferenceRule& rule, const Doc& reply);
  // {v: copy}, {v: null} for a missing document the rule copies as null,
  // or nullopt for a missing document the rule refuses.
  std::optional<Doc> For(const bson_iter_t& reference) const;

 private:
  const ExtendedReferenceRule& rule_;
  std::map<std::string, Doc> copies_;  // LinkKey bytes -> copy
};

// The refusal of a reference to a document that does not exist.
Refusal MissingReference(const ExtendedReferenceRule& rule, const bson_iter_t& reference);

// A value as a key for maps: whole numbers of one value share a key (1,
// 1L and 1.0 name one document, as the backend matches them); any other
// value is its BSON bytes.
std::string KeyOf(const bson_iter_t& value);
// A value as relaxed Extended JSON, for messages: 5, "c1", {"$oid": ...}.
std::string ValueText(const bson_iter_t& value);

// How a sync runs, in words (for `remold explain`).
std::string SyncLine(const ExtendedReferenceRule& rule);

// Keeps the copies of referenced documents in step with them (synced
// mode): for each reference, read the referenced document, set its copy
// (or null when it is gone) on the referencing documents that hold another
// one, 1,000 at a time, then read the referenced document again; another
// round while it changed meanwhile (up to 8, then a warning). A sync that
// set 1,000 copies or more says so in a notice.
class CopySync {
 public:
  CopySync(const ExtendedReferenceRule& rule, const FollowerContext& context);
  // Queues the sync of `reference` ({v: value}); call once per reference.
  void Schedule(CommandQueue& queue, Doc reference);

 private:
  void Round(CommandQueue& queue, size_t ref, int round);
  void Batch(CommandQueue& queue, size_t ref, int round, Doc copy);
  void Verify(CommandQueue& queue, size_t ref, int round, Doc copy);
  BackendCommand ReadOne(size_t ref) const;

  ExtendedReferenceRule rule_;
  FollowerContext context_;
  void Done(size_t ref);

  std::vector<Doc> refs_;
  std::vector<int64_t> set_;  // per reference: the copies set so far
};

}  // namespace remold
