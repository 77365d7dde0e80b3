package qupath.lib.images.servers;

import java.awt.image.BufferedImage;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
import org.medopenclaw.qupath.stubs.Calls;

/**
 * Stub of qupath-core/src/main/java/qupath/lib/images/servers/ImageServers.java: {@code buildServer} takes the
 * first builder of the first supporting reader (no series selector) and throws IOException when none can open
 * the image. Here: an existing ".tif" file opens as a 6000 x 4000, 0.25 um/px, 40x RGB pyramid, and a
 * "-2ch.tif" file as the same pyramid with two non-RGB (fluorescence) channels.
 */
public final class ImageServers {
    private ImageServers() {
    }

    public static ImageServer<BufferedImage> buildServer(URI uri, String... args) throws IOException {
        Calls.record("ImageServers.buildServer");
        Path path = Path.of(uri);
        if (!Files.isRegularFile(path) || !path.toString().endsWith(".tif")) {
            throw new IOException("Unable to open " + uri);
        }
        boolean twoChannels = path.toString().endsWith("-2ch.tif");
        ImageServerMetadata metadata = new ImageServerMetadata(List.of(
                new ImageServerMetadata.ImageResolutionLevel(6000, 4000, 1.0),
                new ImageServerMetadata.ImageResolutionLevel(1500, 1000, 4.0)), 40.0, !twoChannels,
                twoChannels ? List.of("DAPI", "FITC") : List.of("Red", "Green", "Blue"));
        return new ImageServer<>() {
            @Override
            public ImageServerMetadata getMetadata() {
                return metadata;
            }

            @Override
            public PixelCalibration getPixelCalibration() {
                return new PixelCalibration(0.25);
            }

            @Override
            public int getWidth() {
                return 6000;
            }

            @Override
            public int getHeight() {
                return 4000;
            }

            @Override
            public Collection<URI> getURIs() {
                return List.of(uri);
            }

            @Override
            public void close() {
                Calls.record("ImageServer.close");
            }
        };
    }
}
