// Step 4 of the scenario: a client of its own whose connection string asks
// for one compressor, inserting and reading back 20 compressible documents.
// The Java driver also tells which compressors the handshake reply named
// (ConnectionDescription.getCompressors(), seen on every command event).

import static com.mongodb.client.model.Sorts.ascending;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.bson.Document;

final class Compression {
  static Document run(String dbName, String name, String uri) {
    Set<String> negotiated = new TreeSet<>();
    CommandListener listener = new CommandListener() {
      @Override
      public synchronized void commandStarted(CommandStartedEvent event) {
        negotiated.addAll(event.getConnectionDescription().getCompressors());
      }
    };
    try (MongoClient client = Scenario.connect(uri, listener)) {
      MongoCollection<Document> coll = client.getDatabase(dbName).getCollection("compressed_" + name);
      List<Document> docs = new ArrayList<>();
      for (int i = 0; i < 20; i++) docs.add(new Document("_id", i).append("text", "row " + i + " " + "compressible ".repeat(20)));
      int inserted = coll.insertMany(docs).getInsertedIds().size();
      List<Document> found = Crud.findAll(coll, new Document(), ascending("_id"));
      synchronized (listener) {
        return new Document("inserted", inserted).append("found", found)
            .append("driverCompressors", new ArrayList<>(negotiated));
      }
    }
  }
}
