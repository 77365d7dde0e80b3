package org.medopenclaw.qupath;

import java.nio.file.Path;
import java.util.List;

/**
 * Geometry and calibration of the open image, whichever viewer shows it.
 *
 * @param levels pyramid levels as {width, height, downsample}, level 0 first
 * @param mpp microns per full-resolution pixel, NaN when unknown
 * @param baseMagnification objective magnification at downsample 1, NaN when unknown
 * @param magnificationSource "objective-power", "mpp" or "none"
 */
public record ImageInfo(Path path, int width, int height, List<double[]> levels, double mpp,
                        double baseMagnification, String magnificationSource) {

    /** Convention shared with the Python runtime: 0.25 um/px is a 40x scan (10 um / mpp). */
    public static final double MICRONS_AT_1X = 10.0;

    public boolean hasMagnification() {
        return Double.isFinite(baseMagnification) && baseMagnification > 0;
    }

    /** The coarsest level still at least as fine as {@code downsample}. */
    public int bestLevel(double downsample) {
        int best = 0;
        for (int level = 0; level < levels.size(); level++) {
            if (levels.get(level)[2] <= downsample * (1.0 + 1e-9)) {
                best = level;
            }
        }
        return best;
    }
}
