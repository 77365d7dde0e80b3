package javafx.beans.property;

/**
 * Stub of JavaFX's StringProperty (openjfx/jfx
 * modules/javafx.base/src/main/java/javafx/beans/property/StringProperty.java): a value to get and set.
 */
public class StringProperty {
    private String value;

    public StringProperty(String value) {
        this.value = value;
    }

    public String get() {
        return value;
    }

    public void set(String value) {
        this.value = value;
    }
}
