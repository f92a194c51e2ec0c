"""The Docker backend's calls group: its containers' cgroups under one parent of their own.

An engine puts every container under its cgroup parent (Docker's ``/docker``), beside
whatever else runs there: on a stock deployment the invoker's own container. A call at the
top CPU weight (102 400 shares) then outweighs the invoker 100 to 1 on a core they share,
and the invoker's work, each call's start included, waits behind the calls it orders. With
``HostConfig.CgroupParent`` set to ``/<prefix>-calls`` (the name of the process backend's
calls group, :func:`containers.cgroups.calls_group_name`) the weights rank calls among
calls; the group weighs against the engine's parent at the default weight.

The engine makes the group, in every hierarchy, and never removes it; the backend does,
when it closes (Podman leaves its ``conmon`` cgroup inside it too). So the backend uses a
group only where it could remove it (:func:`calls_group_parent`): a local engine with the
``cgroupfs`` driver (the ``systemd`` driver wants a slice, a unit of systemd's to make and
stop), this process in the host's cgroup namespace with every hierarchy mounted whole, and
allowed to make a directory in each. Elsewhere the containers stay in the engine's parent
and ``ow-invoker run`` says what that costs (:func:`invoker.cpu_order.shared_cores_warning`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from containers.cgroups import PROC_MOUNTINFO, calls_group_name, cgroup_hierarchies

# The inode of the initial cgroup namespace (the kernel's PROC_CGROUP_INIT_INO): the host's.
HOST_CGROUP_NAMESPACE = 0xEFFFFFFB


def calls_group_parent(name_prefix: str, driver: str, local: bool) -> tuple[str | None, str]:
    """The ``CgroupParent`` for this backend's containers, or None and why not. ``driver``:
    the engine's ``CgroupDriver`` (``/info``); ``local``: the engine runs on this host."""
    if not local:
        return None, "the engine is not on this host: its cgroups are not ours to remove"
    if driver != "cgroupfs":
        return None, f"the engine's cgroup driver is {driver or 'unknown'}, not cgroupfs"
    try:
        if os.stat("/proc/self/ns/cgroup").st_ino != HOST_CGROUP_NAMESPACE:
            return None, "this process is in a cgroup namespace of its own"
        hierarchies = cgroup_hierarchies(Path(PROC_MOUNTINFO).read_text())
    except OSError as e:
        return None, f"cannot read this process's cgroup namespace or mounts: {e}"
    if not hierarchies:
        return None, "no cgroup hierarchy is mounted here"
    if part := [str(mount) for mount, root in hierarchies if root != "/"]:
        return None, f"only part of the host's cgroups is mounted at {', '.join(part)}"
    name = calls_group_name(name_prefix)
    probe = f"{name}-probe-{os.getpid()}-{os.urandom(3).hex()}"
    for mount, _ in hierarchies:
        try:
            os.mkdir(mount / probe)
            os.rmdir(mount / probe)
        except OSError as e:
            return None, f"cannot make a cgroup in {mount}: {e}"
    return f"/{name}", ""


def remove_calls_group(parent: str, wait_s: float = 2.0) -> bool:
    """Remove the group ``parent`` (a ``CgroupParent``) from every hierarchy, the empty
    cgroups inside it first, waiting up to ``wait_s`` for those that still hold a process
    (Podman's container monitors exit a moment after their containers); False if one
    still does then."""
    for _ in range(round(wait_s / 0.1)):
        if _remove_once(parent):
            return True
        time.sleep(0.1)
    return _remove_once(parent)


def _remove_once(parent: str) -> bool:
    try:
        hierarchies = cgroup_hierarchies(Path(PROC_MOUNTINFO).read_text())
    except OSError:
        return False
    removed = True
    for mount, _ in hierarchies:
        group = mount / parent.strip("/")
        if not group.is_dir():
            continue
        for folder, _, _ in os.walk(group, topdown=False):
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError:
                removed = False
    return removed
