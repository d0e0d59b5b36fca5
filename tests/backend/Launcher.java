// Starts mongo-java-server on a loopback port for tests.
//
// Usage: java -cp 'lib/*:classes' Launcher [host] [port] [file]
// Port 0 picks a free port. Without a file the backend is in memory; with
// one it is H2's MVStore in that file, every command committed to the file
// before its reply is sent, so the data survives the process being killed
// (SIGKILL) and the next launcher on the same file finds it.
// Prints "listening HOST:PORT" once bound, then serves until stdin reaches
// EOF or the process is terminated.
import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.wire.message.MongoMessage;
import io.netty.channel.Channel;
import java.net.InetSocketAddress;
import org.h2.mvstore.MVStore;

public final class Launcher {
    public static void main(String[] args) throws Exception {
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        MongoBackend backend = args.length > 2 ? Durable.open(args[2]) : new MemoryBackend();
        MongoServer server = new MongoServer(backend);
        server.bind(host, port);
        InetSocketAddress bound = server.getLocalAddress();
        System.out.println("listening " + bound.getHostString() + ":" + bound.getPort());
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        while (System.in.read() != -1) { }
        server.shutdownNow();
    }

    // H2Backend commits once a second in the background, so a kill loses up
    // to a second of acknowledged writes; this one commits each command
    // before it returns (and so before its reply is written). Commands run
    // one at a time, so each commit holds whole commands only; fast enough
    // for tests.
    static final class Durable extends H2Backend {
        static Durable open(String file) {
            return new Durable(new MVStore.Builder().fileName(file).autoCommitDisabled().open());
        }

        private Durable(MVStore store) { super(store); }

        @Override
        public synchronized Document handleCommand(Channel channel, String database, String command,
                                                   Document query) {
            try {
                return super.handleCommand(channel, database, command, query);
            } finally {
                commit();
            }
        }

        @Override
        public synchronized Document handleMessage(MongoMessage message) {
            try {
                return super.handleMessage(message);
            } finally {
                commit();
            }
        }
    }
}
