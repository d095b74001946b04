"""A stand-in for every implementer CLI, driven by a JSON scenario.

Installed under any binary name by a shim (`exec python fake_cli.py SCENARIO "$@"`).
It records each call (argv, stdin, cwd, chosen environment variables), answers
version probes, and for a dispatch runs the scenario's actions: print events
or bytes, write files, spawn grandchildren, ignore SIGTERM, sleep, exit with
any code or die by a signal.
"""

import os
import signal
import sys
import time

VERSION_WORDS = ("version", "changelog")


def record(scenario, kind, argv, stdin):
    directory = scenario.get("record_dir")
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    keys = scenario.get("env_keys", [])
    entry = {
        "kind": kind,
        "argv": argv,
        "stdin": stdin.decode("utf-8", errors="replace"),
        "cwd": os.getcwd(),
        "env": {k: os.environ[k] for k in keys if k in os.environ},
        "pid": os.getpid(),
        "cgroup": own_cgroup(),
        "parent_cgroup": own_cgroup(f"/proc/{os.getppid()}/cgroup"),
    }
    # Written whole under a hidden name, then linked in: a fake killed mid-way
    # (a relay aborting its version probe) never leaves half a record.
    # Not named by pid alone: confined fakes run in PID namespaces of their own, where two
    # at once can both be pid 2.
    staged = os.path.join(directory, f".staged-{os.getpid()}-{os.urandom(6).hex()}")
    with open(staged, "w") as handle:
        handle.write(repr(entry))  # a Python literal: no json import here
    for n in range(10000):
        try:
            os.link(staged, os.path.join(directory, f"{n:04d}.rec"))
        except FileExistsError:
            continue
        break
    os.unlink(staged)


def own_cgroup(source="/proc/self/cgroup"):
    """This process's cgroup v2 (or the one `source` names); None where there is none."""
    try:
        with open(source) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def move_parent_in(mount):
    """A hostile move: once the relay has left the run's cgroup, put it back in."""
    own = os.path.join(mount, own_cgroup().lstrip("/"))
    parent = f"/proc/{os.getppid()}/cgroup"
    while True:
        with open(parent) as handle:
            if not any(line == "0::" + own_cgroup() for line in handle.read().splitlines()):
                break
        time.sleep(0.01)
    with open(os.path.join(own, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getppid()))


def write_out(stream, data):
    stream.buffer.write(data)
    stream.buffer.flush()


def grandchild(spec):
    import subprocess

    code = "import os, signal, time\n"
    if spec.get("setsid"):
        code += "os.setsid()\n"  # a daemon: out of the process group and the session
    if spec.get("ignore_term"):
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    elif spec.get("term_write"):
        # A late writer: it writes when told to stop, then leaves.
        path, content = spec["term_write"]
        code += (
            "def stop(*_):\n"
            f"    with open({path!r}, 'w') as f: f.write({content!r})\n"
            "    os._exit(0)\n"
            "signal.signal(signal.SIGTERM, stop)\n"
        )
    handshake = spec.get("term_write") or spec.get("setsid")
    if handshake:
        code += "os.write(1, b'r')\n"  # set up: the fake goes on only now
    if spec.get("late_write"):
        # A daemon that writes once its parent is long gone.
        path, content, delay = spec["late_write"]
        code += f"time.sleep({delay!r})\nopen({path!r}, 'w').write({content!r})\n"
    code += "while True: time.sleep(3600)\n"
    stdio = None if spec.get("hold_pipes") else subprocess.DEVNULL
    ready = subprocess.PIPE if handshake else stdio
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", code], stdin=subprocess.DEVNULL, stdout=ready, stderr=stdio
    )
    if handshake:
        proc.stdout.read(1)
        proc.stdout.close()
    if spec.get("pid_file"):
        with open(spec["pid_file"], "w") as handle:
            handle.write(str(proc.pid))


def act(action):
    if "stdout" in action:
        write_out(sys.stdout, action["stdout"].encode())
    elif "stdout_hex" in action:
        write_out(sys.stdout, bytes.fromhex(action["stdout_hex"]))
    elif "stdout_bytewise" in action:
        for byte in action["stdout_bytewise"].encode():
            write_out(sys.stdout, bytes([byte]))
            time.sleep(action.get("delay", 0.002))
    elif "stderr" in action:
        write_out(sys.stderr, action["stderr"].encode())
    elif "spam" in action:
        spec = action["spam"]
        line = spec["line"].encode()
        block = line * max(1, 65536 // len(line))
        lines_per_block = block.count(b"\n")
        remaining = spec["lines"]
        while remaining > 0:
            take = min(remaining, lines_per_block)
            write_out(sys.stdout, block if take == lines_per_block else line * take)
            remaining -= take
    elif "repeat" in action:
        repeat(action["repeat"])
    elif "write" in action:
        path, content = action["write"]
        with open(path, "w") as handle:
            handle.write(content)
    elif "append" in action:
        path, content = action["append"]
        with open(path, "a") as handle:
            handle.write(content)
    elif "append_hex_name" in action:
        name, content = action["append_hex_name"]
        with open(bytes.fromhex(name), "a") as handle:
            handle.write(content)
    elif "symlink" in action:
        target_hex, link = action["symlink"]
        os.unlink(link)
        os.symlink(bytes.fromhex(target_hex), link)
    elif "git" in action:
        import subprocess

        subprocess.run(["git", *action["git"]], check=True, capture_output=True)
    elif "sleep" in action:
        time.sleep(action["sleep"])
    elif "grandchild" in action:
        grandchild(action["grandchild"])
    elif "pid_file" in action:
        with open(action["pid_file"], "w") as handle:
            handle.write(str(os.getpid()))
    elif "unlink" in action:
        os.unlink(action["unlink"])
    elif "mkdir" in action:
        os.makedirs(action["mkdir"])
    elif "rmdir" in action:
        os.rmdir(action["rmdir"])
    elif "rewrite_keep_mtime" in action:
        # Same bytes count, different bytes, and the old times put back.
        path, content = action["rewrite_keep_mtime"]
        info = os.stat(path)
        with open(path, "w") as handle:
            handle.write(content)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    elif "chmod" in action:
        path, mode = action["chmod"]
        os.chmod(path, int(mode, 8))
    elif "wait" in action:
        while True:
            time.sleep(3600)
    elif "move_parent_in" in action:
        move_parent_in(action["move_parent_in"])
    elif "wait_for_file" in action:  # a test's go-ahead
        while not os.path.exists(action["wait_for_file"]):
            time.sleep(0.01)


def repeat(spec):
    """Write spec["text"] spec["count"] times; "@N@" in it becomes the repetition's number.

    Unlike "spam" the text needs no newline: one JSON string can run across
    many writes, and numbered events can carry distinct ids.
    """
    text, count = spec["text"], spec["count"]
    out = sys.stdout.buffer
    if "@N@" in text:
        for n in range(count):
            out.write(text.replace("@N@", str(n)).encode())
    else:
        data = text.encode()
        per_block = max(1, 65536 // max(1, len(data)))
        block = data * per_block
        while count > 0:
            take = min(count, per_block)
            out.write(block if take == per_block else data * take)
            count -= take
    out.flush()


def on_term(spec):
    if spec == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif isinstance(spec, dict):

        def handler(_signum, _frame):
            if spec.get("delay"):  # a slow shutdown: told to stop, it takes its time
                time.sleep(spec["delay"])
            if spec.get("write"):
                path, content = spec["write"]
                with open(path, "w") as handle:
                    handle.write(content)
            os._exit(spec.get("exit", 0))

        signal.signal(signal.SIGTERM, handler)


def finish(spec):
    sys.stdout.flush()
    sys.stderr.flush()
    if spec.get("die_by"):
        os.kill(os.getpid(), getattr(signal, spec["die_by"]))
        time.sleep(5)
    os._exit(spec.get("exit", 0))


def load_scenario(path):
    """The scenario file's JSON."""
    import json

    with open(path) as handle:
        return json.load(handle)


def main():
    scenario = load_scenario(sys.argv[1])
    argv = sys.argv[2:]
    is_version = "--version" in argv or (argv[:1] and argv[0] in VERSION_WORDS and len(argv) == 1)
    if is_version:
        spec = scenario.get("version", {})
        record(scenario, "version", argv, b"")
        if spec.get("hang"):
            while True:
                time.sleep(3600)
        for action in spec.get("actions", []):
            act(action)
        if "stdout" in spec:
            write_out(sys.stdout, spec["stdout"].encode())
        else:
            write_out(sys.stdout, b"fake-cli 0.0.0\n")
        if spec.get("stderr"):
            write_out(sys.stderr, spec["stderr"].encode())
        finish(spec)
    spec = scenario.get("run", {})
    on_term(spec.get("on_term"))
    stdin = b"" if spec.get("skip_stdin") else sys.stdin.buffer.read()
    record(scenario, "run", argv, stdin)
    for action in spec.get("actions", []):
        act(action)
    finish(spec)


if __name__ == "__main__":
    main()
