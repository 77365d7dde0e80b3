package org.medopenclaw.qupath.gateway;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.util.Set;
import py4j.NetworkUtil;
import py4j.Protocol;
import py4j.Py4JException;
import py4j.commands.MemoryCommand;

/**
 * Py4J's memory command reduced to what the bounded gateway needs: releasing an object the client no longer
 * references. The objects every client shares -- the entry point, the JVM view and the gateway server -- are
 * never released: Py4J's own {@code MemoryCommand.deleteObject} compares the requested id with {@code !=}, so
 * an authenticated {@code m d t} removes the entry point and breaks the bridge for every client until restart.
 * Any other memory sub-command is refused and ends the connection, like an unknown command.
 */
public class BoundedMemoryCommand extends MemoryCommand {
    static final Set<String> SHARED_OBJECTS = Set.of(Protocol.ENTRY_POINT_OBJECT_ID, Protocol.DEFAULT_JVM_OBJECT_ID,
            Protocol.GATEWAY_SERVER_ID);

    @Override
    public void execute(String commandName, BufferedReader reader, BufferedWriter writer)
            throws Py4JException, IOException {
        String subCommand = NetworkUtil.safeReadLine(reader);
        if (!MEMORY_DEL_SUB_COMMAND_NAME.equals(subCommand)) {
            throw new Py4JException("refused: memory sub-command '" + subCommand + "' is not served");
        }
        String objectId = NetworkUtil.safeReadLine(reader);
        NetworkUtil.safeReadLine(reader); // end of command
        String answer;
        if (SHARED_OBJECTS.contains(objectId)) {
            answer = Protocol.getOutputErrorCommand("refused: '" + objectId + "' is shared by every client and is "
                    + "never released");
        } else {
            gateway.deleteObject(objectId);
            answer = Protocol.getOutputVoidCommand();
        }
        writer.write(answer);
        writer.flush();
    }
}
