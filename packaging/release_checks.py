#!/usr/bin/env python3
"""Black-box checks of installed Browser Pilot releases, for scripts/test (docs/release.md).

Every check launches the given absolute executables directly (no shell) over pipes, speaks
only the public NDJSON protocol or the `bp` CLI, and reads /proc for process identity (Linux).
Subcommands (each exits 0 when its claim holds, 1 with a message when not):

  summary CMD...                 initialize + tools/list on `CMD` (a bridge command); prints
                                 the protocol, versions and tool names as one JSON line
  processes --home H --install D the Broker of home H and its janitor are D/browser-pilot
  disconnect-guard --home H --install D
                                 D/bp disconnect refuses (exit 4) while a host is connected
                                 and the Broker survives; after the host's EOF it stops it
  side-by-side --a DA --home-a HA --b DB --home-b HB
                                 two installations with separate homes run two Brokers at
                                 once; DB/bp disconnect on HA gets protocol_incompatible and
                                 the Broker of HA keeps serving its host
  launcher --install D --cli JS  dist/cli.js passes exit codes and SIGTERM through exactly as
                                 the native executable reports them, and leaves no child
Python 3 standard library only.
"""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 60.0


class CheckFailed(Exception):
    pass


def wait_until(condition, what, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise CheckFailed(f"timed out waiting for {what}")


class Bridge:
    """One `bridge --stdio` child and a tiny JSON-RPC client over its pipes."""

    def __init__(self, command, env):
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.buffer = b""
        self.next_id = 0

    def call(self, method, params, timeout=DEADLINE_S):
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("id") == self.next_id:
                    if "error" in message:
                        raise CheckFailed(f"{method} failed: {message['error']}")
                    return message["result"]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CheckFailed(f"no answer to {method}")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise CheckFailed(f"the bridge exited before answering {method}")
                self.buffer += chunk

    def initialize(self):
        return self.call(
            "initialize",
            {
                "client": {
                    "id": "dev.browser-pilot.release-checks",
                    "name": "release checks",
                    "version": "1",
                    "instanceId": f"install:release-checks-{os.getpid()}",
                },
                "protocol": {"min": {"major": 1, "minor": 0}, "max": {"major": 1, "minor": 1}},
                "requestedCapabilities": [
                    "browser.control", "workspace.manage", "observation.read",
                    "action.input", "artifact.read", "event.read",
                ],
                "launchMode": "embedded",
            },
        )

    def close(self):
        """EOF on stdin, then the bridge must exit by itself."""
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise CheckFailed("the bridge did not exit after EOF")


def env_with_home(home):
    return dict(os.environ, BROWSER_PILOT_HOME=home)


def bp(install, home, *args):
    return subprocess.run(
        [os.path.join(install, "bp"), *args], env=env_with_home(home), capture_output=True, text=True,
        timeout=DEADLINE_S, check=False,
    )


def broker_pid(install, home):
    status = bp(install, home, "status")
    if status.returncode != 0:
        return None
    # `bp status` nests the Broker's own status object: {"broker": {"broker": {"id", "pid"}, ...}}.
    return json.loads(status.stdout)["broker"]["broker"]["pid"]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def exe_and_role(pid):
    exe = os.path.realpath(f"/proc/{pid}/exe")
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        argv = handle.read().split(b"\0")
    role = argv[1].decode() if len(argv) > 1 else ""
    return exe, role


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def janitor_of(pid):
    for child in children(pid):
        try:
            if exe_and_role(child)[1] == "--browser-pilot-internal=janitor":
                return child
        except OSError:
            continue
    return None


def expect_own_executable(pid, install, role):
    exe, actual_role = exe_and_role(pid)
    expected = os.path.realpath(os.path.join(install, "browser-pilot"))
    if exe != expected or actual_role != f"--browser-pilot-internal={role}":
        raise CheckFailed(f"the {role} (pid {pid}) runs {exe} {actual_role}, expected {expected}")


def check_processes(install, home):
    pid = broker_pid(install, home)
    if pid is None:
        raise CheckFailed("no Broker runs for this home")
    expect_own_executable(pid, install, "broker")
    janitor = wait_until(lambda: janitor_of(pid), "the Broker's janitor")
    expect_own_executable(janitor, install, "janitor")
    print(f"Broker pid {pid} and janitor pid {janitor} are {install}/browser-pilot", file=sys.stderr)


def stop_broker(install, home):
    """bp disconnect until it is accepted (the Broker counts a closed Connection soon after the
    bridge's exit), then wait for the Broker process to end."""
    pid = broker_pid(install, home)
    if pid is None:
        return
    wait_until(lambda: bp(install, home, "disconnect").returncode == 0, "bp disconnect to be accepted")
    wait_until(lambda: not alive(pid), f"Broker {pid} to exit")


def check_disconnect_guard(install, home):
    bridge = Bridge([os.path.join(install, "browser-pilot"), "bridge", "--stdio"], env_with_home(home))
    try:
        bridge.initialize()
        pid = broker_pid(install, home)
        janitor = janitor_of(pid)
        refused = bp(install, home, "disconnect")
        if refused.returncode != 4 or "broker_in_use" not in refused.stderr:
            raise CheckFailed(f"bp disconnect with a host connected: exit {refused.returncode} {refused.stderr!r}")
        if not alive(pid):
            raise CheckFailed("the Broker stopped although a host was connected")
        bridge.call("tools/list", {})
    finally:
        bridge.close()
    stop_broker(install, home)
    if janitor is not None:
        wait_until(lambda: not alive(janitor), f"janitor {janitor} to exit")
    print("bp disconnect refused with a host connected (exit 4) and stopped the idle Broker", file=sys.stderr)


def check_side_by_side(install_a, home_a, install_b, home_b):
    bridge_a = Bridge([os.path.join(install_a, "browser-pilot"), "bridge", "--stdio"], env_with_home(home_a))
    bridge_b = Bridge([os.path.join(install_b, "browser-pilot"), "bridge", "--stdio"], env_with_home(home_b))
    try:
        broker_a = bridge_a.initialize()["broker"]["id"]
        broker_b = bridge_b.initialize()["broker"]["id"]
        pid_a, pid_b = broker_pid(install_a, home_a), broker_pid(install_b, home_b)
        if broker_a == broker_b or pid_a == pid_b or not (alive(pid_a) and alive(pid_b)):
            raise CheckFailed("the two homes do not run two Brokers at once")
        expect_own_executable(pid_a, install_a, "broker")
        expect_own_executable(pid_b, install_b, "broker")
        foreign = bp(install_b, home_a, "disconnect")
        if foreign.returncode == 0 or "protocol_incompatible" not in foreign.stderr:
            raise CheckFailed(f"another installation's bp disconnect: exit {foreign.returncode} {foreign.stderr!r}")
        bridge_a.call("tools/list", {})
    finally:
        bridge_a.close()
        bridge_b.close()
    if not alive(pid_a):
        raise CheckFailed("another installation's bp disconnect stopped the Broker")
    foreign = bp(install_b, home_a, "disconnect")
    if foreign.returncode == 0 or "protocol_incompatible" not in foreign.stderr or not alive(pid_a):
        raise CheckFailed("another installation stopped an idle Broker it did not start")
    stop_broker(install_a, home_a)
    stop_broker(install_b, home_b)
    print("two installations ran two Brokers; the foreign bp disconnect got protocol_incompatible", file=sys.stderr)


def check_launcher(install, cli_js):
    with tempfile.TemporaryDirectory() as home:
        native = bp(install, home, "status").returncode
        via_node = subprocess.run(
            ["node", os.path.join(os.path.dirname(cli_js), "bp.js"), "status"], env=env_with_home(home),
            capture_output=True, timeout=DEADLINE_S, check=False,
        ).returncode
        if native != 3 or via_node != native:
            raise CheckFailed(f"bp status without a Broker: native exit {native}, through node {via_node}")

        def terminated(command, launcher):
            bridge = Bridge(command, env_with_home(home))
            bridge.initialize()
            # The launcher's child is the native bridge (which itself may have started the
            # Broker, a detached process that outlives it on purpose).
            before = set(children(bridge.process.pid)) if launcher else set()
            if launcher and not before:
                raise CheckFailed("the launcher has no native child")
            bridge.process.send_signal(signal.SIGTERM)
            code = bridge.process.wait(timeout=DEADLINE_S)
            for child in before:
                wait_until(lambda: not alive(child), f"launcher child {child} to exit")
            bridge.process.stdin.close()
            return code

        native = terminated([os.path.join(install, "browser-pilot"), "bridge", "--stdio"], False)
        via_node = terminated(["node", cli_js, "bridge", "--stdio"], True)
        stop_broker(install, home)
        if via_node != native:
            raise CheckFailed(f"SIGTERM: native bridge status {native}, through node {via_node}")
    print(f"the launcher passes exit code 3 and SIGTERM (status {native}) through", file=sys.stderr)


def summary(command):
    bridge = Bridge(command, os.environ.copy())
    try:
        init = bridge.initialize()
        tools = bridge.call("tools/list", {})["tools"]
        if not tools:
            raise CheckFailed("tools/list is empty")
        bridge.call("shutdown", {})
    finally:
        bridge.close()
    print(json.dumps({
        "protocol": init["protocol"],
        "executable": init["executable"]["version"],
        "service": init["service"]["version"],
        "tools": sorted(tool["name"] for tool in tools),
    }, sort_keys=True))


def option(args, name):
    return os.path.abspath(args[args.index(name) + 1])


def main(argv):
    try:
        command = argv[0]
        if command == "summary":
            summary(argv[1:])
        elif command == "processes":
            check_processes(option(argv, "--install"), option(argv, "--home"))
        elif command == "disconnect-guard":
            check_disconnect_guard(option(argv, "--install"), option(argv, "--home"))
        elif command == "side-by-side":
            check_side_by_side(option(argv, "--a"), option(argv, "--home-a"), option(argv, "--b"), option(argv, "--home-b"))
        elif command == "launcher":
            check_launcher(option(argv, "--install"), option(argv, "--cli"))
        else:
            raise CheckFailed(f"unknown check {command}")
    except (CheckFailed, OSError, ValueError, KeyError, subprocess.SubprocessError) as error:
        print(f"release_checks.py {argv[0] if argv else ''}: FAILED: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
