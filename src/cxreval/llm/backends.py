"""Chat backends: any OpenAI-compatible server and Anthropic (tool use), over httpx2 (async).

A backend makes one HTTP request per :meth:`complete` and classifies what went wrong:
:class:`TransientError` (timeouts, dropped connections, 408/409/429/5xx: the runner retries,
honouring ``Retry-After``) or :class:`FatalError` (bad key, unknown model, refused request: the
run stops). Retries live in the runner. ``timeout`` is a deadline for the whole request
(connect, send, every byte of the answer): httpx2's own timeout bounds each read only, so
:func:`post_within` cancels a request at its deadline (:class:`DeadlineExceeded`). Each request
is one JSON POST with the provider's documented headers; no provider SDK is used (they would add
nothing here: bodies are sent as built and answers read as text, see docs/dependencies.md).

Structured output on OpenAI-compatible servers comes in three variants:
``json_schema`` (OpenAI, vLLM, SGLang, llama.cpp's C++ server, Ollama),
``json_object`` with a ``schema`` field (llama-cpp-python's server, llama.cpp) and ``none``
(the prompt alone describes the shape). ``auto`` starts with ``json_schema`` and steps down
when the server says it does not understand the variant. Anthropic gets the schema as the input
schema of a forced tool.

Error text that leaves a backend passes through :meth:`redact`, the one redactor of
:mod:`cxreval.llm.redact` (any run of 8 or more characters of the key, found in the text with its
JSON, URL and HTML escapes decoded, is replaced first; only then is the text cut), so the key
never reaches logs, caches or outputs, whatever a server echoes back.

Answers are read as raw text and validated here: an HTTP 200
whose body is cut off, nested too deeply, has no message, a non-string content or nonsensical
usage is a :class:`MalformedResponse` (a :class:`TransientError`: retried, then listed as a
failure; it carries the body's length, so the runner charges the estimated cost of a request a
provider bills anyway), never a crash. Usage that is missing or not a non-negative integer is
reported as ``None``, and the runner estimates it.

No redirect is ever followed (the report text would be posted again to wherever it points), and
a loopback endpoint or ``--local-only`` ignores proxy settings from the environment
(``HTTP_PROXY``, ``ALL_PROXY``, ...), so no byte leaves the machine.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel

from .config import LLMConfig, is_reasoning_model, require_backend
from .redact import Redactor

log = logging.getLogger("cxreval.llm")

FORMAT_ORDER: tuple[Literal["json_schema", "json_object", "none"], ...] = ("json_schema", "json_object", "none")
MAX_ERROR_CHARS = 500
#: The Messages API version sent to Anthropic (its ``anthropic-version`` header).
ANTHROPIC_VERSION = "2023-06-01"


class ChatResponse(BaseModel):
    """The text of one answer (JSON for both providers) and its token usage.

    ``input_tokens`` / ``output_tokens`` are ``None`` when the server reported no usable usage.
    """

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None


def _tokens(usage: Any, name: str) -> int | None:
    """A usage count the server reported, if it is a non-negative integer (bools are not)."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _loads_object(body: str, what: str) -> dict[str, Any]:
    """A response body as a JSON object, or a TransientError saying what is wrong with it."""
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        raise TransientError(f"malformed response: the {what} body is not complete JSON ({len(body)} characters)") from None
    except RecursionError:
        raise TransientError(
            f"malformed response: the {what} body is nested too deeply to read ({len(body)} characters)"
        ) from None
    except (TypeError, ValueError) as exc:  # e.g. an integer of more digits than Python converts
        raise TransientError(
            f"malformed response: the {what} body holds a value that cannot be read ({str(exc)[:120]})"
        ) from None
    if not isinstance(value, dict):
        raise TransientError(f"malformed response: the {what} body is not a JSON object")
    return value


def http_client(config: LLMConfig) -> Any:
    """The HTTP client of a backend: never follows redirects; no proxies for local endpoints
    (``trust_env=False``: no ``HTTP_PROXY`` / ``ALL_PROXY`` from the environment)."""
    import httpx2  # imported here: nothing network-related happens at cxreval import

    local = config.local_only or config.is_local
    return httpx2.AsyncClient(timeout=config.timeout, follow_redirects=False, trust_env=not local)


class HTTPStatusError(Exception):
    """A response whose status is not 2xx: its status, body text (unredacted: the caller redacts)
    and headers."""

    def __init__(self, status: int, body: str, headers: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.headers = headers


class TransientError(Exception):
    """Worth retrying: the server was busy, slow or unreachable."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MalformedResponse(TransientError):
    """An HTTP 200 whose body is unusable: retried like any transport error, but a provider bills
    it, so the runner charges its estimated cost (``body_bytes``: the size of what came back)."""

    def __init__(self, message: str, body_bytes: int) -> None:
        super().__init__(message)
        self.body_bytes = body_bytes


class DeadlineExceeded(TransientError):
    """No whole answer within the request's deadline (``--timeout``: connect, send and the whole
    response together, however slowly a server drips its bytes): retried, then listed as
    ``deadline``."""


class FatalError(Exception):
    """Retrying cannot help (authentication, unknown model, malformed request): stop the run."""


async def post_within(
    client: Any, url: str, body: dict[str, Any], headers: dict[str, str], deadline: float, timeout: float
) -> str:
    """POST ``body`` as JSON to ``url``; the answer's text, or :class:`HTTPStatusError` for a
    status outside 2xx. Cancelled when the event loop's clock passes ``deadline``: httpx2's
    ``timeout`` bounds each phase of a request (each read, for one), so a server that sends one
    byte at a time would keep it alive for ever. Transport faults are classified here:
    a timeout is :class:`DeadlineExceeded`, a connection or protocol fault :class:`TransientError`
    (unredacted: the caller redacts)."""
    import httpx2

    try:
        async with asyncio.timeout_at(deadline):
            response = await client.post(url, json=body, headers=headers)
    except (TimeoutError, httpx2.TimeoutException):
        raise DeadlineExceeded(_deadline_message(timeout)) from None
    except httpx2.TransportError as exc:
        raise TransientError(f"connection error: {type(exc).__name__}: {exc}") from None
    except httpx2.HTTPError as exc:
        raise TransientError(f"bad response: {type(exc).__name__}: {exc}") from None
    if not 200 <= response.status_code < 300:
        raise HTTPStatusError(response.status_code, response.text, response.headers)
    return response.text


def _deadline_message(timeout: float) -> str:
    return f"deadline: no whole answer within {timeout:g} s (--timeout covers connect and the whole response)"


class Backend(Protocol):
    name: str

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse: ...

    async def aclose(self) -> None: ...

    def redact(self, text: str, limit: int | None = MAX_ERROR_CHARS) -> str: ...


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError, IndexError):  # a header no date reader understands
        return None


def _status_transient(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500


class _Base:
    #: The provider's headers, set by each backend.
    headers: dict[str, str]

    def __init__(self, config: LLMConfig) -> None:
        config.check_endpoint()
        self.config = config
        self._key = config.api_key()
        self._redactor = Redactor(self._key)
        #: Set once a server refused an automatic output-token limit as too large: the limit then.
        self.token_cap: int | None = None
        #: The HTTP client (:func:`http_client`), made once the endpoint and key are checked.
        self.client: Any = http_client(config)

    async def aclose(self) -> None:
        await self.client.aclose()

    def max_tokens(self, schema: dict[str, Any]) -> int:
        """The output-token limit of a call with ``schema``: the config's, or the schema's bound
        under ``token_cap`` once a server has refused a larger one."""
        limit = self.config.max_tokens_for(schema)
        return limit if self.token_cap is None else min(limit, self.token_cap)

    def _step_down_tokens(self, status: int, body: str, sent: int) -> bool:
        """True (retry) when a server refused an automatic limit of ``sent`` tokens as too large:
        later calls ask for at most ``TOKEN_STEP_DOWN``. A limit the user set is never changed."""
        if self.config.max_tokens is not None or sent <= TOKEN_STEP_DOWN or not _too_many_tokens(status, body):
            return False
        if self.token_cap is None:
            log.warning(
                "%s refused %d output tokens as too many: asking for at most %d (set --max-tokens to choose)",
                self.config.model,
                sent,
                TOKEN_STEP_DOWN,
            )
        self.token_cap = TOKEN_STEP_DOWN
        return True

    async def _post(self, url: str, body: dict[str, Any], deadline: float) -> str:
        """:func:`post_within` with this backend's client and headers; a transport fault's message
        redacted (a status outside 2xx stays an :class:`HTTPStatusError`, redacted by
        :meth:`_status_error`)."""
        try:
            return await post_within(self.client, url, body, self.headers, deadline, self.config.timeout)
        except DeadlineExceeded:
            raise
        except TransientError as exc:  # a connection or protocol fault
            raise TransientError(self.redact(str(exc))) from None

    def redact(self, text: str, limit: int | None = MAX_ERROR_CHARS) -> str:
        """``text`` with every long piece of the key replaced, in whatever escapes it stands
        (:class:`~cxreval.llm.redact.Redactor`), then cut to ``limit`` characters (None keeps it
        whole): redacted first, so a key straddling the cut cannot survive in part."""
        return self._redactor(text, limit)

    def _status_error(self, status: int, body: str, headers: Any) -> Exception:
        if 300 <= status < 400:
            where = urlsplit(str(headers.get("location", "") if headers is not None else ""))
            target = f"{where.scheme}://{where.hostname}" if where.hostname else "another address"
            return FatalError(
                self.redact(
                    f"HTTP {status}: the endpoint redirected to {target}; redirects are never followed (the report "
                    "text would be sent again); give the final address as --base-url"
                )
            )
        message = self.redact(f"HTTP {status}: {body}")
        if _status_transient(status):
            return TransientError(message, parse_retry_after(headers))
        return FatalError(message)


def _refuses_classic_params(status: int, body: str) -> bool:
    """A 400 saying ``max_tokens`` or a temperature is not supported ("Unsupported parameter:
    'max_tokens' ... Use 'max_completion_tokens'"): how OpenAI answers the classic parameters for
    a reasoning model. Not a limit that is too large (vLLM names both fields then)."""
    low = body.lower()
    unsupported = "unsupported" in low or "not supported" in low or "does not support" in low
    return status == 400 and unsupported and ("max_tokens" in low or "temperature" in low)


#: The output-token limit a backend falls back to when a server refuses an automatic one as too
#: large (the fixed value of cxreval 0.1).
TOKEN_STEP_DOWN = 4096


def _too_many_tokens(status: int, body: str) -> bool:
    """A 400 saying the output-token limit is more than the model or its context allows (OpenAI,
    vLLM, Anthropic word it differently; each names the field and a maximum)."""
    low = body.lower()
    named = "max_tokens" in low or "max_completion_tokens" in low or "context length" in low
    too_big = any(w in low for w in ("too large", "at most", "maximum", "exceed"))
    return status == 400 and named and too_big


class OpenAIBackend(_Base):
    """Chat completions on OpenAI or any compatible server (vLLM, SGLang, llama.cpp, Ollama)."""

    name = "openai"

    def __init__(self, config: LLMConfig) -> None:
        super().__init__(config)
        self.url = config.endpoint.rstrip("/") + "/chat/completions"
        self.headers = {"Authorization": f"Bearer {self._key}"}
        self.format = "json_schema" if config.response_format == "auto" else config.response_format
        self._auto = config.response_format == "auto"
        #: Send ``max_completion_tokens`` and no ``temperature``: a reasoning model by name, or a
        #: server that refused the classic parameters once (then for the rest of the run).
        self.reasoning = is_reasoning_model(config.model)

    def _params(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The sampling and length parameters this model accepts (the length sized for ``schema``)."""
        if self.reasoning:
            return {"max_completion_tokens": self.max_tokens(schema)}
        return {"temperature": self.config.temperature, "max_tokens": self.max_tokens(schema)}

    def _response_format(self, schema: dict[str, Any], name: str) -> dict[str, Any] | None:
        if self.format == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": self.config.strict}}
        if self.format == "json_object":
            return {"type": "json_object", "schema": schema}
        return None

    @staticmethod
    def _mentions_format(status: int, body: str) -> bool:
        low = body.lower()
        return status in (400, 422, 500) and ("response_format" in low or "json_schema" in low)

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse:
        deadline = asyncio.get_running_loop().time() + self.config.timeout  # format step-downs included
        while True:
            used, classic = self.format, not self.reasoning
            kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages, **self._params(schema)}
            if self.config.seed is not None:
                kwargs["seed"] = self.config.seed
            fmt = self._response_format(schema, name)
            if fmt is not None:
                kwargs["response_format"] = fmt
            try:
                body_text = await self._post(self.url, kwargs, deadline)
            except HTTPStatusError as exc:
                body = exc.body
                sent = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens") or 0
                if self._step_down_tokens(exc.status, body, sent):
                    continue
                if classic and _refuses_classic_params(exc.status, body):
                    if not self.reasoning:  # concurrent calls may have learned it already
                        self.reasoning = True
                        log.warning(
                            "%s refused max_tokens / temperature: sending max_completion_tokens and no "
                            "temperature, as to a reasoning model",
                            self.config.model,
                        )
                    continue
                if self._auto and self._mentions_format(exc.status, body) and used != "none":
                    if self.format == used:  # concurrent calls may have stepped down already
                        self.format = FORMAT_ORDER[FORMAT_ORDER.index(used) + 1]
                        log.warning("server refused response_format %s; using %s", used, self.format)
                    continue
                raise self._status_error(exc.status, body, exc.headers) from None
            return _parsed(self._parse, body_text)

    def _parse(self, body_text: str) -> ChatResponse:
        """A chat completion read defensively: every malformed shape is a TransientError."""
        doc = _loads_object(body_text, "chat completion")
        choices = doc.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TransientError("malformed response: no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise TransientError("malformed response: the choice has no message")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise TransientError(f"malformed response: message content is a {type(content).__name__}, not text")
        finish = choices[0].get("finish_reason")
        usage = doc.get("usage")
        return ChatResponse(
            text=content or "",
            input_tokens=_tokens(usage, "prompt_tokens"),
            output_tokens=_tokens(usage, "completion_tokens"),
            finish_reason=finish if isinstance(finish, str) else None,
        )


class AnthropicBackend(_Base):
    """Anthropic Messages API; structure comes from a forced tool whose input schema is ours."""

    name = "anthropic"
    format = "tool_use"

    def __init__(self, config: LLMConfig) -> None:
        super().__init__(config)
        self.url = config.endpoint.rstrip("/") + "/v1/messages"
        self.headers = {"x-api-key": self._key, "anthropic-version": ANTHROPIC_VERSION}

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        convo = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.max_tokens(schema),
            "messages": convo,
            "tools": [{"name": name, "description": "Record the structured answer.", "input_schema": schema}],
            "tool_choice": {"type": "tool", "name": name},
        }
        if system:  # the system prompt (instructions, entity list) is the same for every call: cached
            kwargs["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        kwargs["temperature"] = self.config.temperature
        deadline = asyncio.get_running_loop().time() + self.config.timeout
        try:
            body_text = await self._post(self.url, kwargs, deadline)
        except HTTPStatusError as exc:
            if self._step_down_tokens(exc.status, exc.body, kwargs["max_tokens"]):
                return await self.complete(messages, schema, name)  # once: the limit is now at its floor
            raise self._status_error(exc.status, exc.body, exc.headers) from None
        return _parsed(self._parse, body_text)

    def _parse(self, body_text: str) -> ChatResponse:
        """A Message read defensively: the forced tool's input, else the first text block."""
        doc = _loads_object(body_text, "message")
        content = doc.get("content")
        if not isinstance(content, list):
            raise TransientError("malformed response: the message has no content list")
        text: str | None = None
        for block in content:
            if not isinstance(block, dict):
                raise TransientError("malformed response: a content block is not an object")
            if block.get("type") == "tool_use":
                if not isinstance(block.get("input"), dict):
                    raise TransientError("malformed response: the tool input is not an object")
                try:
                    text = json.dumps(block["input"], ensure_ascii=False)
                except (RecursionError, TypeError, ValueError):
                    raise TransientError("malformed response: the tool input is nested too deeply to read") from None
                break
            if block.get("type") == "text" and text is None:
                if not isinstance(block.get("text"), str):
                    raise TransientError("malformed response: a text block holds no text")
                text = block["text"]
        stop = doc.get("stop_reason")
        usage = doc.get("usage")
        return ChatResponse(
            text=text or "",
            input_tokens=_prompt_tokens(usage),
            output_tokens=_tokens(usage, "output_tokens"),
            finish_reason=stop if isinstance(stop, str) else None,
        )


def _prompt_tokens(usage: Any) -> int | None:
    """Every prompt token of an Anthropic answer: its ``input_tokens`` leave out the tokens written to
    or read from the prompt cache, which are counted here too, at the input price (Anthropic bills a
    cache read at a tenth of it and a cache write at 1.25 times: the cost shown is above the bill
    once the cache is warm, below it on a call that writes the cache)."""
    base = _tokens(usage, "input_tokens")
    if base is None:
        return None
    cached = (_tokens(usage, name) or 0 for name in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    return base + sum(cached)


def _parsed(parse: Any, body_text: Any) -> ChatResponse:
    """``parse(body_text)``; anything wrong with an HTTP 200's body is a :class:`MalformedResponse`
    (with the body's size, for the ledger), whatever the parser raised."""
    text = body_text if isinstance(body_text, str) else str(body_text)
    size = len(text.encode("utf-8", "replace"))
    try:
        return parse(text)
    except MalformedResponse:
        raise
    except TransientError as exc:
        raise MalformedResponse(str(exc), size) from None
    except (RecursionError, TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise MalformedResponse(f"malformed response: {type(exc).__name__} while reading the body", size) from None


def make_backend(config: LLMConfig) -> Backend:
    """The backend for ``config.provider`` (checks ``--local-only`` and the key first); with
    replicas, a :class:`BalancedBackend` over one backend per endpoint."""
    require_backend(config.provider)
    if config.replicas:
        return BalancedBackend(config)
    if config.provider == "anthropic":
        return AnthropicBackend(config)
    return OpenAIBackend(config)


#: Seconds an endpoint rests after its n-th consecutive failure: 1, 2, 4 ... at most this.
MAX_REST = 30.0


class EndpointHealth(BaseModel):
    """What one endpoint of a :class:`BalancedBackend` has done so far."""

    url: str
    calls: int = 0
    answers: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    in_flight: int = 0
    resting_until: float = 0.0  # time.monotonic(); 0 = healthy
    last_error: str = ""

    @property
    def healthy(self) -> bool:
        return self.resting_until <= time.monotonic()


class BalancedBackend:
    """Calls spread over several endpoints serving the same model (vLLM replicas with no load
    balancer in front), client side.

    Each call goes to the healthy endpoint with the fewest calls in flight (ties in turn). A
    transient failure (connection refused, timeout, 429, 5xx) rests that endpoint for 1, 2, 4 ...
    seconds (at most :data:`MAX_REST`) and is raised as usual, so the runner's retry goes to
    another endpoint; an answer makes it healthy again. When every endpoint rests, the one whose
    rest ends first is tried. A fatal error (a bad key, an unknown model) is raised at once: the
    replicas serve the same model with the same key, so it would fail everywhere. Answers do not
    depend on the endpoint (it is in no cache key), so a rerun resumes whichever answered.
    """

    name = "balanced"

    def __init__(self, config: LLMConfig) -> None:
        single = [config.model_copy(update={"base_url": url, "replicas": []}) for url in config.endpoints]
        self.members: list[Backend] = [make_backend(c) for c in single]
        self.health = [EndpointHealth(url=url) for url in config.endpoints]
        self._turn = 0

    def _pick(self) -> int:
        healthy = [i for i, h in enumerate(self.health) if h.healthy]
        if not healthy:
            return min(range(len(self.health)), key=lambda i: self.health[i].resting_until)
        least = min(self.health[i].in_flight for i in healthy)
        ready = [i for i in healthy if self.health[i].in_flight == least]
        self._turn += 1
        return ready[self._turn % len(ready)]

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse:
        i = self._pick()
        h = self.health[i]
        h.calls += 1
        h.in_flight += 1
        try:
            resp = await self.members[i].complete(messages, schema, name)
        except FatalError:
            raise
        except Exception as exc:  # transient or a transport surprise: rest this endpoint, let the runner retry
            h.failures += 1
            h.consecutive_failures += 1
            h.resting_until = time.monotonic() + min(MAX_REST, 2.0 ** (h.consecutive_failures - 1))
            h.last_error = self.redact(f"{type(exc).__name__}: {exc}", 200)
            raise
        finally:
            h.in_flight -= 1
        h.answers += 1
        h.consecutive_failures = 0
        h.resting_until = 0.0
        return resp

    async def aclose(self) -> None:
        for member in self.members:
            await member.aclose()

    def redact(self, text: str, limit: int | None = MAX_ERROR_CHARS) -> str:
        return self.members[0].redact(text, limit)  # one key for every replica
