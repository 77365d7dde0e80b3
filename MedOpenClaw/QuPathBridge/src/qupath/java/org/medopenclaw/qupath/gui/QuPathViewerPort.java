package org.medopenclaw.qupath.gui;

import java.awt.geom.Point2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javafx.application.Platform;
import javafx.stage.Modality;
import javafx.stage.Stage;
import javafx.stage.Window;
import org.medopenclaw.qupath.ImageInfo;
import org.medopenclaw.qupath.ViewerPort;
import org.medopenclaw.qupath.ViewerUnavailableException;
import qupath.lib.gui.QuPathGUI;
import qupath.lib.gui.tools.GuiTools;
import qupath.lib.gui.viewer.QuPathViewer;
import qupath.lib.images.ImageData;
import qupath.lib.images.servers.ImageServer;
import qupath.lib.images.servers.ImageServerMetadata;
import qupath.lib.images.servers.ImageServers;

/**
 * ViewerPort over QuPath's active viewer. Every viewer access runs on the JavaFX application thread (Py4J calls
 * arrive on gateway threads), and waits for it, so the core sees the state its request produced.
 *
 * <p>QuPathViewer API used: getCenterPixelX/Y, getDownsampleFactor, setDownsampleFactor(ds, -1, -1) (zoom about
 * the component centre), setCenterPixelLocation, componentPointToImagePoint, getView().getWidth()/getHeight(),
 * getServer(), getImageData(), setImageData(), resetImageData(); GuiTools.makeViewerSnapshot(viewer) for
 * snapshots.
 *
 * <p>Images are opened without any prompting path. {@code QuPathGUI.openImage} can open dialogs even with
 * prompt=false (project import when a project is open, "Set image type" under the default PROMPT preference, the
 * series selector, error dialogs; qupath-gui-fx/src/main/java/qupath/lib/gui/QuPathGUI.java), so the port builds
 * the server itself ({@code ImageServers.buildServer}: the first builder, no selector, IOException on failure),
 * wraps it in an ImageData with the explicit type UNSET (the agent sets the type with set_image_type) and shows
 * it with {@code QuPathViewer.setImageData}, which opens no dialog.
 *
 * <p>Every call fails fast instead of waiting on the user interface: a call made while a modal dialog is open is
 * refused ({@code viewer_busy}), and one the JavaFX thread does not run within the timeout is abandoned
 * ({@code viewer_unresponsive}).
 */
public final class QuPathViewerPort implements ViewerPort {
    private static final Duration FX_TIMEOUT = Duration.ofSeconds(15);
    private final QuPathGUI qupath;
    private final Duration timeout;

    public QuPathViewerPort(QuPathGUI qupath) {
        this(qupath, FX_TIMEOUT);
    }

    QuPathViewerPort(QuPathGUI qupath, Duration timeout) {
        this.qupath = qupath;
        this.timeout = timeout;
    }

    private QuPathViewer viewer() {
        return qupath.getViewer();
    }

    /** Run {@code task} on the JavaFX thread and wait for it; refused at once while a dialog holds the UI. */
    private <T> T onFx(Callable<T> task) {
        Callable<T> guarded = () -> {
            refuseUnderModalDialog();
            return task.call();
        };
        if (Platform.isFxApplicationThread()) {
            return call(guarded);
        }
        FutureTask<T> future = new FutureTask<>(() -> call(guarded));
        Platform.runLater(future);
        try {
            return future.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the QuPath viewer", interrupted);
        } catch (TimeoutException stalled) {
            future.cancel(false);
            throw new ViewerUnavailableException("viewer_unresponsive", "QuPath's user interface did not answer "
                    + "within " + timeout.toMillis() / 1000.0 + " s; close any open dialog in QuPath and retry");
        } catch (ExecutionException failed) {
            if (failed.getCause() instanceof RuntimeException runtime) {
                throw runtime;
            }
            throw new IllegalStateException(String.valueOf(failed.getCause()), failed.getCause());
        }
    }

    private static <T> T call(Callable<T> task) {
        try {
            return task.call();
        } catch (RuntimeException failed) {
            throw failed;
        } catch (Exception failed) {
            throw new IllegalStateException(failed.getMessage(), failed);
        }
    }

    private void onFx(Runnable task) {
        onFx(() -> {
            task.run();
            return null;
        });
    }

    /** A modal dialog blocks the user's QuPath; an agent's request must not run underneath it. */
    private static void refuseUnderModalDialog() {
        for (Window window : Window.getWindows()) {
            if (window.isShowing() && window instanceof Stage stage && stage.getModality() != Modality.NONE) {
                throw new ViewerUnavailableException("viewer_busy", "a QuPath dialog is open ('" + stage.getTitle()
                        + "'); close it in QuPath, then retry");
            }
        }
    }

    /** QuPath itself asks before replacing an image with unsaved objects; an agent cannot answer, so it is refused. */
    private void refuseToDiscardUnsavedWork() {
        ImageData<BufferedImage> current = viewer().getImageData();
        if (current != null && current.isChanged()) {
            throw new ViewerUnavailableException("unsaved_changes", "the image open in QuPath has unsaved changes "
                    + "(annotations, detections); save or discard them in QuPath, then retry");
        }
    }

    @Override
    public ImageInfo open(Path image) throws IOException {
        ImageServer<BufferedImage> server = ImageServers.buildServer(image.toUri());  // off the JavaFX thread
        ImageData<BufferedImage> data = new ImageData<>(server, ImageData.ImageType.UNSET);
        try {
            onFx(() -> {
                refuseToDiscardUnsavedWork();
                viewer().setImageData(data);
                return null;
            });
        } catch (IllegalStateException failed) {
            closeQuietly(server);
            throw new IOException(failed.getMessage(), failed);
        } catch (ViewerUnavailableException busy) {
            closeQuietly(server);
            throw busy;
        }
        return image();
    }

    private static void closeQuietly(ImageServer<BufferedImage> server) {
        try {
            server.close();
        } catch (Exception ignored) {
            // the server was never shown; nothing else refers to it
        }
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
