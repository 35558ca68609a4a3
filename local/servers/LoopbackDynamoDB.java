// LoopbackDynamoDB starts DynamoDB Local exactly as its own main class does,
// except that it listens on one address instead of all interfaces: DynamoDB
// Local has no flag for that. Install compiles it against DynamoDBLocal.jar.
//
// It also gives DynamoDB Local's stream-record table an index by stream.
// DynamoDB Local asks for the oldest record of a table's stream on every
// write to a table with a stream, and keeps all streams' records in one table
// keyed by sequence number alone; without the index, a write to a table
// created after another table's N records scans those N records, so a
// month's new ledger table slowed to tens of milliseconds a write once the
// old month held 20,000 records. Its SQLite (3.8.7) would then also read
// stream records through that index, scanning the whole stream on every
// GetRecords instead of the records after the iterator; planner statistics
// that call the index unselective keep GetRecords on the sequence range. The
// index changes no answer, only how fast it comes.
//
// Usage: java -cp <this dir>:DynamoDBLocal.jar LoopbackDynamoDB <host> <DynamoDB Local flags...>

import com.almworks.sqlite4java.SQLiteConnection;
import com.almworks.sqlite4java.SQLiteJob;
import com.almworks.sqlite4java.SQLiteQueue;
import com.almworks.sqlite4java.SQLiteStatement;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Arrays;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackDynamoDB {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        DynamoDBProxyServer proxy =
                ServerRunner.createServerFromCommandLineArgs(Arrays.copyOfRange(args, 1, args.length));
        for (Connector connector : ((Server) read(proxy, "server")).getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        // Before start, so that the first answer already has the index.
        try {
            indexStreamRecords(proxy);
            System.out.println("ddbpipe: stream records indexed by stream and by shard");
        } catch (Exception e) {
            System.out.println("ddbpipe: warning: stream records not indexed, so writes slow down as streams grow: " + e);
        }
        proxy.start();
        proxy.join();
    }

    // indexStreamRecords reaches the shared database's queue (the handler
    // behind -sharedDb) and adds the index there, as one more job in line.
    private static void indexStreamRecords(DynamoDBProxyServer proxy) throws Exception {
        Object requests = read(read(proxy, "serverHandler"), "primaryHandler");
        Method handler = requests.getClass().getDeclaredMethod("getHandler", String.class);
        handler.setAccessible(true);
        Object client = handler.invoke(requests, "shared");
        SQLiteQueue queue = (SQLiteQueue) read(read(client, "dbAccess"), "queue");
        queue.execute(new SQLiteJob<Void>() {
            @Override
            protected Void job(SQLiteConnection db) throws Throwable {
                SQLiteStatement found = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'us'");
                try {
                    if (!found.step()) {
                        throw new IllegalStateException("no stream-record table 'us'");
                    }
                } finally {
                    found.dispose();
                }
                // The index on StreamID alone: SQLite appends the sequence
                // number (the rowid), which is what MIN reads.
                db.exec("CREATE INDEX IF NOT EXISTS ddbpipe_us_stream ON us (StreamID)");
                // And by shard: on every GetRecords DynamoDB Local finds the
                // shard's newest record (SELECT SequenceNumber FROM us WHERE
                // ShardID=? ORDER BY SequenceNumber DESC LIMIT 1, in
                // getLatestSequenceNumberForShard). Without an index that walks
                // back through every stream's records to the shard's last one:
                // for a quiet stream, most of the table, on the one thread that
                // serves every request.
                db.exec("CREATE INDEX IF NOT EXISTS ddbpipe_us_shard ON us (ShardID)");
                // Statistics saying a stream holds all the rows, so the
                // planner takes the index only where nothing else serves.
                // ANALYZE of the one-row table cf creates sqlite_stat1 the
                // first time and, the second time, loads every row of it.
                db.exec("ANALYZE cf");
                db.exec("DELETE FROM sqlite_stat1 WHERE tbl = 'us'");
                db.exec("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('us', 'ddbpipe_us_stream', '1000000 1000000')");
                db.exec("ANALYZE cf");
                return null;
            }
        }).complete();
    }

    // read returns a field of o, declared by its class or a superclass.
    private static Object read(Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field field = c.getDeclaredField(name);
                field.setAccessible(true);
                return field.get(o);
            } catch (NoSuchFieldException e) {
                // look further up
            }
        }
        throw new NoSuchFieldException(o.getClass().getName() + "." + name);
    }
}
