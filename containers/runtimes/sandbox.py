"""Entering a container's sandbox: run by the zygote's forked child before any action code.

Standalone (stdlib, plus ``pyseccomp`` for the syscall filter), loaded by the zygote from
this file. A sandboxed container is two processes:

``shim`` (the zygote's child, the container's pid for the backend)
    joins the container's cgroup, unshares a **pid namespace** and forks the sandbox's init;
    with outbound networking it also starts ``slirp4netns`` on the init's network
    namespace. It then only waits (refusing to the container any address the node gains
    meanwhile): when the init exits the shim exits with its status, and when the shim dies
    (the backend's SIGKILL) the init gets ``PR_SET_PDEATHSIG`` SIGKILL, and the kernel
    kills every process of the pid namespace with it, whatever it forked or ``setsid``-ed.

``init`` (pid 1 of the namespace, runs the runtime and the action)
    unshares **mount, network, IPC, UTS and cgroup** namespaces; builds a fresh root on a
    tmpfs (the runtime's and system directories bind-mounted read-only, every mount below
    them too; a fresh ``/proc``, a minimal ``/dev``, size-limited private ``/tmp``,
    ``/dev/shm`` and working directory ``/action``), ``pivot_root``s into it and detaches
    the host's tree; with outbound networking, adds **routes refusing the node's addresses**,
    link-local and the operator's deny list; then takes a **uid of its own** (no groups, so
    no capabilities), ``RLIMIT_NPROC``, ``no_new_privs`` and a **seccomp** allow-list:
    Docker's default profile's, a little stricter, the rest refused with EPERM.

Why not bubblewrap: it sandboxes a program it execs, while our cold start comes from
forking a warm interpreter (the zygote); the sandbox must be entered after that fork. The
steps are the ones bubblewrap takes (mount namespace, tmpfs root, read-only binds,
pivot_root), written for that order.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import re
import resource
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from fcntl import ioctl
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
MS_RELATIME, ST_RELATIME = 1 << 21, 4096
KEPT_FLAGS = MS_NOEXEC | 1024 | 2048  # noexec, noatime, nodiratime: same bits in statvfs
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 217}.get(platform.machine())
SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}.get(platform.machine())
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SIOCGIFCONF, IFREQ_SIZE = 0x8912, 40  # struct ifreq on 64-bit Linux
SLIRP_GATEWAY = "10.0.2.2"  # slirp4netns's defaults: 10.0.2.0/24, the gateway at .2
ALWAYS_DENIED = ("169.254.0.0/16",)  # link-local: cloud metadata at 169.254.169.254
NEVER_DENIED = ((0x0A000200, 24), (0x7F000000, 8))  # slirp's own net, the sandbox's loopback
RTM_NEWROUTE, NLMSG_ERROR, RTA_DST, RTA_GATEWAY, RTMGRP_IPV4_IFADDR = 24, 2, 1, 5, 0x10
NLM_F_NEW_ROUTE = 0x1 | 0x4 | 0x400 | 0x100  # request, ack, create, replace
RT_TABLE_MAIN, RTPROT_STATIC, RTN_UNICAST, RTN_PROHIBIT = 254, 4, 1, 8
WORKDIR = "/action"
ACTION_UID = 1000  # the action's uid inside a user namespace (non-root invokers)
PROJECT_ROOT = "/opt/ow"  # what a sandbox sees of the project: the runtimes, the GPU client
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

# The syscalls an action may make: an allow-list, everything else refused with EPERM (Docker's
# defaultErrnoRet), so that what a list misses and whatever a later kernel adds is refused.
# These are the unconditional ones of Docker's default seccomp profile (moby/profiles seccomp
# v0.2.3, 2026; io_uring_* left it in 2023); its conditional rules are in prepare_filter. Of
# its rules for capabilities only chroot's is for one of Docker's default set (CAP_SYS_CHROOT);
# chroot is refused here all the same: the action holds no capability, so the kernel would
# refuse it anyway. Names libseccomp does not know on this architecture are skipped: refused.
ALLOWED_SYSCALLS = (
    "_llseek", "_newselect", "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk",
    "cachestat", "capget", "capset", "chdir", "chmod", "chown", "chown32", "clock_adjtime",
    "clock_adjtime64", "clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64",
    "clock_nanosleep", "clock_nanosleep_time64", "close", "close_range", "connect",
    "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1",
    "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old",
    "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
    "fadvise64", "fadvise64_64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat",
    "fchmodat2", "fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync", "fgetxattr",
    "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64",
    "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64", "futex", "futex_requeue",
    "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "get_robust_list",
    "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "getegid32",
    "geteuid", "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32", "getitimer",
    "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
    "getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit", "getrusage", "getsid",
    "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getuid32", "getxattr",
    "getxattrat", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_pgetevents_time64", "io_setup",
    "io_submit", "ioctl", "ioprio_get", "ioprio_set", "ipc", "kill", "landlock_add_rule",
    "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lchown32", "lgetxattr", "link",
    "linkat", "listen", "listmount", "listxattr", "listxattrat", "llistxattr", "lremovexattr",
    "lseek", "lsetxattr", "lstat", "lstat64", "madvise", "map_shadow_stack", "membarrier",
    "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock",
    "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
    "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock",
    "munlockall", "munmap", "name_to_handle_at", "nanosleep", "newfstatat", "open", "openat",
    "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64", "preadv",
    "preadv2", "prlimit64", "process_mrelease", "pselect6", "pselect6_time64", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recv",
    "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages", "removexattr",
    "removexattrat", "rename", "renameat", "renameat2", "restart_syscall", "riscv_hwprobe",
    "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
    "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity",
    "sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
    "sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr", "sched_setparam",
    "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop",
    "semtimedop", "semtimedop_time64", "send", "sendfile", "sendfile64", "sendmmsg", "sendmsg",
    "sendto", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid", "setfsgid32",
    "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32", "setitimer",
    "setpgid", "setpriority", "setregid", "setregid32", "setresgid", "setresgid32", "setresuid",
    "setresuid32", "setreuid", "setreuid32", "setrlimit", "setsid", "setsockopt", "setuid",
    "setuid32", "setxattr", "setxattrat", "shmat", "shmctl", "shmdt", "shmget", "shutdown",
    "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn", "socketcall", "socketpair",
    "splice", "stat", "stat64", "statfs", "statfs64", "statmount", "statx", "symlink", "symlinkat",
    "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime",
    "timer_settime64", "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64", "times", "tkill", "truncate", "truncate64", "ugetrlimit", "umask",
    "uname", "unlink", "unlinkat", "uretprobe", "utime", "utimensat", "utimensat_time64", "utimes",
    "vfork", "vmsplice", "wait4", "waitid", "waitpid", "write", "writev",
)  # fmt: skip
ARCH_SYSCALLS = {  # Docker's arch-specific allowances, for the two architectures we run on
    "x86_64": ("arch_prctl", "modify_ldt"),
    "aarch64": ("arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint",
                "cacheflush", "set_tls"),
}  # fmt: skip
# Stricter than Docker, which allows these to every container (ptrace and process_vm_* since
# kernel 4.8): another process's memory stays out of reach, pinning is the invoker's.
STRICTER_THAN_DOCKER = frozenset(
    {"ptrace", "process_vm_readv", "process_vm_writev", "sched_setaffinity"}
)
# personality(2): Docker's values only (PER_LINUX, PER_LINUX32, UNAME26 with either, query).
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
AF_ALG, AF_VSOCK, AF_LIMIT = 38, 40, 64  # socket families refused as by Docker; AF_MAX is 46

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(OSError):
    """A step of the sandbox could not be taken: the container must not run."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"sandbox: {what}: {os.strerror(err)}")


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            src.encode() if src else None,
            dst.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {src or fstype} on {dst}",
    )


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare {flags:#x}")


def _prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl {option}")


class Config:
    """What every sandbox of one zygote shares (from the backend, as JSON)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.root: str = data["root"]  # an empty directory: the new root's mount point
        self.binds: list[str] = [p for p in data.get("binds", []) if os.path.exists(p)]
        self.files: dict[str, str] = dict(data.get("files", {}))  # inside path -> host path
        self.network: str = data.get("network", "none")
        self.slirp4netns: str | None = data.get("slirp4netns")
        self.pids_max = int(data.get("pids_max", 1024))
        self.shm_mb = int(data.get("shm_mb", 64))
        self.tmp_mb = int(data.get("tmp_mb", 512))
        self.hostname: str = data.get("hostname", "action")
        # Ports of the host's loopback the operator lets actions reach at 127.0.0.1 (a
        # local object store, say): relayed by the shim, nothing else of the host's is.
        self.host_ports: list[int] = [int(p) for p in data.get("host_ports", [])]
        # IPv4 prefixes (a.b.c.d/n) actions may not reach through slirp4netns, besides the
        # node's own addresses and ALWAYS_DENIED, and those they may even so: the longest
        # matching prefix decides, an allowed one at equal length.
        self.deny: list[str] = list(data.get("deny", []))
        self.allow: list[str] = list(data.get("allow", []))
        # A non-root invoker: each container in a user namespace of its own, its uids mapped
        # from the invoker's subordinate ranges by newuidmap/newgidmap (Debian's uidmap).
        self.userns = bool(data.get("userns", False))
        self.gid_offset = int(data.get("gid_base", 0)) - int(data.get("uid_base", 0))
        self.newuidmap: str = data.get("newuidmap") or "newuidmap"
        self.newgidmap: str = data.get("newgidmap") or "newgidmap"


# uid -> its container's cgroup dirs, the step, whether a /proc scan is allowed -> still alive
Liveness = Callable[[dict[int, list[str]], int, bool], set[int]]
SCAN_EVERY_S = 1.0  # a /proc scan costs ~10 us a process: at most once a second, unless short


class UidPool:
    """Host uids for containers, one per live container (two in a user namespace: its set-up
    uid and its action's): two containers (so two tenants) never share one.

    A uid given back waits in quarantine until nothing of its container is alive: the shim is
    reaped right after the backend's SIGKILL, while its pid namespace may still be dying.
    Rechecked at each take and give_back; free uids are reused oldest first (FIFO)."""

    def __init__(self, base: int, count: int, step: int = 1, alive: Liveness | None = None):
        self.base, self.count, self.step = base, count, step
        self._free = deque(range(base, base + count - step + 1, step))
        self._held: dict[int, list[str]] = {}  # quarantine, oldest first: uid -> its cgroups
        self._alive = alive or alive_uids
        self._next_scan = 0.0

    def take(self) -> int:
        self._recheck()
        if not self._free:
            raise SandboxError(
                errno.EAGAIN,
                f"sandbox: all {self.count // self.step} container uids in use "
                f"({len(self._held)} waiting for their container's last process)",
            )
        return self._free.popleft()

    def give_back(self, uid: int, cgroups: Sequence[str] = ()) -> None:
        """``uid`` of a container whose shim is gone; ``cgroups``: its cgroup directories."""
        if self.base <= uid < self.base + self.count and (uid - self.base) % self.step == 0:
            self._held[uid] = list(cgroups)
            self._recheck()

    def _recheck(self) -> None:
        if not self._held:
            return
        now = time.monotonic()
        scan = now >= self._next_scan or not self._free
        if scan:
            self._next_scan = now + SCAN_EVERY_S
        alive = self._alive(self._held, self.step, scan)
        for uid in [u for u in self._held if u not in alive]:
            del self._held[uid]
            self._free.append(uid)


def alive_uids(held: dict[int, list[str]], step: int, scan: bool = True) -> set[int]:
    """The uids of ``held`` (uid -> its container's cgroup dirs) whose container may still
    have a process: its cgroup is populated; with no cgroup, or one already removed (the
    backend removes it after destroy), a host process runs as one of its ``step`` uids (a
    /proc scan; without ``scan``, such uids count as alive)."""
    alive, unknown = set(), []
    for uid, dirs in held.items():
        populated = _populated(dirs[0]) if dirs else None
        if populated or (populated is None and not scan):
            alive.add(uid)
        elif populated is None:
            unknown.append(uid)
    if unknown:
        running = _running_uids()
        alive.update(u for u in unknown if not running.isdisjoint(range(u, u + step)))
    return alive


def _populated(cgroup: str) -> bool | None:
    """Whether a process is in ``cgroup`` (v2 ``cgroup.events``, v1 ``cgroup.procs``); None
    when the directory is gone."""
    for name in ("cgroup.events", "cgroup.procs"):
        try:
            with open(os.path.join(cgroup, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue  # v1 has no cgroup.events
        except OSError:
            return True  # unreadable: assume the worst
        return b"populated 1" in data if name == "cgroup.events" else bool(data.strip())
    return None


def _running_uids() -> set[int]:
    """Every uid (real, effective, saved, filesystem) of the host's processes."""
    uids: set[int] = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/status", "rb") as f:
                    data = f.read(2048)
            except OSError:
                continue  # gone meanwhile
            at = data.find(b"\nUid:")
            if at >= 0:
                uids.update(int(u) for u in data[at + 5 : data.find(b"\n", at + 5)].split())
    return uids


_program: Any = None  # the filter's BPF (a ctypes buffer), made once by prepare_filter


def prepare_filter() -> None:
    """Build the seccomp filter once, in the zygote; each child only loads its BPF
    (libseccomp's own load would generate it again in each: about 2 ms for this one)."""
    global _program
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ERRNO(errno.EPERM))
    with contextlib.suppress(OSError):  # a binary tree: ~370 rules, log-time lookups
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    allowed = {*ALLOWED_SYSCALLS, *ARCH_SYSCALLS.get(platform.machine(), ())}
    for name in sorted(allowed - STRICTER_THAN_DOCKER):
        if sc.resolve_syscall(sc.Arch.NATIVE, name) >= 0:  # else not a syscall here
            f.add_rule(sc.ALLOW, name)
    for persona in PERSONALITIES:
        f.add_rule(sc.ALLOW, "personality", sc.Arg(0, sc.EQ, persona))
    # Exact families: Docker's "< 38, 39, > 40" lets 38 and 40 through with high bits set,
    # which the kernel drops from the int.
    for family in range(AF_LIMIT):
        if family not in (AF_ALG, AF_VSOCK):
            f.add_rule(sc.ALLOW, "socket", sc.Arg(0, sc.EQ, family))
    # clone without namespace flags; clone3 hides its flags in memory a filter cannot read:
    # ENOSYS makes libc fall back to clone.
    namespaces = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                  | CLONE_NEWPID | CLONE_NEWNET)  # fmt: skip
    f.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, namespaces, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    with open(os.memfd_create("seccomp"), "w+b") as out:
        f.export_bpf(out)
        out.seek(0)
        bpf = out.read()
    _program = ctypes.create_string_buffer(bpf, len(bpf))


# -- the shim --------------------------------------------------------------------------------


def enter(config: Config, uid: int) -> None:
    """Called by the zygote's child after it joined its cgroup and session, with fds 1-4
    kept. Returns only in the sandbox's init, ready for the assignment on fd 4; the shim
    never returns."""
    alive_r, alive_w = os.pipe()  # EOF for the init and slirp4netns once the shim is gone
    # init -> shim: "my network namespace exists", with a netlink socket in it (outbound)
    net_r, net_w = (s.detach() for s in socket.socketpair())
    ready_r, ready_w = os.pipe()  # slirp4netns (or the shim) -> init: "network configured"
    helper, pid_w = 0, -1
    if config.network == "slirp4netns":
        if not config.slirp4netns:
            raise SandboxError(errno.ENOENT, "sandbox: slirp4netns is not installed")
        # Forked before the pid namespace exists, so that it stays in the host's.
        pid_r, pid_w = os.pipe()
        helper = _fork_slirp(config.slirp4netns, pid_r, ready_w, alive_r, (alive_w, pid_w))
        os.close(pid_r)
    if config.userns:
        _enter_userns(config, uid)
        uid = ACTION_UID  # inside; the host sees uid + 1
    # Subscribed before the init reads the node's addresses: no later one is missed.
    watch = _watch_addresses() if config.network == "slirp4netns" else None
    _unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (alive_w, net_r, ready_w, pid_w):
                if fd >= 0:
                    os.close(fd)
            if watch is not None:
                watch.close()
            _become_init(config, uid, alive_r, net_w, ready_r)
            return
        except BaseException as e:
            _die(e)
    for fd in (alive_r, net_w, ready_r, 0, 1, 2, 3, 4):
        os.close(fd)
    listeners: list[socket.socket] = []
    routes: socket.socket | None = None
    try:
        with socket.socket(fileno=net_r) as s:
            up, fds, _, _ = socket.recv_fds(s, 1, 1)
        routes = socket.socket(fileno=fds[0]) if fds else None
        if up:
            listeners = _listen_in(pid, config.host_ports)
            if helper:
                os.write(pid_w, str(pid).encode())
            else:
                os.write(ready_w, b"1")
    except OSError:
        pass
    for fd in (ready_w, pid_w):
        if fd >= 0:
            os.close(fd)
    if watch is not None and routes is not None:
        _relay(pid, listeners, watch, lambda: _sync_routes(routes, config, pid))
    elif listeners:
        _relay(pid, listeners)
    _wait_for(pid, helper)


def _enter_userns(config: Config, uid: int) -> None:
    """A user namespace of the container's own: inside, 0 is host ``uid`` (the set-up) and
    ``ACTION_UID`` host ``uid + 1`` (the action); written by newuidmap and newgidmap, which a
    helper left in the parent namespace runs, then root of it."""
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    mapper = os.fork()
    if mapper == 0:
        try:
            os.close(go_w)
            os.close(done_r)
            if os.read(go_r, 1) != b"1":
                os._exit(1)
            target, gid = str(os.getppid()), uid + config.gid_offset
            error = b""
            for tool, base in ((config.newuidmap, uid), (config.newgidmap, gid)):
                import subprocess

                argv = [tool, target, "0", str(base), "1", str(ACTION_UID), str(base + 1), "1"]
                done = subprocess.run(argv, capture_output=True, check=False)
                if done.returncode != 0:
                    error = f"{os.path.basename(tool)}: ".encode() + done.stderr.strip()
                    break
            os.write(done_w, error or b"ok")
        except BaseException as e:
            os.write(done_w, str(e).encode())
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(done_w)
    try:
        _unshare(CLONE_NEWUSER)
        os.write(go_w, b"1")
        answer = b"".join(iter(lambda: os.read(done_r, 4096), b""))
    finally:
        os.close(go_w)
        os.close(done_r)
        os.waitpid(mapper, 0)
    if answer != b"ok":
        raise SandboxError(errno.EPERM, f"sandbox: mapping the container's uids: {answer.decode()}")
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def _die(e: BaseException) -> None:
    try:
        os.write(2, f"sandbox: {e}\n".encode())
    finally:
        os._exit(126)


def _wait_for(init: int, helper: int) -> None:
    """The shim's life: wait for the init, then exit as it did."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == init:
            break
    if helper:
        try:
            os.kill(helper, signal.SIGKILL)
        except OSError:
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _listen_in(init: int, ports: list[int]) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1 of the init's network namespace, made from the
    shim's (setns there and back): a socket stays in the namespace it was made in."""
    if not ports:
        return []
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    theirs = os.open(f"/proc/{init}/ns/net", os.O_RDONLY)
    try:
        _check(_libc.setns(theirs, CLONE_NEWNET), "enter the container's network")
        try:
            return [socket.create_server(("127.0.0.1", port), backlog=64) for port in ports]
        finally:
            _check(_libc.setns(own, CLONE_NEWNET), "return to the host's network")
    finally:
        os.close(own)
        os.close(theirs)


def _relay(
    init: int,
    listeners: list[socket.socket],
    watch: socket.socket | None = None,
    changed: Callable[[], None] = lambda: None,
) -> None:
    """Copy bytes between connections made in the container to a relayed port and the
    same port of the host's loopback, and call ``changed`` when ``watch`` has news, until
    the init exits."""
    import selectors

    sel = selectors.DefaultSelector()
    exited = os.pidfd_open(init)
    sel.register(exited, selectors.EVENT_READ, None)
    if watch is not None:
        sel.register(watch, selectors.EVENT_READ, ("watch",))
    for lsock in listeners:
        lsock.setblocking(False)
        sel.register(lsock, selectors.EVENT_READ, ("accept", lsock.getsockname()[1]))
    peers: dict[socket.socket, socket.socket] = {}

    def close(sock: socket.socket) -> None:
        for s in (sock, peers.pop(sock, None)):
            if s is not None:
                peers.pop(s, None)
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                s.close()

    while True:
        for key, _ in sel.select():
            if key.data is None:
                return  # the init exited
            if key.data[0] == "watch":
                try:
                    while watch and watch.recv(1 << 16):
                        pass
                except OSError:  # drained; or ENOBUFS (events lost): a full sync anyway
                    pass
                changed()
                continue
            if key.data[0] == "accept":
                try:
                    inner, _ = key.fileobj.accept()  # type: ignore[union-attr]
                except OSError:
                    continue
                try:
                    outer = socket.create_connection(("127.0.0.1", key.data[1]), timeout=5)
                except OSError:
                    inner.close()
                    continue
                for a, b in ((inner, outer), (outer, inner)):
                    a.setblocking(False)
                    peers[a] = b
                    sel.register(a, selectors.EVENT_READ, ("copy",))
                continue
            src = key.fileobj
            assert isinstance(src, socket.socket)
            try:
                data = src.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            dst = peers.get(src)
            if not data or dst is None:
                close(src)
                continue
            try:
                dst.setblocking(True)
                dst.sendall(data)
                dst.setblocking(False)
            except OSError:
                close(src)


def _fork_slirp(binary: str, pid_r: int, ready_w: int, exit_r: int, close: tuple[int, ...]) -> int:
    """slirp4netns, once the init's pid arrives on ``pid_r``, on the init's network
    namespace from the host's: user-mode NAT for outbound connections, with the host's
    loopback out of reach. It writes to ``ready_w`` when the interface is configured and
    exits when ``exit_r`` reads EOF (the shim is gone).

    In a mount namespace of its own whose mounts are all private: slirp4netns's own sandbox
    makes only ``/`` private before it detaches the old root, and that detach, propagated
    through every shared mount, took the host's mounts below them with it (the network
    namespaces Podman and ``ip netns`` bind under a shared ``/run/netns``)."""
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        for fd in close:
            os.close(fd)
        target = os.read(pid_r, 32).decode()
        if not target.isdigit():
            os._exit(0)  # the init never came up
        os.set_inheritable(ready_w, True)
        os.set_inheritable(exit_r, True)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # it talks on stdout; its failures show as no network
            os.dup2(null, fd)
        argv = [
            binary, "--configure", "--mtu=65520", "--disable-host-loopback",
            "--enable-sandbox", "--enable-seccomp",
            f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", target, "tap0",
        ]  # fmt: skip
        os.execv(binary, argv)
    except BaseException as e:
        _die(e)
    raise AssertionError("unreachable")


# -- the init --------------------------------------------------------------------------------


def _become_init(config: Config, uid: int, alive_r: int, net_w: int, ready_r: int) -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    outbound = config.network == "slirp4netns"
    node = _node_addresses() if outbound else []  # still in the host's network namespace
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
    _loopback_up()
    with socket.socket(fileno=net_w) as s:  # for the shim: a netlink socket in this namespace
        later = _rtnetlink() if outbound else None
        socket.send_fds(s, [b"1"], [later.fileno()] if later else [])
        if later:
            later.close()
    _build_root(config, uid)
    name = config.hostname.encode()
    _check(_libc.sethostname(name, len(name)), "sethostname")
    if os.read(ready_r, 1) != b"1":
        raise SandboxError(errno.ENETDOWN, "sandbox: the action network did not come up")
    os.close(ready_r)
    if outbound:
        # As its root, before the drop; tap0 is up: the allowed routes need its gateway.
        with _rtnetlink() as nl:
            _restrict_routes(nl, config, [*node, *ALWAYS_DENIED, *config.deny], allowed=True)
    resource.setrlimit(resource.RLIMIT_NPROC, (config.pids_max, config.pids_max))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # to a non-zero uid: every capability is dropped
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a change of credentials clears it
    _prctl(PR_SET_DUMPABLE, 1)  # and this: the action may read its own /proc/self files
    os.set_blocking(alive_r, False)
    try:
        gone = os.read(alive_r, 1) == b""
    except BlockingIOError:
        gone = False
    if gone:
        os._exit(1)  # the shim died before the death signal was armed again
    os.close(alive_r)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _program is not None:  # struct sock_fprog: the count of instructions, a pointer
        fprog = struct.pack("HP", len(_program) // 8, ctypes.addressof(_program))
        _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0), "seccomp")


def _node_addresses() -> list[str]:
    """Every IPv4 address of every interface of the host's network namespace: the node's
    services listen there, and slirp4netns, in that namespace, would connect an action to
    them. Read for each container, so that addresses added since the start count too."""
    size = 64 * IFREQ_SIZE
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        while True:
            buf = ctypes.create_string_buffer(size)
            ifc = struct.pack("iL", size, ctypes.addressof(buf))
            used = struct.unpack("iL", ioctl(s, SIOCGIFCONF, ifc))[0]
            if used + IFREQ_SIZE <= size:  # else it may not have fit: ask again, larger
                break
            size *= 4
    raw = buf.raw  # each ifreq: the name (16 bytes), then a sockaddr_in: the address at 20
    return [socket.inet_ntoa(raw[i + 20 : i + 24]) for i in range(0, used, IFREQ_SIZE)]


def _prefix(cidr: str) -> tuple[int, int]:
    """``a.b.c.d/n`` (or an address: /32) -> (the network as an int, n)."""
    addr, _, bits = cidr.partition("/")
    n = int(bits or 32)
    return int.from_bytes(socket.inet_aton(addr), "big") & (~0 << (32 - n)) & 0xFFFFFFFF, n


def _within(p: tuple[int, int], net: tuple[int, int]) -> bool:
    return p[1] >= net[1] and p[0] >> (32 - net[1]) == net[0] >> (32 - net[1])


def _rtnetlink() -> socket.socket:
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)


def _restrict_routes(nl: socket.socket, config: Config, denied: list[str], allowed: bool) -> None:
    """Routes in the container's network namespace, which the action (no CAP_NET_ADMIN)
    cannot change: "prohibited" (connect: EACCES) for ``denied`` but what the allow list
    names, and with ``allowed`` a route via slirp4netns's gateway for each allowed prefix,
    so that the longest matching prefix decides. slirp4netns connects from the host's
    namespace wherever the action asks; its ``--disable-host-loopback`` keeps out only the
    host's 127.0.0.1. One netlink round trip (rtnetlink, RTM_NEWROUTE)."""
    allow = {_prefix(p) for p in config.allow}
    deny = {_prefix(p) for p in denied} - allow
    deny = {p for p in deny if not any(_within(p, net) for net in NEVER_DENIED)}
    gateway = struct.pack("HH4s", 8, RTA_GATEWAY, socket.inet_aton(SLIRP_GATEWAY))
    routes = [(p, RTN_PROHIBIT, b"") for p in sorted(deny)]
    routes += [(p, RTN_UNICAST, gateway) for p in sorted(allow) if allowed]
    msgs = []
    for seq, ((net, bits), kind, attrs) in enumerate(routes):
        body = struct.pack("BBBBBBBBI", socket.AF_INET, bits, 0, 0, RT_TABLE_MAIN,
                           RTPROT_STATIC, 0, kind, 0)  # fmt: skip
        body += struct.pack("HH", 8, RTA_DST) + net.to_bytes(4, "big") + attrs
        head = struct.pack("IHHII", 16 + len(body), RTM_NEWROUTE, NLM_F_NEW_ROUTE, seq, 0)
        msgs.append(head + body)
    if not msgs:
        return
    nl.send(b"".join(msgs))
    acked = 0
    while acked < len(msgs):
        data, off = nl.recv(1 << 16), 0
        while off + 20 <= len(data):
            length, kind, _, seq, _ = struct.unpack_from("IHHII", data, off)
            if kind == NLMSG_ERROR:
                acked += 1
                err = -struct.unpack_from("i", data, off + 16)[0]
                if err:
                    (net, bits), _, _ = routes[seq]
                    where = f"{socket.inet_ntoa(net.to_bytes(4, 'big'))}/{bits}"
                    raise SandboxError(err, f"sandbox: route {where}: {os.strerror(err)}")
            off += (length + 3) & ~3


def _watch_addresses() -> socket.socket:
    """Told of every change to the IPv4 addresses of the host's network namespace (an
    rtnetlink multicast group): the shim refuses an address added while its container
    lives (a spare is built ahead of demand, a warm container lives for minutes)."""
    s = _rtnetlink()
    s.bind((0, RTMGRP_IPV4_IFADDR))
    s.setblocking(False)
    return s


def _sync_routes(nl: socket.socket, config: Config, init: int) -> None:
    """The node's addresses now, refused in the container too; if that fails, it goes."""
    try:
        _restrict_routes(nl, config, _node_addresses(), allowed=False)
    except OSError:
        os.kill(init, signal.SIGKILL)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", ioctl(s, SIOCGIFFLAGS, req))[1]
        ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _mkdirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _bind(src: str, dst: str) -> None:
    """``src`` read-only at ``dst`` (created as an empty directory or file)."""
    if os.path.isdir(src):
        _mkdirs(dst)
    else:
        _mkdirs(os.path.dirname(dst))
        if not os.path.exists(dst):
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(src, dst, None, MS_BIND | MS_REC)
    _readonly(dst)


def _readonly(path: str) -> None:
    """The mount at ``path`` and every mount below it read-only, nosuid and nodev: a
    recursive bind copies each submount with flags of its own, so remounting the top alone
    left a writable one below ``/usr`` writable. mount_setattr(2) only sets attributes, so
    the flags a user namespace locks (noexec, atime) stay; without it (before Linux 5.12),
    each mount is remounted."""
    if SYS_MOUNT_SETATTR is not None:  # struct mount_attr: set, clear, propagation, userns
        attr = struct.pack("4Q", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
        rc = _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE, attr,
                           ctypes.c_size_t(len(attr)))  # fmt: skip
        if rc == 0 or ctypes.get_errno() != errno.ENOSYS:
            _check(rc, f"mount_setattr {path}")
            return
    with open("/proc/self/mountinfo", "rb") as f:  # field 5: the mount point, \ooo-escaped
        points = [re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split()[4])
                  for line in f]  # fmt: skip
    for point in (os.fsdecode(p) for p in points):
        if point == path or point.startswith(path.rstrip("/") + "/"):
            host = os.statvfs(point).f_flag  # in a user namespace these are locked: keep them
            flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_RDONLY | (host & KEPT_FLAGS)
            _mount(None, point, None, flags | (MS_RELATIME if host & ST_RELATIME else 0))


def _tmpfs(dst: str, mode: int, size_mb: int, uid: int = 0, extra: int = 0) -> None:
    _mkdirs(dst)
    opts = f"mode={mode:o},size={size_mb}m,uid={uid},gid={uid}"
    _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | extra, opts)


def _build_root(config: Config, uid: int) -> None:
    """A fresh root on a tmpfs, then pivot_root into it and drop the host's tree."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = config.root
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = "/" + top
        if os.path.islink(host):  # merged /usr: keep the same links
            os.symlink(os.readlink(host), root + host)
        elif os.path.isdir(host):
            _bind(host, root + host)
    _mkdirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _tmpfs(root + "/dev", 0o755, 1, extra=MS_NOEXEC)
    for dev in DEVICES:
        if os.path.exists("/dev/" + dev):
            target = f"{root}/dev/{dev}"
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o666))
            _mount("/dev/" + dev, target, None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    _tmpfs(root + "/dev/shm", 0o1777, config.shm_mb, extra=MS_NOEXEC)
    _tmpfs(root + "/tmp", 0o1777, config.tmp_mb)
    _tmpfs(root + WORKDIR, 0o700, config.tmp_mb, uid=uid)
    # Last, so that the mounts above hide none of them (a checkout under /tmp, say).
    for path in config.binds:
        _bind(path, root + path)
    for inside, host in config.files.items():
        _bind(host, root + inside)
    os.chdir(root)
    assert SYS_PIVOT_ROOT is not None, "pivot_root: unknown architecture"
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=755,size=1m")
