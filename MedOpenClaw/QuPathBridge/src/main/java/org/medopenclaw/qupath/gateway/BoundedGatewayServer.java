package org.medopenclaw.qupath.gateway;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import javax.net.ServerSocketFactory;
import org.medopenclaw.qupath.BridgeEntryPoint;
import py4j.CallbackClient;
import py4j.Gateway;
import py4j.GatewayServer;
import py4j.Py4JServerConnection;

/**
 * A Py4J gateway bound to the loopback interface, requiring an auth token, whose connections are
 * {@link BoundedGatewayConnection}s serving only the {@link BridgeEntryPoint} operations.
 */
public class BoundedGatewayServer extends GatewayServer {
    private final String token;

    /**
     * @param port 0 for any free port (read it back with {@link #getListeningPort()} after {@link #start()})
     * @param token shared secret the client must present first; at least 16 characters
     */
    public BoundedGatewayServer(BridgeEntryPoint entryPoint, int port, String token) {
        super(entryPoint, port, InetAddress.getLoopbackAddress(), DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT,
                null, new CallbackClient(DEFAULT_PYTHON_PORT, InetAddress.getLoopbackAddress()),
                ServerSocketFactory.getDefault());
        if (token == null || token.length() < 16) {
            throw new IllegalArgumentException("an auth token of at least 16 characters is required");
        }
        this.token = token;
    }

    @Override
    protected Py4JServerConnection createConnection(Gateway gateway, Socket socket) throws IOException {
        BoundedGatewayConnection connection = new BoundedGatewayConnection(gateway, socket, token, getListeners());
        connection.startConnection();
        return connection;
    }
}
