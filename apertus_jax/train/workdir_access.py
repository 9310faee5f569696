"""Is a run directory usable? Checked by the trainer CLI before JAX starts devices or builds the mesh.

`os.access` is not enough: it answers "allowed" to root for any directory, and under `/proc` a directory
can look writable while `mkdir` fails with "No such file or directory". So the check really tries what the
run will do first: create the workdir (a probe directory next to where it will be) or a file inside an
existing one, and removes the probe at once, leaving nothing behind.
"""

import os
import tempfile

_FIX = "pass --workdir= a directory you can write (or fix its permissions / mount)"


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_workdir_usable(workdir: str) -> None:
    """Raises if the run could not create or write `workdir`; writes nothing (probes are removed).

    Args:
      workdir: the run directory, existing or not (it is created later by the run).
    Raises:
      ValueError: one line naming the workdir, the reason and the fix: a path component is a file, the
        workdir is not a directory, or a probe file / directory cannot be created (read-only file system,
        permissions, pseudo file systems such as /proc).
    """
    path = os.path.abspath(workdir)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"workdir {workdir} exists and is not a directory; {_FIX}")
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        raise ValueError(
            f"workdir {workdir} cannot be created: {existing} is a file, not a directory; {_FIX}"
        )
    try:
        if existing == path:
            with tempfile.TemporaryFile(dir=path):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".workdir-probe-", dir=existing))
    except OSError as error:
        action = "is not writable" if existing == path else f"cannot be created in {existing}"
        reason = error.strerror or type(error).__name__
        raise ValueError(f"workdir {workdir} {action} ({reason}); {_FIX}") from None
