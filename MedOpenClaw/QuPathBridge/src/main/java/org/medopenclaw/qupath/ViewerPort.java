package org.medopenclaw.qupath;

import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The little a viewer must offer the bridge core. The core validates every request and computes the target
 * view (ViewGeometry); a port only applies it. Implementations: the file-backed port (tiled TIFF through
 * ImageIO, used in CI) and the QuPath port (QuPathViewer, compiled when QuPath jars are provided).
 */
public interface ViewerPort {

    /** Open an image; on failure the previously open image stays open. */
    ImageInfo open(Path image) throws IOException;

    /** Close the open image (the viewer becomes empty). */
    void close();

    /** The open image, or null. */
    ImageInfo image();

    double centerX();

    double centerY();

    double downsample();

    /** Show full-resolution pixel (cx, cy) at the viewport centre at this downsample (already clamped). */
    void setView(double centerX, double centerY, double downsample);

    int viewportWidth();

    int viewportHeight();

    String imageType();

    /** @throws IllegalArgumentException when the viewer refuses the type for this image (QuPath 0.6 refuses a
     *  brightfield type on an image that is neither RGB nor 3-channel) */
    void setImageType(String imageType);

    /** Full-resolution image point under a viewport (component) point, in pixels from the viewport's top-left. */
    double[] componentToImage(double x, double y);

    /** The current viewer as the user sees it. */
    BufferedImage snapshot() throws IOException;

    /** Bring the viewer to the foreground. */
    void focus();
}
