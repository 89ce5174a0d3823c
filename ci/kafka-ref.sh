#!/usr/bin/env bash
# Fetch Apache Kafka's jars (broker, tools, log4j2 SLF4J binding, and kafka-streams) from Maven Central into
# ~/.cache/seglog/kafka-<version>/lib, once, and print that lib directory.
#
#   bash ci/kafka-ref.sh            # Kafka 4.4.0 (the pin)
#   bash ci/kafka-ref.sh 4.1.1      # the second pin (or SEGLOG_KAFKA_VERSION=4.1.1)
#
# The Kafka tests (pytest -m kafka) and `seglog bench --only kafka` find the jars there (or in
# $SEGLOG_KAFKA_LIB). Idempotent: a complete lib dir is reused without running Maven (only the
# kafka-streams jar is added to one that lacks it). The dir
# is filled in a temp dir and renamed into place, so an interrupted run leaves nothing half done.
# Needs java (17+) and mvn; nothing is written to the repository (Maven's target/ goes to a
# temp dir) and no jar is ever committed.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

version="${1:-${SEGLOG_KAFKA_VERSION:-4.4.0}}"
case "$version" in
  4.4.0) log4j=2.25.5 ;;   # the log4j-core that kafka-server 4.4.0 itself declares
  4.1.1) log4j=2.24.3 ;;   # ... and 4.1.1
  *) log4j="${SEGLOG_KAFKA_LOG4J:-}"
     [ -n "$log4j" ] || { echo "kafka-ref: unknown Kafka $version: set SEGLOG_KAFKA_LOG4J to the log4j version it uses" >&2; exit 2; } ;;
esac

cache="${SEGLOG_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seglog}"
ref="$cache/kafka-$version"
lib="$ref/lib"
stamp="$lib/.seglog-complete"

# Kafka Streams (the streams group tests' Java app, tests/kafka/java/StreamsWordCount.java):
# the one jar, without its transitive dependencies (the broker's jars cover them; the app's
# state stores are in memory, so no rocksdbjni). Added to a complete lib dir once, by rename.
ensure_streams() {
  local jar="$lib/kafka-streams-$version.jar"
  [ -f "$jar" ] && return 0
  local tmp
  tmp="$(mktemp -d "$ref/.streams.XXXXXX")"
  if ! mvn -B -q dependency:copy -Dartifact="org.apache.kafka:kafka-streams:$version" \
         -Dmdep.useBaseVersion=true -DoutputDirectory="$tmp" >"$tmp/mvn.log" 2>&1 \
     || [ ! -f "$tmp/kafka-streams-$version.jar" ]; then
    tail -20 "$tmp/mvn.log" >&2
    rm -rf "$tmp"
    echo "kafka-ref: could not fetch kafka-streams $version" >&2
    return 1
  fi
  mv "$tmp/kafka-streams-$version.jar" "$jar"
  rm -rf "$tmp"
}

if [ -f "$stamp" ]; then
  if command -v mvn >/dev/null; then
    ensure_streams || echo "kafka-ref: the streams group tests will skip" >&2
  fi
  echo "$lib"
  exit 0
fi

command -v java >/dev/null || { echo "kafka-ref: java not found (Kafka $version needs Java 17+)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "kafka-ref: mvn not found" >&2; exit 1; }

mkdir -p "$ref"
work="$(mktemp -d "$ref/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# -f with a copy of the pom, so target/ lands in the temp dir and not in the repository.
cp "$here/tools/kafka-ref/pom.xml" "$work/pom.xml"
if ! mvn -B -q -f "$work/pom.xml" -Dkafka.version="$version" -Dlog4j.version="$log4j" \
       -Dlib.dir="$work/lib" package >"$work/mvn.log" 2>&1; then
  tail -40 "$work/mvn.log" >&2
  echo "kafka-ref: mvn failed for Kafka $version" >&2
  exit 1
fi

# One log4j version and SLF4J 1.7 (whose binding is log4j-slf4j-impl): anything else means the
# pom and this Kafka release disagree, and the broker would log nothing.
n_core=$(find "$work/lib" -name 'log4j-core-*.jar' | wc -l)
[ "$n_core" -eq 1 ] && [ -f "$work/lib/log4j-core-$log4j.jar" ] \
  || { echo "kafka-ref: expected log4j-core-$log4j.jar alone in the lib dir" >&2; ls "$work/lib" >&2; exit 1; }
[ -f "$work/lib/kafka_2.13-$version.jar" ] && [ -f "$work/lib/kafka-tools-$version.jar" ] \
  && ls "$work/lib"/slf4j-api-1.7.*.jar >/dev/null 2>&1 \
  || { echo "kafka-ref: the lib dir lacks kafka_2.13, kafka-tools or slf4j-api 1.7" >&2; exit 1; }

echo "kafka $version log4j $log4j ($(find "$work/lib" -name '*.jar' | wc -l) jars)" > "$work/lib/.seglog-complete"
rm -rf "$lib"
mv "$work/lib" "$lib"
ensure_streams || echo "kafka-ref: the streams group tests will skip" >&2
echo "$lib"
