// The backend's replies to a plan's commands in a fuzz run: those the input
// gives, in order, then, once they run out, a plain success that suits
// most commands: {ok: 1, n: 0, nModified: 0, cursor: {id: 0, ns, firstBatch: []}}
// (ns from the command's "$db" and first value), so that every plan can
// run to its end. With `show`, it prints each command and reply on stderr,
// and so does the caller with the client's reply (to read a reproducer).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "common/doc.h"
#include "rewrite/plan.h"

namespace remold::fuzz {

class ReplyFeed {
 public:
  explicit ReplyFeed(std::vector<Doc> given = {}, bool show = false)
      : given_(std::move(given)), show_(show) {}

  // The reply to `command`, which the plan has just sent.
  Doc Next(const BackendCommand& command);

  // Whether every reply so far had an "ok" field (a plan may hand the
  // backend's reply to the client, as it is or reshaped).
  bool AllHadOk() const { return all_had_ok_; }

  // Prints `doc` as relaxed Extended JSON after `what`, when showing.
  void Show(const char* what, const Doc& doc) const;

 private:
  Doc Default(const BackendCommand& command) const;

  std::vector<Doc> given_;
  bool all_had_ok_ = true;
  size_t next_ = 0;
  bool show_ = false;
};

}  // namespace remold::fuzz
