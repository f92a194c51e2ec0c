"""Configuration of ``run``: one GPU configuration reachable from its flags, environment and
TOML, and its own flags, environment names and TOML keys kept."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpu.config import GpuConfig
from invoker import config as invoker_config
from ow_invoker.cli import build_parser


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


# -- run: the GPU pool's settings are GpuConfig's ------------------------------------------


def test_gpu_is_off_unless_devices_are_given():
    assert invoker_config.load(_args("run"), {}).gpu is None
    # The other settings alone do not start a pool (as before), but they are still checked.
    assert invoker_config.load(_args("run", "--gpu-o3-limit", "3"), {}).gpu is None
    assert invoker_config.load(_args("run"), {"OW_INVOKER_GPU_DEVICES": ""}).gpu is None
    with pytest.raises(ValueError, match="unknown GPU policy"):
        invoker_config.load(_args("run"), {"OW_INVOKER_GPU_POLICY": "lifo"})


def test_the_four_old_gpu_flags_keep_their_meaning():
    cfg = invoker_config.load(
        _args(
            "run",
            "--gpu-devices",
            "virtual:2",
            "--gpu-memory-mb",
            "64",
            "--gpu-policy",
            "lb",
            "--gpu-o3-limit",
            "7",
        ),
        {},
    )
    assert cfg.gpu == GpuConfig(devices="virtual:2", memory_mb=64, policy="lb", o3_limit=7)


def test_gpu_defaults_are_gpu_configs():
    cfg = invoker_config.load(_args("run", "--gpu-devices", "auto"), {})
    assert cfg.gpu == GpuConfig()


def test_every_gpu_setting_is_a_flag_of_run():
    cfg = invoker_config.load(
        _args(
            "run",
            "--gpu-devices",
            "virtual:1",
            "--gpu-host-memory-mb",
            "2g",
            "--gpu-affinity-penalty",
            "3.5",
            "--gpu-fair-share-by",
            "namespace",
            "--gpu-max-retries",
            "0",
            "--gpu-state-dir",
            "/tmp/tier",
        ),
        {},
    )
    assert cfg.gpu is not None
    assert cfg.gpu.host_memory_mb == 2048 and cfg.gpu.affinity_penalty == 3.5
    assert cfg.gpu.fair_share_by == "namespace" and cfg.gpu.max_retries == 0
    assert cfg.gpu.state_dir == "/tmp/tier" and cfg.state_dir == ".state/invoker"


def test_gpu_settings_from_the_environment():
    cfg = invoker_config.load(
        _args("run"),
        {
            "OW_INVOKER_GPU_DEVICES": "virtual:3",
            "OW_INVOKER_GPU_HOST_MEMORY_MB": "1024",
            "OW_INVOKER_GPU_AFFINITY_PENALTY": "2",
            "OW_INVOKER_GPU_WORKER_THREADS": "2",
        },
    )
    assert cfg.gpu == GpuConfig(
        devices="virtual:3", host_memory_mb=1024, affinity_penalty=2.0, worker_threads=2
    )


def test_gpu_settings_from_toml_flat_keys_a_table_and_the_invoker_section(tmp_path):
    flat = _toml(tmp_path, 'gpu_devices = "virtual:2"\ngpu_host_memory_mb = 512\n')
    assert invoker_config.load(_args("run", "--config", flat), {}).gpu == GpuConfig(
        devices="virtual:2", host_memory_mb=512
    )
    table = _toml(
        tmp_path,
        '[invoker]\npolicy = "fifo"\n\n[invoker.gpu]\ndevices = "virtual:1"\n'
        "affinity_penalty = 4.0\n",
    )
    cfg = invoker_config.load(_args("run", "--config", table), {})
    assert cfg.policy == "fifo"
    assert cfg.gpu == GpuConfig(devices="virtual:1", affinity_penalty=4.0)


def test_gpu_precedence_file_then_environment_then_flags(tmp_path):
    path = _toml(tmp_path, 'gpu_devices = "virtual:2"\ngpu_o3_limit = 1\ngpu_memory_mb = 100\n')
    cfg = invoker_config.load(
        _args("run", "--config", path, "--gpu-o3-limit", "3"),
        {"OW_INVOKER_GPU_O3_LIMIT": "2", "OW_INVOKER_GPU_MEMORY_MB": "200"},
    )
    assert cfg.gpu is not None and (cfg.gpu.o3_limit, cfg.gpu.memory_mb) == (3, 200)


def test_unknown_gpu_key_in_a_file_is_refused(tmp_path):
    path = _toml(tmp_path, '[gpu]\ndevices = "virtual:1"\nhost_tier_mb = 1\n')
    with pytest.raises(ValueError, match=r"unknown keys.*gpu_host_tier_mb"):
        invoker_config.load(_args("run", "--config", path), {})
    table = _toml(tmp_path, '[invoker]\npolicy = "fifo"\n\n[invoker.gpus]\ndevices = "auto"\n')
    with pytest.raises(ValueError, match=r"unknown keys.*gpus"):
        invoker_config.load(_args("run", "--config", table), {})


def test_gpu_policy_flag_refuses_an_unknown_name(capsys):
    with pytest.raises(SystemExit) as exit_:
        _args("run", "--gpu-policy", "lifo")
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_run_keeps_its_flags_env_names_and_toml_keys(tmp_path):
    path = _toml(tmp_path, '[invoker]\nbackend = "process"\nprewarm = ["python:3.11:1:256"]\n')
    cfg = invoker_config.load(
        _args("run", "--config", path, "--id", "2", "--action-cores", "0,"),
        {
            "KAFKA_HOSTS": "k:9092",
            "CONFIG_whisk_couchdb_username": "u",
            "CONFIG_whisk_containerPool_userMemory": "1g",
            "OW_INVOKER_POLICY": "sept",
            "INVOKER_ID": "9",
        },
    )
    assert (cfg.instance, cfg.kafka, cfg.couchdb_user) == (2, "k:9092", "u")
    assert (cfg.user_memory_mb, cfg.policy, cfg.action_cores) == (1024, "sept", (0,))
    assert cfg.prewarm == ("python:3.11:1:256",)


# -- run: each container backend's settings are its own type's -------------------------------

# Every backend setting as operators give it: flag, our variable, TOML key, a value, and
# where it lands. These names predate the groups and must not change.
BACKEND_SETTINGS = [
    ("--sandbox", "OW_INVOKER_SANDBOX", "sandbox", "none", ("process", "sandbox", "none")),
    ("--action-network", "OW_INVOKER_ACTION_NETWORK", "action_network", "none",
     ("process", "action_network", "none")),
    ("--sandbox-host-ports", "OW_INVOKER_SANDBOX_HOST_PORTS", "sandbox_host_ports", "9000,9001",
     ("process", "sandbox_host_ports", (9000, 9001))),
    ("--action-network-deny", "OW_INVOKER_ACTION_NETWORK_DENY", "action_network_deny",
     "10.0.0.0/8", ("process", "action_network_deny", ("10.0.0.0/8",))),
    ("--action-network-allow", "OW_INVOKER_ACTION_NETWORK_ALLOW", "action_network_allow",
     "10.1.0.0/16", ("process", "action_network_allow", ("10.1.0.0/16",))),
    ("--action-user", "OW_INVOKER_ACTION_USER", "action_user", "root",
     ("process", "action_user", "root")),
    ("--docker-host", "OW_INVOKER_DOCKER_HOST", "docker_host", "tcp://h:2375",
     ("docker", "host", "tcp://h:2375")),
    ("--docker-binds", "OW_INVOKER_DOCKER_BINDS", "docker_binds", "/usr:/usr:ro",
     ("docker", "binds", ("/usr:/usr:ro",))),
    ("--docker-reach", "OW_INVOKER_DOCKER_REACH", "docker_reach", "publish",
     ("docker", "reach", "publish")),
    ("--docker-network", "OW_INVOKER_DOCKER_NETWORK", "docker_network", "none",
     ("docker", "network", "none")),
    ("--docker-shm-size-mb", "OW_INVOKER_DOCKER_SHM_SIZE_MB", "docker_shm_size_mb", "128",
     ("docker", "shm_size_mb", 128)),
    ("--docker-dns-servers", "OW_INVOKER_DOCKER_DNS_SERVERS", "docker_dns_servers", "10.0.0.2",
     ("docker", "dns_servers", ("10.0.0.2",))),
    ("--docker-dns-search", "OW_INVOKER_DOCKER_DNS_SEARCH", "docker_dns_search", "svc.local",
     ("docker", "dns_search", ("svc.local",))),
    ("--docker-dns-options", "OW_INVOKER_DOCKER_DNS_OPTIONS", "docker_dns_options", "ndots:2",
     ("docker", "dns_options", ("ndots:2",))),
    ("--pids-limit", "OW_INVOKER_PIDS_LIMIT", "pids_limit", "64", (None, "pids_limit", 64)),
]  # fmt: skip


def _landed(cfg: invoker_config.InvokerConfig, group: str | None, name: str) -> object:
    return getattr(getattr(cfg, group) if group else cfg, name)


@pytest.mark.parametrize(
    ("flag", "env", "key", "value", "where"), BACKEND_SETTINGS, ids=[s[2] for s in BACKEND_SETTINGS]
)
def test_backend_settings_keep_their_flags_env_names_and_toml_keys(
    tmp_path, flag, env, key, value, where
):
    group, name, expected = where
    # The process backend's network lists are refused unless it is sandboxed and chosen;
    # the DNS settings unless Docker is.
    backend = "docker" if group == "docker" or key == "pids_limit" else "process"
    base = ["run", "--backend", backend]
    from_flag = invoker_config.load(_args(*base, flag, value), {})
    from_env = invoker_config.load(_args(*base), {env: value})
    toml_value = f'"{value}"' if not value.isdigit() else value
    path = _toml(tmp_path, f"[invoker]\n{key} = {toml_value}\n")
    from_file = invoker_config.load(_args(*base, "--config", path), {})
    for cfg in (from_flag, from_env, from_file):
        assert _landed(cfg, group, name) == expected, cfg
    if group is not None:  # and a table named after the group, with the field's own name
        table = _toml(tmp_path, f"[invoker]\n[invoker.{group}]\n{name} = {toml_value}\n")
        cfg = invoker_config.load(_args(*base, "--config", table), {})
        assert _landed(cfg, group, name) == expected


def test_docker_host_is_read_from_the_stock_variable_too():
    cfg = invoker_config.load(_args("run"), {"DOCKER_HOST": "unix:///d.sock"})
    assert cfg.docker.host == "unix:///d.sock"
    ours = {"DOCKER_HOST": "unix:///d.sock", "OW_INVOKER_DOCKER_HOST": "tcp://h:2375"}
    assert invoker_config.load(_args("run"), ours).docker.host == "tcp://h:2375"


def test_backend_settings_are_grouped_under_their_backend_in_the_help(capsys):
    with pytest.raises(SystemExit):
        _args("run", "--help")
    text = capsys.readouterr().out
    options = text.index("options:")  # below the usage line, which lists every flag
    process, docker = text.index("the process backend"), text.index("the Docker backend")
    assert options < text.index("--backend {process,docker}", options) < process
    assert process < text.index("--sandbox SANDBOX", options) < docker
    assert docker < text.index("--docker-reach DOCKER_REACH", options)
    assert "(docker)" not in text


def test_backend_settings_are_checked_by_their_own_types():
    with pytest.raises(ValueError, match="sandbox: namespaces or none"):
        invoker_config.load(_args("run", "--sandbox", "chroot"), {})
    with pytest.raises(ValueError, match="docker_reach: netns, publish"):
        invoker_config.load(_args("run", "--docker-reach", "bridge"), {})
    with pytest.raises(ValueError, match="docker_shm_size_mb must be positive"):
        invoker_config.load(_args("run", "--docker-shm-size-mb", "0"), {})
    with pytest.raises(ValueError, match="pids_limit must be positive"):
        invoker_config.load(_args("run", "--pids-limit", "0"), {})
    with pytest.raises(ValueError, match="action user 'no-such-user-x' does not exist"):
        invoker_config.load(_args("run", "--action-user", "no-such-user-x"), {})


def test_the_backend_flag_lists_the_registrys_backends(capsys):
    with pytest.raises(SystemExit) as exit_:
        _args("run", "--backend", "lxc")
    assert exit_.value.code == 2 and "choose from 'process', 'docker'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown container backend 'lxc': choose docker, process"):
        invoker_config.load(None, {"OW_INVOKER_BACKEND": "lxc"})


def test_the_chosen_backends_settings():
    cfg = invoker_config.load(_args("run", "--backend", "docker", "--docker-network", "none"), {})
    assert cfg.backend_settings is cfg.docker and cfg.docker.network == "none"
    default = invoker_config.load(None, {})
    assert default.backend == "process" and default.backend_settings is default.process


def test_a_whole_gpu_config_can_be_given_in_code():
    cfg = invoker_config.load(None, {}, gpu=GpuConfig(devices="virtual:1"), policy="fifo")
    assert cfg.gpu == GpuConfig(devices="virtual:1") and cfg.policy == "fifo"
