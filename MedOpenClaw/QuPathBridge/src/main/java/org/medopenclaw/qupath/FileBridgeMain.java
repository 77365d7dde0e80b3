package org.medopenclaw.qupath;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.medopenclaw.qupath.file.FileViewerPort;
import org.medopenclaw.qupath.gateway.BoundedGatewayServer;

/**
 * Runs the bounded gateway over the file-backed viewer (no QuPath needed).
 *
 * <pre>
 * MEDOPENCLAW_BRIDGE_TOKEN=... java -cp medopenclaw-qupath-bridge.jar:py4j.jar \
 *     org.medopenclaw.qupath.FileBridgeMain --data-root DIR [--data-root DIR2] [--viewport 1024x768]
 *     [--port 0] [--audit bridge_audit.jsonl] [--connection-file FILE]
 * </pre>
 * The token comes from the environment (never the command line, which other users can list). The chosen port
 * is printed as {@code MEDOPENCLAW_BRIDGE_PORT <n>} and, with {@code --connection-file}, written with the token
 * to an owner-only file as the QuPath extension does; the process exits when its standard input closes, so a
 * parent that dies takes the gateway with it.
 */
public final class FileBridgeMain {
    public static final String TOKEN_VARIABLE = "MEDOPENCLAW_BRIDGE_TOKEN";

    private FileBridgeMain() {
    }

    public static void main(String[] arguments) throws IOException {
        List<Path> roots = new ArrayList<>();
        int width = 1024;
        int height = 768;
        int port = 0;
        AuditSink audit = AuditSink.NONE;
        Path connectionFile = null;
        for (int index = 0; index < arguments.length; index++) {
            String option = arguments[index];
            if (index + 1 >= arguments.length) {
                fail("missing value after " + option);
            }
            String value = arguments[++index];
            switch (option) {
                case "--data-root" -> roots.add(Path.of(value));
                case "--viewport" -> {
                    String[] size = value.toLowerCase().split("x");
                    if (size.length != 2) {
                        fail("--viewport takes WIDTHxHEIGHT");
                    }
                    width = Integer.parseInt(size[0]);
                    height = Integer.parseInt(size[1]);
                }
                case "--port" -> port = Integer.parseInt(value);
                case "--audit" -> audit = new JsonlAuditSink(Path.of(value));
                case "--connection-file" -> connectionFile = Path.of(value);
                default -> fail("unknown option " + option);
            }
        }
        if (roots.isEmpty()) {
            fail("at least one --data-root is required");
        }
        String token = System.getenv(TOKEN_VARIABLE);
        if (token == null || token.length() < 16) {
            fail(TOKEN_VARIABLE + " must hold an auth token of at least 16 characters");
        }
        BridgeCore core = new BridgeCore(new FileViewerPort(width, height), roots, audit);
        BoundedGatewayServer server = new BoundedGatewayServer(new BridgeEntryPoint(core), port, token);
        server.start(true);
        if (connectionFile != null) {
            try {
                ConnectionFile.write(connectionFile, server.getListeningPort(), token);
            } catch (IOException failed) {
                server.shutdown();
                fail(failed.getMessage());
            }
        }
        PrintStream out = System.out;
        out.println("MEDOPENCLAW_BRIDGE_PORT " + server.getListeningPort());
        out.flush();
        waitForEndOfInput(System.in);
        server.shutdown();
        System.exit(0);
    }

    private static void waitForEndOfInput(InputStream input) {
        byte[] buffer = new byte[256];
        try {
            while (input.read(buffer) >= 0) {
                // the parent keeps the pipe open while it wants the gateway
            }
        } catch (IOException closed) {
            // a broken pipe means the parent is gone: shut down
        }
    }

    private static void fail(String message) {
        System.err.println("FileBridgeMain: " + message);
        System.exit(2);
    }
}
