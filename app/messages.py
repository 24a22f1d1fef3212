"""Commands from a host page: the explorer in an iframe accepts tesseraApi's commands by postMessage.

    host -> iframe   {"tessera": 1, "id": 7, "cmd": "select", "args": [0.05, 50.85]}
    iframe -> host   {"tessera": 1, "id": 7, "ok": true, "result": {...}}
                     {"tessera": 1, "id": 7, "ok": false, "error": "one line"}
    iframe -> host   {"tessera": 1, "event": "ready"}   once, when the explorer is ready

Only origins in a setting are obeyed: the explorer's own origin, plus the page parameter
`?origins=https://a.example,https://b.example` and the catalog's `"embed_origins": [...]`. A message
from any other origin gets no reply and no action (the refusal is logged in the console). `"tessera"` is
the contract's version: a message of another version (`"tessera": 2`) gets no reply and no action, and one
line in the console; messages without a `"tessera"` key are not ours and are ignored. The reply goes to the
sender only, addressed to its origin. Errors are one line; the page's status line shows them escaped.
The contract is documented in docs/embedding.md.
"""
from __future__ import annotations

import asyncio
import inspect
from urllib.parse import urlsplit

PROTOCOL = 1
DEFAULT_PORTS = {"http": 80, "https": 443}


class MessageError(ValueError):
    """A message the explorer cannot act on; its text is the one-line reply."""


def normalise_origin(text: str) -> str | None:
    """`scheme://host[:port]` as browsers write an origin, or None for anything that is not one."""
    try:
        u = urlsplit(str(text).strip())
        port = u.port
    except ValueError:
        return None
    if u.scheme not in DEFAULT_PORTS or not u.hostname or u.path not in ("", "/") or u.query or u.fragment \
            or u.username or u.password:
        return None
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return f"{u.scheme}://{host}" + (f":{port}" if port is not None and port != DEFAULT_PORTS[u.scheme] else "")


def allowed_origins(own: str, param: str | None, catalog) -> tuple[list[str], list[str]]:
    """(origins obeyed, entries refused as not being origins): the page's own origin, then `?origins=`
    (comma-separated), then the catalog's embed_origins list."""
    entries = [e for e in (param or "").split(",") if e.strip()]
    if isinstance(catalog, list):
        entries += [str(e) for e in catalog]
    elif catalog is not None:
        entries.append(repr(catalog))
    allowed, bad = [own], []
    for e in entries:
        o = normalise_origin(e)
        if o is None:
            bad.append(e)
        elif o not in allowed:
            allowed.append(o)
    return allowed, bad


def _version_ok(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v == PROTOCOL


def is_ours(data) -> bool:
    return isinstance(data, dict) and _version_ok(data.get("tessera")) and "cmd" in data


def version_refusal(data, origin: str) -> str | None:
    """The console line refusing a message of another contract version; None for any other message."""
    if not isinstance(data, dict) or "tessera" not in data or _version_ok(data["tessera"]):
        return None
    shown = repr(data["tessera"])
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    return (f"tessera: refused a message of contract version {shown} from {str(origin)[:200]} "
            f"(this explorer speaks version {PROTOCOL})")


def parse(data: dict, commands: dict) -> tuple[str, list]:
    """(command name, arguments) of a message, or MessageError naming what is wrong."""
    cmd, args = data.get("cmd"), data.get("args", [])
    if not isinstance(cmd, str) or cmd not in commands:
        shown = cmd if isinstance(cmd, str) else repr(cmd)
        raise MessageError(f"unknown command {shown[:200]!r} (commands: {', '.join(sorted(commands))})")
    if not isinstance(args, list):
        raise MessageError(f"{cmd}: args must be a list, not {type(args).__name__}")
    return cmd, args


def one_line(e: BaseException) -> str:
    """An exception as the one line a user or a host page sees (expected errors carry their own text)."""
    text = str(e).strip().splitlines()
    if isinstance(e, (ValueError, KeyError, TypeError)) and text:
        return text[0]
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


async def answer(commands: dict, data: dict) -> dict:
    """The reply to one message (run the command; any failure becomes ok: false with one line)."""
    reply = {"tessera": PROTOCOL, "id": data.get("id")}
    try:
        name, args = parse(data, commands)
        result = commands[name](*args)
        if inspect.isawaitable(result):
            result = await result
        return {**reply, "ok": True, "result": result}
    except (Exception, asyncio.CancelledError) as e:  # a command given up is answered too
        return {**reply, "ok": False, "error": one_line(e)}


def _plain(value):
    """A message's id or note, when it is a string or a number; else None."""
    return value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def install(state, commands: dict, origins: list[str], queue) -> None:
    """Obey messages from `origins` (the page forwards each with its origin, app/web/boot.js), each command in its
    turn in `queue` (app/commands.py); tell the host page (if one of them) that the explorer is ready."""
    from app import documents, page, views
    allowed = set(origins)

    async def handle(msg_id, origin: str, data: dict, unreadable: str | None) -> None:
        reply = {"tessera": PROTOCOL, "id": data.get("id"), "ok": False, "error": unreadable} if unreadable \
            else await answer(commands, data)
        if not reply["ok"]:
            state.status = views.html("<b>Message from {} failed:</b> <span class='message-error'>{}</span>",
                                      origin, reply["error"])
        page.post_answer({"type": "host-reply", "id": msg_id, "origin": origin, "reply": reply},
                         lambda e: {"type": "host-reply", "id": msg_id, "origin": origin,
                                    "reply": {**reply, "ok": False, "result": None,
                                              "error": f"its result cannot be sent ({one_line(e)})"}})

    def on_message(msg) -> None:
        unreadable = None
        try:
            data = documents.plain(msg.data, "the message")
        except ValueError as e:  # nested too deeply to convert: answered with why, if its origin is obeyed
            data = {key: _plain(getattr(msg.data, key, None)) for key in ("tessera", "id")}
            data, unreadable = {**data, "cmd": None}, str(e)
        except Exception:
            data = None  # not plain data: not ours
        if isinstance(data, dict) and "unreadable" in data:  # the page could not copy it (app/web/boot.js)
            unreadable = f"the message cannot be read ({_plain(data['unreadable'])})"
        origin = str(msg.origin)
        refusal = version_refusal(data, origin)
        if refusal:
            page.post({"type": "console", "level": "warn", "text": refusal})
        elif is_ours(data) and origin in allowed:
            queue.submit(handle(msg.id, origin, data, unreadable))
            return
        elif is_ours(data):
            page.post({"type": "console", "level": "warn",
                       "text": f"tessera: refused a message from {origin} (allowed: {', '.join(origins)})"})
        page.post({"type": "host-reply", "id": msg.id, "reply": None})  # no answer: the page forgets it

    page.on("host", on_message)
    if page.framed():  # in a frame: say ready to the host, if its origin is allowed
        host = page.info("host")
        for origin in ([host] if host else origins):
            if origin in allowed:
                page.post({"type": "host-ready", "origin": origin})
