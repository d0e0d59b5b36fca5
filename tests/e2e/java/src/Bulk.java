// Step 3 of the scenario: an ordered and an unordered bulk write mixing
// inserts, updates, a replacement, an upsert and deletes.

import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.lt;
import static com.mongodb.client.model.Sorts.ascending;
import static com.mongodb.client.model.Updates.inc;
import static com.mongodb.client.model.Updates.set;

import com.mongodb.MongoBulkWriteException;
import com.mongodb.bulk.BulkWriteError;
import com.mongodb.bulk.BulkWriteResult;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.BulkWriteOptions;
import com.mongodb.client.model.DeleteOneModel;
import com.mongodb.client.model.InsertOneModel;
import com.mongodb.client.model.ReplaceOneModel;
import com.mongodb.client.model.UpdateManyModel;
import com.mongodb.client.model.UpdateOneModel;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.WriteModel;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;

final class Bulk {
  static Document counts(BulkWriteResult result, List<BulkWriteError> errors) {
    List<Document> writeErrors = new ArrayList<>();
    for (BulkWriteError e : errors) writeErrors.add(new Document("index", e.getIndex()).append("code", e.getCode()));
    return new Document("inserted", result.getInsertedCount())
        .append("matched", result.getMatchedCount())
        .append("modified", result.getModifiedCount())
        .append("deleted", result.getDeletedCount())
        .append("upserted", result.getUpserts().size())
        .append("writeErrors", writeErrors);
  }

  static Document bulkWrite(MongoCollection<Document> coll, List<WriteModel<Document>> ops, boolean ordered) {
    try {
      return counts(coll.bulkWrite(ops, new BulkWriteOptions().ordered(ordered)), List.of());
    } catch (MongoBulkWriteException e) {
      return counts(e.getWriteResult(), e.getWriteErrors());
    }
  }

  static Document run(MongoDatabase db) {
    MongoCollection<Document> coll = db.getCollection("bulk");
    Document ordered = bulkWrite(coll, List.of(
        new InsertOneModel<>(new Document("_id", 1).append("k", "a").append("n", 1)),
        new InsertOneModel<>(new Document("_id", 2).append("k", "b").append("n", 2)),
        new InsertOneModel<>(new Document("_id", 3).append("k", "c").append("n", 3)),
        new UpdateOneModel<>(eq("_id", 1), inc("n", 10)),
        new UpdateManyModel<>(lt("n", 5), set("flag", true)),
        new DeleteOneModel<>(eq("_id", 3)),
        new ReplaceOneModel<>(eq("_id", 2), new Document("k", "B").append("n", 20)),
        new UpdateOneModel<>(eq("_id", 4), set("k", "d"), new UpdateOptions().upsert(true))), true);
    Document unordered = bulkWrite(coll, List.of(
        new InsertOneModel<>(new Document("_id", 2).append("k", "duplicate")),
        new InsertOneModel<>(new Document("_id", 5).append("k", "e").append("n", 5)),
        new UpdateOneModel<>(eq("_id", 2), set("u", true)),
        new DeleteOneModel<>(eq("_id", 1))), false);
    return new Document("ordered", ordered).append("unordered", unordered)
        .append("final", Crud.findAll(coll, new Document(), ascending("_id")));
  }
}
