// The polymorphic pattern's rewrites (pure): a type's logical collection is
// served from the collection that stores every type, each of its commands
// restricted to the type's documents, the discriminator added to what it
// writes and kept out of what it reads.
//
// Reads. find, count and distinct go to the stored collection with
// {<field>: <value>} beside the client's filter (where the type's partial
// indexes serve them), and the discriminator left out by the projection;
// getMore and killCursors follow the cursor there, which comes back under
// the logical name. aggregate reads through the view (ViewStages). A read
// whose filter, sort, projection or key names the discriminator (which
// the application's documents never have) reads through the view too.
// Writes. insert appends the discriminator to each document; update,
// delete and findAndModify select the type's documents, replacements and
// upserts store the discriminator, a pipeline update runs without it and
// sets it again last. A write that names the discriminator is refused with
// BadValue (2): in a document, a statement's filter or update.
// The catalog (catalog.cc): indexes become partial indexes of the stored
// collection, named with the logical collection's prefix.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "patterns/polymorphic/rule.h"
#include "rewrite/capabilities.h"
#include "rewrite/command.h"
#include "rewrite/plan.h"
#include "rules/rule_context.h"

namespace remold {

// The pattern's rewrite part (patterns/pattern.h).
std::optional<Plan> RewritePattern(const Command& command, const RuleContext& rule, const PolymorphicRule& polymorphic,
                                   const Capabilities& caps);

// [{$match: {<field>: <value>}}, <DiscriminatorOut>...]
std::vector<Doc> ViewStages(const PolymorphicRule& rule);
// The stages that leave the discriminator out of the documents read:
// {$project: {<field>: 0}}, twice. Once is MongoDB's form; DocumentDB
// evaluates an $addFields or $set after a single exclusion (even past a
// $sort) on the document before it, and shows the discriminator there
// (and in $$ROOT); after the second, it does not (docs/backends.md,
// departure 10). Both forms are the same on mongod, which merges them.
std::vector<Doc> DiscriminatorOut(const PolymorphicRule& rule);
// The view reads the stored collection.
inline Namespace ViewSource(const PolymorphicRule& rule) { return rule.stored; }
// Every field but the discriminator.
inline bool PassesThrough(const PolymorphicRule& rule, std::string_view field) { return field != rule.field; }

// "polymorphic rule '<name>' for <db.collection>": how every refusal starts.
std::string PolymorphicRuleLabel(const RuleContext& rule, const PolymorphicRule& polymorphic);
// Why a read is refused while documents written before the rule remain.
std::string DocumentsLeft(const std::string& rule_name, const PolymorphicRule& polymorphic);
// engine/rewrites.h, MayRefuseReads.
inline std::optional<std::string> ReadsRefused(const PolymorphicRule& rule, const std::string& rule_name) {
  if (!rule.documents_left) return std::nullopt;
  return DocumentsLeft(rule_name, rule);
}

// Whether a query filter names the discriminator: a clause on it (or a
// path under it), at the top or under $and/$or/$nor, or a clause that may
// read the whole document ($expr naming it or $$ROOT/$$CURRENT, $where,
// $jsonSchema, an operator remold does not know).
bool FilterNamesField(const bson_t* filter, std::string_view field);
// {<field>: <value>} with the clauses of `filter` after it: the type's
// documents that `filter` matches (`filter` does not name the field).
Doc TypeAnd(const PolymorphicRule& rule, const bson_t* filter);

// A find or findAndModify projection that leaves the discriminator out of
// what it returns: none becomes {<field>: 0}; one that returns every field
// but those it excludes gets <field>: 0; one that names its fields stays.
// nullopt when it names the discriminator.
std::optional<Doc> ProjectionWithoutField(const std::optional<Doc>& projection, std::string_view field);

// An index name of the logical collection as stored ("slug_1" ->
// "articles.slug_1"); a hint that is a name likewise (a key pattern stays).
std::string StoredIndexName(const PolymorphicRule& rule, std::string_view name);

// Catalog commands (catalog.cc).
Plan RewritePolymorphicCreateIndexes(const Command& command, const PolymorphicRule& rule, const std::string& who);
Plan RewritePolymorphicListIndexes(const Command& command, const PolymorphicRule& rule);
Plan RewritePolymorphicDropIndexes(const Command& command, const PolymorphicRule& rule, const std::string& who);
Plan RewritePolymorphicCreate(const Command& command, const PolymorphicRule& rule, const std::string& who);
Plan RewritePolymorphicDrop(const Command& command, const PolymorphicRule& rule);

}  // namespace remold
