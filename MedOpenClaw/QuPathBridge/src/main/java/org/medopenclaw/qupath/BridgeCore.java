package org.medopenclaw.qupath;

import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;
import javax.imageio.ImageIO;

/**
 * Validation, audit and dispatch of the named operations over one {@link ViewerPort}.
 *
 * <p>Every operation validates its arguments and computes the target view before touching the port, so a
 * refused call changes nothing; every call (accepted or refused) is written to the audit sink together with
 * the resulting viewer state. Responses are JSON strings: {ok, data, error: {code, message}, state}.
 */
public final class BridgeCore {
    public static final List<String> IMAGE_TYPES = List.of("BRIGHTFIELD_H_E", "BRIGHTFIELD_H_DAB",
            "BRIGHTFIELD_OTHER", "FLUORESCENCE", "OTHER", "UNSET");
    public static final List<String> SLIDE_SUFFIXES = List.of(".svs", ".tif", ".tiff", ".ndpi", ".mrxs", ".scn",
            ".svslide", ".bif", ".vms", ".vmu");
    public static final double MAX_SLEEP_SECONDS = 10.0;
    public static final int MAX_LABEL_LENGTH = 80;
    public static final int MAX_PATH_LENGTH = 4096;

    /** One operation's body: returns the response data or throws to refuse. */
    @FunctionalInterface
    interface Operation {
        Map<String, Object> run() throws BridgeError, IOException;
    }

    private final ViewerPort port;
    private final List<Path> dataRoots;
    private final AuditSink audit;
    private final List<Map<String, Object>> evidence = new ArrayList<>();
    private Map<String, Object> lastState;

    public BridgeCore(ViewerPort port, List<Path> dataRoots, AuditSink audit) throws IOException {
        this.port = port;
        List<Path> roots = new ArrayList<>();
        for (Path root : dataRoots) {
            roots.add(root.toRealPath());
        }
        this.dataRoots = List.copyOf(roots);
        this.audit = audit;
    }

    /** Run one operation: never throws; the response and the audit record carry any refusal. */
    synchronized String execute(String operation, Map<String, Object> arguments, Operation body) {
        long started = System.nanoTime();
        Map<String, Object> response = new LinkedHashMap<>();
        Map<String, Object> error = null;
        Map<String, Object> data = null;
        try {
            data = body.run();
        } catch (BridgeError refused) {
            error = errorOf(refused.code(), refused.getMessage());
        } catch (IOException failed) {
            error = errorOf("io_error", failed.getMessage());
        } catch (ViewerUnavailableException unavailable) {
            error = errorOf(unavailable.code(), unavailable.getMessage());
        } catch (RuntimeException bug) {
            error = errorOf("internal_error", bug.getClass().getSimpleName() + ": " + bug.getMessage());
        }
        Map<String, Object> state = reportedState();
        response.put("ok", error == null);
        response.put("data", data == null ? Map.of() : data);
        response.put("error", error);
        response.put("state", state);
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("time", System.currentTimeMillis() / 1000.0);
        record.put("operation", operation);
        record.put("arguments", arguments);
        record.put("status", error == null ? "ok" : "error");
        record.put("error", error);
        record.put("state", state);
        record.put("duration_ms", (System.nanoTime() - started) / 1e6);
        audit.record(record);
        return Json.write(response);
    }

    private static Map<String, Object> errorOf(String code, String message) {
        Map<String, Object> error = new LinkedHashMap<>();
        error.put("code", code);
        error.put("message", message);
        return error;
    }

    // -- state ----------------------------------------------------------------------------------------------

    /** The state after a call; while the viewer cannot answer (a dialog is open), the last state it reported. */
    private Map<String, Object> reportedState() {
        try {
            lastState = state();
        } catch (ViewerUnavailableException unavailable) {
            if (lastState == null) {
                Map<String, Object> empty = new LinkedHashMap<>();
                empty.put("image", null);
                empty.put("image_type", "UNSET");
                empty.put("viewport_width", 0);
                empty.put("viewport_height", 0);
                empty.put("view", null);
                lastState = empty;
            }
        }
        return lastState;
    }

    public Map<String, Object> state() {
        Map<String, Object> state = new LinkedHashMap<>();
        ImageInfo info = port.image();
        state.put("image", info == null ? null : imageJson(info));
        state.put("image_type", port.imageType());
        state.put("viewport_width", port.viewportWidth());
        state.put("viewport_height", port.viewportHeight());
        if (info == null) {
            state.put("view", null);
        } else {
            Map<String, Object> view = new LinkedHashMap<>();
            view.put("centre_x", port.centerX());
            view.put("centre_y", port.centerY());
            view.put("downsample", port.downsample());
            state.put("view", view);
        }
        return state;
    }

    private static Map<String, Object> imageJson(ImageInfo info) {
        Map<String, Object> image = new LinkedHashMap<>();
        image.put("path", info.path().toString());
        image.put("name", info.path().getFileName().toString());
        image.put("width", info.width());
        image.put("height", info.height());
        List<Object> levels = new ArrayList<>();
        for (double[] level : info.levels()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("width", (int) level[0]);
            item.put("height", (int) level[1]);
            item.put("downsample", level[2]);
            levels.add(item);
        }
        image.put("levels", levels);
        image.put("mpp", Double.isFinite(info.mpp()) ? info.mpp() : null);
        image.put("base_magnification", info.hasMagnification() ? info.baseMagnification() : null);
        image.put("magnification_source", info.magnificationSource());
        return image;
    }

    private ViewGeometry.View view(ImageInfo info) {
        return new ViewGeometry.View(port.centerX(), port.centerY(), port.downsample(), port.viewportWidth(),
                port.viewportHeight(), info.width(), info.height());
    }

    private ImageInfo requireImage() throws BridgeError {
        ImageInfo info = port.image();
        if (info == null) {
            throw new BridgeError("no_image", "no image is open; call load_case or load_image first");
        }
        return info;
    }

    private void apply(ViewGeometry.View view) {
        port.setView(view.centerX(), view.centerY(), view.downsample());
    }

    private static double round3(double value) {
        return Math.round(value * 1000.0) / 1000.0;
    }

    private static String checkLabel(String label) throws BridgeError {
        if (label == null || label.isEmpty() || label.length() > MAX_LABEL_LENGTH) {
            throw new BridgeError("invalid_argument", "label must be 1.." + MAX_LABEL_LENGTH + " characters");
        }
        return label;
    }

    private Map<String, Object> viewRecord(ImageInfo info, String label) {
        ViewGeometry.View view = view(info);
        double[] field = view.field();
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("label", label);
        record.put("image", info.path().getFileName().toString());
        record.put("centre_x", round3(view.centerX()));
        record.put("centre_y", round3(view.centerY()));
        record.put("downsample", view.downsample());
        record.put("magnification", info.hasMagnification() ? info.baseMagnification() / view.downsample() : null);
        record.put("field", List.of(round3(Math.max(field[0], 0.0)), round3(Math.max(field[1], 0.0)),
                round3(Math.min(field[2], info.width())), round3(Math.min(field[3], info.height()))));
        return record;
    }

    // -- paths ----------------------------------------------------------------------------------------------

    /** The real path of a request if it lies under a data root (symlinks resolved), else a refusal. */
    Path allowedPath(String requested) throws BridgeError, IOException {
        if (requested == null || requested.isEmpty()) {
            throw new BridgeError("invalid_argument", "a non-empty path string is required");
        }
        if (requested.length() > MAX_PATH_LENGTH || requested.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
            throw new BridgeError("invalid_argument", "a path must be at most " + MAX_PATH_LENGTH
                    + " characters without control characters (NUL, newline, ...)");
        }
        Path candidate;
        Path real;
        try {
            candidate = Path.of(requested);
            if (!candidate.isAbsolute() && !dataRoots.isEmpty()) {
                candidate = dataRoots.get(0).resolve(candidate);
            }
            real = Files.exists(candidate) ? candidate.toRealPath() : candidate.toAbsolutePath().normalize();
        } catch (InvalidPathException | FileSystemException invalid) {  // e.g. a name longer than NAME_MAX
            throw new BridgeError("invalid_argument", "not a usable file path: " + invalid.getMessage());
        }
        if (dataRoots.stream().noneMatch(real::startsWith)) {
            throw new BridgeError("path_not_allowed", "'" + requested + "' is outside the allowed data roots");
        }
        if (!Files.exists(real)) {
            throw new BridgeError("not_found", "'" + requested + "' does not exist");
        }
        return real;
    }

    // -- operations -----------------------------------------------------------------------------------------

    Map<String, Object> loadCase(String casePath, String imageName) throws BridgeError, IOException {
        Path target = allowedPath(casePath);
        if (Files.isDirectory(target)) {
            List<Path> slides;
            try (Stream<Path> entries = Files.list(target)) {
                slides = entries.filter(path -> SLIDE_SUFFIXES.stream().anyMatch(
                        suffix -> path.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(suffix)))
                        .sorted().toList();
            }
            if (imageName != null) {
                slides = slides.stream().filter(path -> path.getFileName().toString().equals(imageName)).toList();
            }
            if (slides.isEmpty()) {
                throw new BridgeError(imageName == null ? "invalid_case" : "not_found",
                        "'" + casePath + "' holds no whole-slide image" + (imageName == null ? "" : " named " + imageName));
            }
            if (slides.size() > 1) {
                throw new BridgeError("ambiguous_case", "'" + casePath + "' holds several images; pass image_name");
            }
            target = allowedPath(slides.get(0).toString());
        } else if (imageName != null && !imageName.equals(target.getFileName().toString())) {
            throw new BridgeError("invalid_argument", "image_name only applies to a case folder");
        }
        return loadImage(target.toString());
    }

    Map<String, Object> loadImage(String imagePath) throws BridgeError, IOException {
        Path target = allowedPath(imagePath);
        if (!Files.isRegularFile(target)) {
            throw new BridgeError("invalid_argument", "'" + imagePath + "' is not a file");
        }
        ImageInfo info;
        try {
            info = port.open(target);
        } catch (IOException unreadable) {
            throw new BridgeError("unreadable_image", "cannot open '" + target.getFileName()
                    + "' as a whole-slide image (" + unreadable.getMessage() + ")");
        }
        port.setImageType("UNSET");
        ViewGeometry.View fit = new ViewGeometry.View(info.width() / 2.0, info.height() / 2.0, 1.0,
                port.viewportWidth(), port.viewportHeight(), info.width(), info.height());
        apply(fit.withDownsample(fit.maxDownsample()));
        return Map.of();
    }

    Map<String, Object> setImageType(String imageType) throws BridgeError {
        requireImage();
        if (!IMAGE_TYPES.contains(imageType)) {
            throw new BridgeError("invalid_argument", "image_type must be one of " + String.join(", ", IMAGE_TYPES));
        }
        try {
            port.setImageType(imageType);
        } catch (IllegalArgumentException refused) {  // QuPath 0.6: brightfield on a non-RGB image
            throw new BridgeError("invalid_argument", refused.getMessage());
        }
        return Map.of();
    }

    Map<String, Object> zoom(String direction, Double amount, String unit, Double x, Double y) throws BridgeError {
        ImageInfo info = requireImage();
        apply(ViewGeometry.zoom(view(info), direction, amount, unit == null ? "factor" : unit, x, y,
                info.baseMagnification(), port));
        return Map.of();
    }

    Map<String, Object> pan(String direction, Double amount, String unit, Double x, Double y) throws BridgeError {
        ImageInfo info = requireImage();
        apply(ViewGeometry.pan(view(info), direction, amount, unit == null ? "viewport" : unit, x, y, port));
        return Map.of();
    }

    Map<String, Object> focus() {
        port.focus();
        return Map.of();
    }

    Map<String, Object> capture(String label) throws BridgeError, IOException {
        ImageInfo info = requireImage();
        checkLabel(label);
        BufferedImage snapshot = port.snapshot();
        ByteArrayOutputStream png = new ByteArrayOutputStream();
        ImageIO.write(snapshot, "png", png);
        byte[] bytes = png.toByteArray();
        Map<String, Object> record = viewRecord(info, label);
        record.put("kind", "capture");
        record.put("sha256", sha256(bytes));
        record.put("width", snapshot.getWidth());
        record.put("height", snapshot.getHeight());
        evidence.add(record);
        Map<String, Object> data = new LinkedHashMap<>(record);
        data.put("png_base64", Base64.getEncoder().encodeToString(bytes));
        return data;
    }

    Map<String, Object> pointToWsi(Double x, Double y) throws BridgeError {
        ImageInfo info = requireImage();
        double[] point = ViewGeometry.checkPoint(x, y);
        if (point == null) {
            throw new BridgeError("invalid_argument", "x and y are required");
        }
        double[] screen = view(info).normalisedToScreen(point[0], point[1]);
        double[] image = port.componentToImage(screen[0], screen[1]);
        Map<String, Object> data = new LinkedHashMap<>();
        data.put("x", image[0]);
        data.put("y", image[1]);
        data.put("inside_slide", image[0] >= 0 && image[1] >= 0 && image[0] < info.width() && image[1] < info.height());
        return data;
    }

    Map<String, Object> recordView(String label) throws BridgeError {
        Map<String, Object> record = viewRecord(requireImage(), checkLabel(label));
        record.put("kind", "view");
        evidence.add(record);
        return record;
    }

    Map<String, Object> sleep(Double seconds) throws BridgeError {
        if (seconds == null || !(seconds >= 0 && seconds <= MAX_SLEEP_SECONDS)) {
            throw new BridgeError("invalid_argument", "seconds must be a number in 0..10");
        }
        try {
            Thread.sleep(Math.round(seconds * 1000.0));
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new BridgeError("interrupted", "the wait was interrupted");
        }
        return Map.of("slept_seconds", seconds);
    }

    Map<String, Object> close() {
        port.close();
        return Map.of();
    }

    /** Captured and recorded views of this session, in order (the viewer-side evidence log). */
    public synchronized List<Map<String, Object>> evidence() {
        return List.copyOf(evidence);
    }

    private static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException impossible) {
            throw new IllegalStateException(impossible);
        }
    }
}
