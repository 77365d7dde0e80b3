#!/usr/bin/env bash
# Build the MedOpenClaw QuPath bridge with javac and the py4j jar shipped in the `py4j` pip wheel.
#
# The bridge is compiled for Java 17 (--release 17), so one jar runs in QuPath 0.5 (built with JDK 17, class
# files version 61), 0.6 (JDK 21, version 65) and 0.7 (JDK 25, version 69; its jars need javac 25). Compiling
# against QuPath 0.6's jars, and the --check-adapter stubs (compiled at version 65, as QuPath 0.6 is), needs javac
# 21 or newer: javac 17 stops with "class file has wrong version 65.0, should be 61.0".
#
#   scripts/build_qupath_bridge.sh                 core + file-backed viewer + bounded gateway (runs in CI)
#   QUPATH_JARS=/path/to/QuPath/lib/app scripts/build_qupath_bridge.sh
#                                                  also the QuPath adapter and extension jar
#   scripts/build_qupath_bridge.sh --check-adapter  (runs in CI, no QuPath needed) compile the QuPath adapter
#                                                  against recording stubs of the QuPath API it may use
#                                                  (src/test/stubs) and run its checks (src/test/java): no
#                                                  prompting API, fail-fast under dialogs, unsaved changes kept,
#                                                  the extension's menu, owner-only files. QUPATH_STUBS_RELEASE=25
#                                                  compiles the stubs as QuPath 0.7 is (JDK 25, class version 69)
#
# Outputs (MedOpenClaw/QuPathBridge/build/, git-ignored):
#   medopenclaw-qupath-bridge.jar      core, file-backed ViewerPort, FileBridgeMain, bounded gateway
#   medopenclaw-qupath-extension.jar   the above + QuPathViewerPort + QuPath extension (only with QUPATH_JARS)
# Environment: PYTHON (interpreter with py4j installed, default python3), JAVAC, JAVA, JAR (default: those on
# PATH), MEDOPENCLAW_BRIDGE_BUILD. Several compilations in a row (--check-adapter's four) run in one JVM: JAVAC's
# own JDK's compiler, in process, through the java launcher beside JAVAC's real path (one javac launch each when
# there is none).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bridge="$repo/MedOpenClaw/QuPathBridge"
out="${MEDOPENCLAW_BRIDGE_BUILD:-$bridge/build}"
python="${PYTHON:-python3}"
javac="${JAVAC:-javac}"
jar="${JAR:-jar}"
java="${JAVA:-java}"

# javac, jar and java each start a short-lived JVM: C1 alone compiles its hot code with about half the CPU of the
# default C1 + C2, and the serial collector runs no GC threads (javac's and jar's -J pass the flags on to their JVM)
short_jvm=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC)
run_javac() { "$javac" "${short_jvm[@]/#/-J}" "$@"; }
run_jar() { "$jar" "${short_jvm[@]/#/-J}" "$@"; }

# compilations are queued (queue_javac) and run together (run_queued_javac): several in one JVM, where javac's
# in-process compiler warms up once (scripts/JavacInOneJvm.java, about 1.5 s of CPU less per compilation)
end_of_run="--end-of-javac-run"
queued=()
queue_javac() { queued+=("$@" "$end_of_run"); }

jdk_java() {  # the java launcher beside $javac's real path, i.e. of the same JDK (none: $javac is not in a JDK's bin)
  local path
  path="$(realpath "$(command -v "$javac")" 2>/dev/null)" && [[ -x "${path%/*}/java" ]] && echo "${path%/*}/java"
}

run_queued_javac() {  # the queued compilations in order; the first that fails ends the build
  local arg runs=0 run=() launcher=""
  for arg in "${queued[@]}"; do [[ "$arg" != "$end_of_run" ]] || runs=$((runs + 1)); done
  (( runs < 2 )) || launcher="$(jdk_java)" || true
  if [[ -n "$launcher" ]]; then
    "$launcher" "${short_jvm[@]}" "$repo/scripts/JavacInOneJvm.java" "${queued[@]}"
  else
    for arg in "${queued[@]}"; do
      if [[ "$arg" == "$end_of_run" ]]; then run_javac "${run[@]}"; run=(); else run+=("$arg"); fi
    done
  fi
  queued=()
}

javac_version=""
javac_major() {  # "javac 21.0.5" -> 21 (need_javac_21 asks javac once: each -version is a JVM start)
  sed -nE 's/^javac ([0-9]+).*/\1/p' <<<"$javac_version"
}

class_version() {  # the class-file major version of the first class in the jars of folder $1 (0: none)
  "$python" - "$1" <<'PY'
import glob, struct, sys, zipfile
for path in sorted(glob.glob(sys.argv[1] + "/*.jar")):
    with zipfile.ZipFile(path) as archive:
        name = next((n for n in archive.namelist() if n.endswith(".class") and "module-info" not in n), None)
        if name:
            print(struct.unpack(">H", archive.read(name)[6:8])[0])
            sys.exit()
print(0)
PY
}

need_javac_21() {  # $1: what needs it
  javac_version="${javac_version:-$(run_javac -version 2>&1)}"
  if (( $(javac_major) < 21 )); then
    echo "build_qupath_bridge: $1 needs javac 21 or newer (QuPath 0.6 is built with JDK 21, class files version" \
         "65); $javac is $javac_version. Install" \
         "openjdk-21-jdk-headless (Debian 13+, Ubuntu 24.04) or temurin-21-jdk (Adoptium; Debian 12), or set JAVAC" \
         "and JAVA." >&2
    exit 1
  fi
}

py4j_jar="$("$python" -c 'from py4j.java_gateway import find_jar_path; print(find_jar_path())')"
if [[ -z "$py4j_jar" || ! -f "$py4j_jar" ]]; then
  echo "build_qupath_bridge: the py4j jar was not found; pip install py4j==0.10.9.9" >&2
  exit 1
fi

rm -rf "$out/classes" "$out/qupath-classes"
mkdir -p "$out/classes"
mapfile -t core_sources < <(find "$bridge/src/main/java" -name '*.java' | sort)
queue_javac --release 17 -Xlint:all,-serial -Werror -encoding UTF-8 -cp "$py4j_jar" -d "$out/classes" \
  "${core_sources[@]}"
bridge_jar() {
  run_jar --create --file "$out/medopenclaw-qupath-bridge.jar" -C "$out/classes" .
  echo "built $out/medopenclaw-qupath-bridge.jar (py4j: $py4j_jar)"
}

if [[ "${1:-}" != "--check-adapter" ]]; then
  # the bridge jar before the adapter is compiled against QUPATH_JARS: it is built even when that fails
  run_queued_javac
  bridge_jar
  qupath_classpath="${QUPATH_JARS:+$QUPATH_JARS/*}"
  if [[ -n "$qupath_classpath" ]] && (( $(class_version "$QUPATH_JARS") >= 65 )); then
    need_javac_21 "compiling against $QUPATH_JARS"
  fi
else
  # every compilation first (one JVM), against the stubs' classes; then the jars, and the checks run on them
  stubs="$out/qupath-stubs"
  rm -rf "$stubs" "$out/check-classes"
  mkdir -p "$stubs/classes" "$out/check-classes"
  mapfile -t stub_sources < <(find "$bridge/src/test/stubs" -name '*.java' | sort)
  # the stubs at the class version of the QuPath release checked: 21 (0.6, version 65) or 25 (0.7, version 69)
  stubs_release="${QUPATH_STUBS_RELEASE:-21}"
  need_javac_21 "--check-adapter (stubs compiled at class version 65, as QuPath 0.6 is)"
  if (( $(javac_major) < stubs_release )); then
    echo "build_qupath_bridge: QUPATH_STUBS_RELEASE=$stubs_release needs javac $stubs_release or newer" >&2
    exit 1
  fi
  queue_javac --release "$stubs_release" -encoding UTF-8 -d "$stubs/classes" "${stub_sources[@]}"
  qupath_classpath="$stubs/classes"
fi

if [[ -n "$qupath_classpath" ]]; then
  mkdir -p "$out/qupath-classes"
  mapfile -t qupath_sources < <(find "$bridge/src/qupath/java" -name '*.java' | sort)
  queue_javac --release 17 -encoding UTF-8 -cp "$py4j_jar:$out/classes:$qupath_classpath" -d "$out/qupath-classes" \
    "${qupath_sources[@]}"
fi

if [[ "${1:-}" == "--check-adapter" ]]; then
  mapfile -t check_sources < <(find "$bridge/src/test/java" -name '*.java' | sort)
  queue_javac --release 17 -Xlint:all -Werror -encoding UTF-8 \
    -cp "$py4j_jar:$out/classes:$out/qupath-classes:$stubs/classes" -d "$out/check-classes" "${check_sources[@]}"
  run_queued_javac
  bridge_jar
  run_jar --create --file "$stubs/qupath-stubs.jar" -C "$stubs/classes" .
fi

if [[ -n "$qupath_classpath" ]]; then
  run_queued_javac
  cp -r "$bridge/src/qupath/resources/." "$out/qupath-classes/"
  cp -r "$out/classes/." "$out/qupath-classes/"
  run_jar --create --file "$out/medopenclaw-qupath-extension.jar" -C "$out/qupath-classes" .
  echo "built $out/medopenclaw-qupath-extension.jar (copy it and $py4j_jar into QuPath's extensions folder)"
fi

if [[ "${1:-}" == "--check-adapter" ]]; then
  classpath="$py4j_jar:$out/medopenclaw-qupath-extension.jar:$stubs/qupath-stubs.jar"
  # the checks' scratch folders (a QuPath home, slides, connection files) in the build folder, emptied before each
  # run; in the system's temporary directory each run left three behind
  scratch="$out/check-scratch"
  rm -rf "$scratch" && mkdir -p "$scratch"
  # the checks in turn in one JVM (Checks.main); the first that fails ends the run
  "$java" "${short_jvm[@]}" -Djava.io.tmpdir="$scratch" -cp "$out/check-classes:$classpath" \
    org.medopenclaw.qupath.Checks org.medopenclaw.qupath.gui.QuPathViewerPortCheck \
    org.medopenclaw.qupath.gui.QuPathBridgeExtensionCheck org.medopenclaw.qupath.OwnerOnlyFileCheck
fi
