package qupath.lib.images;

import org.medopenclaw.qupath.stubs.Calls;
import qupath.lib.images.servers.ImageServer;

/** Stub of qupath-core/src/main/java/qupath/lib/images/ImageData.java. */
public class ImageData<T> {
    /** The image types of QuPath's ImageData.ImageType. */
    public enum ImageType { BRIGHTFIELD_H_E, BRIGHTFIELD_H_DAB, BRIGHTFIELD_OTHER, FLUORESCENCE, OTHER, UNSET }

    private final ImageServer<T> server;
    private ImageType type;

    public ImageData(ImageServer<T> server, ImageType type) {
        Calls.record("new ImageData(" + type + ")");
        this.server = server;
        this.type = type;
    }

    public ImageServer<T> getServer() {
        return server;
    }

    public ImageType getImageType() {
        return type;
    }

    public void setImageType(ImageType type) {
        this.type = type;
    }
}
