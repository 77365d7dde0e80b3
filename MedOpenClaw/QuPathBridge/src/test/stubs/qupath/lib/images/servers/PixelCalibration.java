package qupath.lib.images.servers;

/** Stub of qupath-core/src/main/java/qupath/lib/images/servers/PixelCalibration.java. */
public class PixelCalibration {
    private final double micronsPerPixel;

    PixelCalibration(double micronsPerPixel) {
        this.micronsPerPixel = micronsPerPixel;
    }

    public boolean hasPixelSizeMicrons() {
        return Double.isFinite(micronsPerPixel);
    }

    public double getAveragedPixelSizeMicrons() {
        return micronsPerPixel;
    }
}
