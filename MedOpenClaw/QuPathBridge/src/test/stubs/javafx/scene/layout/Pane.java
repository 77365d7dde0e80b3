package javafx.scene.layout;

/** Stub of JavaFX's Pane (its Region size). */
public class Pane {
    private final double width;
    private final double height;

    public Pane(double width, double height) {
        this.width = width;
        this.height = height;
    }

    public double getWidth() {
        return width;
    }

    public double getHeight() {
        return height;
    }
}
