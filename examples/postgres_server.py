"""A throwaway PostgreSQL server, from Debian's ``postgresql`` binaries: the database of
``make demo`` (``examples/demo.py``) and of the tests' ``postgres`` fixture.

:func:`start_server` runs ``initdb`` in a fresh temporary directory and starts ``postgres`` on
127.0.0.1 (on a free port unless given one), with its unix socket in that directory (not a
shared one). As root it
runs both as an unprivileged user (``postgres`` where it exists, else ``nobody``): PostgreSQL
refuses to run as root. The superuser ``drill`` has a password (scram-sha-256), so connections
go through the password path the engine takes. :meth:`PostgresServer.stop` stops exactly the
process it started and removes the directory.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def _bin() -> Path:
    """Debian's newest PostgreSQL server binaries (``/usr/lib/postgresql/<version>/bin``)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


BIN = _bin()
USER = "drill"
DATABASE = "drill"
"""The database :func:`start_server` creates unless told another."""


def binaries_missing() -> str | None:
    """Why no server can start here (one line), or None."""
    if not (BIN / "initdb").exists() or not (BIN / "postgres").exists():
        return "PostgreSQL server binaries not found in /usr/lib/postgresql (apt-get install postgresql)"
    return None


@dataclass
class PostgresServer:
    """A running server: where it listens, its superuser's password, its process."""

    host: str
    port: int
    password: str
    directory: Path
    process: subprocess.Popen[bytes]
    database: str = DATABASE

    @property
    def url(self) -> str:
        """The engine's ``url`` for the database (no credentials in it)."""
        return f"postgresql://{self.host}:{self.port}/{self.database}"

    def uri(self) -> str:
        """A libpq URI with the credentials, for setting up and checking the database."""
        return f"postgresql://{USER}:{self.password}@{self.host}:{self.port}/{self.database}"

    def connect(self):
        """An autocommit ADBC connection as the superuser."""
        import adbc_driver_postgresql.dbapi as pg

        return pg.connect(self.uri(), autocommit=True)

    def execute(self, *statements: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def query(self, sql: str) -> list[tuple]:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()

    def statements(self) -> list[str]:
        """The statements the server logged (``log_statement=all``), oldest first."""
        text = (self.directory / "server.log").read_text(errors="replace")
        return [line.split("LOG:", 1)[1].strip() for line in text.splitlines() if "LOG:" in line]

    def stop(self) -> None:
        """Fast shutdown of the server started (SIGINT to its postmaster), then remove its data."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_server(port: int | None = None, database: str = DATABASE) -> PostgresServer:
    """initdb in a temporary directory and start the server on ``port`` (a free one when None)
    with an empty ``database``; ready when this returns. ``database`` is a plain identifier."""
    if not database.isidentifier():
        raise ValueError(f"database {database!r} is not a plain identifier")
    directory = Path(tempfile.mkdtemp(prefix="drill-pg-"))
    account = _run_as()
    ids = {} if account is None else {"user": account.pw_uid, "group": account.pw_gid}
    password = secrets.token_urlsafe(16)
    pwfile = directory / "pw"
    pwfile.write_text(password + "\n")
    data = directory / "data"
    if account is not None:
        os.chmod(directory, 0o700)
        os.chown(directory, account.pw_uid, account.pw_gid)
        os.chown(pwfile, account.pw_uid, account.pw_gid)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    subprocess.run(
        [
            str(BIN / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "-A",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=directory,
        **ids,
    )
    pwfile.unlink()
    port = _free_port() if port is None else port
    process = subprocess.Popen(
        [
            str(BIN / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-k",
            str(directory),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "max_connections=40",
            "-c",
            "log_statement=all",  # the tests read the SQL the engine sent
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(directory / "server.log", "wb"),  # noqa: SIM115 (the server keeps it)
        env=env,
        cwd=directory,
        start_new_session=True,
        **ids,
    )
    server = PostgresServer("127.0.0.1", port, password, directory, process, database)
    deadline = time.monotonic() + 60
    import adbc_driver_postgresql.dbapi as pg

    admin = f"postgresql://{USER}:{password}@127.0.0.1:{port}/postgres"
    while True:
        try:
            with pg.connect(admin, autocommit=True) as conn, conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {database}")
            return server
        except Exception:
            if process.poll() is not None or time.monotonic() > deadline:
                log = (directory / "server.log").read_text(errors="replace")[-2000:]
                server.stop()
                raise RuntimeError(f"PostgreSQL did not start: {log}") from None
            time.sleep(0.2)
