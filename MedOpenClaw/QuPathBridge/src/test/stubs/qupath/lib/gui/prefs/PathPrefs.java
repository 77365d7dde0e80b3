package qupath.lib.gui.prefs;

import java.util.HashMap;
import java.util.Map;
import javafx.beans.property.StringProperty;

/**
 * Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/prefs/PathPrefs.java (QuPath v0.7.0):
 * {@code createPersistentPreference(name, default)} gives a property whose value QuPath keeps across sessions (the
 * same name gives the same stored value).
 */
public final class PathPrefs {
    private static final Map<String, StringProperty> STORED = new HashMap<>();

    private PathPrefs() {
    }

    public static synchronized StringProperty createPersistentPreference(String name, String defaultValue) {
        return STORED.computeIfAbsent(name, key -> new StringProperty(defaultValue));
    }
}
