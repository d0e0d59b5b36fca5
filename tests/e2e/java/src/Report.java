// How the scenario reports a step: {ok: true, ...its results} or {ok: false,
// error: {kind, code, codeName, message}} with the exception as the driver
// throws it at the application.

import com.mongodb.MongoCommandException;
import com.mongodb.MongoServerException;
import com.mongodb.MongoWriteException;
import org.bson.Document;

final class Report {
  interface Step {
    Document run() throws Exception;
  }

  static Document step(Step step) {
    try {
      Document result = new Document("ok", true);
      result.putAll(step.run());
      return result;
    } catch (Exception e) {
      return new Document("ok", false).append("error", errorSeen(e));
    }
  }

  static Document errorSeen(Exception e) {
    Document seen = new Document("kind", e.getClass().getSimpleName())
        .append("code", null).append("codeName", null).append("message", e.getMessage());
    if (e instanceof MongoCommandException) {
      MongoCommandException command = (MongoCommandException) e;
      seen.append("code", command.getErrorCode()).append("codeName", command.getErrorCodeName());
    } else if (e instanceof MongoWriteException) {
      seen.append("code", ((MongoWriteException) e).getError().getCode());
    } else if (e instanceof MongoServerException) {
      seen.append("code", ((MongoServerException) e).getCode());
    }
    return seen;
  }
}
