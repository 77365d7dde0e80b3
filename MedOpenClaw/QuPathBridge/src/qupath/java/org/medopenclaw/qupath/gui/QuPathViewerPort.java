package org.medopenclaw.qupath.gui;

import java.awt.geom.Point2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javafx.application.Platform;
import org.medopenclaw.qupath.ImageInfo;
import org.medopenclaw.qupath.ViewerPort;
import qupath.lib.gui.QuPathGUI;
import qupath.lib.gui.tools.GuiTools;
import qupath.lib.gui.viewer.QuPathViewer;
import qupath.lib.images.ImageData;
import qupath.lib.images.servers.ImageServer;
import qupath.lib.images.servers.ImageServerMetadata;

/**
 * ViewerPort over QuPath's active viewer. Every viewer access runs on the JavaFX application thread (Py4J calls
 * arrive on gateway threads), and waits for it, so the core sees the state its request produced.
 *
 * <p>QuPathViewer API used: getCenterPixelX/Y, getDownsampleFactor, setDownsampleFactor(ds, -1, -1) (zoom about
 * the component centre), setCenterPixelLocation, componentPointToImagePoint, getView().getWidth()/getHeight(),
 * getServer(), getImageData(), resetImageData(); GuiTools.makeViewerSnapshot(viewer) for snapshots;
 * QuPathGUI.openImage(viewer, path, false, false) to open an image without prompts.
 */
public final class QuPathViewerPort implements ViewerPort {
    private static final long FX_TIMEOUT_SECONDS = 120;
    private final QuPathGUI qupath;

    public QuPathViewerPort(QuPathGUI qupath) {
        this.qupath = qupath;
    }

    private QuPathViewer viewer() {
        return qupath.getViewer();
    }

    private static <T> T onFx(Callable<T> task) {
        if (Platform.isFxApplicationThread()) {
            try {
                return task.call();
            } catch (Exception failed) {
                throw new IllegalStateException(failed.getMessage(), failed);
            }
        }
        FutureTask<T> future = new FutureTask<>(task);
        Platform.runLater(future);
        try {
            return future.get(FX_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the QuPath viewer", interrupted);
        } catch (ExecutionException | TimeoutException failed) {
            throw new IllegalStateException("the QuPath viewer did not answer: " + failed.getMessage(), failed);
        }
    }

    private static void onFx(Runnable task) {
        onFx(() -> {
            task.run();
            return null;
        });
    }

    @Override
    public ImageInfo open(Path image) throws IOException {
        boolean opened;
        try {
            opened = onFx(() -> qupath.openImage(viewer(), image.toString(), false, false));
        } catch (IllegalStateException failed) {
            throw new IOException(failed.getMessage(), failed);
        }
        if (!opened || image() == null) {
            throw new IOException("QuPath could not open " + image.getFileName());
        }
        return image();
    }

    @Override
    public void close() {
        onFx(() -> viewer().resetImageData());
    }

    @Override
    public ImageInfo image() {
        return onFx(() -> {
            ImageServer<BufferedImage> server = viewer().getServer();
            if (server == null) {
                return null;
            }
            ImageServerMetadata metadata = server.getMetadata();
            List<double[]> levels = new ArrayList<>();
            for (ImageServerMetadata.ImageResolutionLevel level : metadata.getLevels()) {
                levels.add(new double[] {level.getWidth(), level.getHeight(), level.getDownsample()});
            }
            double mpp = server.getPixelCalibration().hasPixelSizeMicrons()
                    ? server.getPixelCalibration().getAveragedPixelSizeMicrons() : Double.NaN;
            double magnification = metadata.getMagnification();
            String source = "objective-power";
            if (!(Double.isFinite(magnification) && magnification > 0)) {
                magnification = Double.isFinite(mpp) ? ImageInfo.MICRONS_AT_1X / mpp : Double.NaN;
                source = Double.isFinite(mpp) ? "mpp" : "none";
            }
            return new ImageInfo(Path.of(server.getURIs().iterator().next()), server.getWidth(), server.getHeight(),
                    List.copyOf(levels), mpp, magnification, source);
        });
    }

    @Override
    public double centerX() {
        return onFx(() -> viewer().getCenterPixelX());
    }

    @Override
    public double centerY() {
        return onFx(() -> viewer().getCenterPixelY());
    }

    @Override
    public double downsample() {
        return onFx(() -> viewer().getDownsampleFactor());
    }

    @Override
    public void setView(double x, double y, double value) {
        onFx(() -> {
            viewer().setDownsampleFactor(value, -1, -1);
            viewer().setCenterPixelLocation(x, y);
        });
    }

    @Override
    public int viewportWidth() {
        return onFx(() -> (int) Math.round(viewer().getView().getWidth()));
    }

    @Override
    public int viewportHeight() {
        return onFx(() -> (int) Math.round(viewer().getView().getHeight()));
    }

    @Override
    public String imageType() {
        return onFx(() -> {
            ImageData<BufferedImage> data = viewer().getImageData();
            return data == null ? "UNSET" : data.getImageType().name();
        });
    }

    @Override
    public void setImageType(String imageType) {
        onFx(() -> {
            ImageData<BufferedImage> data = viewer().getImageData();
            if (data != null) {
                data.setImageType(ImageData.ImageType.valueOf(imageType));
            }
        });
    }

    @Override
    public double[] componentToImage(double x, double y) {
        return onFx(() -> {
            Point2D point = viewer().componentPointToImagePoint(x, y, null, false);
            return new double[] {point.getX(), point.getY()};
        });
    }

    @Override
    public BufferedImage snapshot() {
        return onFx(() -> GuiTools.makeViewerSnapshot(viewer()));
    }

    @Override
    public void focus() {
        onFx(() -> {
            qupath.getStage().toFront();
            qupath.getStage().requestFocus();
        });
    }
}
