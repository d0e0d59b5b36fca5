// Steps 5 and 6 of the scenario, on the collection the test's bucket rule
// covers: readings inserted one by one and read back, then an update the
// rule refuses, and the readings read again.

import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Sorts.ascending;
import static com.mongodb.client.model.Updates.set;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.result.UpdateResult;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import org.bson.Document;

final class Bucket {
  static final Instant T0 = Instant.parse("2024-03-04T00:00:00Z");

  static Document run(MongoDatabase db) {
    MongoCollection<Document> coll = db.getCollection("readings");
    List<Document> inserted = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      Document doc = new Document("sensor", "s" + (1 + i % 2))
          .append("at", Date.from(T0.plusSeconds(i * 600L)))
          .append("temp", 20.25 + i);
      Document sent = new Document(doc);  // the driver adds _id to doc
      Document withId = new Document("_id", coll.insertOne(doc).getInsertedId());
      withId.putAll(sent);
      inserted.add(withId);
    }
    return new Document("inserted", inserted)
        .append("found", Crud.findAll(coll, new Document(), ascending("at")));
  }

  static Document refusal(MongoDatabase db) {
    MongoCollection<Document> coll = db.getCollection("readings");
    Document attempt = Report.step(() -> {
      UpdateResult r = coll.updateOne(eq("sensor", "s1"), set("temp", 99.5));
      return Crud.updateCounts(r);
    });
    return new Document("attempt", attempt)
        .append("after", Crud.findAll(coll, new Document(), ascending("at")));
  }
}
