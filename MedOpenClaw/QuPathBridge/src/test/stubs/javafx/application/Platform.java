package javafx.application;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Stub of JavaFX's Platform: one application thread runs {@code runLater} tasks in order. {@code stall()} makes
 * that thread stop answering (what a blocked JavaFX thread looks like to the bridge).
 */
public final class Platform {
    private static volatile Thread fxThread;
    private static volatile boolean stalled;
    private static final ExecutorService FX = Executors.newSingleThreadExecutor(task -> {
        Thread thread = new Thread(task, "JavaFX Application Thread (stub)");
        thread.setDaemon(true);
        fxThread = thread;
        return thread;
    });

    private Platform() {
    }

    public static boolean isFxApplicationThread() {
        return Thread.currentThread() == fxThread;
    }

    public static void runLater(Runnable runnable) {
        FX.execute(() -> {
            while (stalled) {
                Thread.onSpinWait();
            }
            runnable.run();
        });
    }

    public static void stall(boolean value) {
        stalled = value;
    }
}
