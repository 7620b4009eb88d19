#!/usr/bin/env bash
# mypy over the packages as they install (kernelkb.kb, kernelkb.kernels, ...): a tree of
# links lays the checkout's folders out as the wheel does (mypy reads no import hooks).
set -euo pipefail
cd "$(dirname "$0")/.."
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/kernelkb"
cp kernelkb/*.py "$tree/kernelkb/"
for folder in kb retrieval optimizer kernels seeds; do ln -s "$PWD/$folder" "$tree/kernelkb/$folder"; done
mypy="$(realpath "${MYPY:-$(command -v mypy)}")"
cd "$tree" && "$mypy" --config-file "$OLDPWD/pyproject.toml" --cache-dir "$OLDPWD/.mypy_cache" -p kernelkb "$@"
