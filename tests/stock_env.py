"""The environments the stock deployments give the Scala invoker, with local values: the
variable list of apache/openwhisk's ``ansible/roles/invoker/tasks/deploy.yml`` (its
``env`` fact, with ``group_vars/all``'s defaults where the test has no value of its own) and
of apache/openwhisk-deploy-kube's ``helm/openwhisk/templates/invoker-pod.yaml`` (docker
container factory, no scheduler). Values the role leaves empty (``| default()``) are empty
here too: the stock image treats them as unset, and so must ow-invoker.
"""

from __future__ import annotations

import base64
import json
from typing import Any

# ansible's roles/invoker/templates/config.j2: comments and an include, no setting.
ANSIBLE_HOCON = """include classpath("application.conf")

# Specify any custom config here. For example
# whisk {
#   metrics {
#     prometheus-enabled = true
#   }
# }"""


def test_manifest() -> dict[str, Any]:
    """A runtimes manifest in the stock format (our own, with the kinds the tests run)."""

    def kind(kind: str, name: str, default: bool) -> dict[str, Any]:
        return {
            "kind": kind,
            "default": default,
            "image": {"prefix": "openwhisk", "name": name, "tag": "nightly"},
            "deprecated": False,
            "attached": {"attachmentName": "codefile", "attachmentType": "text/plain"},
            "stemCells": [{"initialCount": 1, "memory": "256 MB", "reactive": {}}],
        }

    return {
        "description": ["runtimes of the stock-environment tests"],
        "runtimes": {
            "python": [kind("python:3.11", "action-python-v3.11", True)],
            "nodejs": [kind("nodejs:20", "action-nodejs-v20", True)],
        },
        "blackboxes": [{"prefix": "openwhisk", "name": "dockerskeleton", "tag": "nightly"}],
    }


def couch_settings(
    couchdb: Any, db_prefix: str, *, protocol: str = "http", port: int | None = None
) -> dict[str, Any]:
    """The ``couch_*`` and ``db_prefix`` arguments of :func:`ansible_env` and
    :func:`helm_env` for a test's CouchDB-API server on 127.0.0.1 (``port``: a TLS
    terminator's in front of it, with ``protocol`` https)."""
    return {
        "couch_protocol": protocol,
        "couch_host": "127.0.0.1",
        "couch_port": couchdb.port if port is None else port,
        "couch_user": couchdb.user,
        "couch_password": couchdb.password,
        "db_prefix": db_prefix,
    }


def ansible_env(
    *,
    kafka_hosts: str,
    couch_protocol: str,
    couch_host: str,
    couch_port: int,
    couch_user: str,
    couch_password: str,
    db_prefix: str,
    topics_prefix: str = "",
    api_host: tuple[str, str, int] = ("https", "openwhisk.example.com", 443),
    kafka_protocol: str = "PLAINTEXT",
    kafka_store: str = "/conf/kafka-keystore.jks",
    kafka_store_password: str = "openwhisk",
    invoker_protocol: str = "https",
    invoker_keystore: str = "/conf/invoker-openwhisk-keystore.p12",
    invoker_keystore_password: str = "openwhisk",
    client_auth: str = "true",
    invoker_password: str = "invoker.pass",
    manifest: dict[str, Any] | None = None,
    user_memory: str = "2048m",
) -> dict[str, str]:
    """Every variable of the role's ``env`` fact, in its order (``invoker.extraEnv`` and the
    optional ElasticSearch, MongoDB and scheduler sets left out: they are off by default)."""
    proto, name, port = api_host
    actions, activations, auth = (
        f"{db_prefix}whisks",
        f"{db_prefix}activations",
        f"{db_prefix}subjects",
    )
    return {
        "JAVA_OPTS": "-Xmx2g -XX:+CrashOnOutOfMemoryError -XX:+UseGCOverheadLimit "
        "-XX:ErrorFile=/logs/java_error.log",
        "INVOKER_OPTS": "",
        "JMX_REMOTE": "false",
        "OPENWHISK_ENCODED_CONFIG": base64.b64encode(ANSIBLE_HOCON.encode()).decode(),
        "PORT": "8080",
        "TZ": "UTC",
        "KAFKA_HOSTS": kafka_hosts,
        "CONFIG_whisk_kafka_replicationFactor": "1",
        "CONFIG_whisk_kafka_topics_invoker_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_invoker_retentionMs": "",
        "CONFIG_whisk_kakfa_topics_invoker_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_prefix": topics_prefix,
        "CONFIG_whisk_kafka_topics_userEvent_prefix": "",
        "CONFIG_whisk_kafka_common_securityProtocol": kafka_protocol,
        "CONFIG_whisk_kafka_common_sslTruststoreLocation": kafka_store,
        "CONFIG_whisk_kafka_common_sslTruststorePassword": kafka_store_password,
        "CONFIG_whisk_kafka_common_sslKeystoreLocation": kafka_store,
        "CONFIG_whisk_kafka_common_sslKeystorePassword": kafka_store_password,
        "CONFIG_whisk_userEvents_enabled": "false",
        "ZOOKEEPER_HOSTS": "127.0.0.1:2181",
        "CONFIG_whisk_couchdb_protocol": couch_protocol,
        "CONFIG_whisk_couchdb_host": couch_host,
        "CONFIG_whisk_couchdb_port": str(couch_port),
        "CONFIG_whisk_couchdb_username": couch_user,
        "CONFIG_whisk_couchdb_password": couch_password,
        "CONFIG_whisk_couchdb_provider": "CouchDB",
        "CONFIG_whisk_couchdb_databases_WhiskAuth": auth,
        "CONFIG_whisk_couchdb_databases_WhiskEntity": actions,
        "CONFIG_whisk_couchdb_databases_WhiskActivation": activations,
        "DB_WHISK_ACTIONS": actions,
        "DB_WHISK_ACTIVATIONS": activations,
        "DB_WHISK_AUTHS": auth,
        "CONFIG_whisk_db_subjectsDdoc": "",
        "CONFIG_whisk_db_actionsDdoc": "",
        "CONFIG_whisk_db_activationsDdoc": "",
        "CONFIG_whisk_db_activationsFilterDdoc": "",
        "WHISK_API_HOST_PROTO": proto,
        "WHISK_API_HOST_PORT": str(port),
        "WHISK_API_HOST_NAME": name,
        "CONFIG_whisk_containerFactory_runtimesRegistry_url": "",
        "CONFIG_whisk_containerFactory_userImagesRegistry_url": "",
        "RUNTIMES_MANIFEST": json.dumps(manifest or test_manifest()),
        "CONFIG_whisk_runtimes_bypassPullForLocalImages": "",
        "CONFIG_whisk_runtimes_localImagePrefix": "",
        "CONFIG_whisk_containerFactory_containerArgs_network": "bridge",
        "INVOKER_CONTAINER_POLICY": "",
        "CONFIG_whisk_containerPool_userMemory": user_memory,
        "CONFIG_whisk_containerPool_userCpus": "",
        "CONFIG_whisk_docker_client_parallelRuns": "",
        "CONFIG_whisk_docker_containerFactory_useRunc": "true",
        "WHISK_LOGS_DIR": "/var/tmp/wsklogs",
        "METRICS_KAMON": "false",
        "METRICS_KAMON_TAGS": "false",
        "METRICS_LOG": "true",
        "CONFIG_kamon_statsd_hostname": "",
        "CONFIG_kamon_statsd_port": "8125",
        "CONFIG_whisk_spi_LogStoreProvider": (
            "org.apache.openwhisk.core.containerpool.logging.DockerToActivationLogStoreProvider"
        ),
        "CONFIG_whisk_spi_InvokerProvider": "",
        "CONFIG_whisk_spi_InvokerServerProvider": "",
        "CONFIG_logback_log_level": "INFO",
        "CONFIG_whisk_memory_min": "",
        "CONFIG_whisk_memory_max": "",
        "CONFIG_whisk_memory_std": "",
        "CONFIG_whisk_timeLimit_min": "",
        "CONFIG_whisk_timeLimit_max": "",
        "CONFIG_whisk_timeLimit_std": "",
        "CONFIG_whisk_concurrencyLimit_min": "",
        "CONFIG_whisk_concurrencyLimit_max": "",
        "CONFIG_whisk_concurrencyLimit_std": "",
        "CONFIG_whisk_namespaceDefaultLimit_memory_min": "",
        "CONFIG_whisk_namespaceDefaultLimit_memory_max": "",
        "CONFIG_whisk_namespaceDefaultLimit_timeLimit_min": "",
        "CONFIG_whisk_namespaceDefaultLimit_timeLimit_max": "",
        "CONFIG_whisk_namespaceDefaultLimit_concurrencyLimit_min": "",
        "CONFIG_whisk_namespaceDefaultLimit_concurrencyLimit_max": "",
        "CONFIG_whisk_activation_payload_max": "",
        "CONFIG_whisk_transactions_header": "X-Request-ID",
        "CONFIG_whisk_containerPool_pekkoClient": "false",
        "CONFIG_whisk_containerFactory_containerArgs_extraEnvVars_0": "__OW_ALLOW_CONCURRENT=false",
        "CONFIG_whisk_invoker_protocol": invoker_protocol,
        "CONFIG_whisk_invoker_https_keystorePath": invoker_keystore,
        "CONFIG_whisk_invoker_https_keystorePassword": invoker_keystore_password,
        "CONFIG_whisk_invoker_https_keystoreFlavor": "PKCS12",
        "CONFIG_whisk_invoker_https_clientAuth": client_auth,
        "CONFIG_whisk_invoker_resource_tags": " '' ",
        "CONFIG_whisk_invoker_dedicated_namespaces": " '' ",
        "CONFIG_whisk_containerProxy_timeouts_idleContainer": "10 minutes",
        "CONFIG_whisk_containerProxy_timeouts_pauseGrace": "10 seconds",
        "CONFIG_whisk_containerProxy_timeouts_keepingDuration": "10 minutes",
        "CONFIG_whisk_containerPool_prewarmExpirationCheckInitDelay": "10 minutes",
        "CONFIG_whisk_containerPool_prewarmExpirationCheckInterval": "10 minutes",
        "CONFIG_whisk_containerPool_prewarmExpirationCheckIntervalVariance": "10 seconds",
        "CONFIG_whisk_containerPool_prewarmPromotion": "false",
        "CONFIG_whisk_containerPool_prewarmMaxRetryLimit": "5",
        "CONFIG_whisk_containerPool_memorySyncInterval": "1 second",
        "CONFIG_whisk_containerPool_batchDeletionSize": "10",
        "CONFIG_whisk_invoker_username": "invoker.user",
        "CONFIG_whisk_invoker_password": invoker_password,
        "CONFIG_whisk_cluster_name": "whisk",
        # "extend invoker dns env": ("" | default()).split(' ') gives one empty server.
        "CONFIG_whisk_containerFactory_containerArgs_dnsServers_0": "",
    }


def ansible_scheduler_env(etcd_hosts: str) -> dict[str, str]:
    """The role's ``scheduler_env``, merged into ``env`` when ``enable_scheduler`` (its
    default): the FPC SPIs and etcd, with ``group_vars/all``'s defaults."""
    return {
        "CONFIG_whisk_etcd_hosts": etcd_hosts,
        "CONFIG_whisk_etcd_lease_timeout": "10",
        "CONFIG_whisk_etcd_pool_threads": "10",
        "CONFIG_whisk_scheduler_dataManagementService_retryInterval": "1 second",
        "CONFIG_whisk_invoker_containerCreation_maxPeek": "500",
        "CONFIG_whisk_spi_InvokerProvider": "org.apache.openwhisk.core.invoker.FPCInvokerReactive",
        "CONFIG_whisk_spi_InvokerServerProvider": (
            "org.apache.openwhisk.core.invoker.FPCInvokerServer"
        ),
    }


def ansible_argv(invoker_index: int) -> list[str]:
    """The role's ``command``: ``/init.sh --id N --uniqueName N``."""
    return ["--id", str(invoker_index), "--uniqueName", str(invoker_index)]


def helm_env(
    *,
    kafka_hosts: str,
    couch_protocol: str,
    couch_host: str,
    couch_port: int,
    couch_user: str,
    couch_password: str,
    db_prefix: str,
    manifest: dict[str, Any] | None = None,
) -> dict[str, str]:
    """invoker-pod.yaml's ``env`` with values.yaml's defaults (docker factory, DNS not
    overridden, no scheduler, no prometheus, CouchDB as the database)."""
    return {
        "PORT": "8080",
        "WHISK_API_HOST_PROTO": "https",
        "WHISK_API_HOST_PORT": "443",
        "WHISK_API_HOST_NAME": "owdev-nginx.openwhisk.svc.cluster.local",
        "CONFIG_whisk_docker_containerFactory_useRunc": "false",
        "CONFIG_whisk_containerPool_userMemory": "2048m",
        "CONFIG_whisk_containerFactory_containerArgs_network": "bridge",
        "CONFIG_whisk_containerFactory_containerArgs_extraEnvVars_0": "__OW_ALLOW_CONCURRENT=false",
        "CONFIG_whisk_containerFactory_runtimesRegistry_url": "",
        "INVOKER_NAME": "worker-node-1",
        "JAVA_OPTS": "-Xmx512M ",
        "INVOKER_OPTS": " -Dwhisk.spi.ContainerFactoryProvider="
        "org.apache.openwhisk.core.containerpool.docker.DockerContainerFactoryProvider",
        "RUNTIMES_MANIFEST": json.dumps(manifest or test_manifest()),
        "LIMITS_ACTIONS_INVOKES_PERMINUTE": "60",
        "LIMITS_ACTIONS_INVOKES_CONCURRENT": "30",
        "LIMITS_TRIGGERS_FIRES_PERMINUTE": "60",
        "LIMITS_ACTIONS_SEQUENCE_MAXLENGTH": "50",
        "CONFIG_whisk_timeLimit_min": "100ms",
        "CONFIG_whisk_timeLimit_max": "5m",
        "CONFIG_whisk_timeLimit_std": "1m",
        "CONFIG_whisk_memory_min": "128m",
        "CONFIG_whisk_memory_max": "512m",
        "CONFIG_whisk_memory_std": "256m",
        "CONFIG_whisk_concurrencyLimit_min": "1",
        "CONFIG_whisk_concurrencyLimit_max": "1",
        "CONFIG_whisk_concurrencyLimit_std": "1",
        "CONFIG_whisk_logLimit_min": "0m",
        "CONFIG_whisk_logLimit_max": "10m",
        "CONFIG_whisk_logLimit_std": "10m",
        "CONFIG_whisk_activation_payload_max": "1048576",
        "WHISK_LOGS_DIR": "",
        "CONFIG_whisk_info_date": "2026-12-02-00:00:00Z",
        "CONFIG_whisk_couchdb_username": couch_user,
        "CONFIG_whisk_couchdb_password": couch_password,
        "CONFIG_whisk_couchdb_port": str(couch_port),
        "CONFIG_whisk_couchdb_protocol": couch_protocol,
        "CONFIG_whisk_couchdb_host": couch_host,
        "CONFIG_whisk_couchdb_provider": "CouchDB",
        "CONFIG_whisk_couchdb_databases_WhiskActivation": f"{db_prefix}activations",
        "CONFIG_whisk_couchdb_databases_WhiskEntity": f"{db_prefix}whisks",
        "CONFIG_whisk_couchdb_databases_WhiskAuth": f"{db_prefix}subjects",
        "KAFKA_HOSTS": kafka_hosts,
        "CONFIG_whisk_kafka_replicationFactor": "",
        "CONFIG_whisk_kafka_topics_prefix": "",
        "CONFIG_whisk_kafka_topics_cacheInvalidation_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_cacheInvalidation_retentionMs": "",
        "CONFIG_whisk_kafka_topics_cacheInvalidation_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_completed_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_completed_retentionMs": "",
        "CONFIG_whisk_kafka_topics_completed_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_events_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_events_retentionMs": "",
        "CONFIG_whisk_kafka_topics_events_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_health_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_health_retentionMs": "",
        "CONFIG_whisk_kafka_topics_health_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_invoker_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_invoker_retentionMs": "",
        "CONFIG_whisk_kafka_topics_invoker_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_scheduler_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_scheduler_retentionMs": "",
        "CONFIG_whisk_kafka_topics_scheduler_segmentBytes": "",
        "CONFIG_whisk_kafka_topics_creationAck_retentionBytes": "",
        "CONFIG_whisk_kafka_topics_creationAck_retentionMs": "",
        "CONFIG_whisk_kafka_topics_creationAck_segmentBytes": "",
        "ZOOKEEPER_HOSTS": "owdev-zookeeper-0.owdev-zookeeper.openwhisk.svc.cluster.local:2181",
        "CONFIG_logback_log_level": "INFO",
        "CONFIG_whisk_helm_release": "owdev",
        "CONFIG_akka_coordinatedShutdown_phases_actorSystemTerminate_timeout": "30 s",
        "CONFIG_whisk_runtime_delete_timeout": "30 seconds",
    }


def helm_argv(unique_name: str = "worker-node-1") -> list[str]:
    """The pod's command: ``/init.sh --uniqueName $INVOKER_NAME`` (an id from ZooKeeper)."""
    return ["--uniqueName", unique_name]
