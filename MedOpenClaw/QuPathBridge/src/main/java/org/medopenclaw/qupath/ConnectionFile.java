package org.medopenclaw.qupath;

import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/** The {host, port, token} file a client reads to reach a running gateway; readable by its owner only. */
public final class ConnectionFile {
    private ConnectionFile() {
    }

    public static void write(Path file, int port, String token) throws IOException {
        Map<String, Object> connection = new LinkedHashMap<>();
        connection.put("host", "127.0.0.1");
        connection.put("port", port);
        connection.put("token", token);
        OwnerOnlyFile.write(file, Json.write(connection));
    }
}
