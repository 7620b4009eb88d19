"""The shipped experiences: ``*.jsonl`` records an empty store loads first
(``kernelkb seed``; ``kb/seeds.py`` reads them). Package data, so a wheel carries them."""
