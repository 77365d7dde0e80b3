package javafx.stage;

/** Stub of JavaFX's Modality. */
public enum Modality { NONE, WINDOW_MODAL, APPLICATION_MODAL }
