"""The front's configuration: settings of its own (the invokers' stock names, none of their
options)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from front import config as front_config
from ow_invoker.cli import build_parser


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


# -- front: its own configuration -----------------------------------------------------------


def test_front_refuses_the_invokers_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        _args("front", "--policy", "fc")
    assert exit_.value.code == 2
    assert "unrecognized arguments: --policy fc" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _args("front", "--gpu-devices", "auto")


def test_front_reads_the_stock_names_of_kafka_and_couchdb():
    cfg = front_config.load(
        _args("front"),
        {
            "KAFKA_HOSTS": "kafka:9092",
            "CONFIG_whisk_kafka_topics_prefix": "p_",
            "CONFIG_whisk_couchdb_username": "admin",
            "CONFIG_whisk_couchdb_password": "secret",
            "OW_FRONT_COUCHDB_URL": "http://couch:5984",
            "DB_WHISK_ACTIONS": "my_whisks",
            "DB_PREFIX": "x_",
        },
    )
    assert (cfg.kafka, cfg.topic_prefix) == ("kafka:9092", "p_")
    assert (cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password) == (
        "http://couch:5984",
        "admin",
        "secret",
    )
    assert (cfg.whisks_db, cfg.activations_db) == ("my_whisks", "x_activations")


def test_front_reads_the_invokers_own_names_for_what_they_share():
    """One environment for a host (docs/operations.md sets OW_INVOKER_COUCHDB_URL once for
    the front and the invokers); the front's own prefix still wins."""
    env = {"OW_INVOKER_COUCHDB_URL": "http://couch:5984", "OW_INVOKER_KAFKA": "k:9092"}
    cfg = front_config.load(_args("front"), env)
    assert (cfg.couchdb_url, cfg.kafka) == ("http://couch:5984", "k:9092")
    cfg = front_config.load(_args("front"), {**env, "OW_FRONT_COUCHDB_URL": "http://mine:1"})
    assert cfg.couchdb_url == "http://mine:1"


def test_front_takes_the_stock_balancer_and_etcd_names_for_the_scheduler_mode():
    assert not front_config.load(_args("front"), {}).scheduler_mode
    env = {
        "CONFIG_whisk_spi_LoadBalancerProvider": "org.apache.openwhisk.core.loadBalancer."
        "FPCPoolBalancer",
        "CONFIG_whisk_etcd_hosts": "etcd0:2379,etcd1:2379",
        "CONFIG_whisk_cluster_name": "prod",
    }
    cfg = front_config.load(_args("front"), env)
    assert cfg.scheduler_mode
    assert (cfg.etcd_hosts, cfg.cluster_name) == ("etcd0:2379,etcd1:2379", "prod")
    flags = ("front", "--load-balancer", "ShardingContainerPoolBalancer")
    assert not front_config.load(_args(*flags), env).scheduler_mode


@pytest.mark.parametrize(
    ("balancer", "etcd", "refused"),
    [
        ("LeanBalancer", "e:2379", "is not one of ShardingContainerPoolBalancer, FPCPoolBalancer"),
        ("FPCPoolBalancer", None, "reads the schedulers from etcd: give etcd_hosts"),
    ],
)
def test_front_refuses_a_balancer_it_cannot_be(balancer, etcd, refused):
    with pytest.raises(ValueError, match=refused):
        front_config.FrontConfig(load_balancer=balancer, etcd_hosts=etcd)


def test_the_standalone_front_reaches_its_own_invoker_whatever_the_environment():
    from ow_invoker import standalone

    env = {"OW_FRONT_LOAD_BALANCER": "FPCPoolBalancer", "OW_INVOKER_ETCD_HOSTS": "e:2379"}
    front, _ = standalone.load(_args("standalone"), env)
    assert not front.scheduler_mode


def test_front_flags_env_and_file(tmp_path):
    path = _toml(tmp_path, '[invoker]\npolicy = "fifo"\n\n[front]\nport = 4000\nhost = "0.0.0.0"\n')
    cfg = front_config.load(
        _args("front", "--config", path, "--auth", "guest=a:b", "--auth", "whisk.system=c:d"),
        {"OW_FRONT_PORT": "4001", "OW_FRONT_CONTROLLER_ID": "1"},
    )
    assert (cfg.host, cfg.port, cfg.controller_id) == ("0.0.0.0", 4001, "1")
    assert cfg.auth == ("guest=a:b", "whisk.system=c:d")


def test_front_file_with_invoker_keys_is_refused(tmp_path):
    path = _toml(tmp_path, 'kafka = "k:1"\npolicy = "fifo"\n')
    with pytest.raises(ValueError, match=r"unknown keys.*policy"):
        front_config.load(_args("front", "--config", path), {})
