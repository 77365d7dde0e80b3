package org.medopenclaw.qupath.gui;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.medopenclaw.qupath.BridgeCore;
import org.medopenclaw.qupath.BridgeEntryPoint;
import org.medopenclaw.qupath.ConnectionFile;
import org.medopenclaw.qupath.JsonlAuditSink;
import org.medopenclaw.qupath.gateway.BoundedGatewayServer;
import qupath.lib.gui.QuPathGUI;
import qupath.lib.gui.extensions.QuPathExtension;

/**
 * QuPath extension that starts the bounded MedOpenClaw gateway over the active viewer.
 *
 * <p>Configuration (environment): MEDOPENCLAW_DATA_ROOTS (required; folders separated by the path separator),
 * MEDOPENCLAW_BRIDGE_TOKEN (optional; generated when absent), MEDOPENCLAW_BRIDGE_PORT (optional; 0 = any free
 * port). Port and token are written to ~/.medopenclaw/qupath-bridge.json (owner-only on every OS: POSIX mode
 * 0600, a Windows owner-only ACL) for
 * {@code QuPathBridgeClient.from_connection_file}; every operation is audited to
 * ~/.medopenclaw/qupath-bridge-audit.jsonl.
 */
public final class QuPathBridgeExtension implements QuPathExtension {
    private BoundedGatewayServer server;

    @Override
    public void installExtension(QuPathGUI qupath) {
        if (server != null) {
            return;
        }
        String roots = System.getenv("MEDOPENCLAW_DATA_ROOTS");
        if (roots == null || roots.isBlank()) {
            System.err.println("MedOpenClaw bridge not started: set MEDOPENCLAW_DATA_ROOTS");
            return;
        }
        try {
            Path home = Path.of(System.getProperty("user.home"), ".medopenclaw");
            Files.createDirectories(home);
            List<Path> dataRoots = new ArrayList<>();
            for (String root : roots.split(File.pathSeparator)) {
                dataRoots.add(Path.of(root));
            }
            String token = System.getenv("MEDOPENCLAW_BRIDGE_TOKEN");
            if (token == null || token.length() < 16) {
                byte[] secret = new byte[24];
                new SecureRandom().nextBytes(secret);
                token = HexFormat.of().formatHex(secret);
            }
            String port = System.getenv().getOrDefault("MEDOPENCLAW_BRIDGE_PORT", "0");
            BridgeCore core = new BridgeCore(new QuPathViewerPort(qupath), dataRoots,
                    new JsonlAuditSink(home.resolve("qupath-bridge-audit.jsonl")));
            server = new BoundedGatewayServer(new BridgeEntryPoint(core), Integer.parseInt(port), token);
            server.start(true);
            ConnectionFile.write(home.resolve("qupath-bridge.json"), server.getListeningPort(), token);
        } catch (IOException | RuntimeException failed) {
            if (server != null) {  // a gateway nobody can find the token of is shut down, not left running
                server.shutdown();
                server = null;
            }
            System.err.println("MedOpenClaw bridge not started: " + failed.getMessage());
        }
    }

    @Override
    public String getName() {
        return "MedOpenClaw bridge";
    }

    @Override
    public String getDescription() {
        return "Bounded, audited viewer operations for MedOpenClaw agents over Py4J (loopback, token, no scripts)";
    }
}
