package org.medopenclaw.qupath.gateway;

import java.io.IOException;
import java.net.Socket;
import java.util.List;
import py4j.Gateway;
import py4j.GatewayConnection;
import py4j.GatewayServerListener;
import py4j.commands.Command;

/**
 * A connection that understands only the bounded call command (plus the bounded memory release and
 * authentication).
 *
 * <p>Py4J's reflection, JVM-view, constructor, field, dir, help, list, array, stream and shutdown commands are
 * never registered, so a client sending them gets the connection reset ("Unknown command").
 */
public class BoundedGatewayConnection extends GatewayConnection {
    private static final List<Class<? extends Command>> COMMANDS = List.of(BoundedCallCommand.class,
            BoundedMemoryCommand.class);

    public BoundedGatewayConnection(Gateway gateway, Socket socket, String authToken,
                                    List<GatewayServerListener> listeners) throws IOException {
        super(gateway, socket, authToken, null, listeners);
    }

    /** Called by the superclass constructor with Py4J's base commands: register ours instead. */
    @Override
    protected void initCommands(Gateway gateway, List<Class<? extends Command>> requested) {
        super.initCommands(gateway, COMMANDS);
    }
}
