"""Progress of a long experiment: a rich progress bar over all measured calls, plus a log.

Falls back to plain lines when rich is not installed; every message also goes to a log file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


class ExperimentProgress:
    def __init__(self, total_calls: int, log_path: Path | None = None) -> None:
        self.total = total_calls
        self.done = 0
        self.log_path = log_path
        self._progress: Any = None
        self._task: Any = None
        self._last_plain = 0.0

    def __enter__(self) -> ExperimentProgress:
        try:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:
            return self
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        self._progress.start()
        self._task = self._progress.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def log(self, message: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        if self._progress is not None:
            self._progress.console.print(f"[dim]{stamp}[/dim] {message}", highlight=False)
        else:
            print(f"{stamp} {message}", flush=True)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a") as f:
                f.write(f"{stamp} {message}\n")

    def phase(self, description: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=description)
        else:
            self.log(description)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._progress is not None:
            self._progress.update(self._task, advance=n)
        elif time.monotonic() - self._last_plain > 10:
            self._last_plain = time.monotonic()
            print(f"  {self.done}/{self.total} calls measured", flush=True)
