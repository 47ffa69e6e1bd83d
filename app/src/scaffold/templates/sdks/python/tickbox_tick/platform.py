"""The two loops that wait for events and feed them to the Dispatcher:
`wasm` for a componentize-py component of the `tick` world (one
`wasi:io/poll` over stdin, keys, resizes and the next timer), and `native`
for running the same source with CPython while debugging (selectors over
stdin, the controlling terminal and SIGWINCH). Neither knows the protocol.
"""

import os
import sys
import time

from .dispatch import Dispatcher
from .draw import paint

# componentize-py bundles the bindings a module imports while the component
# is built (at module level), not ones first imported when `run` starts.
try:
    from componentize_py_types import Err
    from wit_world.imports import monotonic_clock, poll, stdin, stdout, terminal
except ImportError:  # CPython: only `native` runs here
    pass

READ = 64 * 1024
# blocking-write-and-flush takes at most 4096 bytes a call.
WRITE_CHUNK = 4096


def _report(text):
    sys.stderr.write(text + "\n")


def wasm(tick):
    out = stdout.get_stdout()

    def write(data):
        for i in range(0, len(data), WRITE_CHUNK):
            out.blocking_write_and_flush(data[i:i + WRITE_CHUNK])

    def draw(d):
        view = d.view()
        if view is not None:
            terminal.draw(paint(view))

    size = terminal.get_size()
    d = Dispatcher(tick, lambda: monotonic_clock.now() // 1_000_000, size.cols, size.rows, _report)
    requests, keys = stdin.get_stdin(), terminal.keys()
    # Stream pollables are kept for the whole loop; per-wait ones (the next
    # resize, a clock instant) are released at once, so handles never pile up.
    waiting = [requests.subscribe(), keys.subscribe(), terminal.subscribe_resize(size.generation)]
    draw(d)
    while not d.done:
        deadline, clock = d.next_deadline(), None
        if deadline is not None:
            clock = monotonic_clock.subscribe_instant(deadline * 1_000_000)
        ready = poll.poll(waiting if clock is None else waiting + [clock])
        if clock:
            clock.__exit__(None, None, None)
        write(d.timers())
        if 2 in ready:
            size = terminal.get_size()
            waiting[2].__exit__(None, None, None)
            waiting[2] = terminal.subscribe_resize(size.generation)
            write(d.resize(size.cols, size.rows))
        if 1 in ready:
            try:
                write(d.keys(keys.read(READ)))
            except Err:
                pass  # the key stream never closes while the Tick runs
        if 0 in ready:
            try:
                chunk = requests.read(READ)
            except Err:
                return  # stdin closed: every request was answered; exit
            write(d.feed(chunk))
        draw(d)


def native(tick):
    import selectors
    import signal

    tty = None
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        pass  # no terminal: no keys, the view goes to stderr
    view_fd = tty if tty is not None else 2
    saved = None
    if tty is not None:
        import termios
        import tty as ttymod
        saved = termios.tcgetattr(tty)
        ttymod.setraw(tty)

    def size():
        try:
            s = os.get_terminal_size(view_fd)
            return s.columns, s.lines
        except OSError:
            return 120, 30

    def write_all(fd, data):
        while data:
            data = data[os.write(fd, data):]

    d = Dispatcher(tick, lambda: time.monotonic_ns() // 1_000_000, *size(), _report)
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, "stdin")
    if tty is not None:
        sel.register(tty, selectors.EVENT_READ, "keys")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGWINCH, lambda *_: None)
    sel.register(wake_r, selectors.EVENT_READ, "resize")
    try:
        while not d.done:
            view = d.view()
            if view is not None:
                write_all(view_fd, paint(view))
            deadline = d.next_deadline()
            timeout = None if deadline is None else max(0, deadline - time.monotonic_ns() // 1_000_000) / 1000
            for key, _ in sel.select(timeout):
                if key.data == "resize":
                    os.read(wake_r, 512)
                    write_all(1, d.resize(*size()))
                elif key.data == "keys":
                    write_all(1, d.keys(os.read(tty, READ)))
                else:
                    chunk = os.read(0, READ)
                    if not chunk:
                        return  # stdin closed: every request was answered
                    write_all(1, d.feed(chunk))
            write_all(1, d.timers())
    finally:
        if saved is not None:
            import termios
            termios.tcsetattr(tty, termios.TCSADRAIN, saved)
