package qupath.lib.gui.viewer;

import java.awt.geom.Point2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import javafx.scene.layout.Pane;
import org.medopenclaw.qupath.stubs.Calls;
import qupath.lib.images.ImageData;
import qupath.lib.images.servers.ImageServer;

/** Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/viewer/QuPathViewer.java: a viewport over one image. */
public class QuPathViewer {
    private final Pane view = new Pane(800, 600);
    private ImageData<BufferedImage> imageData;
    private double centerX;
    private double centerY;
    private double downsample = 1.0;

    public Pane getView() {
        return view;
    }

    public ImageData<BufferedImage> getImageData() {
        return imageData;
    }

    public ImageServer<BufferedImage> getServer() {
        return imageData == null ? null : imageData.getServer();
    }

    public void setImageData(ImageData<BufferedImage> imageDataNew) throws IOException {
        Calls.record("QuPathViewer.setImageData");
        imageData = imageDataNew;
        if (imageDataNew != null) {
            centerX = imageDataNew.getServer().getWidth() / 2.0;
            centerY = imageDataNew.getServer().getHeight() / 2.0;
        }
    }

    public void resetImageData() {
        Calls.record("QuPathViewer.resetImageData");
        imageData = null;
    }

    public double getCenterPixelX() {
        return centerX;
    }

    public double getCenterPixelY() {
        return centerY;
    }

    public double getDownsampleFactor() {
        return downsample;
    }

    /** QuPath v0.6.0 (setDownsampleFactor(ds, cx, cy, false)): an invalid factor (not finite, or at most 0) is
     * replaced by getMinDownsample() with a warning, not refused. */
    public void setDownsampleFactor(double downsampleFactor, double cx, double cy) {
        downsample = downsampleFactor <= 0 || !Double.isFinite(downsampleFactor) ? getMinDownsample() : downsampleFactor;
    }

    public double getMinDownsample() {
        return 1.0 / 64.0;
    }

    public void setCenterPixelLocation(double x, double y) {
        centerX = x;
        centerY = y;
    }

    public Point2D componentPointToImagePoint(double x, double y, Point2D pointDest, boolean constrainToBounds) {
        return new Point2D.Double(centerX + (x - view.getWidth() / 2.0) * downsample,
                centerY + (y - view.getHeight() / 2.0) * downsample);
    }
}
