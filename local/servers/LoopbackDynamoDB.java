// LoopbackDynamoDB starts DynamoDB Local exactly as its own main class does,
// except that it listens on one address instead of all interfaces: DynamoDB
// Local has no flag for that. Install compiles it against DynamoDBLocal.jar.
//
// Usage: java -cp <this dir>:DynamoDBLocal.jar LoopbackDynamoDB <host> <DynamoDB Local flags...>

import java.lang.reflect.Field;
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
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        for (Connector connector : ((Server) field.get(proxy)).getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        proxy.start();
        proxy.join();
    }
}
