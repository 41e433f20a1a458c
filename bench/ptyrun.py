"""The live view in a pseudo-terminal, for the bench scripts (soak-live.py, soak-gpu.py,
live-vs-headless.py): start `cbtop` with a real window size, read its frames (keeping the last
few kilobytes, to show why it stopped), press keys, read its RSS, wait for it to exit."""
import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time


class Live:
    def __init__(self, cbtop, args, cwd=None, rows=40, cols=120):
        if os.sep in cbtop:
            cbtop = os.path.abspath(cbtop)  # before the child changes directory to `cwd`
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.environ["TERM"] = "xterm-256color"
                if cwd:
                    os.chdir(cwd)
                os.execvp(cbtop, [cbtop] + args)
            except OSError as e:
                os.write(2, f"cannot run {cbtop}: {e}\n".encode())
            os._exit(127)
        # A real window size (a fresh pty is 0x0).
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.read = 0  # bytes of frames so far
        self.eof = False
        self.tail = b""
        self.status = None  # exit code once it has exited

    def drain(self, seconds):
        """Read frames for `seconds`, or until the child has exited."""
        end = time.time() + seconds
        while time.time() < end and not self.exited():
            if self.eof:
                time.sleep(0.2)
            elif select.select([self.fd], [], [], 0.2)[0]:
                self._read()

    def _read(self):
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        self.eof = not data
        self.read += len(data)
        self.tail = (self.tail + data)[-8192:]

    def exited(self):
        if self.status is None:
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.status = os.waitstatus_to_exitcode(st)
                while not self.eof and select.select([self.fd], [], [], 0.1)[0]:
                    self._read()  # what it wrote last (an error message)
        return self.status is not None

    def press(self, keys):
        os.write(self.fd, keys)

    def wait(self, seconds):
        """Wait up to `seconds` for the exit (reading frames meanwhile); the exit code or None."""
        end = time.time() + seconds
        while not self.exited() and time.time() < end:
            self.drain(0.2)
        return self.status

    def kill(self):
        if not self.exited():
            os.kill(self.pid, signal.SIGTERM)
            if self.wait(5) is None:
                os.kill(self.pid, signal.SIGKILL)
                self.wait(5)

    def rss_kb(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def text(self):
        """The last output as plain text (escape sequences dropped), e.g. cbtop's error."""
        s = self.tail.decode("utf-8", "replace")
        s = re.sub(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>78]|\r", "", s)
        return "\n".join(line.rstrip() for line in s.splitlines() if line.strip())
