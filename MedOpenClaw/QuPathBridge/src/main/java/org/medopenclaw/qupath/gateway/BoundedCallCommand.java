package org.medopenclaw.qupath.gateway;

import java.util.List;
import org.medopenclaw.qupath.BridgeEntryPoint;
import py4j.Protocol;
import py4j.Py4JException;
import py4j.ReturnObject;
import py4j.commands.CallCommand;

/**
 * Py4J's call command restricted to the entry object and its allow-listed operations.
 *
 * <p>Py4J resolves any public method of any object it knows, including inherited ones ({@code getClass},
 * {@code toString}, {@code wait}) and static methods of any class ("z:" targets, which is how
 * {@code gateway.jvm.java.lang.Runtime.getRuntime()} works). Here a call reaches the JVM only when the target
 * is the entry point and the method name is one of {@link BridgeEntryPoint#OPERATIONS}.
 */
public class BoundedCallCommand extends CallCommand {

    @Override
    protected ReturnObject invokeMethod(String methodName, String targetObjectId, List<Object> arguments) {
        boolean allowed = Protocol.ENTRY_POINT_OBJECT_ID.equals(targetObjectId)
                && gateway.getEntryPoint() instanceof BridgeEntryPoint
                && BridgeEntryPoint.OPERATIONS.contains(methodName);
        if (!allowed) {
            return ReturnObject.getErrorReturnObject(new Py4JException(
                    "refused: '" + methodName + "' is not a MedOpenClaw bridge operation"));
        }
        return super.invokeMethod(methodName, targetObjectId, arguments);
    }
}
