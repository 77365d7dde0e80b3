package qupath.lib.images;

import org.medopenclaw.qupath.stubs.Calls;
import qupath.lib.images.servers.ImageServer;

/** Stub of qupath-core/src/main/java/qupath/lib/images/ImageData.java (QuPath v0.6.0). */
public class ImageData<T> {
    /** The image types of QuPath's ImageData.ImageType. */
    public enum ImageType { BRIGHTFIELD_H_E, BRIGHTFIELD_H_DAB, BRIGHTFIELD_OTHER, FLUORESCENCE, OTHER, UNSET }

    private final ImageServer<T> server;
    private ImageType type;
    private boolean changed;

    public ImageData(ImageServer<T> server, ImageType type) {
        Calls.record("new ImageData(" + type + ")");
        this.server = server;
        this.type = type;
    }

    public ImageServer<T> getServer() {
        return server;
    }

    /** Unsaved changes (objects added or edited since the image was opened or saved). */
    public boolean isChanged() {
        return changed;
    }

    public void setChanged(boolean isChanged) {
        changed = isChanged;
    }

    public ImageType getImageType() {
        return type;
    }

    public qupath.lib.images.servers.ImageServerMetadata getServerMetadata() {
        return server.getMetadata();
    }

    /** QuPath 0.6.0: a brightfield type on an image that is neither RGB nor 3-channel is refused. */
    public void setImageType(ImageType type) throws IllegalArgumentException {
        if (this.type == type) {
            return;
        }
        if (type.name().startsWith("BRIGHTFIELD")
                && !(getServerMetadata().isRGB() || getServerMetadata().getChannels().size() == 3)) {
            throw new IllegalArgumentException("Type for non-RGB image cannot be set to " + type);
        }
        this.type = type;
    }
}
