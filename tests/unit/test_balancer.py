"""Invoker health and placement in the front, as pure logic (stock InvokerSupervision and
ShardingContainerPoolBalancer rules)."""

from front.balancer import PING_TIMEOUT_S, TEST_INTERVAL_S, Balancer, Health, Result


def ping(b: Balancer, n: int, now: float, enabled: bool = True, memory: str = "2147483648 B"):
    return b.ping(
        {
            "instance": n,
            "userMemory": memory,
            "instanceType": "invoker",
            "tags": [],
            "dedicatedNamespaces": [],
        },
        enabled,
        now,
    )


def test_a_new_invoker_is_unhealthy_until_one_health_action_succeeds():
    b = Balancer()
    assert ping(b, 0, 0.0) is True  # first ping: send the health test action
    assert b.invokers[0].state is Health.UNHEALTHY and b.invokers[0].user_memory_mb == 2048
    assert ping(b, 0, 1.0) is False  # not again before the interval
    assert b.choose("guest", "guest/a", 256) is None
    b.completed(0, Result.SUCCESS, 2.0)
    assert b.invokers[0].state is Health.HEALTHY
    assert b.choose("guest", "guest/a", 256) == 0


def test_errors_timeouts_silence_and_disable():
    b = Balancer()
    ping(b, 0, 0.0)
    b.completed(0, Result.SUCCESS, 0.0)
    for _ in range(4):
        b.completed(0, Result.SYSTEM_ERROR, 1.0)
    assert b.invokers[0].state is Health.UNHEALTHY
    c = Balancer()
    ping(c, 1, 0.0)
    c.completed(1, Result.SUCCESS, 0.0)
    for _ in range(4):
        c.completed(1, Result.TIMEOUT, 1.0)
    assert c.invokers[1].state is Health.UNRESPONSIVE
    assert ping(c, 1, 1.0 + TEST_INTERVAL_S) is True  # tested again while unresponsive
    assert c.tick(2.0 + TEST_INTERVAL_S) == []  # ... once per interval
    assert c.tick(2.0 + TEST_INTERVAL_S + PING_TIMEOUT_S) == []
    assert c.invokers[1].state is Health.OFFLINE  # no ping for 10 s
    assert ping(c, 1, 100.0) is True and c.invokers[1].state is Health.UNHEALTHY
    ping(c, 1, 101.0, enabled=False)
    assert c.invokers[1].state is Health.OFFLINE


def test_home_invoker_then_the_next_with_free_memory():
    b = Balancer()
    for n in (0, 1):
        ping(b, n, 0.0, memory="512 MB")
        b.completed(n, Result.SUCCESS, 0.0)
    home = b.choose("guest", "guest/a", 256)
    assert b.choose("guest", "guest/a", 256) == home  # 512 MB: two 256 MB calls fit
    other = b.choose("guest", "guest/a", 256)
    assert other != home  # home is full: the next healthy one
    b.release(home, 256)
    assert b.choose("guest", "guest/a", 256) == home
    states = b.states()
    assert states == {"invoker0": "up", "invoker1": "up"}
