"""One Settings object for the whole service, read from ``KERNELKB_*`` env vars or .env.

Read once at the entry points (CLI, HTTP app) and passed down; library code never reads
the environment itself.

The store lives in one folder per user, not per working directory: ``KERNELKB_HOME``
(``KERNELKB_DATA_DIR`` is its older name), else the platform's user data folder
(``~/.local/share/kernelkb`` on Linux, ``~/Library/Application Support/kernelkb`` on
macOS, ``%LOCALAPPDATA%\\kernelkb`` on Windows), so every command, run from anywhere,
and the server read and write the same experiences.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kernelkb.kernels.shared.folders import user_data


def shipped_seeds() -> Path:
    """The seeds folder inside the installed package (package data of ``kernelkb.seeds``),
    so a wheel install loads them as a checkout does."""
    from kernelkb import seeds  # a namespace portion: its folder is its path

    return Path(next(iter(seeds.__path__))).resolve()


def default_home() -> Path:
    """The per-user data folder of the platform (platformdirs; kernels/shared/folders.py)."""
    return user_data()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELKB_", env_file=".env", extra="ignore",
                                      populate_by_name=True)

    home: Path | None = None  # KERNELKB_HOME; default: default_home()
    data_dir: Path | None = None  # KERNELKB_DATA_DIR, the older name of home; wins if set
    # default: sqlite file in data_dir; any SQLAlchemy URL works, e.g. a team's PostgreSQL:
    # postgresql+psycopg://user@host/db in KERNELKB_DATABASE_URL (or KERNELKB_DB_URL)
    db_url: str | None = Field(default=None, validation_alias=AliasChoices(
        "KERNELKB_DATABASE_URL", "KERNELKB_DB_URL", "db_url"))
    chroma_path: Path | None = None  # default: data_dir / "chroma"
    chroma_host: str | None = None  # set to use a Chroma server instead of the folder
    chroma_port: int = 8000
    chroma_collection: str = "experiences"
    # False: no embedding model and no Chroma (a bare GPU host); retrieval then ranks by
    # the metadata ladder, evidence and BM25 only
    vectors: bool = True
    api_token: str | None = None  # None = mutating endpoints are open
    # records per committed write (ingest) and per embedded reindex batch: a crash loses
    # at most one batch's vectors, repaired at the next start (kb/ingest.py sync_index)
    write_batch: int = Field(default=256, ge=1, le=100_000)
    seeds_dir: Path = Field(default_factory=lambda: shipped_seeds())
    # where `optimize` writes run folders and the web pages read them; default: home / "runs",
    # so runs, like the store, do not depend on the directory a command ran in
    runs_dir: Path | None = None
    # an empty store loads the shipped seeds on its first read (serve, query, insights,
    # bootstrap, stats, export, optimize); false keeps it empty until `kernelkb seed`
    load_seeds_on_start: bool = True
    service_url: str | None = None  # the remote client's target, e.g. http://127.0.0.1:8765
    host: str = "127.0.0.1"
    port: int = 8765
    # requests a server process works on at once (its thread pool); the rest wait in line.
    # Python runs one thread at a time: more threads only share the core and stretch the
    # tail (20 at once on 2 cores: p99 3x p50); I/O waits are short (SQLite, local files)
    serve_threads: int = Field(default=4, ge=1, le=256)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    # folders of one's own task files, joined by os.pathsep (kernels/discovery.py); the
    # CLI's --tasks-dir adds to them
    tasks_dir: str = ""

    @model_validator(mode="after")
    def _defaults(self) -> Settings:
        if self.data_dir is None:
            self.data_dir = self.home or default_home()
        self.home = self.data_dir
        if self.db_url is None:
            self.db_url = f"sqlite:///{(self.data_dir / 'kernelkb.sqlite').as_posix()}"
        if self.chroma_path is None:
            self.chroma_path = self.data_dir / "chroma"
        if self.runs_dir is None:
            self.runs_dir = self.data_dir / "runs"
        if self.llm_base_url is None:
            self.llm_base_url = os.environ.get("OPENAI_BASE_URL")
        if self.llm_api_key is None:
            self.llm_api_key = os.environ.get("OPENAI_API_KEY")
        return self

    @property
    def store_dir(self) -> Path:
        """The folder holding the SQLite file and the Chroma folder (when those are local)."""
        assert self.data_dir is not None
        return self.data_dir

    @property
    def database_url(self) -> str:
        assert self.db_url is not None
        return self.db_url

    @property
    def chroma_folder(self) -> Path:
        assert self.chroma_path is not None
        return self.chroma_path
