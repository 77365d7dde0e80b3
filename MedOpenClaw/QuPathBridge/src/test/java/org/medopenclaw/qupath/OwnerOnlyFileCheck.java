package org.medopenclaw.qupath;

import static org.medopenclaw.qupath.Checks.check;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * The connection file is owner-only with every strategy this file system can run: POSIX (Linux, macOS) and the
 * java.io.File flags fallback; the strategy choice covers Windows (an ACL view without a POSIX one), where
 * PosixFilePermissions throws UnsupportedOperationException. Run by Testing/Python/pathology/test_qupath_adapter.py.
 */
public final class OwnerOnlyFileCheck {
    private OwnerOnlyFileCheck() {
    }

    public static void main(String[] arguments) throws Exception {
        check(OwnerOnlyFile.strategy(Set.of("basic", "owner", "dos", "acl", "user")) == OwnerOnlyFile.Strategy.ACL,
                "Windows (NTFS: acl, no posix) restricts through the ACL");
        check(OwnerOnlyFile.strategy(Set.of("basic", "posix", "unix", "owner")) == OwnerOnlyFile.Strategy.POSIX,
                "POSIX file systems get mode 0600");
        check(OwnerOnlyFile.strategy(Set.of("basic")) == OwnerOnlyFile.Strategy.FILE_FLAGS,
                "anything else falls back to java.io.File owner-only flags");
        Path directory = Files.createTempDirectory("owner-only");
        for (OwnerOnlyFile.Strategy strategy : new OwnerOnlyFile.Strategy[] {OwnerOnlyFile.Strategy.POSIX,
                OwnerOnlyFile.Strategy.FILE_FLAGS}) {
            Path file = directory.resolve(strategy + ".json");
            Files.writeString(file, "stale, world-readable");
            OwnerOnlyFile.write(file, "{\"token\":\"secret\"}", strategy);
            String mode = PosixFilePermissions.toString(Files.getPosixFilePermissions(file));
            check("rw-------".equals(mode) && Files.readString(file).contains("secret"), strategy + " gives " + mode);
        }
        try {
            OwnerOnlyFile.write(directory.resolve("acl.json"), "{}", OwnerOnlyFile.Strategy.ACL);
            check(false, "an ACL strategy without an ACL view fails");
        } catch (java.io.IOException refused) {
            check(!Files.exists(directory.resolve("acl.json")), "a file that cannot be restricted is not left behind");
        }
        System.out.println("OwnerOnlyFileCheck passed");
    }
}
