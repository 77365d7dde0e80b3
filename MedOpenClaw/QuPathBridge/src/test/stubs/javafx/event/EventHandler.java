package javafx.event;

/**
 * Stub of JavaFX's EventHandler (openjfx/jfx modules/javafx.base/src/main/java/javafx/event/EventHandler.java).
 */
@FunctionalInterface
public interface EventHandler<T> {
    void handle(T event);
}
