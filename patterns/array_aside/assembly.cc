#include "patterns/array_aside/assembly.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "patterns/array_aside/stored_form.h"
#include "rewrite/cursor_reply.h"

namespace remold {
namespace {

// The documents of a cursor reply's batch (first or next), as iterated.
std::vector<Doc> Batch(const Doc& reply) {
  std::optional<Doc> cursor = FindDocument(reply.get(), "cursor");
  if (!cursor) return {};
  for (const char* key : {"firstBatch", "nextBatch"})
    if (auto batch = Find(cursor->get(), key); batch && BSON_ITER_HOLDS_ARRAY(&*batch)) return ArrayDocuments(*batch);
  return {};
}

struct Overflowed {
  Doc key;        // boxed
  int32_t pages;
};

std::optional<Overflowed> OverflowOf(const AsideLayout& rule, const Doc& stored) {
  std::optional<Doc> marker = FindDocument(stored.get(), rule.marker);
  if (!marker) return std::nullopt;
  auto key = Find(marker->get(), "key");
  auto pages = Find(marker->get(), "pages");
  if (!key || !pages || !BSON_ITER_HOLDS_INT32(&*pages)) return std::nullopt;
  return Overflowed{Boxed(*key), bson_iter_int32(&*pages)};
}

// The pages of one key: seq -> the page document.
using Pages = std::map<int32_t, Doc>;

// `stored` whole, or nullopt when a page it counts is missing from a reply
// that did not hold them all. A page missing from a complete reply was
// deleted (by an application, from the aside collection): its elements
// are left out, as the view leaves them.
std::optional<Doc> Whole(const AsideLayout& rule, const Doc& stored, const Pages& pages, bool complete) {
  std::optional<Overflowed> overflowed = OverflowOf(rule, stored);
  std::optional<Doc> marker = FindDocument(stored.get(), rule.marker);
  if (!overflowed || !marker) return std::nullopt;  // a marker remold did not write
  Doc out;
  bson_iter_t it;
  bson_iter_init(&it, stored.get());
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == rule.marker) continue;
    if (key != rule.array || !BSON_ITER_HOLDS_ARRAY(&it)) {
      AppendValue(out.mut(), key, it);
      continue;
    }
    bson_t array;
    bson_append_array_begin(out.mut(), rule.array.c_str(), -1, &array);
    uint32_t index = 0;
    auto append = [&](const bson_iter_t& values) {
      ForEachChild(values, [&](std::string_view, const bson_iter_t& value) {
        AppendValue(&array, std::to_string(index++), value);
      });
    };
    if (rule.ArrayStartsWhole()) append(it);
    for (int32_t seq = 0; seq < overflowed->pages; ++seq) {
      auto page = pages.find(seq);
      if (page == pages.end()) {
        if (!complete) return std::nullopt;
        continue;
      }
      if (rule.one_per_document) {
        if (auto event = Find(page->second.get(), "event")) AppendValue(&array, std::to_string(index++), *event);
      } else if (auto elements = Find(page->second.get(), "elements"); elements && BSON_ITER_HOLDS_ARRAY(&*elements)) {
        append(*elements);
      }
    }
    if (auto tail = Find(marker->get(), "tail"); tail && BSON_ITER_HOLDS_ARRAY(&*tail)) append(*tail);
    bson_append_array_end(out.mut(), &array);
  }
  return out;
}

// The read of the pages the batch's overflowed documents count.
BackendCommand PagesRead(const Command& client, const AsideLayout& rule, const std::vector<Overflowed>& overflowed) {
  std::vector<Doc> each;
  for (const Overflowed& o : overflowed) {
    Doc clause, below;
    AppendValue(clause.mut(), rule.KeyField(), Unboxed(o.key));
    BSON_APPEND_INT32(below.mut(), "$lt", o.pages);
    AppendDoc(clause.mut(), "seq", below);
    each.push_back(std::move(clause));
  }
  Doc filter;
  if (each.size() == 1) filter = each.front();
  else AppendArray(filter.mut(), "$or", each);
  BackendCommand read;
  bson_t* body = read.body.mut();
  AppendString(body, "find", rule.aside.collection);
  AppendDoc(body, "filter", filter);
  // Not singleBatch: a batch the reply's size cut short leaves the cursor
  // open, which tells a page missing from the reply from a page deleted.
  BSON_APPEND_INT32(body, "batchSize", 1 << 30);
  SealCommand(client, ArgumentTarget::kRead, rule.aside.db, body);
  return read;
}

struct Assembly {
  std::string rule_name;
  AsideLayout rule;
  int32_t max_size = 0;
  bool read_pages = false;
};

}  // namespace

Plan WithDocumentsMadeWhole(Plan plan, const Command& client, const std::string& rule_name, const AsideLayout& rule,
                            int32_t max_bson_object_size) {
  auto assembly = std::make_shared<Assembly>(Assembly{rule_name, rule, max_bson_object_size, false});
  const Command command = client;
  plan.then = [assembly, command](std::span<const Doc> replies) -> Step {
    if (!IsOkReply(replies.front())) return Step{};
    std::vector<Overflowed> overflowed;
    for (const Doc& stored : Batch(replies.front()))
      if (std::optional<Overflowed> o = OverflowOf(assembly->rule, stored); o && o->pages > 0) overflowed.push_back(std::move(*o));
    if (overflowed.empty()) return Step{};
    assembly->read_pages = true;
    return Step{{PagesRead(command, assembly->rule, overflowed)}, {}};
  };
  plan.follow_ups.push_back("the pages of the marked documents in the batch are read, and each is made whole");
  plan.shape = [assembly](std::span<const Doc> replies) -> ShapedReply {
    const Doc& reply = replies.front();
    if (!IsOkReply(reply)) return ShapedReply{reply, {}, {}, {}, {}, {}};
    std::map<std::string, Pages> pages;  // by the key's bytes
    bool complete = true;
    ShapedReply killed;  // the pages cursor, left open by a reply cut short
    if (assembly->read_pages) {
      if (!IsOkReply(replies.back())) return ShapedReply{replies.back(), {}, {}, {}, {}, {}};
      std::optional<Doc> cursor = FindDocument(replies.back().get(), "cursor");
      const int64_t open = cursor ? FindInteger(cursor->get(), "id").value_or(0) : 0;
      complete = cursor && open == 0;
      if (open != 0) {
        killed.cursors_to_kill.push_back(open);
        killed.kill_db = assembly->rule.aside.db;
        killed.kill_collection = assembly->rule.aside.collection;
      }
      for (Doc& page : FirstBatch(replies.back())) {
        auto parent = Find(page.get(), assembly->rule.KeyField());
        auto seq = Find(page.get(), "seq");
        if (!parent || !seq || !BSON_ITER_HOLDS_INT32(&*seq)) continue;
        const Doc key = Boxed(*parent);
        pages[std::string(reinterpret_cast<const char*>(key.bytes().data()), key.bytes().size())]
            .emplace(bson_iter_int32(&*seq), std::move(page));
      }
    }
    std::optional<Doc> refusal;
    Doc out = RewriteCursorReply(reply, [&](std::string_view key, const bson_iter_t& value, CursorOut cursor) {
      if ((key != "firstBatch" && key != "nextBatch") || !BSON_ITER_HOLDS_ARRAY(&value)) return false;
      std::vector<Doc> documents;
      for (Doc& stored : ArrayDocuments(value)) {
        if (!Find(stored.get(), assembly->rule.marker)) {
          documents.push_back(std::move(stored));
          continue;
        }
        std::optional<Overflowed> o = OverflowOf(assembly->rule, stored);
        const Pages none;
        const Pages* of = &none;
        if (o) {
          auto found = pages.find(std::string(reinterpret_cast<const char*>(o->key.bytes().data()), o->key.bytes().size()));
          if (found != pages.end()) of = &found->second;
        }
        std::optional<Doc> whole = Whole(assembly->rule, stored, *of, complete);
        if (!whole) {
          refusal = ErrorReply(error_codes::kBSONObjectTooLarge,
                               assembly->rule.pattern + " rule '" + assembly->rule_name + "' for " + assembly->rule.logical.full() +
                               ": the pages of this batch's documents did not all come back in one reply (they are "
                               "larger together than a reply can carry); read fewer at once (batchSize), or leave '" +
                               assembly->rule.array + "' out");
          return false;
        }
        if (static_cast<int64_t>(whole->bytes().size()) > assembly->max_size) {
          refusal = ErrorReply(error_codes::kBSONObjectTooLarge,
                               assembly->rule.pattern + " rule '" + assembly->rule_name + "' for " + assembly->rule.logical.full() + ": a document read whole would "
                               "be " + std::to_string(whole->bytes().size()) + " bytes, more than the " +
                               std::to_string(assembly->max_size) + " a document may be; leave '" +
                               assembly->rule.array + "' out of the read");
          return false;
        }
        documents.push_back(std::move(*whole));
      }
      AppendArray(cursor.doc, key, documents);
      return true;
    });
    killed.reply = refusal ? std::move(*refusal) : std::move(out);
    return killed;
  };
  return plan;
}

}  // namespace remold
