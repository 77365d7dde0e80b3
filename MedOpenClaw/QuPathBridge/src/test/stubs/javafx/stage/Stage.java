package javafx.stage;

/** Stub of JavaFX's Stage: a window with a title and a modality (dialogs are modal stages). */
public class Stage extends Window {
    private final String title;
    private Modality modality = Modality.NONE;

    public Stage(String title) {
        this.title = title;
    }

    public String getTitle() {
        return title;
    }

    public Modality getModality() {
        return modality;
    }

    public void initModality(Modality value) {
        modality = value;
    }

    public void toFront() {
    }
}
