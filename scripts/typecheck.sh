#!/usr/bin/env bash
# mypy over the packages as they install (kernelkb.kb, kernelkb.kernels, ...): a tree of
# links lays the checkout's root folders out as the wheel does, inside kernelkb/ (mypy
# reads no import hooks, and the card keeps the layers as root folders).
set -euo pipefail
cd "$(dirname "$0")/.."
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/kernelkb"
for entry in kernelkb/*; do
  [ "$(basename "$entry")" = "__pycache__" ] || ln -s "$PWD/$entry" "$tree/kernelkb/"
done
for folder in kb retrieval optimizer kernels seeds; do ln -s "$PWD/$folder" "$tree/kernelkb/$folder"; done
mypy="$(realpath "${MYPY:-$(command -v mypy)}")"
cd "$tree" && "$mypy" --config-file "$OLDPWD/pyproject.toml" --cache-dir "$OLDPWD/.mypy_cache" -p kernelkb "$@"
