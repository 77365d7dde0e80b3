package org.medopenclaw.qupath;

/**
 * The viewer cannot serve a request now (a modal dialog is open, its UI thread did not answer in time): the
 * operation is refused at once with {@code code}, instead of waiting on the user interface.
 */
public final class ViewerUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String code;

    public ViewerUnavailableException(String code, String message) {
        super(message);
        this.code = code;
    }

    public String code() {
        return code;
    }
}
