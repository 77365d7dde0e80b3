package qupath.lib.images.servers;

import java.net.URI;
import java.util.Collection;

/** Stub of qupath-core/src/main/java/qupath/lib/images/servers/ImageServer.java (the methods the adapter uses). */
public interface ImageServer<T> extends AutoCloseable {
    ImageServerMetadata getMetadata();

    PixelCalibration getPixelCalibration();

    int getWidth();

    int getHeight();

    Collection<URI> getURIs();
}
