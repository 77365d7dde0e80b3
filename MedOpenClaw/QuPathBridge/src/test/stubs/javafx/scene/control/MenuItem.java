package javafx.scene.control;

import javafx.event.ActionEvent;
import javafx.event.EventHandler;

/**
 * Stub of JavaFX's MenuItem (openjfx/jfx
 * modules/javafx.controls/src/main/java/javafx/scene/control/MenuItem.java): a text, an action, {@code fire()}
 * (what a click does), a disabled state.
 */
public class MenuItem {
    private String text;
    private boolean disable;
    private EventHandler<ActionEvent> onAction;

    public MenuItem(String text) {
        this.text = text;
    }

    public String getText() {
        return text;
    }

    public void setText(String value) {
        text = value;
    }

    public boolean isDisable() {
        return disable;
    }

    public void setDisable(boolean value) {
        disable = value;
    }

    public void setOnAction(EventHandler<ActionEvent> value) {
        onAction = value;
    }

    public void fire() {
        if (!disable && onAction != null) {
            onAction.handle(new ActionEvent());
        }
    }
}
