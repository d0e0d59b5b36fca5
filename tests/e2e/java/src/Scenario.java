// The driver-matrix scenario with the MongoDB Java sync driver (pom.xml).
//
//   java -cp 'lib/*:classes' Scenario PLAN_JSON
//
// PLAN_JSON is {uri, db, compressed: {NAME: URI, ...}}; the steps, their
// collections and the JSON printed on stdout are specified once, in
// tests/e2e/python/test_driver_matrix.py, which runs this and judges what it
// prints. The output is canonical Extended JSON, so BSON types survive. A
// step that fails is reported, not thrown: the exit status is non-zero only
// if the program itself cannot run.

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.event.CommandListener;
import java.util.concurrent.TimeUnit;
import org.bson.Document;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

public final class Scenario {
  static MongoClient connect(String uri, CommandListener... listeners) {
    MongoClientSettings.Builder settings = MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(uri))
        .applyToClusterSettings(c -> c.serverSelectionTimeout(10, TimeUnit.SECONDS));
    for (CommandListener listener : listeners) settings.addCommandListener(listener);
    return MongoClients.create(settings.build());
  }

  public static void main(String[] args) {
    Document plan = args.length == 1 ? Document.parse(args[0]) : null;
    if (plan == null || plan.getString("uri") == null || plan.getString("db") == null
        || plan.get("compressed", Document.class) == null) {
      System.err.println("usage: Scenario '{\"uri\": ..., \"db\": ..., \"compressed\": {...}}'");
      System.exit(2);
    }
    String dbName = plan.getString("db");
    Document out = new Document();
    try (MongoClient client = connect(plan.getString("uri"))) {
      MongoDatabase db = client.getDatabase(dbName);
      out.append("crud", Report.step(() -> Crud.run(db)));
      out.append("cursor", Report.step(() -> Cursor.run(db)));
      out.append("bulk", Report.step(() -> Bulk.run(db)));
      Document compression = new Document();
      Document compressed = plan.get("compressed", Document.class);
      for (String name : compressed.keySet()) {
        String uri = compressed.getString(name);
        compression.append(name, Report.step(() -> Compression.run(dbName, name, uri)));
      }
      out.append("compression", compression);
      out.append("bucket", Report.step(() -> Bucket.run(db)));
      out.append("refusal", Report.step(() -> Bucket.refusal(db)));
    }
    System.out.println(out.toJson(JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build()));
  }
}
