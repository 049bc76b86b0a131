"""The local runner hosts a task as Docker would: each container with the image's basics (/run/lock,
a login shell's dotfiles, its hostname in /etc/hosts), its own loopback (two tasks on one port),
multi-stage builds and `COPY --from`, and a "needs the internet: <host>" verdict apart from failures.

These run the fixture tasks of tests/tbench_tasks/_runner on the "host" image (this machine's own
system under the overlay), so they need no root to be built and stay fast and offline; the same
tasks on their real images are in test_terminalbench_images.py (slow). Names are resolved by a real
DNS server on 127.0.0.1 (FakeResolver), never by this machine's resolvers.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from clover.evals.terminalbench.build import ContainerSource, FolderSource, copy_from
from clover.evals.terminalbench.container import TaskContainer, container_problem, host_image
from clover.evals.terminalbench.launch import Launch
from clover.evals.terminalbench.local_runner import run_tasks
from clover.evals.terminalbench.netns import failure_reply, outside_access_problem, question
from clover.evals.terminalbench.tasks import find_tasks
from clover.evals.terminalbench.verdicts import summarize
from clover.settings import Settings

RUNNER_TASKS = Path(__file__).parent / "tbench_tasks" / "_runner"
SETTINGS = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)

pytestmark = pytest.mark.skipif(
    container_problem() is not None, reason=f"no local container: {container_problem()}"
)


class FakeResolver:
    """A DNS server on 127.0.0.1 (UDP): A records for `known`, NXDOMAIN for every other name."""

    def __init__(self, known: dict[str, str]) -> None:
        self.known = known
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.asked: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                query, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            name, qtype = question(query)
            self.asked.append(name)
            if name in self.known and qtype == 1:
                reply = bytearray(failure_reply(query, 0))
                reply[6:8] = (1).to_bytes(
                    2, "big"
                )  # one answer: the question's name (pointer), A, IN, TTL 60
                reply += b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton(
                    self.known[name]
                )
            elif name in self.known:
                reply = bytearray(failure_reply(query, 0))  # the name exists, no record of this type
            else:
                reply = bytearray(failure_reply(query, 3))
            self.sock.sendto(bytes(reply), peer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def resolver():
    server = FakeResolver({"mirror.clover-test.org": "10.1.2.3"})
    yield server
    server.close()


def _run(ids: list[str], tmp_path: Path, launch: Launch | None = None, workers: int = 1):
    return {
        r.id: r
        for r in run_tasks(
            find_tasks(RUNNER_TASKS, ids),
            settings=SETTINGS,
            model_factory=None,
            out_dir=tmp_path,
            workers=workers,
            launch=launch or Launch(image="host"),
        )
    }


def test_the_image_basics_a_task_relies_on(tmp_path):
    """/var/lock leads to /run/lock (mailman locks there); what a test appends to ~/.bashrc reaches a
    login shell (tmux starts one: headless-terminal), because /root has .profile and .bashrc."""
    results = _run(["run-lock", "login-dotfiles"], tmp_path)
    assert {k: (r.status, r.reward) for k, r in results.items()} == {
        "run-lock": ("passed", 1.0),
        "login-dotfiles": ("passed", 1.0),
    }, {k: r.reason for k, r in results.items()}


def test_two_tasks_listen_on_one_port_at_once(tmp_path):
    """Each container has its own loopback: both servers bind 127.0.0.1:12355 and each test reaches
    its own (torch-tensor-parallelism's two runs on port 12355)."""
    results = _run(["same-port-a", "same-port-b"], tmp_path, workers=2)
    assert [(r.id, r.status) for r in results.values()] == [
        ("same-port-a", "passed"),
        ("same-port-b", "passed"),
    ], [r.reason for r in results.values()]
    for side in "ab":
        assert (
            f"port 12355 answered: {side}"
            in (tmp_path / f"same-port-{side}/logs/verifier/test-stdout.txt").read_text()
        )


def test_a_container_has_its_hostname_in_etc_hosts_and_its_own_loopback(tmp_path):
    image = host_image(tmp_path / "skeleton")
    one = TaskContainer(tmp_path / "one", image, network=False)
    two = TaskContainer(tmp_path / "two", image, network=False)
    one.start()
    two.start()
    try:
        rc, out, _ = one.exec("hostname; getent hosts $(hostname); cat /etc/resolv.conf", timeout=30)
        lines = out.decode().split("\n")
        assert rc == 0 and lines[0] == one.hostname and lines[1].split() == ["127.0.1.1", one.hostname], out
        assert "nameserver 127.0.0.11" in lines  # the container's DNS, where Docker's sits
        server = (
            'python3 -c \'import socket,time; s=socket.socket(); s.bind(("127.0.0.1", 12355)); s.listen(); '
            'open("/tmp/up","w").close(); time.sleep(30)\' >/dev/null 2>&1 & '
            "for i in $(seq 50); do [ -f /tmp/up ] && break; sleep 0.1; done; [ -f /tmp/up ]"
        )
        assert one.exec(server, timeout=30)[0] == 0
        assert two.exec(server, timeout=30)[0] == 0  # the same port, free in the other namespace
        assert one.exec("exec 3<>/dev/tcp/127.0.0.1/12355", timeout=30)[0] == 0
        three = TaskContainer(tmp_path / "three", image, network=False)
        three.start()
        try:  # nobody listens in a third one: the others' servers are not on its loopback
            assert three.exec("exec 3<>/dev/tcp/127.0.0.1/12355", timeout=30)[0] != 0
        finally:
            three.remove()
    finally:
        one.remove()
        two.remove()


def test_multi_stage_builds_copy_from_an_earlier_stage(tmp_path):
    results = _run(["multi-stage"], tmp_path)
    assert (results["multi-stage"].status, results["multi-stage"].reward) == ("passed", 1.0), results[
        "multi-stage"
    ].reason
    assert not list((tmp_path / "multi-stage").glob("container/stage-*"))  # the stage's container is gone


def test_copy_from_an_image_folder_and_a_container(tmp_path):
    """COPY --from's placement rules: several files into a folder, one file as a new name, a folder's
    contents into a folder; sources as a tool image's files or another container's."""
    (tmp_path / "dist").mkdir()
    for name in ("uv", "uvx"):
        (tmp_path / "dist" / name).write_text(f"#!/bin/sh\necho {name}\n")
        (tmp_path / "dist" / name).chmod(0o755)
    tool = FolderSource({"/uv": tmp_path / "dist" / "uv", "/uvx": tmp_path / "dist" / "uvx"})
    image = host_image(tmp_path / "skeleton")
    target, source = (TaskContainer(tmp_path / n, image, network=False) for n in ("target", "source"))
    target.start()
    source.start()
    try:
        copy_from(target, tool, ["/uv", "/uvx"], "/opt/tools/")
        copy_from(target, tool, ["/uv"], "/usr/local/bin/uv-renamed")
        assert target.exec("/opt/tools/uv && /opt/tools/uvx && uv-renamed", timeout=30)[1].split() == [
            b"uv",
            b"uvx",
            b"uv",
        ]
        source.exec("mkdir -p /build/out/sub && echo deep > /build/out/sub/f.txt", timeout=30)
        copy_from(target, ContainerSource(source), ["/build/out"], "/app/out")
        assert target.read("/app/out/sub/f.txt") == b"deep\n"
        with pytest.raises(Exception, match="is not in the image"):
            copy_from(target, tool, ["/missing"], "/x")
    finally:
        target.remove()
        source.remove()


def test_a_task_that_cannot_reach_a_host_needs_the_internet(tmp_path, resolver):
    """The task looked up a host no resolver here knows and did not pass: "needs the internet:
    <host>", apart from failures; a host it resolved is not named."""
    [result] = _run(["needs-a-host"], tmp_path, Launch(image="host", resolvers=[resolver.address])).values()
    assert result.status == "needs-internet", result.reason
    assert result.hosts == ["downloads.clover-unreachable.org"]
    assert result.reason.startswith("needs the internet: downloads.clover-unreachable.org (the tests failed")
    assert summarize([result])["needs_internet"] == 1 and summarize([result])["judged"] == 0
    lookups = (tmp_path / "needs-a-host" / "logs").parent.glob("container/dns.log")
    assert not list(lookups)  # the container (and its log) is removed unless --keep


def test_the_dns_forwarder_answers_from_the_resolvers_and_records_each_name(tmp_path, resolver):
    if outside_access_problem() is not None:
        pytest.skip(outside_access_problem())
    image = host_image(tmp_path / "skeleton")
    box = TaskContainer(tmp_path / "box", image, network=True, resolvers=[resolver.address])
    box.start()
    try:
        rc, out, _ = box.exec(
            "getent hosts mirror.clover-test.org; getent hosts gone.clover-test.org; "
            "getent hosts printer.local; python3 -c 'import socket; socket.getaddrinfo("
            '"_http._tcp.mirror.clover-test.org", 80)\' 2>/dev/null; echo done',
            timeout=60,
        )
        assert out.decode().split("\n")[0].split() == ["10.1.2.3", "mirror.clover-test.org"], out
        # A public name that never resolved is named; a resolved one, a local one and a service one are not.
        assert box.unreachable_hosts() == ["gone.clover-test.org"]
        assert "mirror.clover-test.org" in resolver.asked
        assert "gone.clover-test.org" in (tmp_path / "box" / "dns.log").read_text()
    finally:
        box.remove()


def test_without_outside_access_every_name_is_refused_and_named(tmp_path, resolver, monkeypatch):
    """No slirp4netns (or no /dev/net/tun): the task runs offline, its lookups are refused at once
    and every public name it asked for is named (the note says why)."""
    import clover.evals.terminalbench.container as container

    monkeypatch.setattr(container, "outside_access_problem", lambda: "slirp4netns is not installed (test)")
    image = host_image(tmp_path / "skeleton")
    box = TaskContainer(tmp_path / "box", image, network=True, resolvers=[resolver.address])
    box.start()
    try:
        rc, out, _ = box.exec(
            "getent hosts mirror.clover-test.org || echo refused; ip -o link | wc -l", timeout=60
        )
        assert out.decode().split() == ["refused", "1"]  # only its loopback
        assert box.unreachable_hosts() == ["mirror.clover-test.org"] and resolver.asked == []
        assert box.network_note == "slirp4netns is not installed (test)"
    finally:
        box.remove()


def test_a_task_without_network_gets_no_resolver(tmp_path, resolver):
    image = host_image(tmp_path / "skeleton")
    box = TaskContainer(tmp_path / "box", image, network=False, resolvers=[resolver.address])
    box.start()
    try:
        rc, out, _ = box.exec(
            "getent hosts mirror.clover-test.org || echo unresolved; ip -o link | wc -l", timeout=60
        )
        assert out.decode().split() == ["unresolved", "1"]  # only its loopback
        assert resolver.asked == [] and box.unreachable_hosts() == []
    finally:
        box.remove()


def test_dns_messages_are_read_and_refused_as_resolvers_expect():
    query = bytes.fromhex("abcd0100000100000000000006676974687562036f72670000010001")  # github.org A, RD
    assert question(query) == ("github.org", 1)
    reply = failure_reply(query, 3)
    assert reply[:2] == b"\xab\xcd" and reply[2] & 0x80 and reply[3] & 0x0F == 3  # same id, a reply, NXDOMAIN
    assert reply[2] & 0x01 and reply[12:] == query[12:]  # RD kept, the question echoed
    assert question(b"\x00" * 5) is None and question(query[:12]) is None


def _pinned_task(root: Path, prebuilt: str) -> None:
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    image = f'docker_image = "{prebuilt}"\n' if prebuilt else ""
    (root / "task.toml").write_text(f'[environment]\nnetwork_mode = "none"\n{image}')
    (root / "instruction.md").write_text("Install the pinned bash.\n")
    (root / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    # apt knows bash from dpkg's status even without package lists: the version is simply not there.
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\napt-get install -y bash=0.0-gone1\n")
    (root / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")


def test_a_pin_the_archive_no_longer_has_is_named(tmp_path):
    """A solution that pins a version the archive has dropped cannot pass on a fresh build: the
    verdict names the pin, and where the task has a prebuilt image (what Harbor pulls: it has the
    version installed), the registry it needs."""
    _pinned_task(tmp_path / "tasks" / "with-image", "someone/with-image:20251031")
    _pinned_task(tmp_path / "tasks" / "without-image", "")
    results = {
        r.id: r
        for r in run_tasks(
            find_tasks(tmp_path / "tasks"),
            settings=SETTINGS,
            model_factory=None,
            out_dir=tmp_path / "out",
            launch=Launch(image="host"),
        )
    }
    with_image, without = results["with-image"], results["without-image"]
    assert (with_image.status, with_image.hosts) == ("needs-internet", ["registry-1.docker.io"]), (
        with_image.reason
    )
    assert with_image.reason.startswith(
        "needs the internet: registry-1.docker.io (the archive no longer has "
        "bash=0.0-gone1; the task's prebuilt image someone/with-image:20251031 has it"
    )
    assert without.status == "failed" and without.reason.startswith(
        "the archive no longer has bash=0.0-gone1: "
    )


def test_links_a_task_leaves_in_its_log_folders_are_not_followed(tmp_path):
    """/logs/verifier is the run's folder mounted in: a link the task leaves there, to a path that is a
    file on this machine, is neither read as the reward nor written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("1\n")
    root = tmp_path / "tasks" / "sly"
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('[environment]\nnetwork_mode = "none"\n')
    (root / "instruction.md").write_text("x\n")
    (root / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    (root / "tests" / "test.sh").write_text(
        f"#!/bin/bash\nln -sf {victim} /logs/verifier/reward.txt\nrm -f /logs/verifier/test-stdout.txt\n"
        f"ln -s {victim} /logs/verifier/test-stdout.txt\necho appended-through-the-link\n"
    )
    [result] = run_tasks(
        find_tasks(tmp_path / "tasks"),
        settings=SETTINGS,
        model_factory=None,
        out_dir=tmp_path / "out",
        launch=Launch(image="host"),
    )
    assert (result.status, result.reason) == ("failed", "the tests wrote no reward")
    assert victim.read_text() == "1\n"


def test_a_timeout_multiplier_scales_each_tasks_timeouts(tmp_path):
    """Harbor's --timeout-multiplier: a build step over the task's own limit times out, and fits with
    the limits scaled (for a slower or shared machine); the multiplier is in results.json."""
    import json

    root = tmp_path / "tasks" / "slow-build"
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('[environment]\nnetwork_mode = "none"\nbuild_timeout_sec = 1.0\n')
    (root / "instruction.md").write_text("x\n")
    (root / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\nRUN sleep 2\n")
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    (root / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    tasks = find_tasks(tmp_path / "tasks")
    [tight] = run_tasks(
        tasks, settings=SETTINGS, model_factory=None, out_dir=tmp_path / "a", launch=Launch(image="host")
    )
    [scaled] = run_tasks(
        tasks,
        settings=SETTINGS,
        model_factory=None,
        out_dir=tmp_path / "b",
        launch=Launch(image="host"),
        timeout_multiplier=10,
    )
    assert tight.status == "error" and "RUN sleep 2 timed out after 1 s" in tight.reason
    assert scaled.status == "passed", scaled.reason
    assert json.loads((tmp_path / "b" / "results.json").read_text())["timeout_multiplier"] == 10
