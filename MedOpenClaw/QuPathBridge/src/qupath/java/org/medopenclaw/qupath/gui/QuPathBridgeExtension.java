package org.medopenclaw.qupath.gui;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import javafx.beans.property.StringProperty;
import javafx.scene.control.Menu;
import javafx.scene.control.MenuItem;
import javafx.stage.DirectoryChooser;
import org.medopenclaw.qupath.BridgeCore;
import org.medopenclaw.qupath.BridgeEntryPoint;
import org.medopenclaw.qupath.ConnectionFile;
import org.medopenclaw.qupath.JsonlAuditSink;
import org.medopenclaw.qupath.gateway.BoundedGatewayServer;
import qupath.lib.common.Version;
import qupath.lib.gui.QuPathGUI;
import qupath.lib.gui.extensions.GitHubProject;
import qupath.lib.gui.extensions.QuPathExtension;
import qupath.lib.gui.prefs.PathPrefs;

/**
 * QuPath extension that serves the bounded MedOpenClaw gateway over the active viewer.
 *
 * <p>A desktop user chooses the data folders and starts or stops the bridge from <i>Extensions &gt; MedOpenClaw
 * bridge</i>; the folders are kept in QuPath's preferences and the bridge starts with QuPath once some are chosen.
 * Scripts set the environment instead: MEDOPENCLAW_DATA_ROOTS (folders separated by the path separator; it wins
 * over the saved folders), MEDOPENCLAW_BRIDGE_TOKEN (optional; generated when absent), MEDOPENCLAW_BRIDGE_PORT
 * (optional; 0 = any free port). Port and token are written to ~/.medopenclaw/qupath-bridge.json (owner-only on
 * every OS: POSIX mode 0600, a Windows owner-only ACL) for {@code QuPathBridgeClient.from_connection_file}; every
 * operation is audited to ~/.medopenclaw/qupath-bridge-audit.jsonl.
 */
public final class QuPathBridgeExtension implements QuPathExtension, GitHubProject {
    static final String ROOTS_ENV = "MEDOPENCLAW_DATA_ROOTS";
    static final String MENU = "Extensions>MedOpenClaw bridge";
    private final StringProperty savedRoots = PathPrefs.createPersistentPreference("medopenclaw.dataRoots", "");
    private final MenuItem status = new MenuItem("Bridge: off");
    private QuPathGUI qupath;
    private BoundedGatewayServer server;

    @Override
    public void installExtension(QuPathGUI qupath) {
        if (this.qupath != null) {
            return;
        }
        this.qupath = qupath;
        status.setDisable(true);
        MenuItem add = new MenuItem("Add data folder...");
        add.setOnAction(event -> addDataFolder());
        MenuItem forget = new MenuItem("Forget the data folders");
        forget.setOnAction(event -> {
            savedRoots.set("");
            stop();
        });
        MenuItem start = new MenuItem("Start bridge");
        start.setOnAction(event -> start(roots()));
        MenuItem stop = new MenuItem("Stop bridge");
        stop.setOnAction(event -> stop());
        Menu menu = qupath.getMenu(MENU, true);
        for (MenuItem item : List.of(status, add, forget, start, stop)) {
            menu.getItems().add(item);
        }
        if (!roots().isBlank()) {
            start(roots());
        }
    }

    /** The folders the bridge may open: the environment's for scripts, else the ones chosen in the menu. */
    String roots() {
        String fromEnvironment = System.getenv(ROOTS_ENV);
        return fromEnvironment != null && !fromEnvironment.isBlank() ? fromEnvironment : savedRoots.get();
    }

    private void addDataFolder() {
        DirectoryChooser chooser = new DirectoryChooser();
        chooser.setTitle("Folder MedOpenClaw agents may open images from");
        File chosen = chooser.showDialog(qupath.getStage());
        if (chosen == null) {
            return;
        }
        Set<String> folders = new LinkedHashSet<>(List.of(savedRoots.get().split(File.pathSeparator)));
        folders.remove("");
        folders.add(chosen.getAbsolutePath());
        savedRoots.set(String.join(File.pathSeparator, folders));
        if (server != null) {
            start(roots());  // serve the new folder too
        }
    }

    /** (Re)start the gateway over {@code roots}; the menu's status line says what happened. */
    void start(String roots) {
        stop();
        if (roots.isBlank()) {
            status.setText("Bridge: off (add a data folder first)");
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
            status.setText("Bridge: on, port " + server.getListeningPort() + ", " + dataRoots.size()
                    + " data folder(s)");
        } catch (IOException | RuntimeException failed) {
            stop();  // a gateway nobody can find the token of is shut down, not left running
            status.setText("Bridge: off (" + failed.getMessage() + ")");
            System.err.println("MedOpenClaw bridge not started: " + failed.getMessage());
        }
    }

    void stop() {
        if (server != null) {
            server.shutdown();
            server = null;
        }
        status.setText("Bridge: off");
    }

    boolean running() {
        return server != null;
    }

    @Override
    public String getName() {
        return "MedOpenClaw bridge";
    }

    @Override
    public String getDescription() {
        return "Bounded, audited viewer operations for MedOpenClaw agents over Py4J (loopback, token, no scripts)";
    }

    /** The oldest QuPath the bridge runs in (its jar is compiled for Java 17, QuPath 0.5's). */
    @Override
    public Version getQuPathVersion() {
        return Version.parse("v0.5.0");
    }

    @Override
    public GitHubRepo getRepository() {
        return GitHubRepo.create(getName(), "MedOpenClaw", "SlicerMedOpenClaw");
    }
}
