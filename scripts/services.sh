#!/usr/bin/env bash
# Start, stop and inspect the real services, all bound to 127.0.0.1.
#
#   scripts/services.sh start|stop|status|restart|kill|freeze|thaw|clean <kafka|couchdb|etcd|toxiproxy|podman|docker|all>...
#
# Each service runs in its own session (setsid), with a PID file and a log file in its state
# dir ($OW_STATE_DIR/<service>, default .state/<service>). "start" returns once the service
# really answers; "stop" sends SIGTERM to the recorded PID only and waits for it to exit;
# "kill" sends SIGKILL (a crash, for fault tests); "freeze" and "thaw" send SIGSTOP and SIGCONT
# (a service that stalls with its connections open, for fault tests); "clean" stops and deletes the service's
# state (data included). Ports, credentials and timeouts come from the environment (see
# docs/services.md); install the components first with scripts/install.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
STATE_ROOT="${OW_STATE_DIR:-$ROOT/.state}"

KAFKA_HOST="${KAFKA_HOST:-127.0.0.1}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_HEAP="${KAFKA_HEAP:--Xms64m -Xmx512m}"
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xss512k}"
KAFKA_MESSAGE_MAX_BYTES="${KAFKA_MESSAGE_MAX_BYTES:-2097152}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
# An optional TLS listener beside the plain one (tests of the stock TLS/SASL settings):
# KAFKA_TLS_PORT, KAFKA_TLS_KEYSTORE (PEM: the broker's key and certificate chain); with
# KAFKA_SASL_USER and KAFKA_SASL_PASSWORD it is SASL_SSL with PLAIN for that one user.
KAFKA_TLS_PORT="${KAFKA_TLS_PORT:-}"
KAFKA_TLS_KEYSTORE="${KAFKA_TLS_KEYSTORE:-}"
KAFKA_SASL_USER="${KAFKA_SASL_USER:-}"
KAFKA_SASL_PASSWORD="${KAFKA_SASL_PASSWORD:-}"
# An optional plain listener for clients that reach the broker through a fault proxy (the
# chaos tests): it listens on KAFKA_PROXIED_PORT and advertises KAFKA_PROXIED_ADVERTISED
# (host:port, the proxy's), so that those clients' every connection goes through the proxy.
KAFKA_PROXIED_PORT="${KAFKA_PROXIED_PORT:-}"
KAFKA_PROXIED_ADVERTISED="${KAFKA_PROXIED_ADVERTISED:-}"
# Where the node's broker reaches its controller (host:port; default the controller's own
# listener): a fault proxy there cuts the broker from the controller while its process and
# its clients' connections stay up, so it is fenced and its partitions lose their leader.
# KAFKA_BROKER_SESSION_TIMEOUT_MS: how long the controller waits before fencing it (the
# broker heartbeats every 2/9 of it: Kafka's own 2 s of 9 s by default).
KAFKA_CONTROLLER_VIA="${KAFKA_CONTROLLER_VIA:-}"
KAFKA_BROKER_SESSION_TIMEOUT_MS="${KAFKA_BROKER_SESSION_TIMEOUT_MS:-9000}"

COUCHDB_HOST="${COUCHDB_HOST:-127.0.0.1}"
COUCHDB_PORT="${COUCHDB_PORT:-5984}"
COUCHDB_USER="${COUCHDB_USER:-whisk_admin}"
COUCHDB_PASSWORD="${COUCHDB_PASSWORD:-some_passw0rd}"
COUCHDB_START_TIMEOUT="${COUCHDB_START_TIMEOUT:-30}"

ETCD_HOST="${ETCD_HOST:-127.0.0.1}"
ETCD_PORT="${ETCD_PORT:-2379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-$((ETCD_PORT + 1))}"
ETCD_START_TIMEOUT="${ETCD_START_TIMEOUT:-30}"

TOXIPROXY_HOST="${TOXIPROXY_HOST:-127.0.0.1}"
TOXIPROXY_PORT="${TOXIPROXY_PORT:-8474}"
TOXIPROXY_START_TIMEOUT="${TOXIPROXY_START_TIMEOUT:-15}"

PODMAN_START_TIMEOUT="${PODMAN_START_TIMEOUT:-30}"
DOCKER_START_TIMEOUT="${DOCKER_START_TIMEOUT:-60}"
DOCKER_STORAGE_DRIVER="${DOCKER_STORAGE_DRIVER:-overlay2}"
STOP_TIMEOUT="${OW_STOP_TIMEOUT:-30}"

if [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }
IMAGES_FAILED=4 # the engine started but its images could not be made
die_images() { printf '[services] ERROR: %s\n' "$*" >&2; exit "$IMAGES_FAILED"; }

state_dir() { printf '%s/%s' "$STATE_ROOT" "$1"; }
pid_file() { printf '%s/%s.pid' "$(state_dir "$1")" "$1"; }
log_file() { printf '%s/%s.log' "$(state_dir "$1")" "$1"; }

# The PID recorded for SERVICE, if that process is still alive and still ours: its command
# line must mention the service's state dir (guards against a recycled PID).
live_pid() {
    local svc="$1" pf pid
    pf="$(pid_file "$svc")"
    [[ -f "$pf" ]] || return 1
    pid="$(cat "$pf")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(state_dir "$svc")" || return 1
    pid_alive "$pid" || return 1
    printf '%s' "$pid"
}

pid_alive() { # a live process, not a zombie
    [[ -r "/proc/$1/stat" ]] && [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]]
}

show_logs() { # the tail of every log in the service's state dir
    local f
    for f in "$(state_dir "$1")"/*.log; do
        [[ -s "$f" ]] || continue
        log "last lines of $f:"
        tail -n 30 "$f" >&2 || true
    done
}

# wait_ready SERVICE TIMEOUT PROBE-ARGS...: poll the probe until it passes, the process dies,
# or TIMEOUT seconds pass; on failure print the log tail and fail.
wait_ready() {
    local svc="$1" timeout="$2" start now err
    shift 2
    start=$(date +%s%N)
    while true; do
        if err=$("$PY" "$ROOT/scripts/probe.py" "$@" 2>&1); then
            now=$(date +%s%N)
            log "$svc: ready in $(((now - start) / 1000000)) ms (pid $(cat "$(pid_file "$svc")"))"
            return 0
        fi
        if ! pid_alive "$(cat "$(pid_file "$svc")")"; then
            log "$svc: the process exited during start-up"
            show_logs "$svc"
            exit 1
        fi
        now=$(date +%s%N)
        if (((now - start) / 1000000000 >= timeout)); then
            log "$svc: not ready after ${timeout} s ($err)"
            show_logs "$svc"
            stop_service "$svc" || true
            exit 1
        fi
        sleep 0.2
    done
}

# launch SERVICE CMD...: run CMD in its own session in the background, record its PID.
launch() {
    local svc="$1" sd
    shift
    sd="$(state_dir "$svc")"
    mkdir -p "$sd/tmp"
    : >"$(log_file "$svc")"
    # Not a process-group leader here (no job control), so setsid execs in place: $! is the
    # service's own PID. Its temporary files go below its state dir, not the host's /tmp:
    # dockerd's containerd, say, writes containerd.<pid>.stacks.log to $TMPDIR when dockerd
    # kills it for failing its health check.
    (cd "$sd" && TMPDIR="$sd/tmp" exec setsid "$@" </dev/null >>"$(log_file "$svc")" 2>&1) &
    printf '%s' "$!" >"$(pid_file "$svc")"
}

port_in_use() {
    "$PY" - "$1" "$2" <<'EOF'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
sys.exit(0 if s.connect_ex((sys.argv[1], int(sys.argv[2]))) == 0 else 1)
EOF
}

# ---------------------------------------------------------------------------------------------
start_kafka() {
    local sd lib cid
    sd="$(state_dir kafka)"
    lib="$CACHE/kafka/lib"
    [[ -f "$CACHE/kafka/.installed" ]] || die "kafka is not installed: run scripts/install.sh kafka"
    for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
        port_in_use "$KAFKA_HOST" "$p" && die "kafka: $KAFKA_HOST:$p is already in use"
    done
    mkdir -p "$sd/data"
    local listeners="PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT" tls="" protocol=SSL
    if [[ -n "$KAFKA_TLS_PORT" ]]; then
        [[ -f "$KAFKA_TLS_KEYSTORE" ]] || die "kafka: KAFKA_TLS_KEYSTORE is not a file"
        port_in_use "$KAFKA_HOST" "$KAFKA_TLS_PORT" && die "kafka: $KAFKA_TLS_PORT is in use"
        [[ -n "$KAFKA_SASL_USER" ]] && protocol=SASL_SSL
        listeners+=",$protocol://$KAFKA_HOST:$KAFKA_TLS_PORT"
        tls="ssl.keystore.type=PEM
ssl.keystore.location=$KAFKA_TLS_KEYSTORE
ssl.client.auth=none"
        if [[ -n "$KAFKA_SASL_USER" ]]; then
            tls+="
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USER=\"$KAFKA_SASL_PASSWORD\";"
        fi
    fi
    local advertised="$listeners"
    if [[ -n "$KAFKA_PROXIED_PORT" ]]; then
        [[ -n "$KAFKA_PROXIED_ADVERTISED" ]] || die "kafka: KAFKA_PROXIED_PORT needs KAFKA_PROXIED_ADVERTISED"
        port_in_use "$KAFKA_HOST" "$KAFKA_PROXIED_PORT" && die "kafka: $KAFKA_PROXIED_PORT is in use"
        listeners+=",PROXIED://$KAFKA_HOST:$KAFKA_PROXIED_PORT"
        advertised+=",PROXIED://$KAFKA_PROXIED_ADVERTISED"
    fi
    cat >"$sd/server.properties" <<EOF
# Written by scripts/services.sh on each start: single-node KRaft broker+controller.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@${KAFKA_CONTROLLER_VIA:-$KAFKA_HOST:$KAFKA_CONTROLLER_PORT}
broker.session.timeout.ms=$KAFKA_BROKER_SESSION_TIMEOUT_MS
broker.heartbeat.interval.ms=$((KAFKA_BROKER_SESSION_TIMEOUT_MS * 2 / 9))
listeners=$listeners,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
$tls
log.dirs=$sd/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=500
message.max.bytes=$KAFKA_MESSAGE_MAX_BYTES
replica.fetch.max.bytes=$KAFKA_MESSAGE_MAX_BYTES
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=8388608
log.segment.bytes=67108864
log.retention.hours=24
EOF
    cat >"$sd/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $sd/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
    # shellcheck disable=SC2206
    local java=(java $KAFKA_HEAP $KAFKA_JVM_OPTS -Djava.awt.headless=true
        "-Dlog4j2.configurationFile=$sd/log4j2.properties" "-Dkafka.logs.dir=$sd"
        -cp "$lib/*")
    if [[ ! -f "$sd/data/meta.properties" ]]; then
        # A random id (as kafka-storage random-uuid makes), never starting with "-": the
        # storage tool would read such an id as an option (1 start in 64 failed that way).
        cid=$("$PY" -c 'import base64,uuid
while (c := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(c)')
        log "kafka: formatting KRaft storage in $sd/data (cluster id $cid)"
        "${java[@]}" kafka.tools.StorageTool format -t "$cid" -c "$sd/server.properties" \
            >"$sd/format.log" 2>&1 || { cat "$sd/format.log" >&2; die "kafka: storage format failed"; }
    fi
    log "kafka: starting on $KAFKA_HOST:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT), state $sd"
    launch kafka "${java[@]}" kafka.Kafka "$sd/server.properties"
    # kafka.log gets the JVM's stdout/stderr; the broker's own log is server.log beside it.
    wait_ready kafka "$KAFKA_START_TIMEOUT" kafka "$KAFKA_HOST:$KAFKA_PORT"
}

# ---------------------------------------------------------------------------------------------
start_couchdb() {
    local sd bin
    sd="$(state_dir couchdb)"
    bin="$CACHE/pouchdb/node_modules/.bin/pouchdb-server"
    [[ -x "$bin" ]] || die "couchdb (pouchdb-server) is not installed: run scripts/install.sh couchdb"
    port_in_use "$COUCHDB_HOST" "$COUCHDB_PORT" && die "couchdb: $COUCHDB_HOST:$COUCHDB_PORT is already in use"
    mkdir -p "$sd/data"
    # Written fresh before each start: the server rewrites it (hashing the password).
    "$PY" - "$sd" "$COUCHDB_HOST" "$COUCHDB_PORT" "$COUCHDB_USER" "$COUCHDB_PASSWORD" <<'EOF'
import json, sys
sd, host, port, user, password = sys.argv[1:6]
config = {
    "admins": {user: password},
    "httpd": {"bind_address": host, "port": int(port)},
    "couchdb": {"database_dir": sd + "/data/"},
    "log": {"file": sd + "/pouchdb.log", "level": "warning"},
}
with open(sd + "/config.json", "w") as f:
    json.dump(config, f, indent=2)
EOF
    log "couchdb: starting pouchdb-server on $COUCHDB_HOST:$COUCHDB_PORT, data in $sd/data"
    launch couchdb node "$(readlink -f "$bin")" --host "$COUCHDB_HOST" --port "$COUCHDB_PORT" \
        --dir "$sd/data/" --config "$sd/config.json" -n
    wait_ready couchdb "$COUCHDB_START_TIMEOUT" couchdb \
        "http://$COUCHDB_HOST:$COUCHDB_PORT" "$COUCHDB_USER" "$COUCHDB_PASSWORD"
}

# ---------------------------------------------------------------------------------------------
# etcd (Debian's etcd-server 3.4): a single-member cluster, its client port (v3 gRPC and the
# JSON gateway /v3/...) and peer port on ETCD_HOST only, its data in the state dir.
start_etcd() {
    local sd client peer
    sd="$(state_dir etcd)"
    command -v etcd >/dev/null || die "etcd is not installed: run scripts/install.sh etcd"
    for p in "$ETCD_PORT" "$ETCD_PEER_PORT"; do
        port_in_use "$ETCD_HOST" "$p" && die "etcd: $ETCD_HOST:$p is already in use"
    done
    mkdir -p "$sd/data"
    chmod 700 "$sd/data" # etcd warns about (and 3.5 refuses) a data dir others can read
    client="http://$ETCD_HOST:$ETCD_PORT"
    peer="http://$ETCD_HOST:$ETCD_PEER_PORT"
    log "etcd: starting on $client (peer $peer), data in $sd/data"
    launch etcd etcd --name ow --data-dir "$sd/data" \
        --listen-client-urls "$client" --advertise-client-urls "$client" \
        --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
        --initial-cluster "ow=$peer" --initial-cluster-state new \
        --logger zap --log-outputs stderr
    wait_ready etcd "$ETCD_START_TIMEOUT" etcd "$client"
}

# ---------------------------------------------------------------------------------------------
# Toxiproxy: a TCP proxy whose faults (latency, cuts, half-open links, throttling) are set
# through its HTTP API on TOXIPROXY_PORT; the proxies themselves are created by its clients.
start_toxiproxy() {
    local sd bin
    sd="$(state_dir toxiproxy)"
    bin="$CACHE/toxiproxy/bin/toxiproxy-server"
    [[ -x "$bin" ]] || die "toxiproxy is not installed: run scripts/install.sh toxiproxy"
    port_in_use "$TOXIPROXY_HOST" "$TOXIPROXY_PORT" && die "toxiproxy: $TOXIPROXY_HOST:$TOXIPROXY_PORT is already in use"
    mkdir -p "$sd"
    printf '[]\n' >"$sd/proxies.json" # none at start (and the state dir on its command line)
    log "toxiproxy: starting its API on $TOXIPROXY_HOST:$TOXIPROXY_PORT"
    LOG_LEVEL="${TOXIPROXY_LOG_LEVEL:-info}" launch toxiproxy "$bin" -host "$TOXIPROXY_HOST" \
        -port "$TOXIPROXY_PORT" -config "$sd/proxies.json"
    wait_ready toxiproxy "$TOXIPROXY_START_TIMEOUT" toxiproxy "http://$TOXIPROXY_HOST:$TOXIPROXY_PORT"
}

# ---------------------------------------------------------------------------------------------
start_podman() {
    local sd conf
    sd="$(state_dir podman)"
    conf="$CACHE/podman/containers.conf"
    command -v podman >/dev/null || die "podman is not installed: run scripts/install.sh podman"
    [[ -f "$conf" ]] || die "$conf is missing: run scripts/install.sh podman"
    mkdir -p "$sd"
    rm -f "$sd/podman.sock"
    export CONTAINERS_CONF="$conf"
    # Rules left by removed containers would forward some new containers' ports to nowhere.
    if [[ "$(id -u)" == 0 ]] && command -v iptables >/dev/null; then
        "$PY" "$ROOT/scripts/podman_cni_gc.py" || log "podman: stale CNI state not cleaned"
    fi
    # What it adds to the host on first use (its CNI networking's bridge, /run/netns bound onto
    # itself; the cgroupfs manager's libpod_parent cgroups), noted when this start finds it
    # absent: stop_podman_leftovers removes it.
    : >"$sd/host-adds"
    [[ -e /sys/class/net/cni-podman0 ]] || echo bridge >>"$sd/host-adds"
    mountpoint -q /run/netns || echo netns-mount >>"$sd/host-adds"
    [[ -n "$(podman_cgroups)" ]] || echo cgroups >>"$sd/host-adds"
    log "podman: starting the Docker-compatible API on unix://$sd/podman.sock"
    launch podman podman system service --time=0 "unix://$sd/podman.sock"
    wait_ready podman "$PODMAN_START_TIMEOUT" podman "$sd/podman.sock"
}

# ---------------------------------------------------------------------------------------------
# Docker Engine (Debian's docker.io) as root on the project's own socket, data root and exec
# root, with no iptables rules, no NAT and no default bridge: containers use host networking
# (a loopback port each) or a network a caller creates. overlay2, falling back to vfs where the
# data root cannot hold overlay mounts. Then the busybox base image is imported and the runtime
# images are built in it (scripts/images.sh, scripts/runtime-images.sh; kept across restarts,
# rebuilt when the runtimes change).
docker_paths() { # the socket and the longest path dockerd's managed containerd puts below sd
    local sd
    sd="$(state_dir docker)"
    printf '%s/docker.sock %s/exec/containerd/containerd-debug.sock\n' "$sd" "$sd"
}

start_docker() {
    local sd sock longest driver
    sd="$(state_dir docker)"
    command -v dockerd >/dev/null || die "dockerd is not installed: run scripts/install.sh docker"
    [[ "$(id -u)" == 0 ]] || die "docker: dockerd runs as root"
    read -r sock longest < <(docker_paths)
    # A unix socket path has at most 107 bytes (sun_path); containerd's lie deepest.
    ((${#longest} <= 100)) || die "docker: state dir $sd is too long for unix sockets (${#longest} > 100 bytes): set OW_STATE_DIR to a shorter path"
    mkdir -p "$sd/data" "$sd/exec"
    rm -f "$sock"
    for driver in "$DOCKER_STORAGE_DRIVER" vfs; do
        log "docker: starting dockerd ($driver) on unix://$sock, data in $sd/data"
        launch docker dockerd -H "unix://$sock" --data-root "$sd/data" --exec-root "$sd/exec" \
            --pidfile "$sd/dockerd.pid" --iptables=false --ip-masq=false --bridge=none \
            --storage-driver="$driver"
        if docker_wait "$sock"; then
            break
        fi
        [[ "$driver" != vfs ]] || { show_logs docker; die "docker: dockerd did not start"; }
        log "docker: dockerd failed with $driver; trying vfs (copies each image per container)"
        stop_service docker >/dev/null 2>&1 || true
    done
    # dockerd runs: a failure from here on is the images', not the machine's (exit 4).
    DOCKER_HOST="unix://$sock" OW_ENGINE=docker "$ROOT/scripts/images.sh" \
        || die_images "docker: importing the busybox image failed"
    DOCKER_HOST="unix://$sock" OW_ENGINE=docker "$ROOT/scripts/runtime-images.sh" \
        || die_images "docker: building the runtime images failed"
}

docker_wait() { # until /_ping answers (0), or dockerd exits or the timeout passes (1)
    local sock="$1" start now err
    start=$(date +%s%N)
    while true; do
        # The Engine API's /_ping, the same probe as Podman's service.
        if err=$("$PY" "$ROOT/scripts/probe.py" podman "$sock" 2>&1); then
            now=$(date +%s%N)
            log "docker: ready in $(((now - start) / 1000000)) ms (pid $(cat "$(pid_file docker)"))"
            return 0
        fi
        pid_alive "$(cat "$(pid_file docker)")" || { tail -n 5 "$(log_file docker)" >&2; return 1; }
        now=$(date +%s%N)
        if (((now - start) / 1000000000 >= DOCKER_START_TIMEOUT)); then
            log "docker: not ready after ${DOCKER_START_TIMEOUT} s ($err)"
            return 1
        fi
        sleep 0.2
    done
}

# dockerd's own containerd (a child it starts) and the containers' shims outlive a SIGKILL of
# dockerd: end the containers (each shim's children: their PID-namespace inits) and the shims
# that name our exec root, then containerd by the PID it recorded, if it still names it too.
stop_docker_leftovers() {
    local sd pf pid shim child
    sd="$(state_dir docker)"
    for shim in /proc/[0-9]*; do
        shim="${shim#/proc/}"
        { tr '\0' ' ' <"/proc/$shim/cmdline"; } 2>/dev/null | grep -q "containerd-shim.* $sd/exec/" || continue
        for child in $(cat /proc/"$shim"/task/*/children 2>/dev/null); do
            kill -KILL "$child" 2>/dev/null || true
        done
        log "docker: ending a container shim left behind (pid $shim)"
        kill -KILL "$shim" 2>/dev/null || true
    done
    pf="$sd/exec/containerd/containerd.pid"
    if [[ -f "$pf" ]] && pid="$(cat "$pf")" && [[ "$pid" =~ ^[0-9]+$ ]] && pid_alive "$pid" \
        && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$sd/exec"; then
        log "docker: stopping its containerd (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do pid_alive "$pid" || break; sleep 0.1; done
        pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$sd/docker.sock" "$sd/dockerd.pid"
    # Mounts a killed daemon left (overlay layers, the netns of host-less containers).
    grep -F " $sd/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}

# The cgroups Podman's cgroupfs manager makes for its containers' parent and conmon, in every
# hierarchy (v1) or the unified one, deepest first.
podman_cgroups() {
    find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -depth -type d -path '*/libpod_parent*' 2>/dev/null
}

# What Podman added to the host while the service ran, when the service's start found it
# absent (no test may leave the host otherwise): its bridge once no container uses it, the
# /run/netns mount once it holds no namespace, the libpod_parent cgroups once they are empty
# (rmdir of a cgroup that holds a process fails, and it is left).
stop_podman_leftovers() {
    local adds
    adds="$(state_dir podman)/host-adds"
    [[ -f "$adds" && "$(id -u)" == 0 ]] || return 0
    if grep -qx bridge "$adds" && [[ -e /sys/class/net/cni-podman0 ]] \
        && [[ -z "$(ls /sys/class/net/cni-podman0/brif 2>/dev/null)" ]]; then
        ip link del cni-podman0 2>/dev/null && log "podman: removed the cni-podman0 bridge it made" \
            || true
    fi
    if grep -qx netns-mount "$adds" && mountpoint -q /run/netns \
        && [[ -z "$(ls -A /run/netns 2>/dev/null)" ]]; then
        umount /run/netns 2>/dev/null && rmdir /run/netns 2>/dev/null \
            && log "podman: removed the /run/netns mount it made" || true
    fi
    if grep -qx cgroups "$adds"; then
        local cg left=0
        while read -r cg; do
            rmdir "$cg" 2>/dev/null || left=1
        done < <(podman_cgroups)
        ((left)) && log "podman: some libpod_parent cgroups still hold processes: left" \
            || log "podman: removed the libpod_parent cgroups it made"
    fi
    rm -f "$adds"
}

# ---------------------------------------------------------------------------------------------
start_service() {
    local svc="$1" pid
    if pid=$(live_pid "$svc"); then
        log "$svc: already running (pid $pid)"
        return 0
    fi
    rm -f "$(pid_file "$svc")"
    "start_$svc"
}

stop_service() {
    local svc="$1" pid waited=0
    if ! pid=$(live_pid "$svc"); then
        rm -f "$(pid_file "$svc")"
        log "$svc: not running"
        return 0
    fi
    log "$svc: stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    while live_pid "$svc" >/dev/null; do
        if ((waited >= STOP_TIMEOUT * 10)); then
            log "$svc: pid $pid still alive after ${STOP_TIMEOUT} s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$(pid_file "$svc")"
    [[ "$svc" != podman ]] || { rm -f "$(state_dir podman)/podman.sock"; stop_podman_leftovers; }
    [[ "$svc" != docker ]] || stop_docker_leftovers
    log "$svc: stopped after $((waited / 10)).$((waited % 10)) s"
}

kill_service() { # crash it: SIGKILL, no clean shutdown (for fault tests)
    local svc="$1" pid waited=0
    if ! pid=$(live_pid "$svc"); then
        rm -f "$(pid_file "$svc")"
        log "$svc: not running"
        return 0
    fi
    log "$svc: killing pid $pid (SIGKILL)"
    kill -KILL "$pid" 2>/dev/null || true
    while live_pid "$svc" >/dev/null && ((waited < 100)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$(pid_file "$svc")"
    [[ "$svc" != podman ]] || rm -f "$(state_dir podman)/podman.sock"
    [[ "$svc" != docker ]] || stop_docker_leftovers
}

freeze_service() { # stall it: SIGSTOP, process and connections kept (for fault tests)
    local svc="$1" pid
    pid=$(live_pid "$svc") || die "$svc: not running"
    log "$svc: freezing pid $pid (SIGSTOP; 'thaw' resumes it)"
    kill -STOP "$pid"
    # kill returns once the signal is sent; return once every thread has stopped, so that a
    # test's fault is in effect (a suite run once saw a frozen etcd answer).
    for _ in $(seq 100); do
        all_stopped "$pid" && return 0
        sleep 0.05
    done
    die "$svc: pid $pid has threads not stopped 5 s after SIGSTOP"
}

all_stopped() { # no thread of process $1 runs: each stopped (T, t) or exited (Z)
    local stat rest
    for stat in /proc/"$1"/task/*/stat; do
        rest="$(<"$stat")" || return 1
        rest="${rest##*) }" # past the command name, which may hold spaces and parentheses
        [[ "${rest%% *}" == [TtZ] ]] || return 1
    done
}

thaw_service() {
    local svc="$1" pid
    pid=$(live_pid "$svc") || die "$svc: not running"
    log "$svc: thawing pid $pid (SIGCONT)"
    kill -CONT "$pid"
}

status_service() {
    local svc="$1" pid
    if pid=$(live_pid "$svc"); then
        echo "$svc: running (pid $pid), state $(state_dir "$svc")"
    else
        echo "$svc: stopped"
        return 3
    fi
}

clean_service() {
    stop_service "$1"
    [[ "$1" != docker ]] || stop_docker_leftovers
    log "$1: removing $(state_dir "$1")"
    rm -rf "$(state_dir "$1")"
}

main() {
    (($# >= 2)) || { sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 2; }
    local action="$1" rc=0
    shift
    local svcs=()
    for s in "$@"; do
        case "$s" in
            all) svcs+=(kafka couchdb etcd toxiproxy podman docker) ;;
            kafka | couchdb | etcd | toxiproxy | podman | docker) svcs+=("$s") ;;
            *) die "unknown service '$s' (kafka couchdb etcd toxiproxy podman docker all)" ;;
        esac
    done
    for s in "${svcs[@]}"; do
        case "$action" in
            start) start_service "$s" ;;
            stop) stop_service "$s" ;;
            restart) stop_service "$s" && start_service "$s" ;;
            kill) kill_service "$s" ;;
            freeze) freeze_service "$s" ;;
            thaw) thaw_service "$s" ;;
            status) status_service "$s" || rc=3 ;;
            clean) clean_service "$s" ;;
            *) die "unknown action '$action' (start stop status restart kill freeze thaw clean)" ;;
        esac
    done
    return "$rc"
}

main "$@"
