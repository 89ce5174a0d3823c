#!/usr/bin/env bash
# Smoke-run the user benchmark (`seglog bench --quick`, about two minutes) into a temp folder.
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
seglog bench --quick --out "$out"
