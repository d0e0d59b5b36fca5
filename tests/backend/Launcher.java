// Starts mongo-java-server's in-memory backend on a loopback port for tests.
//
// Usage: java -cp 'lib/*:classes' Launcher [host] [port]
// Port 0 picks a free port. Prints "listening HOST:PORT" once bound, then
// serves until stdin reaches EOF or the process is terminated.
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import java.net.InetSocketAddress;

public final class Launcher {
    public static void main(String[] args) throws Exception {
        String host = args.length > 0 ? args[0] : "127.0.0.1";
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        MongoServer server = new MongoServer(new MemoryBackend());
        server.bind(host, port);
        InetSocketAddress bound = server.getLocalAddress();
        System.out.println("listening " + bound.getHostString() + ":" + bound.getPort());
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        while (System.in.read() != -1) { }
        server.shutdownNow();
    }
}
