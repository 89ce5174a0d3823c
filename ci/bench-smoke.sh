#!/usr/bin/env bash
# Smoke-run the user benchmark (`seglog bench --quick`, under a minute on a quiet 2-core VM) into a temp folder.
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
seglog bench --quick --out "$out"
