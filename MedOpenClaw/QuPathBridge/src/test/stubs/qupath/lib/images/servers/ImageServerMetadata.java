package qupath.lib.images.servers;

import java.util.List;

/** Stub of qupath-core/src/main/java/qupath/lib/images/servers/ImageServerMetadata.java. */
public class ImageServerMetadata {
    private final List<ImageResolutionLevel> levels;
    private final double magnification;
    private final boolean rgb;
    private final List<String> channels;

    ImageServerMetadata(List<ImageResolutionLevel> levels, double magnification, boolean rgb, List<String> channels) {
        this.levels = levels;
        this.magnification = magnification;
        this.rgb = rgb;
        this.channels = channels;
    }

    public boolean isRGB() {
        return rgb;
    }

    /** QuPath's {@code List<ImageChannel>}; only their number matters to the stubs' callers. */
    public List<String> getChannels() {
        return channels;
    }

    public List<ImageResolutionLevel> getLevels() {
        return levels;
    }

    public double getMagnification() {
        return magnification;
    }

    /** One pyramid level. */
    public static class ImageResolutionLevel {
        private final int width;
        private final int height;
        private final double downsample;

        ImageResolutionLevel(int width, int height, double downsample) {
            this.width = width;
            this.height = height;
            this.downsample = downsample;
        }

        public int getWidth() {
            return width;
        }

        public int getHeight() {
            return height;
        }

        public double getDownsample() {
            return downsample;
        }
    }
}
