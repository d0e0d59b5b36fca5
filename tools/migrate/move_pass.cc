#include "tools/migrate/move_pass.h"

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "rewrite/unchanged_guard.h"
#include "tools/migrate/batch_filters.h"

namespace remold {
namespace {

// Past this many sources that cannot be moved, the pass stops.
constexpr size_t kMaxFailures = 10'000;
// The index a move in another order than _id reads its batches by,
// dropped when nothing is left.
constexpr const char* kOrderIndex = "remold_migrate_order";
// Rounds of write-again, delete-again for sources that keep changing
// before they are unstamped and left to a later sweep.
constexpr int kDeleteRounds = 3;
// Sweeps over the sources that kept changing, once nothing else is left,
// each after a pause longer than the last (a document the application
// writes without pause is left for a later run after them).
constexpr int kChangingSweeps = 5;
constexpr std::chrono::milliseconds kFirstSweepPause{50};

// A token prefix unique to this run.
std::string RunId() {
  std::random_device device;
  std::mt19937_64 random(device() ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(random()));
  return text;
}

Doc Stamped(const std::optional<std::string>& token) {
  Doc filter, exists;
  if (token) {
    AppendString(filter.mut(), kMoveStampField, *token);
  } else {
    BSON_APPEND_BOOL(exists.mut(), "$exists", true);
    AppendDoc(filter.mut(), kMoveStampField, exists);
  }
  return filter;
}

Doc Unstamped() {
  Doc filter, exists;
  BSON_APPEND_BOOL(exists.mut(), "$exists", false);
  AppendDoc(filter.mut(), kMoveStampField, exists);
  return filter;
}

// The document without the stamp.
Doc WithoutStamp(const bson_t* document) {
  Doc out;
  bson_copy_to_excluding_noinit(document, out.mut(), kMoveStampField, nullptr);
  return out;
}

Doc Statement(const Doc& q, const Doc& u, bool multi) {
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  AppendDoc(statement.mut(), "u", u);
  BSON_APPEND_BOOL(statement.mut(), "multi", multi);
  return statement;
}

Doc DeleteStatement(const Doc& q) {
  Doc statement;
  AppendDoc(statement.mut(), "q", q);
  BSON_APPEND_INT32(statement.mut(), "limit", 0);
  return statement;
}

class MovePass {
 public:
  MovePass(BackendClient& backend, Checkpoint& checkpoint, const DocumentMover& mover, const PassOptions& options,
           Progress& progress, std::ostream& report)
      : backend_(backend), checkpoint_(checkpoint), mover_(mover), options_(options), progress_(progress),
        report_(report), run_(RunId()) {
    std::string error;
    std::optional<Doc> source = Doc::FromJson(mover.move.source, &error);
    std::optional<Doc> order = Doc::FromJson(mover.move.order, &error);
    if (!source || !order) throw std::logic_error("bad filter or order of the move: " + error);
    source_ = std::move(*source);
    order_ = std::move(*order);
  }

  // Each batch is the first of what is left, in the move's order: what
  // moved is gone from the source, and what cannot move is set aside for
  // the run. What kept changing is set aside until nothing else is left,
  // then tried again, up to kChangingSweeps times.
  MoveOutcome Run() {
    const auto start = std::chrono::steady_clock::now();
    const bool by_id_only = bson_count_keys(order_.get()) == 1;
    if (!by_id_only && !options_.dry_run) backend_.CreateIndex(mover_.move.from, order_.get(), kOrderIndex);
    if (!options_.dry_run) FinishLeftovers();
    int64_t batches = 0, offset = 0;
    int sweeps = 0;
    while (set_aside_.size() + changing_.size() <= kMaxFailures) {
      std::vector<Doc> clauses = {source_};
      if (!options_.dry_run) clauses.push_back(Unstamped());
      if (!set_aside_.empty()) clauses.push_back(NoneOf(set_aside_));
      if (!changing_.empty()) clauses.push_back(NoneOf(changing_));
      std::vector<Doc> batch = Read(All(std::move(clauses)), true, options_.dry_run ? offset : 0);
      if (batch.empty()) {
        // Nothing unstamped is left: a batch stamped by another run since
        // this one began is finished here, as one found at the start is
        // (another run at once, killed since; or a killed run's stamp,
        // which the server applies after its client is gone).
        if (!options_.dry_run && FinishLeftovers()) continue;
        // Then the sources that kept changing are tried again.
        if (!changing_.empty() && sweeps < kChangingSweeps) {
          std::this_thread::sleep_for(kFirstSweepPause * (1 << sweeps++));
          changing_.clear();
          continue;
        }
        break;
      }
      if (options_.dry_run) {
        DryRun(batch);
        offset += static_cast<int64_t>(batch.size());
      } else {
        const std::string token = run_ + ":" + std::to_string(++batches);
        std::vector<Doc> ids;
        for (const Doc& doc : batch) ids.push_back(IdOf(doc.get()));
        Doc set, stamp;
        AppendString(stamp.mut(), kMoveStampField, token);
        AppendDoc(set.mut(), "$set", stamp);
        const int64_t stamped =
            backend_.WriteBatch(mover_.move.from, "update", {Statement(All({AnyOf(ids), Unstamped()}), set, true)}).n;
        // Every document stamped, and none can change meanwhile: the batch
        // as read is what was stamped. Otherwise it is read again.
        const bool as_read = stamped == static_cast<int64_t>(batch.size()) && !mover_.move.sources_change;
        MoveStamped(token, /*ours=*/true, as_read ? std::optional(std::move(batch)) : std::nullopt);
      }
      Throttle(options_.max_rate, outcome_.moved + outcome_.failed, start);
    }
    if (set_aside_.size() + changing_.size() > kMaxFailures) {
      progress_.Clear();
      report_ << "stopping: more than " << kMaxFailures << " documents cannot be moved\n";
    }
    if (!options_.dry_run) {
      outcome_.left = backend_.CountDocuments(mover_.move.from, source_.get(), kCountAll);
      if (outcome_.left > 0)
        outcome_.in_flight = backend_.CountDocuments(mover_.move.from, All({source_, Stamped(std::nullopt)}).get(),
                                                     kCountAll);
      if (outcome_.left == 0) {
        // Nothing stamped is left, by this run or another: no batch is
        // in flight, and the set of batches written can go.
        ForgetBatches(backend_, checkpoint_);
        if (!by_id_only) backend_.DropIndex(mover_.move.from, kOrderIndex);
      }
      SaveCheckpoint(backend_, checkpoint_, outcome_.left == 0);
    }
    return outcome_;
  }

 private:
  std::vector<Doc> Read(const Doc& filter, bool limited, int64_t skip = 0) {
    Doc options;
    AppendDoc(options.mut(), "sort", order_);
    if (skip > 0) BSON_APPEND_INT64(options.mut(), "skip", skip);
    if (limited) BSON_APPEND_INT64(options.mut(), "limit", options_.batch);
    std::vector<Doc> documents;
    backend_.Find(mover_.move.from, filter.get(), options.get(),
                  [&](DocumentView view) { documents.push_back(Doc::FromBson(view.bson)); });
    return documents;
  }

  // The batches another run stamped and did not finish (yet); whether
  // there was one.
  bool FinishLeftovers() {
    bool found = false;
    while (true) {
      std::vector<Doc> one = Read(Stamped(std::nullopt), true);
      if (one.empty()) return found;
      found = true;
      const std::string token = *FindString(one.front().get(), kMoveStampField);
      MoveStamped(token, /*ours=*/false);
    }
  }

  void Fail(const Doc& source, const std::string& why) {
    progress_.Clear();
    report_ << "cannot move " << IdOf(source.get()).ToRelaxedJson() << ": " << why << "\n";
    set_aside_.push_back(IdOf(source.get()));
    ++outcome_.failed;
    ++checkpoint_.failed;
  }

  // Writes the sources stamped `token`, then deletes them. `ours`: this run
  // stamped them just now; otherwise they are another run's (killed, or
  // running still), written already unless the checkpoint says otherwise,
  // asked after reading them: a run deletes only once its batch is marked
  // written, so a batch read before that mark is read whole. `known`: the
  // sources as read before the stamp, when that is what they still are.
  void MoveStamped(const std::string& token, bool ours, std::optional<std::vector<Doc>> known = std::nullopt) {
    std::vector<Doc> stamped = known ? std::move(*known) : Read(Stamped(token), false);
    const bool written_before = !ours && BatchWritten(backend_, checkpoint_, token);
    int64_t moved = 0;
    for (int round = 1; !stamped.empty(); ++round) {
      std::set<size_t> unmoved;
      // A one-to-one move writes again what it wrote: a source may have
      // changed since, and its copy is replaced with what it holds now.
      if (!written_before || round > 1 || mover_.move.one_to_one) {
        unmoved = Write(stamped, token);
        MarkBatchWritten(backend_, checkpoint_, token);
      }
      std::vector<Doc> deletes, moved_ids, unstamp_ids;
      for (size_t i = 0; i < stamped.size(); ++i) {
        if (unmoved.count(i)) {
          unstamp_ids.push_back(IdOf(stamped[i].get()));
          continue;
        }
        if (mover_.move.sources_change) deletes.push_back(DeleteStatement(UnchangedDocument(stamped[i])));
        moved_ids.push_back(IdOf(stamped[i].get()));
      }
      if (!mover_.move.sources_change && !moved_ids.empty())
        deletes.push_back(DeleteStatement(All({AnyOf(moved_ids), Stamped(token)})));
      const int64_t deleted = deletes.empty() ? 0 : backend_.WriteBatch(mover_.move.from, "delete", deletes).n;
      moved += deleted;
      if (!unstamp_ids.empty()) Unstamp(unstamp_ids);
      if (deleted == static_cast<int64_t>(moved_ids.size())) break;  // every stamped source gone or unstamped
      // Sources still stamped changed after they were read: again.
      stamped = Read(Stamped(token), false);
      if (!stamped.empty() && round >= kDeleteRounds) {
        std::vector<Doc> ids;
        for (const Doc& doc : stamped) ids.push_back(IdOf(doc.get()));
        Unstamp(ids);  // left for a later sweep or run, which moves what they gained
        changing_.insert(changing_.end(), ids.begin(), ids.end());
        break;
      }
    }
    outcome_.moved += moved;
    checkpoint_.converted += moved;
    SaveCheckpoint(backend_, checkpoint_, false);
    progress_.Advance(moved);
  }

  // Writes `stamped` to the destination; the indexes of the sources not
  // stored there (reported and to be unstamped).
  std::set<size_t> Write(const std::vector<Doc>& stamped, const std::string& token) {
    std::vector<Doc> batch;
    for (const Doc& doc : stamped) batch.push_back(WithoutStamp(doc.get()));
    MovedBatch moved = mover_.moved(batch, token);
    std::set<size_t> unmoved;
    for (const auto& [index, why] : moved.failed) {
      Fail(stamped[index], why);
      unmoved.insert(index);
    }
    const bool inserts = !moved.inserts.empty();
    const std::vector<Doc>& writes = inserts ? moved.inserts : moved.upserts;
    if (writes.empty()) return unmoved;
    BatchWriteResult result = backend_.WriteBatch(mover_.move.to, inserts ? "insert" : "update", writes);
    for (const WriteFailure& failure : result.errors) {
      if (failure.code == kDuplicateKey) continue;  // written by an earlier attempt
      if (failure.index < 0 || static_cast<size_t>(failure.index) >= moved.sources.size()) continue;
      for (size_t index : moved.sources[static_cast<size_t>(failure.index)]) {
        if (unmoved.insert(index).second) Fail(stamped[index], "write failed: " + failure.message);
      }
    }
    outcome_.written += result.n;  // inserted, or upserted
    return unmoved;
  }

  void Unstamp(const std::vector<Doc>& ids) {
    Doc unset, field;
    AppendString(field.mut(), kMoveStampField, "");
    AppendDoc(unset.mut(), "$unset", field);
    backend_.WriteBatch(mover_.move.from, "update", {Statement(AnyOf(ids), unset, true)});
  }

  void DryRun(const std::vector<Doc>& batch) {
    MovedBatch moved = mover_.moved(batch, run_);
    for (const auto& [index, why] : moved.failed) Fail(batch[index], why);
    outcome_.moved += static_cast<int64_t>(batch.size() - moved.failed.size());
    outcome_.written += static_cast<int64_t>(moved.inserts.size() + moved.upserts.size());
    progress_.Advance(static_cast<int64_t>(batch.size()));
  }

  BackendClient& backend_;
  Checkpoint& checkpoint_;
  const DocumentMover& mover_;
  const PassOptions& options_;
  Progress& progress_;
  std::ostream& report_;
  const std::string run_;
  Doc source_;
  Doc order_;
  std::vector<Doc> set_aside_;  // cannot move: not read again this run
  std::vector<Doc> changing_;   // kept changing: not read again until the next sweep
  MoveOutcome outcome_;
};

}  // namespace

MoveOutcome RunMovePass(BackendClient& backend, Checkpoint& checkpoint, const DocumentMover& mover,
                        const PassOptions& options, Progress& progress, std::ostream& report) {
  return MovePass(backend, checkpoint, mover, options, progress, report).Run();
}

}  // namespace remold
