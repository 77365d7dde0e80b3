package javafx.scene.control;

import java.util.concurrent.CopyOnWriteArrayList;
import javafx.collections.ObservableList;

/**
 * Stub of JavaFX's Menu (openjfx/jfx modules/javafx.controls/src/main/java/javafx/scene/control/Menu.java): a menu
 * item holding items.
 */
public class Menu extends MenuItem {
    private final Items items = new Items();

    public Menu(String text) {
        super(text);
    }

    public ObservableList<MenuItem> getItems() {
        return items;
    }

    private static final class Items extends CopyOnWriteArrayList<MenuItem> implements ObservableList<MenuItem> {
        private static final long serialVersionUID = 1L;
    }
}
