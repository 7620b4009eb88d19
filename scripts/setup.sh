#!/usr/bin/env bash
# Sets up .venv with everything KernelKB needs (idempotent). Torch is pinned first so a
# CPU-only machine keeps its CPU build; a GPU machine may install its own torch first.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -c "import torch" 2>/dev/null || python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[dev]"
# Debian's chromium + chromium-driver for the browser tests (tests/web), when missing and
# installable; without them those tests skip and say why (CI requires them: .ci/run)
bash scripts/install_browser.sh || echo "setup: no browser; tests/web will be skipped" >&2
