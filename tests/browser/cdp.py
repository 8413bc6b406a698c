"""cdp.py -- a small Chrome DevTools Protocol client for the browser test.

Headless Chromium (Debian's `chromium`) is started with
--remote-debugging-pipe: the protocol runs over file descriptors 3 (to the
browser) and 4 (from it) as NUL-terminated JSON messages, so nothing listens
on a port and nothing but the Python standard library is needed.

    with Browser() as b:
        page = b.new_page(width=1200, height=900)
        page.load("file:///tmp/a.html")
        n = page.eval("document.querySelectorAll('figure').length")
        png = page.screenshot()
        page.console_errors, page.requests      # what the page logged / fetched

Also decode_png(): the screenshot's pixels, to tell a blank page from a
rendered one.
"""
import base64
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

# Flags that work as root in a container and keep Chromium off the network.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
    "--mute-audio", "--remote-debugging-pipe",
]


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, chromium="chromium", timeout=30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="kvv-chromium-")
        to_r, self.to_w = os.pipe()      # we write, the browser reads fd 3
        self.from_r, from_w = os.pipe()  # the browser writes fd 4, we read

        def child_fds():
            a, b = os.dup(to_r), os.dup(from_w)  # dup first: to_r may already be 3
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        self.proc = subprocess.Popen(
            [chromium] + FLAGS + ["--user-data-dir=" + self.profile, "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=self.log)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []  # (sessionId, method, params) not yet consumed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("Browser.close")
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("no answer from chromium within %.0f s" % self.timeout)
            ready, _, _ = select.select([self.from_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise CdpError("chromium closed the pipe (exit %s); log: %s"
                               % (self.proc.poll(), self.log.name))
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None):
        """Send a command and wait for its answer, keeping events for later."""
        want = self.send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == want:
                if "error" in m:
                    raise CdpError("%s: %s" % (method, m["error"].get("message")))
                return m.get("result", {})
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def wait_event(self, session, method):
        """Wait for an event (one already received counts)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, (s, meth, params) in enumerate(self.events):
                if s == session and meth == method:
                    del self.events[i]
                    return params
            m = self._read_message(deadline)
            if "method" in m:
                self.events.append((m.get("sessionId"), m["method"], m.get("params", {})))

    def new_page(self, width=1200, height=900):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session, width, height)


class Page:
    def __init__(self, browser, session, width, height):
        self.b = browser
        self.s = session
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.console_errors = []
        self.requests = []

    def call(self, method, params=None):
        return self.b.call(method, params, self.s)

    def _collect(self):
        """Move this page's console messages, exceptions and requests out of the queue."""
        keep = []
        for s, meth, p in self.b.events:
            if s != self.s:
                keep.append((s, meth, p))
            elif meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", "")))
                                for a in p.get("args", []))
                self.console_errors.append("console.%s: %s" % (p["type"], args))
            elif meth == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                self.console_errors.append("exception: %s" % d.get("text", d))
            elif meth == "Log.entryAdded" and p["entry"].get("level") == "error":
                self.console_errors.append("log: %s" % p["entry"].get("text"))
            elif meth == "Network.requestWillBeSent":
                self.requests.append(p["request"]["url"])
            elif meth == "Network.loadingFailed":
                self.console_errors.append("load failed: %s" % p.get("errorText"))
        self.b.events = keep

    def load(self, url):
        self.console_errors, self.requests = [], []
        self.b.events = [e for e in self.b.events if e[0] != self.s]
        self.call("Page.navigate", {"url": url})
        self.b.wait_event(self.s, "Page.loadEventFired")
        self.eval("1")  # let pending console events arrive
        self._collect()

    def eval(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in r:
            raise CdpError("evaluate: %s" % r["exceptionDetails"].get("text"))
        self._collect()
        return r["result"].get("value")

    def screenshot(self, scale=1.0, max_height=16000):
        """PNG of the whole page (not only the viewport), scaled by `scale`."""
        m = self.call("Page.getLayoutMetrics")
        size = m.get("cssContentSize") or m["contentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"],
                "height": min(size["height"], max_height), "scale": scale}
        r = self.call("Page.captureScreenshot",
                      {"format": "png", "clip": clip, "captureBeyondViewport": True})
        self._collect()
        return base64.b64decode(r["data"])


def decode_png(data):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB/RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError("PNG: depth %d colour type %d interlace %d not handled"
                                 % (depth, color, interlace))
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp
