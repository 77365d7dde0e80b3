package qupath.lib.images.servers;

import java.util.List;

/** Stub of qupath-core/src/main/java/qupath/lib/images/servers/ImageServerMetadata.java. */
public class ImageServerMetadata {
    private final List<ImageResolutionLevel> levels;
    private final double magnification;

    ImageServerMetadata(List<ImageResolutionLevel> levels, double magnification) {
        this.levels = levels;
        this.magnification = magnification;
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
