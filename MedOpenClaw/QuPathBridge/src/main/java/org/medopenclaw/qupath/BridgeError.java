package org.medopenclaw.qupath;

/** A refused operation: {@code code} is the same machine-readable identifier the Python runtime uses. */
public final class BridgeError extends Exception {
    private static final long serialVersionUID = 1L;
    private final String code;

    public BridgeError(String code, String message) {
        super(message);
        this.code = code;
    }

    public String code() {
        return code;
    }
}
