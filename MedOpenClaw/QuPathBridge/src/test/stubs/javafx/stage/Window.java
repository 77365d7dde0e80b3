package javafx.stage;

import java.util.ArrayList;
import java.util.concurrent.CopyOnWriteArrayList;
import javafx.collections.ObservableList;

/** Stub of JavaFX's Window: {@code getWindows()} lists the open windows (dialogs included). */
public class Window {
    private static final Windows WINDOWS = new Windows();
    private boolean showing;

    public static ObservableList<Window> getWindows() {
        return WINDOWS;
    }

    public boolean isShowing() {
        return showing;
    }

    public void show() {
        showing = true;
        WINDOWS.add(this);
    }

    public void hide() {
        showing = false;
        WINDOWS.remove(this);
    }

    public void requestFocus() {
    }

    private static final class Windows extends CopyOnWriteArrayList<Window> implements ObservableList<Window> {
        private static final long serialVersionUID = 1L;

        Windows() {
            super(new ArrayList<>());
        }
    }
}
