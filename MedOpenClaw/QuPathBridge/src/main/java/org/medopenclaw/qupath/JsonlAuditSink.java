package org.medopenclaw.qupath;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;

/** Appends each audit record as one JSON line, flushed immediately so a crash loses nothing written. */
public final class JsonlAuditSink implements AuditSink {
    private final Writer writer;

    public JsonlAuditSink(Path path) throws IOException {
        this.writer = Files.newBufferedWriter(path, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
    }

    @Override
    public synchronized void record(Map<String, Object> record) {
        try {
            writer.write(Json.write(record));
            writer.write('\n');
            writer.flush();
        } catch (IOException error) {
            throw new UncheckedIOException(error);
        }
    }
}
