"""What a reply looks like on a terminal or in a pipe.

- ``reply``: the reply values a command returns beyond plain Python
  values (Redis's own types: a status, a map, a verbatim string ...).
- ``render``: a reply rendered as redis-cli does (raw, noraw) or as JSON.
- ``pretty``: the colourful, streamed rendering for a person at a
  terminal (rich, imported only when it is asked for).

Who imports it: the command table (reply values), the session and the
porcelain (rendering).  It imports neither the engine's runtime nor the
CLI's app; the wire format of ``xs serve`` is xstream_cli.server.resp.
"""
