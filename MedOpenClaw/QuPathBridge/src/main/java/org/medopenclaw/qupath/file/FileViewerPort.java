package org.medopenclaw.qupath.file;

import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.Rectangle;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import javax.imageio.ImageIO;
import javax.imageio.ImageReadParam;
import javax.imageio.ImageReader;
import javax.imageio.metadata.IIOMetadata;
import javax.imageio.plugins.tiff.BaselineTIFFTagSet;
import javax.imageio.plugins.tiff.TIFFDirectory;
import javax.imageio.plugins.tiff.TIFFField;
import javax.imageio.stream.ImageInputStream;
import org.medopenclaw.qupath.ImageInfo;
import org.medopenclaw.qupath.ViewerPort;

/**
 * A viewer over a generic tiled pyramidal TIFF read with the JDK's own TIFF reader (javax.imageio, JDK 9+), for
 * running the bridge without QuPath (CI, tests, headless servers).
 *
 * <p>Levels are the file's pages whose aspect ratio matches page 0 (thumbnails and label images of other shapes
 * are skipped), largest first; downsamples are the mean of the width and height ratios, as OpenSlide computes
 * them. The pixel size comes from the XResolution tag (centimetre or inch units); magnification follows the
 * runtime's convention 10 um / mpp. Snapshots read only the tiles of the one level needed for the field and draw
 * it without overlays (QuPath's own snapshot carries QuPath's overlays).
 */
public final class FileViewerPort implements ViewerPort {
    private static final Color BACKGROUND = Color.WHITE;
    private final int viewportWidth;
    private final int viewportHeight;
    private ImageReader reader;
    private ImageInputStream input;
    private ImageInfo info;
    private List<Integer> pages = List.of();
    private double centerX;
    private double centerY;
    private double downsample = 1.0;
    private String imageType = "UNSET";

    public FileViewerPort(int viewportWidth, int viewportHeight) {
        if (viewportWidth < 64 || viewportHeight < 64) {
            throw new IllegalArgumentException("the viewport must be at least 64 x 64 pixels");
        }
        this.viewportWidth = viewportWidth;
        this.viewportHeight = viewportHeight;
    }

    @Override
    public synchronized ImageInfo open(Path image) throws IOException {
        ImageInputStream stream = ImageIO.createImageInputStream(image.toFile());
        if (stream == null) {
            throw new IOException("cannot read " + image.getFileName());
        }
        Iterator<ImageReader> readers = ImageIO.getImageReadersByFormatName("tiff");
        ImageReader tiff = readers.next();
        try {
            tiff.setInput(stream);
            int count = tiff.getNumImages(true);
            if (count < 1) {
                throw new IOException("no image pages");
            }
            int width = tiff.getWidth(0);
            int height = tiff.getHeight(0);
            List<Integer> levelPages = new ArrayList<>();
            for (int page = 0; page < count; page++) {
                double ratioX = (double) width / tiff.getWidth(page);
                double ratioY = (double) height / tiff.getHeight(page);
                if (Math.abs(ratioX - ratioY) <= 0.02 * Math.max(ratioX, ratioY) + 1.0 / Math.min(tiff.getWidth(page),
                        tiff.getHeight(page))) {
                    levelPages.add(page);
                }
            }
            List<Integer> sorted = new ArrayList<>(levelPages);
            sorted.sort(Comparator.comparingInt((Integer page) -> widthOf(tiff, page)).reversed());
            List<double[]> levels = new ArrayList<>();
            for (int page : sorted) {
                int levelWidth = tiff.getWidth(page);
                int levelHeight = tiff.getHeight(page);
                double levelDownsample = ((double) width / levelWidth + (double) height / levelHeight) / 2.0;
                levels.add(new double[] {levelWidth, levelHeight, levelDownsample});
            }
            double mpp = pixelSizeMicrons(tiff.getImageMetadata(0));
            boolean calibrated = Double.isFinite(mpp);
            ImageInfo opened = new ImageInfo(image, width, height, List.copyOf(levels), mpp,
                    calibrated ? ImageInfo.MICRONS_AT_1X / mpp : Double.NaN, calibrated ? "mpp" : "none");
            closeReader();
            reader = tiff;
            input = stream;
            pages = List.copyOf(sorted);
            info = opened;
            return opened;
        } catch (IOException | RuntimeException failed) {
            tiff.dispose();
            stream.close();
            throw failed instanceof IOException io ? io : new IOException(failed.getMessage(), failed);
        }
    }

    private static int widthOf(ImageReader reader, int page) {
        try {
            return reader.getWidth(page);
        } catch (IOException error) {
            throw new IllegalStateException(error);
        }
    }

    private static double pixelSizeMicrons(IIOMetadata metadata) {
        try {
            TIFFDirectory directory = TIFFDirectory.createFromMetadata(metadata);
            TIFFField resolution = directory.getTIFFField(BaselineTIFFTagSet.TAG_X_RESOLUTION);
            TIFFField unit = directory.getTIFFField(BaselineTIFFTagSet.TAG_RESOLUTION_UNIT);
            if (resolution == null || unit == null) {
                return Double.NaN;
            }
            double perUnit = resolution.getAsDouble(0);
            int unitCode = unit.getAsInt(0);
            if (!(perUnit > 0)) {
                return Double.NaN;
            }
            if (unitCode == BaselineTIFFTagSet.RESOLUTION_UNIT_CENTIMETER) {
                return 1e4 / perUnit;
            }
            if (unitCode == BaselineTIFFTagSet.RESOLUTION_UNIT_INCH) {
                return 25400.0 / perUnit;
            }
            return Double.NaN;
        } catch (javax.imageio.metadata.IIOInvalidTreeException | IllegalArgumentException unreadable) {
            return Double.NaN;
        }
    }

    private void closeReader() throws IOException {
        if (reader != null) {
            reader.dispose();
            input.close();
        }
        reader = null;
        input = null;
    }

    @Override
    public synchronized void close() {
        try {
            closeReader();
        } catch (IOException ignored) {
            // the file handle is released either way; nothing else to undo
        }
        info = null;
        pages = List.of();
        imageType = "UNSET";
    }

    @Override
    public synchronized ImageInfo image() {
        return info;
    }

    @Override
    public synchronized double centerX() {
        return centerX;
    }

    @Override
    public synchronized double centerY() {
        return centerY;
    }

    @Override
    public synchronized double downsample() {
        return downsample;
    }

    @Override
    public synchronized void setView(double x, double y, double value) {
        centerX = x;
        centerY = y;
        downsample = value;
    }

    @Override
    public int viewportWidth() {
        return viewportWidth;
    }

    @Override
    public int viewportHeight() {
        return viewportHeight;
    }

    @Override
    public synchronized String imageType() {
        return imageType;
    }

    @Override
    public synchronized void setImageType(String value) {
        imageType = value;
    }

    @Override
    public synchronized double[] componentToImage(double x, double y) {
        return new double[] {centerX + (x - viewportWidth / 2.0) * downsample,
            centerY + (y - viewportHeight / 2.0) * downsample};
    }

    @Override
    public synchronized BufferedImage snapshot() throws IOException {
        BufferedImage canvas = new BufferedImage(viewportWidth, viewportHeight, BufferedImage.TYPE_INT_RGB);
        Graphics2D graphics = canvas.createGraphics();
        try {
            graphics.setColor(BACKGROUND);
            graphics.fillRect(0, 0, viewportWidth, viewportHeight);
            int level = info.bestLevel(downsample);
            double[] dims = info.levels().get(level);
            double levelDownsample = dims[2];
            double[] topLeft = componentToImage(0, 0);
            double x0 = topLeft[0] / levelDownsample;
            double y0 = topLeft[1] / levelDownsample;
            double scale = downsample / levelDownsample;  // level px per screen px
            int readX0 = (int) Math.max(0, Math.floor(x0));
            int readY0 = (int) Math.max(0, Math.floor(y0));
            int readX1 = (int) Math.min(dims[0], Math.ceil(x0 + viewportWidth * scale));
            int readY1 = (int) Math.min(dims[1], Math.ceil(y0 + viewportHeight * scale));
            if (readX1 <= readX0 || readY1 <= readY0) {
                return canvas;
            }
            ImageReadParam param = reader.getDefaultReadParam();
            param.setSourceRegion(new Rectangle(readX0, readY0, readX1 - readX0, readY1 - readY0));
            BufferedImage region = reader.read(pages.get(level), param);
            graphics.setRenderingHint(RenderingHints.KEY_INTERPOLATION, RenderingHints.VALUE_INTERPOLATION_BILINEAR);
            double left = (readX0 - x0) / scale;
            double top = (readY0 - y0) / scale;
            graphics.drawImage(region, (int) Math.round(left), (int) Math.round(top),
                    (int) Math.round(left + region.getWidth() / scale), (int) Math.round(top + region.getHeight() / scale),
                    0, 0, region.getWidth(), region.getHeight(), null);
            return canvas;
        } finally {
            graphics.dispose();
        }
    }

    @Override
    public void focus() {
        // no window: the file-backed viewer is always "in front"
    }
}
