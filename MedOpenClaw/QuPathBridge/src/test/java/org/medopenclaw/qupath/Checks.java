package org.medopenclaw.qupath;

/** The adapter checks' one assertion: a failed check ends the run (non-zero exit), a passed one prints "ok". */
public final class Checks {
    private Checks() {
    }

    public static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
        System.out.println("ok: " + what);
    }
}
