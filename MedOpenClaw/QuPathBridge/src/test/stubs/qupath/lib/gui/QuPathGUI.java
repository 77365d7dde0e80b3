package qupath.lib.gui;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import javafx.scene.control.Menu;
import javafx.stage.Stage;
import org.medopenclaw.qupath.stubs.Calls;
import qupath.lib.gui.viewer.QuPathViewer;

/** Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/QuPathGUI.java (signatures as in QuPath 0.5/0.6). */
public class QuPathGUI {
    private final QuPathViewer viewer = new QuPathViewer();
    private final Stage stage = new Stage("QuPath");
    private final Map<String, Menu> menus = new LinkedHashMap<>();

    public QuPathViewer getViewer() {
        return viewer;
    }

    public Stage getStage() {
        return stage;
    }

    /** QuPath 0.5-0.7: the menu at a path such as "Extensions>Name", created when asked (else null). */
    public Menu getMenu(String name, boolean createMenu) {
        return createMenu ? menus.computeIfAbsent(name, Menu::new) : menus.get(name);
    }

    /** Prompts (project import, "Set image type", series selector, error dialogs): recorded as prompting. */
    public boolean openImage(QuPathViewer viewer, String pathNew) throws IOException {
        Calls.record("QuPathGUI.openImage");
        return false;
    }

    public boolean openImage(QuPathViewer viewer, String pathNew, boolean prompt, boolean includeURLs)
            throws IOException {
        Calls.record("QuPathGUI.openImage");
        return false;
    }
}
