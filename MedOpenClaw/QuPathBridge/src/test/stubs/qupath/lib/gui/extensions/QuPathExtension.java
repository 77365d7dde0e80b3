package qupath.lib.gui.extensions;

import qupath.lib.common.Version;
import qupath.lib.gui.QuPathGUI;

/**
 * Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/extensions/QuPathExtension.java (QuPath v0.7.0; 0.5 and 0.6
 * have the same methods): {@code getQuPathVersion} defaults to {@code Version.UNKNOWN}.
 */
public interface QuPathExtension {
    void installExtension(QuPathGUI qupath);

    default void installHeadless() {
    }

    String getName();

    String getDescription();

    default Version getQuPathVersion() {
        return Version.UNKNOWN;
    }
}
