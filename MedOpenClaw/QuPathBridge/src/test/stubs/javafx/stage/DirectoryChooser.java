package javafx.stage;

import java.io.File;

/**
 * Stub of JavaFX's DirectoryChooser (openjfx/jfx
 * modules/javafx.graphics/src/main/java/javafx/stage/DirectoryChooser.java): {@code showDialog} answers what the
 * check chose ({@code answer}).
 */
public final class DirectoryChooser {
    /** The folder the next dialog returns (null: the user cancelled). */
    public static volatile File answer;
    private String title;

    public void setTitle(String value) {
        title = value;
    }

    public String getTitle() {
        return title;
    }

    public File showDialog(Window ownerWindow) {
        return answer;
    }
}
