"""What xs worker tells its user while it runs: a JSON event per entry
(--json), the progress line on a terminal, the summary, and one line per
failed entry.  A mixin of the Worker (loop.py), whose attributes it
reads (json, err, stats, running, max_deliveries, retry_delay ...)."""
import sys
import time

from xstream_cli.porcelain.worker.children import _show


class Reports:
    """The Worker's reporting methods."""

    def _event(self, kind, d, **extra):
        if not self.json or self.stdout_gone:
            return
        from storage.ops.exchange import dumps, enc
        rec = {"event": kind, "stream": enc(self.stream), "id": d.id.decode("ascii"),
               "deliveries": d.deliveries}
        rec.update(extra)
        try:
            sys.stdout.buffer.write((dumps(rec) + "\n").encode("utf-8"))
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            self.stdout_gone = True
            self.stopping = True
        except OSError as e:
            self.stdout_gone = True
            self.stopping = True
            self.err.line("xs: cannot write output: %s" % (e.strerror or e))

    def _summary(self, final=False):
        s = self.stats
        took = time.monotonic() - self.started
        rate = s["acked"] / took if took > 0 else 0.0
        text = "xs worker: %d processed, %d failed, %d dead-lettered" % (s["acked"], s["failed"], s["dead"])
        if final:
            if s["released"]:
                text += ", %d released" % s["released"]
            return text + " in %.1fs (%.1f/s)" % (took, rate)
        return text + ", %.1f/s, %d running" % (rate, len(self.running))

    def _progress(self, force=False):
        if not self.err.tty or self.quiet:
            return
        now = time.monotonic()
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            self.err.progress(self._summary())

    def _failure_line(self, d, status, last):
        """``1795...-0 failed (exit 3), attempt 2/3, retry in 200ms``: one
        line per failed entry, for a person and for cron's mail."""
        text = "xs worker: %s failed (%s), attempt %d" % (d.id.decode("ascii"), status.decode("utf-8", "replace"),
                                                         d.deliveries)
        if self.max_deliveries:
            text += "/%d" % self.max_deliveries
        if last:
            return text + ", to the dead-letter stream %s" % _show(self.dl)
        if self.once:
            return text + ", stays pending for the next run"
        if self.retry_delay == 0:
            return text + ", given back to the group"
        return text + ", retry in %dms" % self.retry_delay
