"""The Docker Engine API calls of the Docker backend, over aiodocker.

One place for the endpoints, their timeouts (the reference invoker's: run/rm/inspect 1 min,
pause/unpause 10 s, pull 10 min) and the errors: every failure surfaces as
:class:`EngineError` whose ``gone`` says the container no longer exists. It also knows the
differences between engines that matter here:

- **CPU updates.** Docker has ``POST /containers/{id}/update`` (``CpusetCpus``,
  ``CpuPeriod``/``CpuQuota``). Podman 4.3's compat API lacks it (404) but its libpod API has
  ``POST /libpod/containers/{id}/update`` taking OCI resources (``{"cpu": {"cpus", "quota",
  "period"}}``). :meth:`Engine.update_cpus` tries them in that order, then each without the
  quota, and keeps the first that works; when none does, CPU updates are skipped (logged once).
- **Podman** (detected from the ``/_ping`` headers) replaces its default ulimits by those a
  create request names, and runc then fails to raise ``nproc`` beyond the service's own
  limit, so :attr:`Engine.is_podman` lets the backend name ``nproc`` as well.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiodocker
import aiohttp

log = logging.getLogger(__name__)

RUN_TIMEOUT_S = 60.0
RM_TIMEOUT_S = 60.0
INSPECT_TIMEOUT_S = 60.0
PAUSE_TIMEOUT_S = 10.0
PULL_TIMEOUT_S = 600.0
CPU_PERIOD_US = 100_000

_GONE_MARKERS = ("no such container", "no container with", "is not running")
UNREACHABLE = (0, 900)  # no answer: ours, and aiodocker's status for connection errors


class EngineError(Exception):
    """A failed engine call; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, what: str, status: int, message: str) -> None:
        super().__init__(f"{what}: {message} ({status})" if status else f"{what}: {message}")
        self.status = status
        self.message = message

    @property
    def gone(self) -> bool:
        text = self.message.lower()
        return any(m in text for m in _GONE_MARKERS)


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None without one; digests count as a tag)."""
    if "@" in image:
        return image.rsplit("@", 1)[1]
    name = image.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[1] if ":" in name else None


class _CpuMethod:
    """One way to change a container's cpuset (and quota) on a running engine."""

    def __init__(self, name: str, path: str, with_quota: bool) -> None:
        self.name, self.path, self.with_quota = name, path, with_quota

    def body(self, cpuset: str, cpus: int) -> dict[str, Any]:
        quota = cpus * CPU_PERIOD_US
        if self.path.startswith("libpod/"):
            cpu: dict[str, Any] = {"cpus": cpuset}
            if self.with_quota:
                cpu |= {"quota": quota, "period": CPU_PERIOD_US}
            return {"cpu": cpu}
        body: dict[str, Any] = {"CpusetCpus": cpuset}
        if self.with_quota:
            body |= {"CpuQuota": quota, "CpuPeriod": CPU_PERIOD_US}
        return body


_CPU_METHODS = (
    _CpuMethod("update+quota", "containers/{id}/update", True),
    _CpuMethod("libpod-update+quota", "libpod/containers/{id}/update", True),
    _CpuMethod("update", "containers/{id}/update", False),
    _CpuMethod("libpod-update", "libpod/containers/{id}/update", False),
)


class Engine:
    """A Docker Engine API endpoint (Docker or Podman's compat service)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url
        self.is_podman = False
        self.version = ""
        self.cpu_method: str | None = None  # chosen on the first update; "none": unsupported
        self._docker: aiodocker.Docker | None = None
        self._cpu: _CpuMethod | None = None
        self._cpu_probe = asyncio.Lock()
        self._connecting = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._docker is not None

    @property
    def docker(self) -> aiodocker.Docker:
        if self._docker is None:
            raise EngineError("engine", 0, "not connected (call start() first)")
        return self._docker

    async def start(self) -> None:
        async with self._connecting:
            if self._docker is None:
                await self._connect()

    async def _connect(self) -> None:
        try:
            self._docker = aiodocker.Docker(url=self.url)
            headers = await self._call("ping", self._ping(self._docker), INSPECT_TIMEOUT_S)
        except BaseException as e:
            await self.close()
            if isinstance(e, (ValueError, AssertionError)):  # aiodocker found no address
                reason = str(e) or "no engine address (set --docker-host or DOCKER_HOST)"
                raise EngineError("connect", 0, reason) from e
            raise
        api = headers.get("Api-Version")
        if api:  # spares aiodocker its own /version call (Podman's takes ~1 s)
            self._docker.api_version = f"v{api}"
        podman = headers.get("Libpod-Api-Version")
        self.is_podman = podman is not None
        self.version = f"Podman {podman}" if podman else headers.get("Server", "Docker")
        log.info("container engine: %s, API %s", self.version, api)

    @staticmethod
    async def _ping(docker: aiodocker.Docker) -> Mapping[str, str]:
        """``GET /_ping``: cheap, and its headers name the API version and the engine."""
        response = await docker._do_query("_ping", "GET", versioned_api=False)
        try:
            await response.read()
            return response.headers
        finally:
            response.release()

    async def close(self) -> None:
        if self._docker is not None:
            docker, self._docker = self._docker, None
            await docker.close()

    # -- containers ------------------------------------------------------------------------

    async def create(self, config: Mapping[str, Any], name: str) -> str:
        created = await self._call(
            f"create {name}",
            self._json("containers/create", "POST", params={"name": name}, data=config),
            RUN_TIMEOUT_S,
        )
        return str(created["Id"])

    async def start_container(self, cid: str) -> None:
        await self._call("start", self._json(f"containers/{cid}/start", "POST"), RUN_TIMEOUT_S)

    async def inspect(self, cid: str) -> dict[str, Any]:
        return await self._call("inspect", self._json(f"containers/{cid}/json"), INSPECT_TIMEOUT_S)

    async def stats(self, cid: str) -> dict[str, Any]:
        """One sample of the container's resource usage (CPU time in ``cpu_stats``)."""
        params = {"stream": "false", "one-shot": "true"}
        return await self._call(
            "stats", self._json(f"containers/{cid}/stats", params=params), INSPECT_TIMEOUT_S
        )

    async def pause(self, cid: str) -> None:
        await self._call("pause", self._json(f"containers/{cid}/pause", "POST"), PAUSE_TIMEOUT_S)

    async def unpause(self, cid: str) -> None:
        await self._call(
            "unpause", self._json(f"containers/{cid}/unpause", "POST"), PAUSE_TIMEOUT_S
        )

    async def remove(self, cid: str) -> None:
        """Force-remove (kills a running container); a missing container is no error."""
        try:
            await self._call(
                "remove",
                self._json(f"containers/{cid}", "DELETE", params={"force": "1", "v": "1"}),
                RM_TIMEOUT_S,
            )
        except EngineError as e:
            if e.status != 404:
                raise

    async def cgroup_driver(self) -> str:
        """The engine's ``CgroupDriver`` (``cgroupfs``, ``systemd``; "" if it names none)."""
        info = await self._call("info", self._json("info"), INSPECT_TIMEOUT_S)
        return str(info.get("CgroupDriver") or "")

    async def list(self, label: str) -> list[dict[str, Any]]:
        """All containers (running or not) carrying ``label`` (``key`` or ``key=value``)."""
        filters = json.dumps({"label": [label]})
        return await self._call(
            "list",
            self._json("containers/json", params={"all": "1", "filters": filters}),
            INSPECT_TIMEOUT_S,
        )

    async def update_cpus(self, cid: str, cpuset: str, cpus: int) -> None:
        """Restrict a container to ``cpuset`` with a quota of ``cpus`` CPUs (see the module
        docstring for the fallbacks); a no-op once known to be unsupported."""
        if self._cpu is None:
            async with self._cpu_probe:
                if self._cpu is None and self.cpu_method != "none":
                    await self._probe_cpu(cid, cpuset, cpus)
                    return
        if self._cpu is None:
            return
        await self._post_cpu(self._cpu, cid, cpuset, cpus)

    async def _probe_cpu(self, cid: str, cpuset: str, cpus: int) -> None:
        errors = []
        for method in _CPU_METHODS:
            try:
                await self._post_cpu(method, cid, cpuset, cpus)
            except EngineError as e:
                if e.gone or e.status in UNREACHABLE:  # the container or the engine is away
                    raise
                errors.append(f"{method.name}: {e}")
                continue
            self._cpu, self.cpu_method = method, method.name
            log.info("CPU limits are updated with %s", method.name)
            return
        self.cpu_method = "none"
        log.warning("the engine cannot update CPU limits; calls are not pinned: %s", errors)

    async def _post_cpu(self, method: _CpuMethod, cid: str, cpuset: str, cpus: int) -> None:
        await self._call(
            "update",
            self._json(method.path.format(id=cid), "POST", data=method.body(cpuset, cpus)),
            RUN_TIMEOUT_S,
        )

    async def update_cpu_shares(self, cid: str, shares: int) -> None:
        """Set a running container's ``CpuShares``, by the endpoint :meth:`update_cpus`
        found (the compat one until then)."""
        body: dict[str, Any] = {"CpuShares": shares}
        path = "containers/{id}/update"
        if self._cpu is not None and self._cpu.path.startswith("libpod/"):
            path, body = "libpod/" + path, {"cpu": {"shares": shares}}
        await self._call(
            "update", self._json(path.format(id=cid), "POST", data=body), RUN_TIMEOUT_S
        )

    @asynccontextmanager
    async def logs(
        self, cid: str, since: str | None, follow: bool
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """The raw (multiplexed) body of ``GET /containers/{id}/logs`` with timestamps."""
        params = {"stdout": "1", "stderr": "1", "timestamps": "1"}
        if since is not None:
            params["since"] = since
        if follow:
            params["follow"] = "1"
        try:
            async with asyncio.timeout(INSPECT_TIMEOUT_S):
                response = await self.docker._do_query(
                    f"containers/{cid}/logs", "GET", params=params, timeout=aiohttp.ClientTimeout()
                )
        except aiodocker.DockerError as e:
            raise EngineError("logs", e.status, str(e.message)) from e
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            raise EngineError("logs", 0, str(e) or type(e).__name__) from e
        try:
            yield _chunks(response)
        finally:
            response.close()  # an unfinished (followed) body: drop the connection

    async def network(self, name: str) -> dict[str, Any]:
        """``GET /networks/{name}`` (its driver and ``Options``)."""
        return await self._call("network", self._json(f"networks/{name}"), INSPECT_TIMEOUT_S)

    # -- images ----------------------------------------------------------------------------

    async def image_exists(self, image: str) -> bool:
        try:
            await self._call("image inspect", self.docker.images.inspect(image), INSPECT_TIMEOUT_S)
        except EngineError as e:
            if e.status == 404:
                return False
            raise
        return True

    async def pull(self, image: str) -> None:
        await self._call(f"pull {image}", self.docker.images.pull(image), PULL_TIMEOUT_S)

    # -- plumbing --------------------------------------------------------------------------

    async def _json(
        self,
        path: str,
        method: str = "GET",
        params: Mapping[str, str] | None = None,
        data: Any = None,
    ) -> Any:
        return await self.docker._query_json(
            path, method, params=dict(params) if params else None, data=data
        )

    @staticmethod
    async def _call(what: str, coro: Any, timeout_s: float) -> Any:
        try:
            async with asyncio.timeout(timeout_s):
                return await coro
        except aiodocker.DockerError as e:
            raise EngineError(what, e.status, str(e.message)) from e
        except TimeoutError as e:
            raise EngineError(what, 0, f"no answer within {timeout_s:g} s") from e
        except (aiohttp.ClientError, OSError) as e:
            raise EngineError(what, 0, str(e) or type(e).__name__) from e


async def _chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    while chunk := await response.content.readany():
        yield chunk
