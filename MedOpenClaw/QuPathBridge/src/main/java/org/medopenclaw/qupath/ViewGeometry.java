package org.medopenclaw.qupath;

import java.util.List;

/**
 * Zoom, pan, clamping and point conversion: the Java twin of MedOpenClawLib/pathology/geometry.py (read its
 * docstring for the conventions). A conformance test drives both with the same requests and compares states.
 */
public final class ViewGeometry {
    public static final double MIN_DOWNSAMPLE = 0.25;
    public static final double ZOOM_STEP_FACTOR = Math.sqrt(2.0);
    public static final double MAX_ZOOM_FACTOR = 1024.0;
    public static final int MAX_ZOOM_STEPS = 40;
    public static final int NORMALISED_SPAN = 1000;
    public static final List<String> ZOOM_UNITS = List.of("magnification", "factor", "steps");
    public static final List<String> ZOOM_DIRECTIONS = List.of("in", "out");
    public static final List<String> PAN_UNITS = List.of("viewport", "screen_px", "wsi_px");
    public static final List<String> PAN_DIRECTIONS = List.of("left", "right", "up", "down");

    private ViewGeometry() {
    }

    /** Viewer state: centre in full-resolution px, downsample, viewport size, image size. */
    public record View(double centerX, double centerY, double downsample, int viewportWidth, int viewportHeight,
                       int width, int height) {

        public double maxDownsample() {
            double fit = Math.max((double) width / viewportWidth, (double) height / viewportHeight);
            return Math.max(fit, MIN_DOWNSAMPLE);
        }

        public View clamped() {
            return new View(clip(centerX, 0.0, width), clip(centerY, 0.0, height),
                    clip(downsample, MIN_DOWNSAMPLE, maxDownsample()), viewportWidth, viewportHeight, width, height);
        }

        public View withCenter(double x, double y) {
            return new View(x, y, downsample, viewportWidth, viewportHeight, width, height);
        }

        public View withDownsample(double value) {
            return new View(centerX, centerY, value, viewportWidth, viewportHeight, width, height);
        }

        /** Screen (component) point of a normalised 0..999 point: the centre of the n-th thousandth. */
        public double[] normalisedToScreen(double x, double y) {
            return new double[] {(x + 0.5) * viewportWidth / NORMALISED_SPAN, (y + 0.5) * viewportHeight / NORMALISED_SPAN};
        }

        public double[] screenToImage(double sx, double sy) {
            return new double[] {centerX + (sx - viewportWidth / 2.0) * downsample,
                centerY + (sy - viewportHeight / 2.0) * downsample};
        }

        /** Full-resolution rectangle {x0, y0, x1, y1} shown by the viewport. */
        public double[] field() {
            double[] topLeft = screenToImage(0.0, 0.0);
            double[] bottomRight = screenToImage(viewportWidth, viewportHeight);
            return new double[] {topLeft[0], topLeft[1], bottomRight[0], bottomRight[1]};
        }
    }

    static double clip(double value, double low, double high) {
        return Math.min(Math.max(value, low), high);
    }

    /** Both or neither of x, y, each finite in 0..999; null when neither. */
    public static double[] checkPoint(Double x, Double y) throws BridgeError {
        if (x == null && y == null) {
            return null;
        }
        if (x == null || y == null) {
            throw new BridgeError("invalid_argument", "give both x and y (0..999 on the current screenshot) or neither");
        }
        for (double value : new double[] {x, y}) {
            if (!Double.isFinite(value)) {
                throw new BridgeError("invalid_argument", "x and y must be numbers in 0..999");
            }
            if (value < 0 || value > NORMALISED_SPAN - 1) {
                throw new BridgeError("invalid_argument", "x=" + x + ", y=" + y + ": a value is outside 0..999");
            }
        }
        return new double[] {x, y};
    }

    private static double positive(String name, Double value) throws BridgeError {
        if (value == null) {
            throw new BridgeError("invalid_argument", name + " is required");
        }
        if (!Double.isFinite(value) || value <= 0) {
            throw new BridgeError("invalid_argument", name + " must be a positive number, got " + value);
        }
        return value;
    }

    private static View recentred(View view, double[] point, ViewerPort port) {
        if (point == null) {
            return view;
        }
        double[] screen = view.normalisedToScreen(point[0], point[1]);
        double[] image = port.componentToImage(screen[0], screen[1]);
        return view.withCenter(image[0], image[1]);
    }

    /** The clamped view after a zoom request; throws for an invalid request. */
    public static View zoom(View view, String direction, Double amount, String unit, Double x, Double y,
                            double baseMagnification, ViewerPort port) throws BridgeError {
        if (!ZOOM_UNITS.contains(unit)) {
            throw new BridgeError("invalid_argument", "unit must be one of " + String.join(", ", ZOOM_UNITS)
                    + ", got '" + unit + "'");
        }
        double value = positive("amount", amount);
        double[] point = checkPoint(x, y);
        double target;
        if (unit.equals("magnification")) {
            if (direction != null && !ZOOM_DIRECTIONS.contains(direction)) {
                throw new BridgeError("invalid_argument", "direction must be 'in' or 'out', got '" + direction + "'");
            }
            if (!(Double.isFinite(baseMagnification) && baseMagnification > 0)) {
                throw new BridgeError("magnification_unknown", "this slide has no magnification or pixel-size "
                        + "metadata; zoom with unit 'factor' or 'steps'");
            }
            target = baseMagnification / value;
        } else {
            if (!ZOOM_DIRECTIONS.contains(direction)) {
                throw new BridgeError("invalid_argument", "direction must be 'in' or 'out' for unit '" + unit + "'");
            }
            double factor;
            if (unit.equals("factor")) {
                if (!(value > 1.0 && value <= MAX_ZOOM_FACTOR)) {
                    throw new BridgeError("invalid_argument", "factor must be > 1 and <= 1024 (direction chooses in"
                            + " or out), got " + value);
                }
                factor = value;
            } else {
                if (value != Math.rint(value) || value > MAX_ZOOM_STEPS) {
                    throw new BridgeError("invalid_argument", "steps must be a whole number 1.." + MAX_ZOOM_STEPS);
                }
                factor = Math.pow(ZOOM_STEP_FACTOR, (int) value);
            }
            target = direction.equals("in") ? view.downsample() / factor : view.downsample() * factor;
        }
        return recentred(view, point, port).withDownsample(target).clamped();
    }

    /** The clamped view after a pan by direction and amount, or a recentre on x, y. */
    public static View pan(View view, String direction, Double amount, String unit, Double x, Double y,
                           ViewerPort port) throws BridgeError {
        double[] point = checkPoint(x, y);
        if (point != null) {
            if (direction != null || amount != null) {
                throw new BridgeError("invalid_argument",
                        "pan either by direction and amount, or recentre on x, y: not both");
            }
            return recentred(view, point, port).clamped();
        }
        if (!PAN_DIRECTIONS.contains(direction)) {
            throw new BridgeError("invalid_argument", "direction must be one of " + String.join(", ", PAN_DIRECTIONS)
                    + " (or give x and y to recentre)");
        }
        if (!PAN_UNITS.contains(unit)) {
            throw new BridgeError("invalid_argument", "unit must be one of " + String.join(", ", PAN_UNITS)
                    + ", got '" + unit + "'");
        }
        double value = positive("amount", amount);
        double stepX;
        double stepY;
        switch (unit) {
            case "viewport" -> {
                stepX = value * view.viewportWidth() * view.downsample();
                stepY = value * view.viewportHeight() * view.downsample();
            }
            case "screen_px" -> {
                stepX = value * view.downsample();
                stepY = stepX;
            }
            default -> {
                stepX = value;
                stepY = value;
            }
        }
        double dx = direction.equals("left") ? -stepX : direction.equals("right") ? stepX : 0.0;
        double dy = direction.equals("up") ? -stepY : direction.equals("down") ? stepY : 0.0;
        return view.withCenter(view.centerX() + dx, view.centerY() + dy).clamped();
    }
}
