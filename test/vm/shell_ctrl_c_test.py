#!/usr/bin/env python3
"""`run --shell` on a terminal: Ctrl-C reaches the program in the guest, not qemu.

Boots the test VM with --shell on a pseudo-terminal, starts `sleep 300` in the
guest's shell, types Ctrl-C, and expects the shell to report the sleep ended by
SIGINT (status 130) while the guest keeps running; then `exit` powers it off and
run ends with status 0. Every wait is bounded.

    shell_ctrl_c_test.py BUILD_DIR/vm/run
"""
import os
import pty
import select
import signal
import sys
import time

run = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execv(run, [run, "--timeout", "600", "--shell"])

seen = b""


def expect(pattern, seconds):
    """Reads the terminal until `pattern` shows up, and consumes the output up to it;
    False after `seconds` or at EOF."""
    global seen
    deadline = time.monotonic() + seconds
    while True:
        at = seen.find(pattern)
        if at >= 0:
            seen = seen[at + len(pattern):]
            return True
        if time.monotonic() >= deadline:
            return False
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            return False
        if not data:
            return False
        seen += data
        sys.stdout.write(data.decode(errors="replace"))
        sys.stdout.flush()


def finish(ok, why):
    if not ok:
        print(f"\nFAILED: {why}")
    try:
        os.killpg(pid, signal.SIGTERM)  # run and qemu: the pty's process group
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
        time.sleep(0.2)
    if status is None:
        os.killpg(pid, signal.SIGKILL)
        print("FAILED: run still running 30 s after SIGTERM")
        sys.exit(1)
    sys.exit(0 if ok else 1)


# Each step waits for the guest's answer: typed ahead, input is lost to readline
# starting up or to the Ctrl-C.
prompt = b"# "
if not expect(b"rdma_asio guest: shell", 600) or not expect(prompt, 120):
    finish(False, "no guest shell prompt within 720 s")
# The product proves the command ran (the terminal echoes what is typed).
os.write(fd, b"echo started-$((6 * 7)); sleep 300\r")
if not expect(b"started-42", 60):
    finish(False, "the guest's shell did not run the command within 60 s")
time.sleep(2)
os.write(fd, b"\x03")
if not expect(prompt, 60):
    finish(False, "no prompt within 60 s of Ctrl-C: it did not end the guest's sleep")
os.write(fd, b'echo "status=$?"\r')
if not expect(b"status=130", 60):
    finish(False, "Ctrl-C did not end the guest's sleep with SIGINT (status=130 not seen)")
if not expect(prompt, 60):
    finish(False, "no prompt after the status")
os.write(fd, b"exit\r")
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        expect(b"\0", 0)
        code = os.waitstatus_to_exitcode(status)
        print(f"\nrun --shell exited with status {code}")
        sys.exit(0 if code == 0 else 1)
    expect(b"\0", 0.5)
finish(False, "the guest did not power off within 120 s of `exit`")
