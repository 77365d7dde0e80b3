package javafx.event;

/**
 * Stub of JavaFX's ActionEvent (openjfx/jfx modules/javafx.base/src/main/java/javafx/event/ActionEvent.java) (what
 * a menu item fires).
 */
public class ActionEvent {
}
