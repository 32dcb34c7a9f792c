"""Progress lines on standard error, for the work that can take a while: importing a big model
and compiling. Shown only on a terminal and only once the work is long enough to need one, so
output piped or captured stays exactly the results."""

from __future__ import annotations

import os
import sys
import threading

from .reporting import stream_is_terminal


class ImportProgress:
    """A progress bar on standard error while an importer converts nodes, for models big enough
    to take a while (and only on a terminal); a callable ``(done, total)``."""

    MIN_NODES = 200

    def __init__(self, model: str) -> None:
        self.model = model
        self.bar = None
        self.task = None

    def __enter__(self):
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < self.MIN_NODES or not stream_is_terminal(sys.stderr):
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("importing {task.description}"), BarColumn(), MofNCompleteColumn(),
                                console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(os.path.basename(self.model), total=total)
        self.bar.update(self.task, completed=done)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


class CompileProgress:
    """A transient progress line on standard error while a compile that has taken more than
    ``DELAY`` seconds goes on (only on a terminal): the stage the compiler reports
    (`compiler.progress`) and how far it is. Short compiles print nothing."""

    DELAY = 1.0

    def __init__(self) -> None:
        self.state = ("compiling", 0, 0)
        self.bar = None
        self.task = None
        self.lock = threading.Lock()
        self.timer = None
        self.listening = None

    def __enter__(self):
        from ..compiler import progress

        if not stream_is_terminal(sys.stderr):
            return self
        self.listening = progress.listen(self.update)
        self.listening.__enter__()
        self.timer = threading.Timer(self.DELAY, self.show)
        self.timer.daemon = True
        self.timer.start()
        return self

    def update(self, stage: str, done: int, total: int) -> None:
        with self.lock:
            self.state = (stage, done, total)
            if self.bar is not None:
                self.bar.update(self.task, description=stage, completed=done, total=total or None)

    def show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with self.lock:
            if self.listening is None:
                return
            stage, done, total = self.state
            self.bar = Progress(SpinnerColumn(), TextColumn("compiling: {task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                                transient=True)
            self.task = self.bar.add_task(stage, total=total or None, completed=done)
            self.bar.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and take the line away (at once: idempotent)."""
        if self.timer is not None:
            self.timer.cancel()
        with self.lock:
            if self.listening is not None:
                self.listening.__exit__(None, None, None)
                self.listening = None
            if self.bar is not None:
                self.bar.stop()
                self.bar = None
