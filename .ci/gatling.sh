#!/usr/bin/env bash
# Assemble Gatling 3 (its Java DSL and its runner, io.gatling.app.Gatling)
# from its jars on Maven Central into $HEADROOM_GATLING_HOME (default
# ~/.cache/headroom/gatling-$VERSION/lib), for the import test that runs
# a simulation in real Gatling beside headroom's import of it. Gatling's
# open-source code is Apache-2.0; the HTML reports module (Highcharts) is
# left out: the test runs with --no-reports. Needs java and mvn; idempotent.
set -euo pipefail

VERSION=3.15.1
HOME_DIR=${HEADROOM_GATLING_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/headroom/gatling-$VERSION}
[ -f "$HOME_DIR/lib/gatling-app-$VERSION.jar" ] && { echo "$HOME_DIR"; exit 0; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deps=""
for a in gatling-app gatling-core-java gatling-http-java; do
  deps="$deps<dependency><groupId>io.gatling</groupId><artifactId>$a</artifactId><version>$VERSION</version></dependency>"
done
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>headroom.ci</groupId><artifactId>gatling-dist</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
(cd "$work" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib) >&2
mkdir -p "$(dirname "$HOME_DIR")"
rm -rf "$HOME_DIR"
mkdir -p "$HOME_DIR"
mv "$work/lib" "$HOME_DIR/lib"
echo "$HOME_DIR"
