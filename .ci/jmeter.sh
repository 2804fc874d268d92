#!/usr/bin/env bash
# Assemble Apache JMeter 5.6.3 from its jars on Maven Central into
# $HEADROOM_JMETER_HOME (default ~/.cache/headroom/jmeter-5.6.3), laid out
# as JMeter's own distribution is: bin/ApacheJMeter.jar and the properties
# files, lib/ for third-party jars, lib/ext/ for JMeter's components.
#
# Why: the import test runs a .jmx in real JMeter beside headroom's import
# of it. Debian 12's `jmeter` (2.13) cannot load any plan (its xstream
# refuses ScriptWrapper), and JMeter's release zip is not on a package
# registry, but its jars are. Needs java and mvn; idempotent.
set -euo pipefail

VERSION=5.6.3
HOME_DIR=${HEADROOM_JMETER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/headroom/jmeter-$VERSION}
[ -f "$HOME_DIR/bin/ApacheJMeter.jar" ] && { echo "$HOME_DIR"; exit 0; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deps=""
for a in ApacheJMeter ApacheJMeter_core ApacheJMeter_http ApacheJMeter_components \
  ApacheJMeter_functions ApacheJMeter_config; do
  deps="$deps<dependency><groupId>org.apache.jmeter</groupId><artifactId>$a</artifactId><version>$VERSION</version></dependency>"
done
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>headroom.ci</groupId><artifactId>jmeter-dist</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
(cd "$work" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=jars) >&2

staged="$work/home"
mkdir -p "$staged/bin" "$staged/lib/ext" "$staged/lib/junit"
(cd "$staged" && unzip -q -o "$work/jars/ApacheJMeter_config-$VERSION.jar" 'bin/*')
cp "$work/jars/ApacheJMeter-$VERSION.jar" "$staged/bin/ApacheJMeter.jar"
for jar in "$work"/jars/*.jar; do
  case $(basename "$jar") in
    ApacheJMeter_config-* | ApacheJMeter-*) ;;
    ApacheJMeter_*) cp "$jar" "$staged/lib/ext/" ;;
    *) cp "$jar" "$staged/lib/" ;;
  esac
done
mkdir -p "$(dirname "$HOME_DIR")"
rm -rf "$HOME_DIR"
mv "$staged" "$HOME_DIR"
echo "$HOME_DIR"
