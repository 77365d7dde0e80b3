package qupath.lib.gui.extensions;

import qupath.lib.gui.QuPathGUI;

/** Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/extensions/QuPathExtension.java. */
public interface QuPathExtension {
    void installExtension(QuPathGUI qupath);

    String getName();

    String getDescription();
}
