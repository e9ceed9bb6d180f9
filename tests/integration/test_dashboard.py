"""mqdashboard in headless Chromium (Debian's chromium and chromium-driver, driven by selenium)
against real daemons: every view clicked through as an operator would, a screenshot of each kept
under test-artifacts/dashboard/ (ignored by git)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from rocketmq_py.client import Message, Producer
from rocketmq_py.client.push_consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_py.remoting.protocol.heartbeat import ConsumeFromWhere
from rocketmq_py.remoting.protocol.message import MessageExt
from tests.conftest import Cluster
from tests.integration.daemons import ROOT, Daemon, DaemonSet

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
ARTIFACTS = os.path.join(ROOT, "test-artifacts", "dashboard")
BROKER_OPTIONS = ("traceTopicEnable=true",)
pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="chromium and chromium-driver are installed by `make test` (browser-deps)")


@pytest.fixture(scope="module")
def console(cluster: Cluster, module_daemons: DaemonSet) -> tuple[Daemon, Daemon, str]:
    """The module's cluster with a dashboard started beside it (stopped first, with them)."""
    ns, broker = cluster
    return ns, broker, f"http://{module_daemons.dashboard(ns.addr).addr}"


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,1000",
                "--disable-gpu"):
        options.add_argument(arg)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


class ConsumerThread:
    """A traced push consumer on its own loop in a thread (the browser calls block the test's
    thread); its listener holds every message until ``release`` so lag can be seen first."""

    def __init__(self, namesrv: str, group: str, topic: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="consumer-loop", daemon=True)
        self.thread.start()
        self.received: list[MessageExt] = []
        self.gate = asyncio.Event()
        self.consumer = PushConsumer(group, namesrv, enable_msg_trace=True, auto_commit_interval=0.5,
                                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        self.consumer.subscribe(topic, "*")
        self.consumer.register_message_listener(self._listen)

    async def _listen(self, msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        await self.gate.wait()
        self.received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def call(self, coro: object, timeout: float = 60) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def start(self) -> None:
        self.call(self.consumer.start())

    def release(self) -> None:
        self.loop.call_soon_threadsafe(self.gate.set)

    def stop(self) -> None:
        self.release()
        self.call(self.consumer.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        assert not self.thread.is_alive(), "the consumer's loop did not stop"
        self.loop.close()  # its selector and self-pipe, which a loop collected unclosed warns of


def shot(driver: WebDriver, name: str) -> None:
    os.makedirs(ARTIFACTS, exist_ok=True)
    assert driver.save_screenshot(os.path.join(ARTIFACTS, f"{name}.png"))


def wait(driver: WebDriver, condition: Callable[[WebDriver], object], timeout: float = 30, refresh: bool = False
         ) -> object:
    """Poll ``condition`` (reloading the page between polls when ``refresh``), bounded. A reload
    that times out (the browser's renderer starved on a loaded machine) is a poll that failed,
    not the end of the wait: the bound stays ``timeout``."""
    def check(d: WebDriver) -> object:
        if refresh:
            try:
                d.refresh()
            except TimeoutException:
                return False
        return condition(d)
    return WebDriverWait(driver, timeout, poll_frequency=0.5).until(check)


def find(driver: WebDriver, css: str, timeout: float = 15) -> WebElement:
    """The element, once the page a click or submit started has loaded it (bounded)."""
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
            lambda d: (d.find_elements(By.CSS_SELECTOR, css) or [None])[0])
    except TimeoutException:
        main = driver.find_elements(By.TAG_NAME, "main")
        raise AssertionError(f"no {css} on {driver.current_url}:\n{main[0].text if main else ''}") from None


def go(driver: WebDriver, by: str, value: str) -> None:
    """Click a link or submit button and wait (bounded) until the page it opens has replaced this one."""
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(by, value).click()

    def replaced(_: WebDriver) -> bool:
        # Chrome answers a node the navigation has just dropped either as stale or, mid-swap, as
        # an inspector error saying it no longer belongs to the document: both mean replaced.
        try:
            old.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" not in (exc.msg or ""):
                raise
            return True
        return False

    WebDriverWait(driver, 30, poll_frequency=0.1).until(replaced)


def text(driver: WebDriver, css: str) -> str:
    return find(driver, css).text


def column(driver: WebDriver, table: str, index: int) -> list[str]:
    find(driver, f"#{table}")
    return [row.find_elements(By.TAG_NAME, "td")[index].text
            for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
            if len(row.find_elements(By.TAG_NAME, "td")) > index]


def set_value(driver: WebDriver, css: str, value: str) -> None:
    """A datetime-local field's value, set as the date picker would (typing into it is locale-bound)."""
    driver.execute_script("document.querySelector(arguments[0]).value = arguments[1]", css, value)


def test_click_through_every_view(console: tuple[Daemon, Daemon, str], browser: WebDriver) -> None:
    ns, broker, url = console
    d = browser
    topic, group, key = "DashTopic", "CG_DASH", "dash-key-1"

    # Cluster: the broker with its figures, the TPS chart drawing samples.
    d.get(url + "/")
    assert broker.addr in column(d, "brokers", 3)
    wait(d, lambda d: int(text(d, "#tps-samples").split()[0]) >= 2)
    assert d.find_elements(By.CSS_SELECTOR, "#tps-chart polyline")
    shot(d, "01-cluster")

    # Topics: create one with 4 queues; its page shows the route and 4 queues.
    go(d, By.ID, "nav-topics")
    d.find_element(By.ID, "new-topic").send_keys(topic)
    for name in ("readQueueNums", "writeQueueNums"):
        field = d.find_element(By.NAME, name)
        field.clear()
        field.send_keys("4")
    go(d, By.ID, "create-topic-submit")
    assert "created" in text(d, "#flash"), d.page_source
    # The broker registers a new topic with the NameServer a moment after creating it.
    wait(d, lambda d: column(d, "route", 0) == ["broker-a"], refresh=True)
    assert column(d, "route", 0) == ["broker-a"] and column(d, "route", 2) == ["4"]
    assert column(d, "status", 1) == ["0", "1", "2", "3"]
    shot(d, "02-topic-created")

    # Send a traced test message from the topic page, then 20 more from an SDK producer.
    before_send = datetime.now().replace(microsecond=0)
    time.sleep(1.0 - (time.time() % 1.0) + 0.01)  # the reset below is to a whole second before any send
    d.find_element(By.ID, "send-tags").send_keys("TagD")
    d.find_element(By.ID, "send-keys").send_keys(key)
    d.find_element(By.ID, "send-body").send_keys("hello from the console")
    d.find_element(By.ID, "send-trace").click()
    go(d, By.ID, "send-submit")
    msg_id = text(d, "#sent-msg-id")
    assert "SEND_OK" in text(d, "#send-result") and len(msg_id) == 32
    shot(d, "03-topic-sent")

    async def send_more() -> None:
        async with Producer("PG_DASH", ns.addr) as p:
            for i in range(20):
                await p.send(Message(topic, f"m{i}".encode(), keys=f"more-{i}"))

    asyncio.run(send_more())
    d.get(f"{url}/topics/{topic}")  # refreshing the answer to the POST would send the form again
    wait(d, lambda d: sum(int(v) for v in column(d, "status", 3)) == 21, refresh=True)

    consumer = ConsumerThread(ns.addr, group, topic)
    try:
        consumer.start()
        # Consumers: the group holds its 21 messages, so its lag shows; released, it falls to 0.
        go(d, By.ID, "nav-consumers")
        wait(d, lambda d: group in column(d, "groups", 0), refresh=True)
        go(d, By.LINK_TEXT, group)
        assert text(d, "#group-name") == group and d.find_elements(By.CSS_SELECTOR, "#clients tbody tr")
        wait(d, lambda d: int(text(d, "#total-lag")) > 0 and len(column(d, "lag", 0)) >= 4, refresh=True)
        shot(d, "04-consumer-lag")
        consumer.release()
        wait(d, lambda d: text(d, "#total-lag") == "0" and set(column(d, "lag", 5)) == {"0"}, refresh=True)
        assert len(consumer.received) == 21
        shot(d, "05-consumer-lag-zero")

        # Messages: find it by key; its page shows the body and properties.
        go(d, By.ID, "nav-messages")
        d.find_element(By.ID, "key-topic").send_keys(topic)
        d.find_element(By.ID, "key-key").send_keys(key)
        go(d, By.ID, "key-submit")
        assert column(d, "results", 0) == [msg_id]
        shot(d, "06-messages-by-key")
        # By its id (a unique key, with its topic), and by a time range holding all 21.
        d.find_element(By.ID, "id-topic").send_keys(topic)
        d.find_element(By.ID, "id-msgid").send_keys(msg_id)
        go(d, By.ID, "id-submit")
        assert column(d, "results", 0) == [msg_id] and text(d, "#result-count") == "1"
        d.find_element(By.ID, "time-topic").send_keys(topic)
        set_value(d, "#time-begin", before_send.strftime("%Y-%m-%dT%H:%M:%S"))
        set_value(d, "#time-end", (datetime.now() + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S"))
        go(d, By.ID, "time-submit")
        assert text(d, "#result-count") == "21" and column(d, "results", 0)[0] == msg_id  # oldest first
        shot(d, "06b-messages-by-time")
        d.back()
        d.back()
        assert column(d, "results", 0) == [msg_id]
        go(d, By.CSS_SELECTOR, "#results a.msg-link")
        assert text(d, "#msg-body") == "hello from the console" and text(d, "#msg-keys") == key
        rows = {r.find_element(By.TAG_NAME, "th").text: r.find_element(By.TAG_NAME, "td").text
                for r in d.find_elements(By.CSS_SELECTOR, "#properties tr")}
        assert rows["KEYS"] == key and rows["TAGS"] == "TagD" and rows["UNIQ_KEY"] == msg_id, rows
        shot(d, "07-message")

        # Its trace: sent by the console's traced producer, consumed by the group.
        go(d, By.ID, "trace-link")
        wait(d, lambda d: {"Pub", "SubBefore", "SubAfter"} <= set(column(d, "trace", 0)), refresh=True)
        kinds, groups, status = column(d, "trace", 0), column(d, "trace", 1), column(d, "trace", 6)
        assert dict(zip(kinds, groups, strict=True)) == {"Pub": "PID_MQDASHBOARD_TRACE", "SubBefore": group,
                                                         "SubAfter": group}
        assert set(status) == {"success"}
        assert column(d, "trace", 3)[kinds.index("Pub")] == broker.addr
        shot(d, "08-trace")

        # Reset the group's offsets to before the first send: every queue back to 0, all consumed again.
        d.get(f"{url}/consumers/{group}")
        set_value(d, "#reset-time", before_send.strftime("%Y-%m-%dT%H:%M:%S"))
        go(d, By.ID, "reset-submit")
        assert "reset" in text(d, "#flash")
        assert sorted(column(d, "reset-result", 1)) == ["0", "1", "2", "3"]
        assert set(column(d, "reset-result", 2)) == {"0"}
        shot(d, "09-consumer-reset")
        d.get(f"{url}/consumers/{group}")
        wait(d, lambda d: len(consumer.received) == 42 and text(d, "#total-lag") == "0", refresh=True, timeout=60)
        shot(d, "10-consumer-reconsumed")

        # Back on the cluster page under load: the put rate shows, and the live chart draws it.
        asyncio.run(send_more())
        go(d, By.ID, "nav-cluster")
        wait(d, lambda d: float(column(d, "brokers", 5)[0]) > 0, refresh=True)
        wait(d, lambda d: float(text(d, "#tps-legend").split("put: ", 1)[1].split()[0]) > 0)
        assert int(column(d, "brokers", 7)[0]) >= 41
        shot(d, "11-cluster-tps")
    finally:
        consumer.stop()

    # With the group down, a reset still takes: the offsets are set at the broker, the lag is back.
    d.get(f"{url}/consumers/{group}")
    assert "not online" in text(d, "#offline")
    set_value(d, "#reset-time", before_send.strftime("%Y-%m-%dT%H:%M:%S"))
    go(d, By.ID, "reset-submit")
    assert "Offsets of 4 queues" in text(d, "#flash") and set(column(d, "reset-result", 2)) == {"0"}
    d.get(f"{url}/consumers/{group}")
    assert int(text(d, "#total-lag")) == 41
    shot(d, "12-consumer-reset-offline")


def test_refusals_are_pages_not_crashes(console: tuple[Daemon, Daemon, str], browser: WebDriver) -> None:
    _, _, url = console
    d = browser
    d.get(url + "/topics")
    d.find_element(By.ID, "new-topic").send_keys("bad topic!")
    go(d, By.ID, "create-topic-submit")
    assert "topic" in text(d, "#error").lower()
    d.get(url + "/messages?mode=key&topic=NoSuchTopic&key=k")
    assert text(d, "#error")
    d.get(url + "/messages?mode=time&topic=DashTopic&begin=yesterday")
    assert "begin" in text(d, "#error")
    shot(d, "13-error")
    d.get(url + "/")  # and the console still serves
    assert d.find_elements(By.CSS_SELECTOR, "#brokers tbody tr.broker-row")
