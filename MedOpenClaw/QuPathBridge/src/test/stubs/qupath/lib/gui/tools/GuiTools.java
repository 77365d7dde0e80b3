package qupath.lib.gui.tools;

import java.awt.image.BufferedImage;
import qupath.lib.gui.viewer.QuPathViewer;

/** Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/tools/GuiTools.java. */
public final class GuiTools {
    private GuiTools() {
    }

    public static BufferedImage makeViewerSnapshot(QuPathViewer viewer) {
        return new BufferedImage((int) viewer.getView().getWidth(), (int) viewer.getView().getHeight(),
                BufferedImage.TYPE_INT_RGB);
    }
}
