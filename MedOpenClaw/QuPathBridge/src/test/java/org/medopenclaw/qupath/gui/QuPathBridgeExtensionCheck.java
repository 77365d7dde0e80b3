package org.medopenclaw.qupath.gui;

import static org.medopenclaw.qupath.Checks.check;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import javafx.scene.control.Menu;
import javafx.scene.control.MenuItem;
import javafx.stage.DirectoryChooser;
import qupath.lib.gui.QuPathGUI;

/**
 * The extension as a desktop user meets it (no MEDOPENCLAW_DATA_ROOTS in QuPath's environment): its menu chooses
 * the data folders, kept in QuPath's preferences, and starts and stops the bridge; it declares the oldest QuPath it
 * runs in and its GitHub repository (QuPath's update check). Run by Testing/Python/pathology/test_qupath_adapter.py.
 */
public final class QuPathBridgeExtensionCheck {
    private QuPathBridgeExtensionCheck() {
    }

    private static MenuItem item(Menu menu, String prefix) {
        return menu.getItems().stream().filter(item -> item.getText().startsWith(prefix)).findFirst().orElseThrow();
    }

    public static void main(String[] arguments) throws Exception {
        check(System.getenv(QuPathBridgeExtension.ROOTS_ENV) == null, "run without " + QuPathBridgeExtension.ROOTS_ENV);
        Path home = Files.createTempDirectory("qupath-home");
        System.setProperty("user.home", home.toString());  // the connection file goes to ~/.medopenclaw
        QuPathGUI qupath = new QuPathGUI();
        QuPathBridgeExtension extension = new QuPathBridgeExtension();
        check("0.5.0".equals(extension.getQuPathVersion().toString()), "the oldest QuPath is declared (0.5.0)");
        check("https://github.com/MedOpenClaw/SlicerMedOpenClaw".equals(extension.getRepository().getUrlString()),
                "the GitHub repository is declared for QuPath's update check");

        extension.installExtension(qupath);
        Menu menu = qupath.getMenu(QuPathBridgeExtension.MENU, false);
        check(menu != null && !extension.running(), "a menu, and no bridge without data folders");
        item(menu, "Start bridge").fire();
        check(!extension.running() && item(menu, "Bridge:").getText().contains("add a data folder first"),
                "starting without data folders says what to do");

        Path slides = Files.createDirectories(home.resolve("slides"));
        DirectoryChooser.answer = slides.toFile();
        item(menu, "Add data folder").fire();
        item(menu, "Start bridge").fire();
        check(extension.running() && item(menu, "Bridge:").getText().contains("1 data folder"),
                "the bridge starts over the chosen folder: " + item(menu, "Bridge:").getText());
        check(Files.exists(home.resolve(".medopenclaw").resolve("qupath-bridge.json")), "the connection file is written");
        item(menu, "Stop bridge").fire();
        check(!extension.running() && "Bridge: off".equals(item(menu, "Bridge:").getText()), "the bridge stops");

        QuPathBridgeExtension nextStart = new QuPathBridgeExtension();  // QuPath started again
        nextStart.installExtension(new QuPathGUI());
        check(nextStart.running() && nextStart.roots().equals(slides.toFile().getAbsolutePath()),
                "the chosen folders are kept in the preferences and the bridge starts with QuPath");
        nextStart.stop();
        DirectoryChooser.answer = null;
        item(menu, "Forget the data folders").fire();
        check(extension.roots().isEmpty(), "the folders can be forgotten");
        System.out.println("QuPathBridgeExtensionCheck passed");
    }
}
