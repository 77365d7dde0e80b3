package org.medopenclaw.qupath.gui;

import static org.medopenclaw.qupath.Checks.check;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import javafx.application.Platform;
import javafx.stage.Modality;
import javafx.stage.Stage;
import org.medopenclaw.qupath.BridgeCore;
import org.medopenclaw.qupath.BridgeEntryPoint;
import org.medopenclaw.qupath.AuditSink;
import org.medopenclaw.qupath.ImageInfo;
import org.medopenclaw.qupath.ViewerUnavailableException;
import org.medopenclaw.qupath.stubs.Calls;
import qupath.lib.gui.QuPathGUI;

/**
 * The QuPath adapter against the recording QuPath API stubs (src/test/stubs): it opens images without any
 * prompting API, keeps the previous image when an image cannot be opened or has unsaved changes, and refuses at
 * once (viewer_busy)
 * while a modal dialog is open or (viewer_unresponsive) when the JavaFX thread does not answer.
 * Run by Testing/Python/pathology/test_qupath_adapter.py; exits non-zero on the first failed check.
 */
public final class QuPathViewerPortCheck {
    private QuPathViewerPortCheck() {
    }

    public static void main(String[] arguments) throws Exception {
        Path root = Files.createTempDirectory("qupath-port");
        Path slide = Files.writeString(root.resolve("slide.tif"), "stub slide");
        Files.writeString(root.resolve("broken.tif.txt"), "not a slide");
        QuPathGUI qupath = new QuPathGUI();
        QuPathViewerPort port = new QuPathViewerPort(qupath, Duration.ofMillis(500));

        ImageInfo info = port.open(slide);
        check(info != null && info.width() == 6000 && info.path().equals(slide), "open shows the image");
        check("UNSET".equals(port.imageType()), "the image type is set explicitly (UNSET), never prompted for");
        check(Calls.all().containsAll(List.of("ImageServers.buildServer", "new ImageData(UNSET)",
                "QuPathViewer.setImageData")), "opened through ImageServers.buildServer + QuPathViewer.setImageData");

        try {
            port.open(root.resolve("broken.tif.txt"));
            check(false, "an unreadable image is refused");
        } catch (IOException refused) {
            check(port.image().path().equals(slide), "an unreadable image leaves the previous one open");
        }

        port.setView(1000, 800, 4.0);
        check(port.centerX() == 1000 && port.downsample() == 4.0, "views are applied on the viewer");
        double[] point = port.componentToImage(400, 300);
        check(point[0] == 1000 && point[1] == 800, "component points map through the viewer");
        check(port.snapshot().getWidth() == port.viewportWidth(), "snapshots have the viewport's size");
        port.setImageType("BRIGHTFIELD_H_E");
        check("BRIGHTFIELD_H_E".equals(port.imageType()), "the image type is set on the ImageData");
        port.focus();

        BridgeCore core = new BridgeCore(port, List.of(root), AuditSink.NONE);
        BridgeEntryPoint entry = new BridgeEntryPoint(core);
        check(entry.loadImage(slide.toString()).startsWith("{\"ok\":true"), "load_image through the core");
        Path fluorescence = Files.writeString(root.resolve("cells-2ch.tif"), "stub slide");
        check(entry.loadImage(fluorescence.toString()).startsWith("{\"ok\":true"), "a 2-channel image opens");
        String brightfield = entry.setImageType("BRIGHTFIELD_H_E");
        check(brightfield.contains("\"code\":\"invalid_argument\"") && brightfield.contains("non-RGB"),
                "QuPath's refusal of brightfield on a non-RGB image is invalid_argument: " + brightfield);
        check("UNSET".equals(port.imageType()), "the refused type is not set");
        port.setView(1000, 800, Double.NaN);
        check(port.downsample() == 1.0 / 64.0, "an invalid downsample becomes QuPath's minimum, as in QuPath");
        check(entry.loadImage(slide.toString()).startsWith("{\"ok\":true"), "back to the RGB slide");
        qupath.getViewer().getImageData().setChanged(true);  // the user annotated and did not save
        String unsaved = entry.loadImage(fluorescence.toString());
        check(unsaved.contains("\"code\":\"unsaved_changes\""), "an agent's load_image never discards unsaved "
                + "changes: " + unsaved);
        check(port.image().path().equals(slide), "the unsaved image stays open");
        qupath.getViewer().getImageData().setChanged(false);

        Stage dialog = new Stage("Set image type");
        dialog.initModality(Modality.APPLICATION_MODAL);
        dialog.show();
        long started = System.nanoTime();
        try {
            port.centerX();
            check(false, "a call under a modal dialog is refused");
        } catch (ViewerUnavailableException busy) {
            check("viewer_busy".equals(busy.code()) && busy.getMessage().contains("Set image type"),
                    "a call under a modal dialog is refused with viewer_busy, naming the dialog");
        }
        check(System.nanoTime() - started < 400_000_000L, "the refusal is immediate");
        String refused = entry.zoom("in", 2.0, "factor", null, null);
        check(refused.contains("\"code\":\"viewer_busy\""), "the bridge answers viewer_busy as data");
        dialog.hide();
        check(port.centerX() >= 0, "calls run again once the dialog is closed");

        Platform.stall(true);
        started = System.nanoTime();
        try {
            port.centerX();
            check(false, "a stalled JavaFX thread is not waited on");
        } catch (ViewerUnavailableException stalled) {
            check("viewer_unresponsive".equals(stalled.code()), "a stalled JavaFX thread gives viewer_unresponsive");
        }
        check(System.nanoTime() - started < 2_000_000_000L, "within the configured timeout");
        Platform.stall(false);

        check(Calls.all().stream().noneMatch(Calls.PROMPTING::contains), "no prompting QuPath API was called: "
                + Calls.all());
        System.out.println("QuPathViewerPortCheck passed");
    }
}
