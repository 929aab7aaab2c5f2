"""What INFO's commandstats and errorstats sections report, and the
counters of its stats and persistence sections that come from replies:
per command, its calls, the time the engine spent on them, and how many
were rejected (refused before running: a wrong arity, NOAUTH) or failed
(ran and answered an error); per error code (the first word of an error
reply: ERR, NOGROUP, WRONGTYPE ...), how many were sent.

Counted on the event loop, when a reply is sent (a blocked read once,
with its final reply; the commands of an EXEC as commands of their own,
as Redis does).

Who imports it: the server's connection (counts) and commands (INFO).
"""

from storage.errors import RedisError


class Stats:
    """The server's reply counters (INFO; CONFIG RESETSTAT zeroes them)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.commands = {}            # name -> [calls, usec, rejected, failed]
        self.errors = {}              # error code -> replies
        self.error_replies = 0
        self.dirty = 0                # write commands that succeeded (rdb_changes_since_last_save)

    def error(self, e):
        code = str(e).split(" ", 1)[0] or "ERR"
        self.errors[code] = self.errors.get(code, 0) + 1
        self.error_replies += 1

    def reply(self, item, r):
        """Count the reply ``r`` sent for the Item ``item``."""
        failed = isinstance(r, RedisError)
        if failed:
            self.error(r)
        name = item.name
        if name is None:              # an unknown command: an error, no command
            return
        st = self.commands.get(name)
        if st is None:
            st = self.commands[name] = [0, 0, 0, 0]
        if item.rejected:
            st[2] += 1
            return
        st[0] += 1
        st[1] += item.usec
        if failed:
            st[3] += 1
        elif item.write:
            self.dirty += 1

    def replies(self, items, replies):
        commands = self.commands
        for it, r in zip(items, replies):
            st = commands.get(it.name)
            if st is None or it.rejected or isinstance(r, RedisError):
                self.reply(it, r)
                continue
            st[0] += 1                # the common case of reply(): a call that succeeded
            st[1] += it.usec
            if it.write:
                self.dirty += 1

    def commandstats(self):
        out = []
        for name in sorted(self.commands):
            calls, usec, rejected, failed = self.commands[name]
            out.append(("cmdstat_" + name, "calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d"
                        % (calls, usec, usec / calls if calls else 0.0, rejected, failed)))
        return out

    def errorstats(self):
        return [("errorstat_" + code, "count=%d" % n) for code, n in sorted(self.errors.items())]
