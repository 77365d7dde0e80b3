package org.medopenclaw.qupath;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.AclEntry;
import java.nio.file.attribute.AclEntryPermission;
import java.nio.file.attribute.AclEntryType;
import java.nio.file.attribute.AclFileAttributeView;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * Writes a file only its owner can read (the bridge's connection file holds the auth token), on every OS.
 *
 * <p>POSIX file systems get mode 0600 at creation. Windows file systems have no POSIX view
 * ({@code PosixFilePermissions} there throws UnsupportedOperationException): their ACL is replaced by one entry
 * for the owner. Anything else falls back to java.io.File's owner-only flags. The content is written only after
 * the file is restricted, and a file that cannot be restricted is deleted and reported, never left readable.
 */
public final class OwnerOnlyFile {
    private static final Set<AclEntryPermission> OWNER_PERMISSIONS = EnumSet.of(AclEntryPermission.READ_DATA,
            AclEntryPermission.WRITE_DATA, AclEntryPermission.APPEND_DATA, AclEntryPermission.READ_ATTRIBUTES,
            AclEntryPermission.WRITE_ATTRIBUTES, AclEntryPermission.READ_NAMED_ATTRS,
            AclEntryPermission.WRITE_NAMED_ATTRS, AclEntryPermission.READ_ACL, AclEntryPermission.WRITE_ACL,
            AclEntryPermission.DELETE, AclEntryPermission.SYNCHRONIZE);

    /** How a file system lets us restrict a file to its owner. */
    enum Strategy { POSIX, ACL, FILE_FLAGS }

    private OwnerOnlyFile() {
    }

    static Strategy strategy(Set<String> attributeViews) {
        if (attributeViews.contains("posix")) {
            return Strategy.POSIX;
        }
        return attributeViews.contains("acl") ? Strategy.ACL : Strategy.FILE_FLAGS;
    }

    public static void write(Path file, String content) throws IOException {
        write(file, content, strategy(file.getFileSystem().supportedFileAttributeViews()));
    }

    static void write(Path file, String content, Strategy strategy) throws IOException {
        Files.deleteIfExists(file);
        if (strategy == Strategy.POSIX) {
            Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } else {
            Files.createFile(file);
            try {
                if (strategy == Strategy.ACL) {
                    restrictAcl(file);
                } else {
                    restrictFlags(file.toFile());
                }
            } catch (IOException | RuntimeException failed) {
                Files.deleteIfExists(file);
                throw new IOException("cannot make " + file + " readable by its owner only: " + failed.getMessage(),
                        failed);
            }
        }
        Files.writeString(file, content, StandardCharsets.UTF_8);
    }

    private static void restrictAcl(Path file) throws IOException {
        AclFileAttributeView view = Files.getFileAttributeView(file, AclFileAttributeView.class);
        if (view == null) {
            throw new IOException("the file system reports ACLs but offers no ACL view");
        }
        AclEntry owner = AclEntry.newBuilder().setType(AclEntryType.ALLOW).setPrincipal(Files.getOwner(file))
                .setPermissions(OWNER_PERMISSIONS).build();
        view.setAcl(List.of(owner));
    }

    private static void restrictFlags(File file) throws IOException {
        boolean restricted = file.setReadable(false, false) && file.setWritable(false, false)
                && file.setExecutable(false, false) && file.setReadable(true, true) && file.setWritable(true, true);
        if (!restricted) {
            throw new IOException("the file system refused owner-only flags");
        }
    }
}
