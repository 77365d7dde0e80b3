package org.medopenclaw.qupath.stubs;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/** What the adapter called on the QuPath API stubs; the prompting calls are the ones it must never make. */
public final class Calls {
    /** QuPath API that can open dialogs (QuPathGUI.openImage: project import, image type, series, errors). */
    public static final Set<String> PROMPTING = Set.of("QuPathGUI.openImage");
    private static final List<String> CALLS = new ArrayList<>();

    private Calls() {
    }

    public static synchronized void record(String call) {
        CALLS.add(call);
    }

    public static synchronized List<String> all() {
        return List.copyOf(CALLS);
    }

    public static synchronized void clear() {
        CALLS.clear();
    }
}
