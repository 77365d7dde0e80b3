package javafx.collections;

import java.util.List;

/** Stub of JavaFX's ObservableList (a List). */
public interface ObservableList<E> extends List<E> {
}
