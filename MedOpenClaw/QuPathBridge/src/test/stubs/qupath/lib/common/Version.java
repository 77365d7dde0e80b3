package qupath.lib.common;

/** Stub of qupath-core/src/main/java/qupath/lib/common/Version.java (QuPath v0.7.0): parse and UNKNOWN. */
public final class Version {
    public static final Version UNKNOWN = new Version("UNKNOWN.VERSION");
    private final String text;

    private Version(String text) {
        this.text = text;
    }

    /** QuPath accepts "0.5.0" and "v0.5.0"; anything else is an IllegalArgumentException. */
    public static Version parse(String versionString) throws IllegalArgumentException {
        String text = versionString.startsWith("v") ? versionString.substring(1) : versionString;
        if (!text.matches("\\d+\\.\\d+\\.\\d+.*")) {
            throw new IllegalArgumentException("Unable to parse version from " + versionString);
        }
        return new Version(text);
    }

    @Override
    public String toString() {
        return text;
    }
}
