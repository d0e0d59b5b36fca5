// The plans of the writes to an array stored partly aside (layout.h; pure;
// see rewrite.h for when each is used).
//
// AsideWritePlan, in steps:
//   1. marked documents matching one of `fold_filters` are read
//      through the view and stored whole, each under a guard that it is
//      as read, until none is left (a document too large to be stored
//      whole refuses the write: BSONObjectTooLarge);
//   2. the keys of marked documents matching `keys_of` are read (the
//      documents a delete may remove);
//   3. the client's write runs, as `write` says;
//   4. the documents it may have left with more than `first` elements,
//      or a full tail, have their overflow moved aside (stored_form.h);
//   5. the pages of keys read in 1 and 2 that no document names any more
//      are deleted.
// Steps 4 and 5 may fail without failing the client's write: a document
// left whole is read right, and pages no document names are never read.
// A write of one document is pinned to it (AsideWrite::pinned): another
// write moving its overflow aside between steps 1 and 3 makes it refused
// (WriteConflict), never passed by.
//
// AsideAppendPlan: a $push onto the array of the one document a filter
// pins by _id. The document's form is read; the push runs once, on that
// form (onto the tail of a marked document, as sent otherwise); then
// step 4. A document that changed form in between is not written, and the
// write is refused with WriteConflict.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/doc.h"
#include "patterns/migration_direction.h"
#include "patterns/array_aside/layout.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"

namespace remold {

struct AsideWrite {
  std::vector<Doc> fold_filters;
  std::optional<Doc> collation;  // of the filters
  std::optional<Doc> keys_of;
  BackendCommand write;
  // The documents that may need their overflow moved aside after the
  // write, from its reply; nullopt: none.
  std::function<std::optional<Doc>(const Doc& reply)> written;
  // Set for a write of one document (one statement of limit 1 or multi
  // false, or a findAndModify): step 1 reads the one document its filter
  // (fold_filters, one) selects, in `sort` order, in whichever form, and
  // stores it whole when it overflowed; the write is then sent as
  // `pinned` makes it of {_id: <that document's>}, and a write that then
  // matches nothing (`matched` says from its reply) is refused with
  // WriteConflict: the document changed in between, nothing was written.
  // With no document found, `write` is sent (an upsert may insert).
  std::function<BackendCommand(const Doc& id)> pinned;
  std::function<bool(const Doc& reply)> matched;
  std::optional<Doc> sort;
};

Plan AsideWritePlan(const Command& client, const std::string& rule_name, const AsideLayout& rule, AsideWrite write);

// `statement`: the client's one update statement; `filter` its filter
// (pinning _id), `tail_update` its update with the push onto the tail,
// `pushed` how many elements it pushes.
Plan AsideAppendPlan(const Command& client, const std::string& rule_name, const AsideLayout& rule,
                     const Doc& statement, const Doc& filter, const Doc& tail_update, int64_t pushed);

// One round of `remold migrate` (patterns/migration.h): up to a batch of
// the documents over `first` elements moved aside (kToRule), or of the
// marked documents stored whole, their keys retired (kToFlat).
Plan AsideMigrationRound(const std::string& rule_name, const AsideLayout& rule, MigrationDirection direction);

// `statement` with `value` under `key` in place of its own (appended when
// it has none).
Doc WithField(const Doc& statement, std::string_view key, const bson_iter_t& value);
Doc WithDocument(const Doc& statement, std::string_view key, const Doc& value);

// {$and}-free conjunction of two filters' top-level clauses.
Doc Beside(const Doc& filter, const Doc& more);

}  // namespace remold
