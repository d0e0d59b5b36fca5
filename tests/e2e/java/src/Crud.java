// Step 1 of the scenario: insert, find, update and delete on a plain collection.

import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.gte;
import static com.mongodb.client.model.Filters.lt;
import static com.mongodb.client.model.Sorts.ascending;
import static com.mongodb.client.model.Updates.inc;
import static com.mongodb.client.model.Updates.set;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.result.DeleteResult;
import com.mongodb.client.result.InsertManyResult;
import com.mongodb.client.result.InsertOneResult;
import com.mongodb.client.result.UpdateResult;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;
import org.bson.conversions.Bson;

final class Crud {
  static List<Document> findAll(MongoCollection<Document> coll, Bson filter, Bson sort) {
    return coll.find(filter).sort(sort).into(new ArrayList<>());
  }

  static Document updateCounts(UpdateResult result) {
    return new Document("matched", result.getMatchedCount()).append("modified", result.getModifiedCount());
  }

  static Document run(MongoDatabase db) {
    MongoCollection<Document> coll = db.getCollection("crud");
    InsertOneResult one = coll.insertOne(new Document("_id", "a").append("n", 1).append("tags", List.of("x", "y")));
    InsertManyResult many = coll.insertMany(List.of(
        new Document("_id", "b").append("n", 2), new Document("_id", "c").append("n", 3)));
    List<Document> foundGte2 = findAll(coll, gte("n", 2), ascending("_id"));
    UpdateResult u1 = coll.updateOne(eq("_id", "a"), inc("n", 10));
    UpdateResult um = coll.updateMany(lt("n", 5), set("small", true));
    DeleteResult d1 = coll.deleteOne(eq("_id", "b"));
    return new Document("insertOneId", one.getInsertedId())
        .append("insertManyCount", many.getInsertedIds().size())
        .append("foundGte2", foundGte2)
        .append("updateOne", updateCounts(u1))
        .append("updateMany", updateCounts(um))
        .append("deleteOne", d1.getDeletedCount())
        .append("final", findAll(coll, new Document(), ascending("_id")))
        .append("count", coll.countDocuments());
  }
}
