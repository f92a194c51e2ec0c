"""Per-container memory (and CPU-share) cgroups for the process backend.

cgroup v1 (``memory`` and ``cpu`` hierarchies, as on hybrid hosts) is preferred when its
memory controller is mounted; otherwise cgroup v2 when a parent with the memory controller
delegated can be found. Container cgroups are created *under the invoker's own cgroup* (v1)
so the invoker's own limits still bound them, and are named after the container, which
carries the invoker's name prefix, so leftovers of a crashed invoker can be found.

Their CPU side (v1 ``cpu``; v2's one directory) goes in one group of this backend's, the
**calls group** ``<prefix>-calls``, at the default weight, as Docker puts its containers under
``/docker``: a call's weight then ranks it among the calls only. Side by side with the
invoker's own process, a container at the top weight (10 000, 102 400 v1 shares) left the
invoker's thread 1 % of a core it shared with it, and so every weight write and every call's
start waited behind the calls being ordered. The backend creates the group before its
zygote and removes it at close; a killed run's is reused by the next.

Each container cgroup gets ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes``, so no
swap either) or ``memory.max`` + ``memory.swap.max``, and ``cpu.shares`` / ``cpu.weight`` when
asked. The zygote creates, names and limits them (it forks children into spare cgroups ahead
of demand, because joining one costs an RCU grace period, ~10 ms on v1, and renames one on
assignment); this module finds where they go, reads OOM kills (``memory.oom_control`` /
``memory.events``), kills what is left and removes them.

When no cgroup is usable :func:`probe` says why and the backend falls back to ``RLIMIT_AS``
in the child, which is weaker: it limits address space rather than memory, surfaces as
``MemoryError`` (or a failed allocation) instead of a kill, and cannot be reported by
``was_oom_killed``.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PROC_CGROUP = "/proc/self/cgroup"
PROC_MOUNTINFO = "/proc/self/mountinfo"
CPU_WEIGHTS = range(1, 10_001)  # cgroup v2 ``cpu.weight``: what set_cpu_weight takes
DEFAULT_CPU_WEIGHT = 100


def check_cpu_weight(weight: int) -> int:
    """``weight`` if it is one :meth:`Container.set_cpu_weight` takes, else ValueError."""
    if weight not in CPU_WEIGHTS:
        raise ValueError(f"a CPU weight is 1..10000 (cgroup v2 cpu.weight), not {weight!r}")
    return weight


def cpu_shares_of(weight: int) -> int:
    """The cgroup v1 ``cpu.shares`` (Docker's ``CpuShares``) of a v2 weight: the kernel's
    own equivalence (weight 100 = 1024 shares = nice 0), within v1's 2..262144."""
    return max(2, min(262_144, round(check_cpu_weight(weight) * 1024 / 100)))


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` → controller → path (``""`` is the v2 unified hierarchy)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def parse_mountinfo(text: str) -> dict[str, tuple[str, str]]:
    """cgroup mounts: controller (``""`` for v2) → (mount point, root of the mount)."""
    out: dict[str, tuple[str, str]] = {}
    for _, mount, root, fstype, options in _cgroup_mounts(text):
        if fstype == "cgroup2":
            out.setdefault("", (mount, root))
        else:
            for opt in options:
                if opt in ("memory", "cpu", "cpuset", "cpuacct", "pids", "freezer"):
                    out.setdefault(opt, (mount, root))
    return out


def cgroup_hierarchies(mountinfo: str) -> list[tuple[Path, str]]:
    """Every cgroup hierarchy mounted (v1 and v2, named ones too), once each however often
    it is mounted: (mount point, the hierarchy's path at that mount point)."""
    found: dict[str, tuple[Path, str]] = {}
    for device, mount, root, _, _ in _cgroup_mounts(mountinfo):
        found.setdefault(device, (Path(mount), root))
    return list(found.values())


def _cgroup_mounts(mountinfo: str) -> Iterator[tuple[str, str, str, str, list[str]]]:
    """Each cgroup mount's device, mount point, root, type and super options."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if sep and len(fields) >= 5 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
            mount, root = _unescape(fields[4]), _unescape(fields[3])
            yield fields[2], mount, root, rfields[0], rfields[2].split(",")


def _unescape(path: str) -> str:
    return (
        path.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )


def _own_dir(mount: str, root: str, path: str) -> Path:
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return Path(mount) / path.lstrip("/")


def process_dirs(pid: int) -> dict[str, Path]:
    """The cgroup directory of ``pid`` per mounted controller (``""``: v2), leaving out the
    root, which counts the whole host; {} if this process cannot read them."""
    try:
        own = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
        mounts = parse_mountinfo(Path(PROC_MOUNTINFO).read_text())
    except OSError:
        return {}
    return {
        controller: _own_dir(*mounts[controller], path)
        for controller, path in own.items()
        if controller in mounts and path not in ("", "/")
    }


@dataclass(frozen=True)
class CgroupSupport:
    """Where container cgroups go, or why there are none (``version == 0``). ``cpu_parent``
    (v1) and ``memory_parent`` (v2) are the calls group, made by :func:`make_calls_group`."""

    version: int
    memory_parent: Path | None = None
    cpu_parent: Path | None = None
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.version in (1, 2)

    @property
    def calls_group(self) -> Path | None:
        """The group that holds the containers' CPU cgroups, if any."""
        return self.memory_parent if self.version == 2 else self.cpu_parent


def calls_group_name(name_prefix: str) -> str:
    """Never a container's name: those are ``<prefix>_...``."""
    return f"{name_prefix}-calls"


def make_calls_group(support: CgroupSupport) -> None:
    """Create the calls group (kept if a killed run left it), its controllers delegated to
    the containers (v2). Raises OSError."""
    group = support.calls_group
    if group is None:
        return
    os.makedirs(group, exist_ok=True)
    if support.version == 2:
        wanted = ["memory"] + (["cpu"] if support.cpu_parent is not None else [])
        enabled = (group / "cgroup.subtree_control").read_text().split()
        missing = " ".join(f"+{c}" for c in wanted if c not in enabled)
        if missing:
            (group / "cgroup.subtree_control").write_text(missing)


def remove_calls_group(support: CgroupSupport) -> bool:
    """Remove the calls group; False while a container cgroup is still in it."""
    group = support.calls_group
    if group is None:
        return True
    try:
        os.rmdir(group)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def probe(name_prefix: str) -> CgroupSupport:
    """Find a writable place for container cgroups (creates and removes a test cgroup)."""
    try:
        own = parse_proc_cgroup(Path(PROC_CGROUP).read_text())
        mounts = parse_mountinfo(Path(PROC_MOUNTINFO).read_text())
    except OSError as e:
        return CgroupSupport(0, reason=f"cannot read cgroup information: {e}")
    # Unique even across pid namespaces: a probe cgroup left by a killed run never collides.
    test_name = f"{name_prefix}_probe_{os.getpid()}_{os.urandom(3).hex()}"
    reasons: list[str] = []
    if "memory" in mounts and "memory" in own:
        parent = _own_dir(*mounts["memory"], own["memory"])
        try:
            _try_v1(parent / test_name)
            cpu_parent = None
            if "cpu" in mounts and "cpu" in own:
                cpu_dir = _own_dir(*mounts["cpu"], own["cpu"])
                try:
                    os.mkdir(cpu_dir / test_name)
                    os.rmdir(cpu_dir / test_name)
                    cpu_parent = cpu_dir / calls_group_name(name_prefix)
                except OSError:
                    pass
            return CgroupSupport(1, parent, cpu_parent)
        except OSError as e:
            reasons.append(f"cgroup v1 memory at {parent}: {e}")
    if "" in mounts and "" in own:
        mount, root = mounts[""]
        for parent in dict.fromkeys((_own_dir(mount, root, own[""]), Path(mount))):
            try:
                subtree = (parent / "cgroup.subtree_control").read_text().split()
                if "memory" not in subtree:
                    raise OSError(errno.ENOTSUP, "memory controller not delegated")
                _try_v2(parent / test_name)
                group = parent / calls_group_name(name_prefix)
                return CgroupSupport(2, group, group if "cpu" in subtree else None)
            except OSError as e:
                reasons.append(f"cgroup v2 at {parent}: {e}")
    return CgroupSupport(0, reason="; ".join(reasons) or "no cgroup memory controller mounted")


def _try_v1(path: Path) -> None:
    os.mkdir(path)
    try:
        (path / "memory.limit_in_bytes").write_text(str(256 << 20))
    finally:
        os.rmdir(path)


def _try_v2(path: Path) -> None:
    os.mkdir(path)
    try:
        (path / "memory.max").write_text(str(256 << 20))
    finally:
        os.rmdir(path)


@dataclass
class ContainerCgroup:
    """The cgroup directories of one container (one per v1 hierarchy, one for v2)."""

    version: int
    memory: Path
    cpu: Path | None = None
    _dirs: list[Path] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._dirs = list(dict.fromkeys(d for d in (self.memory, self.cpu) if d is not None))

    @property
    def procs_files(self) -> list[str]:
        """Files the container's first process writes its pid into to join."""
        return [str(d / "cgroup.procs") for d in self._dirs]

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "memory": str(self.memory),
            "cpu": self.cpu and str(self.cpu),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ContainerCgroup:
        cpu = data.get("cpu")
        return cls(
            int(str(data["version"])), Path(str(data["memory"])), Path(str(cpu)) if cpu else None
        )

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this cgroup (0 if unknown)."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (self.memory / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        """Every process in the container."""
        out: list[int] = []
        try:
            text = (self.memory / "cgroup.procs").read_text()
        except OSError:
            return out
        return [int(p) for p in text.split()]

    def threads(self) -> list[int]:
        """Every thread of every process in the container (for CPU affinity)."""
        name = "tasks" if self.version == 1 else "cgroup.threads"
        try:
            return [int(t) for t in (self.memory / name).read_text().split()]
        except OSError:
            return []

    def set_cpu_weight(self, weight: int) -> bool:
        """Write the container's CPU weight (v2 ``cpu.weight``, v1 ``cpu.shares`` of the
        same meaning); False when it has no CPU controller to write to."""
        if self.version == 2:
            target, value = self.memory / "cpu.weight", check_cpu_weight(weight)
        elif self.cpu is not None:
            target, value = self.cpu / "cpu.shares", cpu_shares_of(weight)
        else:
            return False
        if not target.exists():  # v2 without the cpu controller delegated
            return False
        target.write_text(str(value))
        return True

    def kill_all(self) -> None:
        if self.version == 2:
            try:
                (self.memory / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def remove(self) -> bool:
        """rmdir every directory; False while processes remain (retry later)."""
        ok = True
        for d in self._dirs:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        return ok

    def exists(self) -> bool:
        return any(d.exists() for d in self._dirs)


def engine_container_cgroup(pid: int, cid: str) -> ContainerCgroup | None:
    """The cgroup of an engine's container whose init is ``pid`` (Docker's ``.../<cid>``,
    Podman's ``.../libpod-<cid>``), if this process sees it; None if the pid's cgroup does
    not name ``cid`` (another process: the pid reused, or a pid namespace of our own)."""
    dirs = process_dirs(pid)
    if "memory" in dirs and cid in dirs["memory"].name:
        return ContainerCgroup(1, dirs["memory"], dirs.get("cpu"))
    if "" in dirs and cid in dirs[""].name:
        return ContainerCgroup(2, dirs[""])
    return None


def find_leftovers(support: CgroupSupport, name_prefix: str) -> list[ContainerCgroup]:
    """Cgroups whose names carry the prefix: in this backend's parents, and (left by a run
    from before the calls group) beside the calls group."""
    if not support.usable or support.memory_parent is None:
        return []
    start = name_prefix + "_"

    def named(parents: list[Path]) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for parent in parents:
            try:
                entries = [e for e in os.scandir(parent) if e.is_dir()]
            except OSError:
                continue
            found.update((e.name, Path(e.path)) for e in entries if e.name.startswith(start))
        return found

    if support.version == 2:  # the memory parent is the calls group
        group = support.memory_parent
        return [ContainerCgroup(2, path) for path in named([group.parent, group]).values()]
    memory = named([support.memory_parent])
    cpu = named([support.cpu_parent.parent, support.cpu_parent]) if support.cpu_parent else {}
    return [
        ContainerCgroup(1, memory.get(n, support.memory_parent / n), cpu.get(n))
        for n in dict.fromkeys([*memory, *cpu])
    ]
