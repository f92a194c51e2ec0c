#!/usr/bin/env bash
# Install the real services and tools the tests and a local run need, cached under .cache/.
#
#   scripts/install.sh [core|console|python|kafka|couchdb|etcd|toxiproxy|podman|docker|images|wsk|aio|openwhisk-js|serverless|browser|all]...
#
# core: the package alone and the sandbox's system packages (what `scripts/run.sh` needs);
# sandbox: slirp4netns and libseccomp (Debian) for the process backend's sandbox; console: the live console's chart
# library (npm, front/console/package-lock.json) in .cache/console; python: with the test, gpu
# (torch) and experiments extras; docker: Debian's Docker Engine (docker.io), started by
# services.sh; aio: the Adobe I/O Runtime CLI plugin, an OpenWhisk CLI written by others that
# the tests drive when `wsk` cannot be built (the Go proxy refuses openwhisk-cli); browser:
# Debian's chromium and playwright-core (no browser download), for the console's browser test;
# serverless: the Serverless Framework v3 and its serverless-openwhisk plugin (npm), a client;
# toxiproxy: Shopify's TCP fault proxy, built from the Go module proxy (the chaos tests);
# etcd: Debian's etcd-server (etcd 3.4, the scheduler mode's registry), started by services.sh.
#
# Idempotent: each component writes a stamp when it is complete and is skipped when its stamp
# matches. Remove .cache/<component> (or set OW_FORCE_INSTALL=1) to reinstall. See docs/services.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
VENV="${OW_VENV:-$ROOT/.venv}"
PYTHON_BIN="${OW_PYTHON:-python3}"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_SCALA="${KAFKA_SCALA:-2.13}"
POUCHDB_SERVER_VERSION="${POUCHDB_SERVER_VERSION:-4.2.0}"
OPENWHISK_JS_VERSION="${OPENWHISK_JS_VERSION:-3}"
AIO_RUNTIME_VERSION="${AIO_RUNTIME_VERSION:-8}"
# v4 of the Serverless Framework needs a login and a licence key; v3 runs offline.
SERVERLESS_VERSION="${SERVERLESS_VERSION:-3}"
SERVERLESS_OPENWHISK_VERSION="${SERVERLESS_OPENWHISK_VERSION:-0.18}"
PLAYWRIGHT_CORE_VERSION="${PLAYWRIGHT_CORE_VERSION:-1.65.1}"
# github.com/apache/openwhisk-cli has no semver tags; this is the pseudo-version of its newest
# commit (23f3cf7, 2024-09-24). Override with WSK_CLI_VERSION.
WSK_CLI_VERSION="${WSK_CLI_VERSION:-v0.0.0-20240924142310-23f3cf73b812}"
TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-v2.5.0}"

log() { printf '[install] %s\n' "$*" >&2; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }

# stamp_ok DIR VALUE: the component in DIR was completely installed with VALUE.
stamp_ok() {
    [[ "${OW_FORCE_INSTALL:-0}" != 1 && -f "$1/.installed" && "$(cat "$1/.installed")" == "$2" ]]
}
stamp_write() { printf '%s' "$2" >"$1/.installed"; }

timed() { # timed NAME FUNC...: run FUNC, report how long it took, pass on its exit status
    local name="$1" start rc=0
    shift
    start=$(date +%s)
    "$@" || rc=$?
    if ((rc == 0)); then
        log "$name: done in $(($(date +%s) - start)) s"
    elif ((rc == 3)); then
        log "$name: unavailable on this machine"
    else
        log "$name: FAILED (exit $rc) after $(($(date +%s) - start)) s"
    fi
    return "$rc"
}

# ---------------------------------------------------------------------------------------------
install_python() {
    local stamp_value
    stamp_value="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
    if [[ "${OW_FORCE_INSTALL:-0}" != 1 && -f "$VENV/.ow-installed" ]] \
        && [[ "$(cat "$VENV/.ow-installed")" == "$stamp_value" ]] \
        && [[ -x "$VENV/bin/python" ]]; then
        log "python: up to date ($VENV)"
        return
    fi
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "python: creating $VENV"
        "$PYTHON_BIN" -m venv "$VENV" || die "python: venv creation failed"
    fi
    local pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
    # A local CPU-only torch wheel (some machines carry one in pip's find-links folder) saves
    # the ~3 GB CUDA build and its nvidia-* wheels; PyPI's torch needs those wheels even to
    # import on a CPU-only machine (checked: --no-deps fails with "libcublasLt.so not found").
    local links="${PIP_FIND_LINKS:-/opt/wheels}" cpu_wheel=""
    if [[ -d "$links" ]]; then
        cpu_wheel=$(find "$links" -maxdepth 1 -name 'torch-*+cpu-cp311-*.whl' | sort -V | tail -1)
    fi
    if [[ -n "$cpu_wheel" ]] && ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
        log "python: local CPU torch wheel $(basename "$cpu_wheel")"
        "${pip[@]}" "$cpu_wheel" || die "python: installing $cpu_wheel failed"
    fi
    log "python: pip install -e .[test,gpu,experiments,sebs] (torch from PyPI is ~3 GB the first time)"
    "${pip[@]}" -e "$ROOT[test,gpu,experiments,sebs]" || die "python: pip install failed"
    # The SeBS benchmarks' code and inputs, as data: its own requirements are not needed.
    "${pip[@]}" --no-deps "serverless-benchmarks==1.2.0" \
        || die "python: pip install serverless-benchmarks failed"
    "$VENV/bin/python" - <<'EOF2' || die "python: torch does not run a small model on the CPU"
import torch

m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
with torch.no_grad():
    assert m(torch.randn(3, 8)).shape == (3, 2)
print("[install] python: torch", torch.__version__, "runs a small model on the CPU")
EOF2
    printf '%s' "$stamp_value" >"$VENV/.ow-installed"
}

# ---------------------------------------------------------------------------------------------
install_kafka() {
    local dir="$CACHE/kafka" want="kafka_${KAFKA_SCALA}-${KAFKA_VERSION}"
    if stamp_ok "$dir" "$want"; then
        log "kafka: $want already in $dir/lib"
        return
    fi
    command -v mvn >/dev/null || die "kafka: mvn not found (apt-get install -y maven)"
    command -v java >/dev/null || die "kafka: java not found (apt-get install -y openjdk-17-jre-headless)"
    rm -rf "$dir"
    mkdir -p "$dir"
    # kafka_2.13 brings the broker, KRaft (kafka.tools.StorageTool) and the raft/metadata/server
    # modules; kafka-tools the command-line tools; log4j-core + the slf4j binding send the
    # broker's logs to the file named by the log4j2 config that services.sh writes.
    cat >"$dir/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ow-invoker</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_${KAFKA_SCALA}</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>${KAFKA_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>2.24.3</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
    log "kafka: fetching $want and its runtime dependencies from Maven Central"
    # Maven's JVM keeps no perf data: else it leaves /tmp/hsperfdata_<user> behind.
    if ! (cd "$dir" && MAVEN_OPTS="${MAVEN_OPTS:-} -XX:-UsePerfData" mvn -B -Dstyle.color=never dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$dir/lib") >"$dir/mvn.log" 2>&1; then
        tail -n 30 "$dir/mvn.log" >&2
        die "kafka: mvn dependency:copy-dependencies failed (log: $dir/mvn.log)"
    fi
    # Kafka uses slf4j 1.7 (log4j-slf4j-impl is its binding). Drop other bindings a transitive dependency may bring (only one may be present).
    find "$dir/lib" -name 'slf4j-reload4j-*.jar' -o -name 'slf4j-log4j12-*.jar' \
        -o -name 'logback-classic-*.jar' | xargs -r rm -f
    ls "$dir/lib"/kafka_"${KAFKA_SCALA}"-"${KAFKA_VERSION}".jar >/dev/null \
        || die "kafka: broker jar missing after download"
    log "kafka: $(find "$dir/lib" -name '*.jar' | wc -l) jars, $(du -sh "$dir/lib" | cut -f1)"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
install_couchdb() {
    local dir="$CACHE/pouchdb" want="pouchdb-server@$POUCHDB_SERVER_VERSION"
    if stamp_ok "$dir" "$want" && [[ -x "$dir/node_modules/.bin/pouchdb-server" ]]; then
        log "couchdb: $want already in $dir"
        return
    fi
    command -v npm >/dev/null || die "couchdb: npm not found"
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || printf '{"name":"ow-pouchdb","private":true}\n' >"$dir/package.json"
    log "couchdb: npm install $want (builds leveldown from source; about a minute)"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$want") \
        || die "couchdb: npm install $want failed"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
write_containers_conf() {
    local dir="$CACHE/podman"
    mkdir -p "$dir"
    # cgroup v1 without CAP_SYS_RESOURCE: crun fails, runc works with explicit ulimits.
    cat >"$dir/containers.conf" <<'EOF'
# Written by scripts/install.sh podman; exported as CONTAINERS_CONF by scripts/services.sh.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
}

install_podman() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    [[ -x /bin/busybox ]] && dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
    if ((${#missing[@]})); then
        [[ "$(id -u)" == 0 ]] || die "podman: need root to apt-get install ${missing[*]}"
        log "podman: apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=300 update -qq
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
            podman runc busybox-static \
            uidmap slirp4netns fuse-overlayfs iptables >/dev/null \
            || die "podman: apt-get install failed"
    else
        log "podman: podman, runc and busybox-static already installed"
    fi
    write_containers_conf
    "$ROOT/scripts/images.sh"
}

# ---------------------------------------------------------------------------------------------
# Debian's Docker Engine (dockerd 20.10 + containerd + runc). Only the packages: the daemon is
# started by `scripts/services.sh start docker` on the project's own socket and paths, never as
# the system's service. A newer static `docker` client in /usr/local/bin may stay: it talks to
# any dockerd through DOCKER_HOST. The images are built by services.sh once dockerd runs.
install_docker() {
    local dir="$CACHE/docker" have
    mkdir -p "$dir"
    have="$(dpkg-query -W -f '${Version}' docker.io 2>/dev/null || true)"
    # debootstrap: the invoker image's base where Docker Hub is out of reach (invoker-image.sh)
    if [[ -n "$have" ]] && command -v dockerd >/dev/null && [[ -x /bin/busybox ]] \
        && command -v debootstrap >/dev/null && stamp_ok "$dir" "docker.io@$have"; then
        log "docker: docker.io $have already installed"
        return
    fi
    if [[ -z "$have" ]] || ! command -v dockerd >/dev/null || [[ ! -x /bin/busybox ]] \
        || ! command -v debootstrap >/dev/null; then
        [[ "$(id -u)" == 0 ]] || die "docker: need root to apt-get install docker.io busybox-static debootstrap"
        log "docker: apt-get install docker.io busybox-static debootstrap"
        export DEBIAN_FRONTEND=noninteractive
        # Another apt (the podman component, another session) may hold the lock: wait for it.
        apt-get -o DPkg::Lock::Timeout=300 update -qq
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
            docker.io busybox-static debootstrap >/dev/null \
            || die "docker: apt-get install docker.io failed"
        have="$(dpkg-query -W -f '${Version}' docker.io)"
    fi
    dockerd --version >&2 || die "docker: dockerd does not run"
    stamp_write "$dir" "docker.io@$have"
}

# ---------------------------------------------------------------------------------------------
# Debian's etcd-server (etcd 3.4, what a stock scheduler ("FPC") deployment runs): only the
# package; the server is started by `scripts/services.sh start etcd` on the project's ports and
# state dir, never as the system's service (here policy-rc.d keeps apt from starting that one;
# where apt does start it, it holds etcd's default ports 2379/2380, not the tests').
install_etcd() {
    local dir="$CACHE/etcd" have
    mkdir -p "$dir"
    have="$(dpkg-query -W -f '${Version}' etcd-server 2>/dev/null || true)"
    if [[ -n "$have" ]] && command -v etcd >/dev/null && stamp_ok "$dir" "etcd-server@$have"; then
        log "etcd: etcd-server $have already installed"
        return
    fi
    if [[ -z "$have" ]] || ! command -v etcd >/dev/null; then
        [[ "$(id -u)" == 0 ]] || die "etcd: need root to apt-get install etcd-server"
        log "etcd: apt-get install etcd-server"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=300 update -qq
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
            etcd-server >/dev/null || die "etcd: apt-get install etcd-server failed"
        have="$(dpkg-query -W -f '${Version}' etcd-server)"
    fi
    etcd --version >&2 || die "etcd: etcd does not run"
    stamp_write "$dir" "etcd-server@$have"
}

# ---------------------------------------------------------------------------------------------
install_wsk() {
    local dir="$CACHE/bin" want="openwhisk-cli@$WSK_CLI_VERSION"
    local marker="$CACHE/wsk"
    mkdir -p "$dir" "$marker"
    if stamp_ok "$marker" "$want" && [[ -x "$dir/wsk" ]]; then
        log "wsk: $want already at $dir/wsk"
        return
    fi
    command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
    command -v go >/dev/null || die "wsk: go not found"
    rm -f "$marker/UNAVAILABLE"
    log "wsk: go install github.com/apache/openwhisk-cli@$WSK_CLI_VERSION"
    local out
    if out=$(GOBIN="$dir" GOFLAGS="${GOFLAGS:-} -mod=mod" \
        go install "github.com/apache/openwhisk-cli@$WSK_CLI_VERSION" 2>&1); then
        ln -sf openwhisk-cli "$dir/wsk"
        "$dir/wsk" --help >/dev/null || die "wsk: the built binary does not run"
        stamp_write "$marker" "$want"
        return
    fi
    printf '%s\n' "$out" | tail -5 >&2
    {
        echo "go install github.com/apache/openwhisk-cli@$WSK_CLI_VERSION failed on $(date -u +%FT%TZ):"
        printf '%s\n' "$out" | tail -5
    } >"$marker/UNAVAILABLE"
    log "wsk: NOT AVAILABLE (reason in $marker/UNAVAILABLE); set WSK_BIN to an existing wsk binary"
    return 3
}

# Toxiproxy's server, the fault proxy between the invoker and its services in the chaos tests
# (driven through its HTTP API; started by services.sh).
install_toxiproxy() {
    local dir="$CACHE/toxiproxy" want="toxiproxy@$TOXIPROXY_VERSION"
    mkdir -p "$dir/bin"
    if stamp_ok "$dir" "$want" && [[ -x "$dir/bin/toxiproxy-server" ]]; then
        log "toxiproxy: $want already at $dir/bin/toxiproxy-server"
        return
    fi
    command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
    command -v go >/dev/null || die "toxiproxy: go not found (it is built from the Go module proxy)"
    log "toxiproxy: go install github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
    GOBIN="$dir/bin" GOFLAGS="${GOFLAGS:-} -mod=mod" \
        go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
        || die "toxiproxy: go install failed"
    mv -f "$dir/bin/server" "$dir/bin/toxiproxy-server"
    "$dir/bin/toxiproxy-server" -version >/dev/null || die "toxiproxy: the built server does not run"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
install_openwhisk_js() {
    local dir="$CACHE/node" want="openwhisk@$OPENWHISK_JS_VERSION"
    if stamp_ok "$dir" "$want" && [[ -f "$dir/node_modules/openwhisk/package.json" ]]; then
        log "openwhisk-js: $want already in $dir/node_modules"
        return
    fi
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || printf '{"name":"ow-node-clients","private":true}\n' >"$dir/package.json"
    log "openwhisk-js: npm install $want"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$want") \
        || die "openwhisk-js: npm install $want failed"
    (cd "$dir" && node -e 'require("openwhisk")') || die "openwhisk-js: require('openwhisk') fails"
    stamp_write "$dir" "$want"
}

install_core() {
    if [[ -x "$VENV/bin/ow-invoker" ]] && "$VENV/bin/python" -c 'import aiokafka, aiohttp, orjson' 2>/dev/null; then
        log "core: ow-invoker already installed in $VENV"
        return
    fi
    [[ -x "$VENV/bin/python" ]] || "$PYTHON_BIN" -m venv "$VENV" || die "core: venv creation failed"
    log "core: pip install -e . into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT" \
        || die "core: pip install failed"
}

# The process backend's sandbox: slirp4netns (user-mode NAT for actions' outbound network),
# libseccomp (the syscall filter, through pyseccomp) and uidmap (newuidmap/newgidmap, for a
# non-root invoker's user namespaces), from Debian.
install_sandbox() {
    local missing=()
    command -v slirp4netns >/dev/null || missing+=(slirp4netns)
    command -v newuidmap >/dev/null || missing+=(uidmap) # sandboxes of a non-root invoker
    ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
    if ((${#missing[@]} == 0)); then
        log "sandbox: slirp4netns, libseccomp and uidmap present"
        return
    fi
    [[ "$(id -u)" == 0 ]] || die "sandbox: need root to apt-get install ${missing[*]}"
    log "sandbox: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" \
        >/dev/null 2>&1 || {
        apt-get -o DPkg::Lock::Timeout=300 update -qq
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    } || die "sandbox: apt-get install ${missing[*]} failed"
}

install_aio() {
    local dir="$CACHE/aio" want="@adobe/aio-cli-plugin-runtime@$AIO_RUNTIME_VERSION"
    if stamp_ok "$dir" "$want" && [[ -d "$dir/node_modules/@adobe/aio-cli-plugin-runtime" ]]; then
        log "aio: $want already in $dir/node_modules"
        return
    fi
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || printf '{"name":"ow-aio-cli","private":true}\n' >"$dir/package.json"
    log "aio: npm install $want"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$want") \
        || die "aio: npm install $want failed"
    NODE_PATH="$dir/node_modules" node "$ROOT/scripts/aio-runtime.js" runtime --help >/dev/null \
        || die "aio: the runtime CLI does not start"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
# The Serverless Framework v3 (offline: no login, telemetry off) with the serverless-openwhisk
# provider plugin; a service finds the plugin through a node_modules link to this folder.
install_serverless() {
    local dir="$CACHE/serverless"
    local want="serverless@$SERVERLESS_VERSION serverless-openwhisk@$SERVERLESS_OPENWHISK_VERSION"
    if stamp_ok "$dir" "$want" && [[ -f "$dir/node_modules/serverless/bin/serverless.js" ]] \
        && [[ -f "$dir/node_modules/serverless-openwhisk/package.json" ]]; then
        log "serverless: $want already in $dir/node_modules"
        return
    fi
    command -v npm >/dev/null || die "serverless: npm not found"
    mkdir -p "$dir"
    [[ -f "$dir/package.json" ]] || printf '{"name":"ow-serverless","private":true}\n' >"$dir/package.json"
    log "serverless: npm install $want"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
        "serverless@$SERVERLESS_VERSION" "serverless-openwhisk@$SERVERLESS_OPENWHISK_VERSION") \
        || die "serverless: npm install $want failed"
    local home
    home="$(mktemp -d)"
    (cd "$dir" && SLS_TELEMETRY_DISABLED=1 SLS_NOTIFICATIONS_MODE=off CI=1 HOME="$home" \
        node node_modules/serverless/bin/serverless.js --version >/dev/null) \
        || { rm -rf "$home"; die "serverless: the framework does not start"; }
    rm -rf "$home"
    (cd "$dir" && node -e 'require("serverless-openwhisk")') \
        || die "serverless: require('serverless-openwhisk') fails"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
# The console's front-end libraries (Chart.js), exactly as front/console/package-lock.json
# pins them; the front serves them from .cache/console/node_modules (no CDN is reachable).
install_console() {
    local dir="$CACHE/console" src="$ROOT/front/console" want
    command -v npm >/dev/null || die "console: npm not found (Node.js 20 with npm)"
    want="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)"
    if stamp_ok "$dir" "$want" && [[ -f "$dir/node_modules/chart.js/package.json" ]]; then
        log "console: chart.js already in $dir/node_modules"
        return
    fi
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    log "console: npm ci (chart.js, as front/console/package-lock.json pins it)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || die "console: npm ci failed"
    [[ -f "$dir/node_modules/chart.js/dist/chart.umd.min.js" ]] \
        || die "console: chart.js has no dist/chart.umd.min.js"
    stamp_write "$dir" "$want"
}

# Debian's chromium (apt) and playwright-core (npm; it downloads no browser), which the
# console's end-to-end test drives headless with executablePath /usr/bin/chromium.
install_browser() {
    local dir="$CACHE/browser" have want
    mkdir -p "$dir"
    have="$(dpkg-query -W -f '${Version}' chromium 2>/dev/null || true)"
    want="chromium@$have playwright-core@$PLAYWRIGHT_CORE_VERSION"
    if [[ -n "$have" && -x /usr/bin/chromium ]] && stamp_ok "$dir" "$want" \
        && [[ -f "$dir/node_modules/playwright-core/package.json" ]]; then
        log "browser: chromium $have and playwright-core@$PLAYWRIGHT_CORE_VERSION already installed"
        return
    fi
    if [[ -z "$have" || ! -x /usr/bin/chromium ]]; then
        [[ "$(id -u)" == 0 ]] || die "browser: need root to apt-get install chromium"
        log "browser: apt-get install chromium"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=300 update -qq
        apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
            chromium fonts-dejavu-core >/dev/null || die "browser: apt-get install chromium failed"
        have="$(dpkg-query -W -f '${Version}' chromium)"
        want="chromium@$have playwright-core@$PLAYWRIGHT_CORE_VERSION"
    fi
    /usr/bin/chromium --headless --no-sandbox --disable-gpu --version >&2 \
        || die "browser: chromium does not start"
    command -v npm >/dev/null || die "browser: npm not found"
    [[ -f "$dir/package.json" ]] || printf '{"name":"ow-browser-test","private":true}\n' >"$dir/package.json"
    log "browser: npm install playwright-core@$PLAYWRIGHT_CORE_VERSION"
    (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund \
        --loglevel=error "playwright-core@$PLAYWRIGHT_CORE_VERSION") \
        || die "browser: npm install playwright-core failed"
    stamp_write "$dir" "$want"
}

# ---------------------------------------------------------------------------------------------
main() {
    local comps=("$@")
    ((${#comps[@]})) || comps=(all)
    local expanded=()
    for c in "${comps[@]}"; do
        case "$c" in
            all) expanded+=(sandbox python console kafka couchdb etcd toxiproxy podman docker wsk aio openwhisk-js serverless browser) ;;
            core | sandbox | console | python | kafka | couchdb | etcd | toxiproxy | podman | docker | images | wsk | aio | openwhisk-js | serverless | browser)
                expanded+=("$c")
                ;;
            -h | --help)
                sed -n '2,18p' "${BASH_SOURCE[0]}"
                exit 0
                ;;
            *) die "unknown component '$c' (core sandbox console python kafka couchdb etcd toxiproxy podman docker images wsk aio openwhisk-js serverless browser all)" ;;
        esac
    done
    mkdir -p "$CACHE"
    WSK_OPTIONAL=0
    [[ " ${comps[*]} " == *" all "* ]] && WSK_OPTIONAL=1
    # The npm components (a minute of native build for pouchdb-server's leveldown, the rest
    # network) share nothing with the others: asked for with python, they install beside it,
    # their output shown once they are done, so a fresh machine waits for the longer of the
    # two, not their sum. A failure anywhere still ends the install with an error (set -e).
    local npm=() others=() c
    for c in "${expanded[@]}"; do
        case "$c" in
            console | couchdb | aio | openwhisk-js | serverless | browser) npm+=("$c") ;;
            *) others+=("$c") ;;
        esac
    done
    if ((${#npm[@]})) && [[ " ${others[*]} " == *" python "* ]]; then
        NPM_LOG="$CACHE/install-npm.log"
        (for c in "${npm[@]}"; do install_one "$c"; done) >"$NPM_LOG" 2>&1 &
        NPM_PID=$!
        trap npm_done EXIT # also when a component of the others fails
        for c in "${others[@]}"; do install_one "$c"; done
        npm_done
    else
        for c in "${expanded[@]}"; do install_one "$c"; done
    fi
}

npm_done() { # the npm components' end: their output, their status
    [[ -n "${NPM_PID:-}" ]] || return 0
    local pid="$NPM_PID" rc=0
    NPM_PID=""
    wait "$pid" || rc=$?
    cat "$NPM_LOG" >&2
    rm -f "$NPM_LOG"
    return "$rc"
}

install_one() { # install_one COMPONENT: install it, timed; non-zero when it failed
    case "$1" in
        core) timed sandbox install_sandbox && timed core install_core ;;
        sandbox) timed sandbox install_sandbox ;;
        console) timed console install_console ;;
        browser) timed browser install_browser ;;
        python) timed python install_python ;;
        aio) timed aio install_aio ;;
        serverless) timed serverless install_serverless ;;
        kafka) timed kafka install_kafka ;;
        couchdb) timed couchdb install_couchdb ;;
        etcd) timed etcd install_etcd ;;
        toxiproxy) timed toxiproxy install_toxiproxy ;;
        podman) timed podman install_podman ;;
        docker) timed docker install_docker ;;
        images) timed images "$ROOT/scripts/images.sh" ;;
        openwhisk-js) timed openwhisk-js install_openwhisk_js ;;
        wsk)
            # The Go module proxy may refuse openwhisk-cli (it does on the project's
            # machines): as part of "all" that is a warning, the wsk_cli fixture then skips
            # with the recorded reason; asked for alone it is an error.
            timed wsk install_wsk || ((WSK_OPTIONAL))
            ;;
        *) return 1 ;;
    esac
}

main "$@"
