// Sixteen concurrent clients through remold: each thread pops its own client
// from a pool and interleaves inserts, finds and updates on its own
// documents, checking every reply against a local model; at the end the
// whole collection is checked from the main thread.

#include <barrier>
#include <map>
#include <thread>

#include "driver.h"

namespace e2e {
namespace {

constexpr int kThreads = 16;
constexpr int kSteps = 40;

std::string DocId(int thread, int step) { return "t" + std::to_string(thread) + "-" + std::to_string(step); }

// One thread's work. Returns a description of the first mismatch, or "".
class Worker {
 public:
  Worker(mongoc_client_pool_t* pool, std::string db_name, int thread)
      : pool_(pool), db_name_(std::move(db_name)), thread_(thread) {}

  std::string Run(std::barrier<>& start) {
    mongoc_client_t* client = mongoc_client_pool_pop(pool_);
    CollectionPtr coll(mongoc_client_get_collection(client, db_name_.c_str(), "c"));
    start.arrive_and_wait();
    std::string failure;
    for (int step = 0; step < kSteps && failure.empty(); ++step) failure = Step(coll.get(), step);
    if (failure.empty()) failure = CheckAll(coll.get());
    coll.reset();
    mongoc_client_pool_push(pool_, client);
    return failure.empty() ? "" : "thread " + std::to_string(thread_) + ": " + failure;
  }

 private:
  // Insert a document, bump an earlier one, and read back this thread's set.
  std::string Step(mongoc_collection_t* coll, int step) {
    bson_error_t error;
    Bson reply;
    Bson doc = Bson().Add("_id", DocId(thread_, step)).Add("t", thread_).Add("step", step).Add("v", 0);
    if (!mongoc_collection_insert_one(coll, doc.get(), nullptr, reply.out(), &error)) {
      return "insert " + DocId(thread_, step) + ": " + error.message;
    }
    model_[step] = 0;

    const int target = step / 2;
    if (!mongoc_collection_update_one(coll, Bson().Add("_id", DocId(thread_, target)).get(),
                                      Json(R"({"$inc": {"v": 1}})").get(), nullptr, reply.out(), &error)) {
      return "update " + DocId(thread_, target) + ": " + error.message;
    }
    if (reply.Int("modifiedCount") != 1) return "update reply " + reply.Json();
    model_[target] += 1;

    CursorPtr cursor(mongoc_collection_find_with_opts(coll, Bson().Add("t", thread_).get(),
                                                      Json(R"({"projection": {"step": 1, "v": 1}})").get(), nullptr));
    std::vector<Bson> found = Drain(cursor.get());
    if (found.size() != model_.size()) {
      return "step " + std::to_string(step) + ": found " + std::to_string(found.size()) + " documents, want " +
             std::to_string(model_.size());
    }
    return "";
  }

  std::string CheckAll(mongoc_collection_t* coll) {
    CursorPtr cursor(mongoc_collection_find_with_opts(coll, Bson().Add("t", thread_).get(),
                                                      Json(R"({"sort": {"step": 1}})").get(), nullptr));
    std::vector<Bson> found = Drain(cursor.get());
    if (found.size() != model_.size()) return "final read found " + std::to_string(found.size()) + " documents";
    for (const Bson& doc : found) {
      std::optional<int64_t> step = doc.Int("step");
      if (!step || doc.Int("v") != model_[static_cast<int>(*step)] || doc.Int("t") != thread_) {
        return "unexpected document " + doc.Json();
      }
    }
    return "";
  }

  mongoc_client_pool_t* pool_;
  std::string db_name_;
  int thread_;
  std::map<int, int64_t> model_;  // step -> v
};

using ConcurrencyTest = DriverTest;

TEST_F(ConcurrencyTest, SixteenClientsInterleaveReadsAndWrites) {
  std::barrier start(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { failures[t] = Worker(pool_.get(), db_name(), t).Run(start); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");

  // Every thread's documents, seen from another client: step s was bumped
  // once by each of steps 2s and 2s+1 that ran.
  CollectionPtr coll = Collection();
  Bson pipeline = Json(R"({"pipeline": [{"$group": {"_id": "$t", "n": {"$sum": 1}, "v": {"$sum": "$v"}}},
                                        {"$sort": {"_id": 1}}]})");
  CursorPtr cursor(mongoc_collection_aggregate(coll.get(), MONGOC_QUERY_NONE, pipeline.get(), nullptr, nullptr));
  std::vector<Bson> per_thread = Drain(cursor.get());
  ASSERT_EQ(per_thread.size(), static_cast<size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(per_thread[t].Int("_id"), t);
    EXPECT_EQ(per_thread[t].Int("n"), kSteps) << per_thread[t].Json();
    EXPECT_EQ(per_thread[t].Int("v"), kSteps) << per_thread[t].Json();
  }
}

}  // namespace
}  // namespace e2e
