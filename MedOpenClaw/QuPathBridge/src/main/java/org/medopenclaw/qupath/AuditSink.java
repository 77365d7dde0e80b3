package org.medopenclaw.qupath;

import java.util.Map;

/** Receives one record per bridge operation (accepted or refused): the viewer-side audit hook. */
@FunctionalInterface
public interface AuditSink {
    void record(Map<String, Object> record);

    AuditSink NONE = record -> { };
}
