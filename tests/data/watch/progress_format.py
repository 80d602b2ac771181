"""A stand-in for tqdm (not installed here) that writes what tqdm 4.x writes, byte for byte in the
common case: the default bar format '{l_bar}{bar}{r_bar}' of tqdm.std.tqdm.format_meter, a bar of
10 cells when the width is unknown (output to a pipe, as under watch), the Unicode block charset,
updates no more often than mininterval (0.1 s), the rate smoothed by tqdm's EMA (smoothing 0.3),
each update written to stderr as '\\r' + text + blanks over the previous text, a newline on close,
and ProgressBar.write() behaving like tqdm.write (clear the bar on stderr, print the line on
stdout, redraw the bar). Used by train_trainer_logs.py and train_tqdm_slow.py; not a test itself.
"""
import sys
import time

_UTF = " " + "".join(chr(c) for c in range(0x258F, 0x2587, -1))   # " ▏▎▍▌▋▊▉█"


def format_interval(t):
    mins, s = divmod(int(t), 60)
    h, m = divmod(mins, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%02d:%02d" % (m, s)


def format_num(n):
    f = ("%.3g" % n).replace("e+0", "e+").replace("e-0", "e-")
    n = str(n)
    return f if len(f) < len(n) else n


def bar(frac, width=10):
    nsyms = len(_UTF) - 1
    full, partial = divmod(int(frac * width * nsyms), nsyms)
    out = _UTF[-1] * full
    if full < width:
        out += _UTF[partial] + _UTF[0] * (width - full - 1)
    return out


def format_meter(n, total, elapsed, prefix="", unit="it", rate=None, postfix=None):
    """tqdm's default line for a known total, ncols unknown, unit_scale off."""
    if total and n >= total + 0.5:
        total = None
    elapsed_str = format_interval(elapsed)
    if rate is None and elapsed:
        rate = n / elapsed
    inv_rate = 1 / rate if rate else None
    rate_noinv_fmt = ("%5.2f" % rate if rate else "?") + unit + "/s"
    rate_inv_fmt = ("%5.2f" % inv_rate if inv_rate else "?") + "s/" + unit
    rate_fmt = rate_inv_fmt if inv_rate and inv_rate > 1 else rate_noinv_fmt
    n_fmt = str(n)
    total_fmt = str(total) if total is not None else "?"
    postfix = ", " + postfix if postfix else ""
    remaining = (total - n) / rate if rate and total else 0
    remaining_str = format_interval(remaining) if rate else "?"
    l_bar = (prefix if prefix[-2:] == ": " else prefix + ": ") if prefix else ""
    r_bar = "| %s/%s [%s<%s, %s%s]" % (n_fmt, total_fmt, elapsed_str, remaining_str, rate_fmt, postfix)
    if total:
        frac = n / total
        l_bar += "%3.0f%%|" % (frac * 100)
        return l_bar + bar(frac) + r_bar
    return "%s%s %s [%s, %s%s]" % (l_bar, n_fmt, unit, elapsed_str, rate_fmt, postfix)


class _EMA(object):
    def __init__(self, smoothing=0.3):
        self.alpha = smoothing
        self.last = 0
        self.calls = 0

    def __call__(self, x=None):
        beta = 1 - self.alpha
        if x is not None:
            self.last = self.alpha * x + beta * self.last
            self.calls += 1
        return self.last / (1 - beta ** self.calls) if self.calls else self.last


class ProgressBar(object):
    def __init__(self, total, desc="", mininterval=0.1, file=None):
        self.total = total
        self.desc = desc
        self.mininterval = mininterval
        self.fp = file or sys.stderr
        self.n = 0
        self.postfix = ""
        self.start_t = self.last_print_t = time.time()
        self.last_print_n = 0
        self._ema_dn = _EMA()
        self._ema_dt = _EMA()
        self._last_len = 0
        self.refresh()

    def _status(self, s):
        self.fp.write("\r" + s + " " * max(self._last_len - len(s), 0))
        self.fp.flush()
        self._last_len = len(s)

    def __str__(self):
        elapsed = time.time() - self.start_t
        rate = self._ema_dn() / self._ema_dt() if self._ema_dt() else None
        return format_meter(self.n, self.total, elapsed, prefix=self.desc, rate=rate, postfix=self.postfix)

    def refresh(self):
        self._status(str(self))

    def update(self, n=1):
        self.n += n
        if self.n - self.last_print_n >= 1:
            cur_t = time.time()
            dt = cur_t - self.last_print_t
            if dt >= self.mininterval:
                dn = self.n - self.last_print_n
                if dt and dn:
                    self._ema_dn(dn)
                    self._ema_dt(dt)
                self.refresh()
                self.last_print_n = self.n
                self.last_print_t = cur_t

    def set_postfix(self, **kwargs):
        parts = []
        for key, value in kwargs.items():
            text = format_num(value) if isinstance(value, (int, float)) else str(value)
            parts.append(key + "=" + text.strip())
        self.postfix = ", ".join(parts)
        self.refresh()

    def clear(self):
        self._status("")
        self.fp.write("\r")
        self.fp.flush()

    def write(self, line):
        """tqdm.write(line): the bar is cleared, the line goes to stdout, the bar is redrawn."""
        self.clear()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self.refresh()

    def close(self):
        self.refresh()
        self.fp.write("\n")
        self.fp.flush()
