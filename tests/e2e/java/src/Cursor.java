// Step 2 of the scenario: 250 documents read back through one cursor in
// batches of 50, each batch's size recorded as the driver received it.

import static com.mongodb.client.model.Sorts.ascending;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.MongoDatabase;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;

final class Cursor {
  static Document run(MongoDatabase db) {
    MongoCollection<Document> coll = db.getCollection("cursor");
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < 250; i++) docs.add(new Document("_id", i).append("pad", "p".repeat(100)));
    coll.insertMany(docs);
    List<Object> ids = new ArrayList<>();
    List<Integer> batches = new ArrayList<>();
    int left = 0;  // documents of the current batch not yet returned
    try (MongoCursor<Document> found = coll.find().sort(ascending("_id")).batchSize(50).iterator()) {
      while (found.hasNext()) {
        Document doc = found.next();
        if (left == 0) batches.add(found.available() + 1);
        left = found.available();
        ids.add(doc.get("_id"));
      }
    }
    return new Document("ids", ids).append("batches", batches);
  }
}
