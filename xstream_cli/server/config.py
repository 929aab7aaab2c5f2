"""``xs serve``'s settings: the Config that CONFIG GET / SET reads and
changes, and the Redis version the server reports.

Who imports it: the server's connection and commands, and the porcelain
``xs serve`` that builds a Config from its options.
"""

REDIS_VERSION = "8.10.0"        # the Redis whose stream semantics xs has
# descriptors a client may hold: its socket, and while blocked a Canceller's
# pipe, the eventfd the inotify hub rings and its group queue's directory
FDS_PER_CLIENT = 5
DEFAULT_MAXCLIENTS = 10000     # Redis's, and xs serve's --maxclients
RESERVED_FDS = 64               # the store, listening sockets, logs, notification files


def loopback(host):
    """Whether ``host`` (a peer address; None for a Unix socket) is this machine."""
    if host is None:
        return True
    return host in ("localhost", "::1") or host.startswith("127.") or host.startswith("::ffff:127.")


class Config:
    """The server's settings (CONFIG GET / SET)."""

    def __init__(self, bind="127.0.0.1", port=6379, unixsocket=None, unixsocketperm=0o700,
                 requirepass=None, protected_mode=True, maxclients=DEFAULT_MAXCLIENTS,
                 max_bulk=512 << 20, output_limit=256 << 20, durable=True, db="", tls_port=0,
                 tls_cert_file=None, tls_key_file=None, tls_ca_cert_file=None, tls_auth_clients="yes",
                 native=True, maxclients_requested=None, metrics=None):
        self.bind = bind
        self.port = port
        self.unixsocket = unixsocket
        self.unixsocketperm = unixsocketperm
        self.requirepass = requirepass or None
        self.protected_mode = protected_mode
        self.maxclients = maxclients
        self.metrics = metrics        # (host, port) of /metrics (xs serve --metrics), or None
        # whether the user asked for maxclients (fit_open_files warns then);
        # None: asked for unless it is the default
        self.maxclients_requested = (maxclients != DEFAULT_MAXCLIENTS if maxclients_requested is None
                                     else maxclients_requested)
        self.max_bulk = max_bulk
        self.output_limit = output_limit
        self.durable = durable
        self.fd_clients = None           # the most clients the open-file limit allows (fit_open_files)
        self.db = db
        self.tls_port = tls_port         # 0: no TLS listener
        self.tls_cert_file = tls_cert_file
        self.tls_key_file = tls_key_file
        self.tls_ca_cert_file = tls_ca_cert_file
        self.tls_auth_clients = tls_auth_clients     # yes | no | optional, as Redis
        # the serve extra: hiredis reads requests, uvloop runs the event loop,
        # where installed; False: the pure-Python path (XS_SERVE_PURE=1)
        self.native = native
        self.latency_tracking = True             # INFO latencystats (xstream_cli.server.stats)
        self.latency_percentiles = [50.0, 99.0, 99.9]

    def tls_problem(self):
        """Why the TLS options cannot work (a usage error), or None."""
        if not self.tls_port:
            return None
        if not (self.tls_cert_file and self.tls_key_file):
            return "--tls-port needs --tls-cert-file and --tls-key-file"
        if self.tls_auth_clients != "no" and not self.tls_ca_cert_file:
            return ("--tls-auth-clients %s needs --tls-ca-cert-file (the CA that signs the clients' "
                    "certificates); give --tls-auth-clients no to take clients without one" % self.tls_auth_clients)
        return None

    def tls_context(self):
        """The server's ssl.SSLContext (TLS 1.2 or later).  Raises OSError
        (ssl.SSLError) for a certificate, key or CA that cannot be used."""
        import ssl
        for opt, path in (("--tls-cert-file", self.tls_cert_file), ("--tls-key-file", self.tls_key_file),
                          ("--tls-ca-cert-file", self.tls_ca_cert_file)):
            if path:
                try:
                    with open(path, "rb"):
                        pass
                except OSError as e:
                    raise OSError("TLS: cannot read %s %s: %s" % (opt, path, e.strerror or e))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        except ssl.SSLError as e:
            raise OSError("TLS: --tls-cert-file %s and --tls-key-file %s are not a PEM certificate and its "
                          "private key (%s)" % (self.tls_cert_file, self.tls_key_file, e.reason or e))
        if self.tls_ca_cert_file:
            try:
                ctx.load_verify_locations(self.tls_ca_cert_file)
            except ssl.SSLError as e:
                raise OSError("TLS: --tls-ca-cert-file %s holds no PEM CA certificate (%s)" % (
                    self.tls_ca_cert_file, e.reason or e))
        ctx.verify_mode = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "no": ssl.CERT_NONE}[
            self.tls_auth_clients]
        return ctx

    # name -> (getter, setter or None)
    def params(self):
        yes = lambda b: "yes" if b else "no"        # noqa: E731
        return {
            "bind": (lambda: self.bind or "", None),
            "port": (lambda: str(self.port if self.unixsocket is None else 0), None),
            "tls-port": (lambda: str(self.tls_port or 0), None),
            "tls-cert-file": (lambda: self.tls_cert_file or "", None),
            "tls-key-file": (lambda: self.tls_key_file or "", None),
            "tls-ca-cert-file": (lambda: self.tls_ca_cert_file or "", None),
            "tls-auth-clients": (lambda: self.tls_auth_clients, None),
            "unixsocket": (lambda: self.unixsocket or "", None),
            "unixsocketperm": (lambda: "%o" % self.unixsocketperm if self.unixsocket else "0", None),
            "requirepass": (lambda: self.requirepass or "", self._set_pass),
            "protected-mode": (lambda: yes(self.protected_mode), self._set_protected),
            "maxclients": (lambda: str(self.maxclients), self._set_maxclients),
            "proto-max-bulk-len": (lambda: str(self.max_bulk), self._set_int("max_bulk", 1 << 20)),
            "client-output-buffer-limit": (
                lambda: "normal %d %d 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
                % (self.output_limit, self.output_limit), self._set_output_limit),
            "databases": (lambda: "1", None),
            "appendonly": (lambda: "yes", None),
            "appendfsync": (lambda: "always" if self.durable else "no", None),
            "save": (lambda: "", None),
            "timeout": (lambda: "0", None),
            "dir": (lambda: self.db, None),
            "latency-tracking": (lambda: yes(self.latency_tracking), self._set_latency_tracking),
            "latency-tracking-info-percentiles": (
                lambda: " ".join(percentile_text(p) for p in self.latency_percentiles), self._set_percentiles),
        }

    def _set_latency_tracking(self, v):
        if v.lower() not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        self.latency_tracking = v.lower() == "yes"

    def _set_percentiles(self, v):
        """Percentiles separated by single spaces, each 0.0 .. 100.0 ("" for none),
        with Redis's errors (config.c)."""
        out = []
        for w in v.split(" ") if v else []:        # each space a separator, as sdssplitlen
            p = _string2d(w)
            if p is None:
                raise ValueError("Invalid latency-tracking-info-percentiles parameters")
            if not 0.0 <= p <= 100.0:
                raise ValueError("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
            out.append(p)
        self.latency_percentiles = out

    def _set_maxclients(self, v):
        before = self.maxclients
        self._set_int("maxclients", 1)(v)
        if self.fd_clients is not None and self.maxclients > self.fd_clients:
            self.maxclients = before
            raise ValueError("The operating system is not able to handle the specified number of clients, "
                             "try with %d" % self.fd_clients)

    def fit_open_files(self):
        """Make room for ``maxclients`` in the open-file limit, as Redis
        does at start (adjustOpenFilesLimit): raise the soft RLIMIT_NOFILE
        toward the hard one, and if that is not enough, lower maxclients
        to what fits (with descriptors in reserve).

        Logged here, on the server's log: a warning when the user asked
        for that many clients (--maxclients other than the default), as
        Redis warns; otherwise one info line, since nobody asked for
        10000 clients (Redis's default needs 10032 descriptors, xs's
        5 a client: 50064, more than many hard limits, so every start
        would warn).  Returns None (the caller logs nothing more)."""
        import logging
        import resource
        need = self.maxclients * FDS_PER_CLIENT + RESERVED_FDS
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < need:
            target = need if hard == resource.RLIM_INFINITY else min(need, hard)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError):
                pass
        if soft == resource.RLIM_INFINITY:
            return None
        self.fd_clients = max(1, (soft - RESERVED_FDS) // FDS_PER_CLIENT)
        if self.maxclients <= self.fd_clients:
            return None
        asked, self.maxclients = self.maxclients, self.fd_clients
        log = logging.getLogger("xs.serve")
        if self.maxclients_requested:
            log.warning("you requested maxclients of %d requiring at least %d max file descriptors; the open "
                        "files limit is %d: maxclients has been reduced to %d to compensate for low ulimit. "
                        "If you need higher maxclients increase 'ulimit -n'.", asked, need, soft, self.maxclients)
        else:
            log.info("maxclients has been reduced to %d to fit the open files limit (%d; the default of %d "
                     "clients needs %d); for more clients raise 'ulimit -n'", self.maxclients, soft, asked, need)
        return None

    def _set_pass(self, v):
        self.requirepass = v or None

    def _set_protected(self, v):
        v = v.lower()
        if v not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        self.protected_mode = v == "yes"

    def _set_int(self, attr, lowest):
        def set_(v):
            try:
                n = int(v)
            except ValueError:
                raise ValueError("argument couldn't be parsed into an integer")
            if n < lowest:
                raise ValueError("argument must be between %d and 9223372036854775807 inclusive" % lowest)
            setattr(self, attr, n)
        return set_

    def _set_output_limit(self, v):
        """``normal <hard> <soft> <seconds>`` (other classes accepted and
        ignored: xs serve has no replicas or pub/sub); the hard limit is
        the one applied (bytes, or with kb/mb/gb)."""
        words = v.split()
        if len(words) % 4 or not words:
            raise ValueError("Wrong number of arguments in buffer limit configuration.")
        for i in range(0, len(words), 4):
            cls = words[i].lower()
            if cls not in ("normal", "slave", "replica", "pubsub"):
                raise ValueError("Invalid client class specified in buffer limit configuration.")
            hard = _memory(words[i + 1])
            if hard is None or _memory(words[i + 2]) is None or not words[i + 3].isdigit():
                raise ValueError("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
            if cls == "normal":
                self.output_limit = hard or (1 << 62)



def percentile_text(p):
    """A percentile as Redis prints it ("%f", trailing zeros trimmed): 50, 99.9."""
    return ("%f" % p).rstrip("0").rstrip(".")


def _string2d(word):
    """A number as Redis's string2d reads it (strtod, the whole word, no
    leading space, not NaN), or None."""
    if not word or word[0].isspace() or word[-1].isspace() or "_" in word:
        return None
    try:
        v = float(word)
    except ValueError:
        return None
    return None if v != v else v


def _memory(word):
    """Redis's memory units: 100, 10kb, 5mb, 1gb (None if not one)."""
    w = word.lower()
    for unit, mult in (("kb", 1024), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1000), ("m", 10 ** 6),
                       ("g", 10 ** 9), ("b", 1)):
        if w.endswith(unit):
            w, m = w[:-len(unit)], mult
            break
    else:
        m = 1
    return int(w) * m if w.isdigit() else None
