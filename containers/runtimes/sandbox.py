"""Entering a container's sandbox: run by the zygote's forked child before any action code.

Standalone (stdlib, plus ``pyseccomp`` for the syscall filter), loaded by the zygote from
this file. A sandboxed container is two processes:

``shim`` (the zygote's child, the container's pid for the backend)
    joins the container's cgroup, unshares a **pid namespace** and forks the sandbox's init;
    with outbound networking it also starts ``slirp4netns`` on the init's network
    namespace. It then only waits: when the init exits the shim exits with its status, and
    when the shim dies (the backend's SIGKILL) the init gets ``PR_SET_PDEATHSIG`` SIGKILL,
    and the kernel kills every process of the pid namespace with it, whatever it forked or
    ``setsid``-ed.

``init`` (pid 1 of the namespace, runs the runtime and the action)
    unshares **mount, network, IPC, UTS and cgroup** namespaces; builds a fresh root on a
    tmpfs (the runtime's and system directories bind-mounted read-only, a fresh ``/proc``,
    a minimal ``/dev``, size-limited private ``/tmp``, ``/dev/shm`` and working directory
    ``/action``), ``pivot_root``s into it and detaches the host's tree; then takes a **uid
    of its own** (no groups, so no capabilities), ``RLIMIT_NPROC``, ``no_new_privs`` and a
    **seccomp** filter with the refusals of Docker's default profile.

Why not bubblewrap: it sandboxes a program it execs, while our cold start comes from
forking a warm interpreter (the zygote); the sandbox must be entered after that fork. The
steps are the ones bubblewrap takes (mount namespace, tmpfs root, read-only binds,
pivot_root), written for that order.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import socket
import struct
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
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 217}.get(platform.machine())
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
WORKDIR = "/action"
ACTION_UID = 1000  # the action's uid inside a user namespace (non-root invokers)
PROJECT_ROOT = "/opt/ow"  # what a sandbox sees of the project: the runtimes, the GPU client
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

# Refused with EPERM, as Docker's default seccomp profile refuses them (it allows a list and
# refuses the rest; these are the refusals that matter to a process without capabilities,
# plus what would undo the sandbox: namespaces, mounts, tracing, pinning).
REFUSED_SYSCALLS = (
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
    "delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
    "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
    "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "migrate_pages",
    "mount", "mount_setattr", "move_mount", "move_pages", "name_to_handle_at", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd", "pivot_root",
    "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace", "query_module",
    "quotactl", "reboot", "request_key", "sched_setaffinity", "set_mempolicy", "setns",
    "settimeofday", "stime", "swapoff", "swapon", "sysfs", "syslog", "umount", "umount2",
    "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "_sysctl",
)  # fmt: skip

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
        # A non-root invoker: each container in a user namespace of its own, its uids mapped
        # from the invoker's subordinate ranges by newuidmap/newgidmap (Debian's uidmap).
        self.userns = bool(data.get("userns", False))
        self.gid_offset = int(data.get("gid_base", 0)) - int(data.get("uid_base", 0))
        self.newuidmap: str = data.get("newuidmap") or "newuidmap"
        self.newgidmap: str = data.get("newgidmap") or "newgidmap"


class UidPool:
    """Host uids for containers, one per live container (two in a user namespace: its set-up
    uid and its action's): two containers (so two tenants) never share one, and a uid is
    reused only after its pid namespace is gone."""

    def __init__(self, base: int, count: int, step: int = 1) -> None:
        self.base, self.count = base, count
        self._free = list(range(base + count - step, base - 1, -step))

    def take(self) -> int:
        if not self._free:
            raise SandboxError(errno.EAGAIN, f"sandbox: all {self.count} container uids in use")
        return self._free.pop()

    def give_back(self, uid: int) -> None:
        if self.base <= uid < self.base + self.count:
            self._free.append(uid)


_filter: Any = None


def prepare_filter() -> None:
    """Build the seccomp filter once, in the zygote (each child only loads it)."""
    global _filter
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in REFUSED_SYSCALLS:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            pass  # not a syscall on this architecture
    # clone3 hides its flags in memory a filter cannot read: ENOSYS makes libc fall back to
    # clone, whose namespace flags can be refused.
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                 CLONE_NEWPID, CLONE_NEWNET):  # fmt: skip
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    _filter = f


# -- the shim --------------------------------------------------------------------------------


def enter(config: Config, uid: int) -> None:
    """Called by the zygote's child after it joined its cgroup and session, with fds 1-4
    kept. Returns only in the sandbox's init, ready for the assignment on fd 4; the shim
    never returns."""
    alive_r, alive_w = os.pipe()  # EOF for the init and slirp4netns once the shim is gone
    net_r, net_w = os.pipe()  # init -> shim: "my network namespace exists"
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
    _unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (alive_w, net_r, ready_w, pid_w):
                if fd >= 0:
                    os.close(fd)
            _become_init(config, uid, alive_r, net_w, ready_r)
            return
        except BaseException as e:
            _die(e)
    for fd in (alive_r, net_w, ready_r, 0, 1, 2, 3, 4):
        os.close(fd)
    listeners: list[socket.socket] = []
    try:
        if os.read(net_r, 1):
            listeners = _listen_in(pid, config.host_ports)
            if helper:
                os.write(pid_w, str(pid).encode())
            else:
                os.write(ready_w, b"1")
    except OSError:
        pass
    for fd in (net_r, ready_w, pid_w):
        if fd >= 0:
            os.close(fd)
    if listeners:
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


def _relay(init: int, listeners: list[socket.socket]) -> None:
    """Copy bytes between connections made in the container to a relayed port and the
    same port of the host's loopback, until the init exits."""
    import selectors

    sel = selectors.DefaultSelector()
    exited = os.pidfd_open(init)
    sel.register(exited, selectors.EVENT_READ, None)
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
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
    _loopback_up()
    os.write(net_w, b"1")
    os.close(net_w)
    _build_root(config, uid)
    name = config.hostname.encode()
    _check(_libc.sethostname(name, len(name)), "sethostname")
    if os.read(ready_r, 1) != b"1":
        raise SandboxError(errno.ENETDOWN, "sandbox: the action network did not come up")
    os.close(ready_r)
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
    if _filter is not None:
        _filter.load()  # sets no_new_privs too
    else:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)


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
    host = os.statvfs(dst).f_flag  # in a user namespace, these flags are locked: keep them
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_RDONLY | (host & KEPT_FLAGS)
    _mount(None, dst, None, flags | (MS_RELATIME if host & ST_RELATIME else 0))


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
