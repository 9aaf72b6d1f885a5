"""Start child processes and stop exactly those, also on Ctrl-C, test failure, or when this
process dies (the kernel sends them SIGTERM via PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    """Owns the processes it starts; :meth:`stop_all` ends them in reverse order."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._commands: dict[str, tuple[list[str], dict[str, str] | None, Path | None]] = {}
        """How each name was last started, for :meth:`restart`."""

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only sets the death signal
        )
        log.close()
        self._commands[name] = (list(argv), env, cwd)
        self._processes.append((name, process))
        logger.debug("started %s (pid %d)", name, process.pid)
        return process

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        self._processes = [(n, p) for n, p in self._processes if p is not process]

    def stop_named(self, name: str) -> None:
        for process_name, process in list(self._processes):
            if process_name == name:
                self.stop(process)

    def kill_named(self, name: str) -> None:
        """SIGKILL, as a crash would: no chance to clean up."""
        for process_name, process in list(self._processes):
            if process_name == name:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                self._processes = [(n, p) for n, p in self._processes if p is not process]

    def signal_named(self, name: str, signum: int = signal.SIGTERM) -> None:
        """Send ``signum`` to ``name``'s process group and wait for it to end (SIGKILL after
        10 s): a crash with SIGKILL, a clean stop with SIGTERM."""
        for process_name, process in list(self._processes):
            if process_name != name:
                continue
            if signum == signal.SIGKILL:
                self.kill_named(name)
            else:
                self.stop(process)

    def restart(self, name: str, signum: int = signal.SIGTERM) -> subprocess.Popen[bytes]:
        """End ``name`` with ``signum`` (see :meth:`signal_named`), then start it again with
        the same command line, environment and directory (same ports, same data)."""
        argv, env, cwd = self._commands[name]
        self.signal_named(name, signum)
        return self.start(name, argv, env=env, cwd=cwd)

    def start_again(self, name: str) -> subprocess.Popen[bytes]:
        """Start ``name`` (ended earlier) with the command line it last ran."""
        argv, env, cwd = self._commands[name]
        return self.start(name, argv, env=env, cwd=cwd)

    def running(self, name: str) -> bool:
        return any(n == name and p.poll() is None for n, p in self._processes)

    def stop_all(self) -> None:
        for _, process in reversed(list(self._processes)):
            self.stop(process)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each running child has used so far, by name."""
        ticks = os.sysconf("SC_CLK_TCK")
        used: dict[str, float] = {}
        for name, process in self._processes:
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{process.pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                used[name] = (int(fields[11]) + int(fields[12])) / ticks
        return used

    def check_alive(self) -> None:
        """Raise naming the first child that has exited, with the end of its log."""
        for name, process in self._processes:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with code {process.returncode}:\n{self.log_tail(name)}"
                )


def wait_for(
    condition: Callable[[], object],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    guard: Supervisor | None = None,
) -> None:
    """Poll ``condition()`` until true; raise ``TimeoutError`` naming ``what``. With ``guard``,
    a child process that has died ends the wait at once with its log."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if guard is not None:
            guard.check_alive()
        try:
            if condition():
                return
        except Exception as e:  # noqa: BLE001 - polling: any failure means "not yet"
            last = e
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout:.0f}s waiting for {what}"
        + (f" (last error: {last})" if last else "")
    )
