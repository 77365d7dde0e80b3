package qupath.lib.gui.extensions;

/** Stub of qupath-gui-fx/src/main/java/qupath/lib/gui/extensions/GitHubProject.java (QuPath v0.7.0). */
public interface GitHubProject {
    GitHubRepo getRepository();

    /** The repository QuPath's update check reads releases from. */
    final class GitHubRepo {
        private final String name;
        private final String owner;
        private final String repo;

        private GitHubRepo(String name, String owner, String repo) {
            this.name = name;
            this.owner = owner;
            this.repo = repo;
        }

        public static GitHubRepo create(String name, String owner, String repo) {
            return new GitHubRepo(name, owner, repo);
        }

        public String getName() {
            return name;
        }

        public String getOwner() {
            return owner;
        }

        public String getRepo() {
            return repo;
        }

        public String getUrlString() {
            return "https://github.com/" + owner + "/" + repo;
        }
    }
}
