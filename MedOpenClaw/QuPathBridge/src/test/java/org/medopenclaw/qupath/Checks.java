package org.medopenclaw.qupath;

import java.lang.reflect.InvocationTargetException;

/**
 * The adapter checks' one assertion: a failed check ends the run (non-zero exit), a passed one prints "ok". Its main
 * runs the named check classes in turn in one JVM (each JVM start costs a second or more of CPU).
 */
public final class Checks {
    private Checks() {
    }

    public static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
        System.out.println("ok: " + what);
    }

    public static void main(String[] checkClasses) throws Exception {
        for (String name : checkClasses) {
            try {
                Class.forName(name).getMethod("main", String[].class).invoke(null, (Object) new String[0]);
            } catch (InvocationTargetException failed) {  // the check's own failure, as if it had run alone
                if (failed.getCause() instanceof Error error) {
                    throw error;
                }
                throw (Exception) failed.getCause();
            }
        }
    }
}
