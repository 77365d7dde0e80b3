package org.medopenclaw.qupath;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The one object Python can reach through the gateway. Its public methods are exactly the named operations of
 * the paper's QuPath registry (App. B); each returns the core's JSON response string. There is no script,
 * Groovy, reflection or object pass-through: the gateway refuses every other method name and every other
 * target object (see {@code gateway.BoundedCallCommand}).
 */
public final class BridgeEntryPoint {
    /** Method names the gateway lets through; checked against the declared public methods at construction. */
    public static final Set<String> OPERATIONS = Set.of("loadCase", "loadImage", "setImageType", "zoom", "pan",
            "focusQupath", "captureViewer", "viewerPointToWsiCoordinate", "recordViewAsEvidence", "sleep", "close");

    private final BridgeCore core;

    public BridgeEntryPoint(BridgeCore core) {
        Set<String> declared = Arrays.stream(BridgeEntryPoint.class.getDeclaredMethods())
                .filter(method -> Modifier.isPublic(method.getModifiers()) && !Modifier.isStatic(method.getModifiers()))
                .map(Method::getName).collect(Collectors.toSet());
        if (!declared.equals(OPERATIONS)) {
            throw new IllegalStateException("public methods " + declared + " differ from the allow-list " + OPERATIONS);
        }
        this.core = core;
    }

    private static Map<String, Object> args(Object... keysAndValues) {
        Map<String, Object> arguments = new LinkedHashMap<>();
        for (int index = 0; index < keysAndValues.length; index += 2) {
            if (keysAndValues[index + 1] != null) {
                arguments.put((String) keysAndValues[index], keysAndValues[index + 1]);
            }
        }
        return arguments;
    }

    public String loadCase(String casePath, String imageName) {
        return core.execute("load_case", args("case_path", casePath, "image_name", imageName),
                () -> core.loadCase(casePath, imageName));
    }

    public String loadImage(String imagePath) {
        return core.execute("load_image", args("image_path", imagePath), () -> core.loadImage(imagePath));
    }

    public String setImageType(String imageType) {
        return core.execute("set_image_type", args("image_type", imageType), () -> core.setImageType(imageType));
    }

    public String zoom(String direction, Double amount, String unit, Double x, Double y) {
        return core.execute("zoom", args("direction", direction, "amount", amount, "unit", unit, "x", x, "y", y),
                () -> core.zoom(direction, amount, unit, x, y));
    }

    public String pan(String direction, Double amount, String unit, Double x, Double y) {
        return core.execute("pan", args("direction", direction, "amount", amount, "unit", unit, "x", x, "y", y),
                () -> core.pan(direction, amount, unit, x, y));
    }

    public String focusQupath() {
        return core.execute("focus_qupath", args(), core::focus);
    }

    public String captureViewer(String label) {
        return core.execute("capture_viewer", args("label", label), () -> core.capture(label));
    }

    public String viewerPointToWsiCoordinate(Double x, Double y) {
        return core.execute("viewer_point_to_wsi_coordinate", args("x", x, "y", y), () -> core.pointToWsi(x, y));
    }

    public String recordViewAsEvidence(String label) {
        return core.execute("record_view_as_evidence", args("label", label), () -> core.recordView(label));
    }

    public String sleep(Double seconds) {
        return core.execute("sleep", args("seconds", seconds), () -> core.sleep(seconds));
    }

    public String close() {
        return core.execute("close", args(), core::close);
    }
}
