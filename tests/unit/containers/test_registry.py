"""The container backends' registry: each backend by name, with its settings type (a field of
the invoker's configuration named after it) and its factory; the only place that picks one."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from containers.backend import BackendContext
from containers.docker.backend import DockerBackend
from containers.docker.settings import DockerSettings
from containers.process.backend import ProcessBackend
from containers.process.settings import ProcessSettings
from containers.registry import BACKENDS, backend_type, make_backend
from invoker.config import InvokerConfig


def test_every_backend_has_its_settings_in_the_invokers_configuration():
    """A backend's settings are a field of InvokerConfig named after it, of its type, set
    by default (so ``--backend <name>`` alone works)."""
    hints = typing.get_type_hints(InvokerConfig)
    fields = {f.name: f for f in dataclasses.fields(InvokerConfig)}
    for name, entry in BACKENDS.items():
        assert hints.get(name) is entry.settings, (
            f"InvokerConfig needs `{name}: {entry.settings.__name__} = setting(factory=...)`"
        )
        assert (
            dataclasses.is_dataclass(entry.settings) and entry.settings.__dataclass_params__.frozen
        )
        assert isinstance(fields[name].default_factory(), entry.settings)  # type: ignore[misc]
        assert isinstance(getattr(InvokerConfig(backend=name), name), entry.settings)


def test_an_unknown_name_lists_the_choices():
    with pytest.raises(
        ValueError, match=r"unknown container backend 'lxc': choose docker, process"
    ):
        backend_type("lxc")
    with pytest.raises(ValueError, match="choose docker, process"):
        make_backend("lxc", ProcessSettings(), BackendContext(Path("/x"), "wsk0"))


def test_a_backend_takes_only_its_own_settings(tmp_path: Path):
    with pytest.raises(
        TypeError, match="backend 'docker' takes DockerSettings, not ProcessSettings"
    ):
        make_backend("docker", ProcessSettings(), BackendContext(tmp_path, "wsk0"))


def test_the_process_backend_from_its_settings(tmp_path: Path):
    settings = ProcessSettings(
        sandbox="none",
        action_network="none",
        sandbox_host_ports=(9000,),
        action_network_deny=("10.0.0.0/8",),
        action_network_allow=("10.1.0.0/16",),
    )
    b = make_backend("process", settings, BackendContext(tmp_path, "wsk3", pids_limit=64))
    assert isinstance(b, ProcessBackend) and b.name == "process"
    assert (b.state_dir, b.name_prefix) == ((tmp_path / "containers").resolve(), "wsk3")
    assert (b.sandbox, b.network, b.pids_limit, b.host_ports) == (False, "none", 64, (9000,))
    assert (b.network_deny, b.network_allow) == (("10.0.0.0/8",), ("10.1.0.0/16",))
    assert b.user is None


def test_the_docker_backend_from_its_settings(tmp_path: Path):
    settings = DockerSettings(
        host="unix:///x.sock",
        binds=("/usr:/usr:ro",),
        reach="publish",
        network="none",
        shm_size_mb=8,
        dns_servers=("10.0.0.2",),
        dns_search=("svc.local",),
        dns_options=("ndots:2",),
    )
    b = make_backend("docker", settings, BackendContext(tmp_path, "wsk3", pids_limit=64))
    assert isinstance(b, DockerBackend) and b.name == "docker"
    assert (b.docker_host, b.name_prefix, b.binds) == ("unix:///x.sock", "wsk3", ("/usr:/usr:ro",))
    assert (b.reach, b.network, b.pids_limit, b.shm_size_mb) == ("publish", "none", 64, 8)
    assert b.dns == (("10.0.0.2",), ("svc.local",), ("ndots:2",))


def test_the_registry_loads_no_backend_until_one_is_made():
    """Reading the configuration (which names the registry's backends) imports neither
    backend's code: not aiodocker for a process invoker, nor the zygote's for a Docker one."""
    code = (
        "import sys, invoker.config, containers.registry\n"
        "loaded = [m for m in ('containers.process.backend', 'containers.docker.backend',"
        " 'aiodocker') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ""
