import java.util.ArrayList;
import java.util.List;
import java.util.spi.ToolProvider;

/**
 * Several javac compilations, in order, in one JVM: each javac launch starts a JVM whose compiler warms up from
 * cold, here the later compilations run on the warm one. scripts/build_qupath_bridge.sh runs this file with the
 * java launcher of the JDK its JAVAC belongs to (a source-file program: nothing to build first).
 *
 * <p>Arguments: each compilation's javac arguments followed by a lone {@value #END}; class path wildcards
 * ("folder/*") are not expanded here (the javac launcher does that). Stops at the first compilation that fails,
 * with its exit status.
 */
public final class JavacInOneJvm {
    static final String END = "--end-of-javac-run";

    public static void main(String[] args) {
        ToolProvider javac = ToolProvider.findFirst("javac").orElseThrow();
        List<String> run = new ArrayList<>();
        for (String arg : args) {
            if (!arg.equals(END)) {
                run.add(arg);
                continue;
            }
            int status = javac.run(System.out, System.err, run.toArray(new String[0]));
            if (status != 0) {
                System.exit(status);
            }
            run.clear();
        }
    }
}
