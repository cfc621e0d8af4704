"""Chat backends: any OpenAI-compatible server (``openai`` SDK, async) and Anthropic (tool use).

A backend makes one HTTP request per :meth:`complete` and classifies what went wrong:
:class:`TransientError` (timeouts, dropped connections, 408/409/429/5xx: the runner retries,
honouring ``Retry-After``) or :class:`FatalError` (bad key, unknown model, refused request: the
run stops). Retries live in the runner, so the SDKs' own retries are switched off.

Structured output on OpenAI-compatible servers comes in three variants:
``json_schema`` (OpenAI, vLLM, SGLang, llama.cpp's C++ server, Ollama),
``json_object`` with a ``schema`` field (llama-cpp-python's server, llama.cpp) and ``none``
(the prompt alone describes the shape). ``auto`` starts with ``json_schema`` and steps down
when the server says it does not understand the variant. Anthropic gets the schema as the input
schema of a forced tool.

Error text that leaves a backend passes through :meth:`redact`, so the key never reaches logs,
caches or outputs, whatever a server echoes back.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from typing import Any, Protocol

from pydantic import BaseModel

from .config import LLMConfig

log = logging.getLogger("cxreval.llm")

FORMAT_ORDER = ("json_schema", "json_object", "none")
MAX_ERROR_CHARS = 500


class ChatResponse(BaseModel):
    """The text of one answer (JSON for both providers) and its token usage."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None


class TransientError(Exception):
    """Worth retrying: the server was busy, slow or unreachable."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FatalError(Exception):
    """Retrying cannot help (authentication, unknown model, malformed request): stop the run."""


class Backend(Protocol):
    name: str

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse: ...

    async def aclose(self) -> None: ...

    def redact(self, text: str) -> str: ...


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
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_transient(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500


class _Base:
    def __init__(self, config: LLMConfig) -> None:
        config.check_endpoint()
        self.config = config
        self._key = config.api_key()

    def redact(self, text: str) -> str:
        text = str(text)
        if self._key and len(self._key) >= 4:
            text = text.replace(self._key, "[redacted]")
        return text[:MAX_ERROR_CHARS]

    def _status_error(self, status: int, body: str, headers: Any) -> Exception:
        message = self.redact(f"HTTP {status}: {body}")
        if _status_transient(status):
            return TransientError(message, parse_retry_after(headers))
        return FatalError(message)


class OpenAIBackend(_Base):
    """Chat completions on OpenAI or any compatible server (vLLM, SGLang, llama.cpp, Ollama)."""

    name = "openai"

    def __init__(self, config: LLMConfig) -> None:
        super().__init__(config)
        import openai  # imported here: nothing network-related happens at cxreval import

        self._openai = openai
        self.client = openai.AsyncOpenAI(
            base_url=config.endpoint, api_key=self._key, timeout=config.timeout, max_retries=0
        )
        from openai.types.chat import ChatCompletion

        self._completion_type = ChatCompletion
        self.format = "json_schema" if config.response_format == "auto" else config.response_format
        self._auto = config.response_format == "auto"

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
        oa = self._openai
        while True:
            used = self.format
            kwargs: dict[str, Any] = {
                "model": self.config.model,
                "messages": messages,
                "temperature": self.config.temperature,
                "max_tokens": self.config.max_tokens,
            }
            if self.config.seed is not None:
                kwargs["seed"] = self.config.seed
            fmt = self._response_format(schema, name)
            if fmt is not None:
                kwargs["response_format"] = fmt
            try:
                # The SDK's documented request method for bodies sent as is: ``create`` would walk
                # the whole schema and messages on every call (about 3 ms of CPU with 170 entity
                # ids, the bottleneck at high concurrency), and json_object + schema is not OpenAI's.
                completion = await self.client.post(
                    "/chat/completions", body=kwargs, cast_to=self._completion_type
                )
            except oa.APIStatusError as exc:
                body = _body_text(exc)
                if self._auto and self._mentions_format(exc.status_code, body) and used != "none":
                    if self.format == used:  # concurrent calls may have stepped down already
                        self.format = FORMAT_ORDER[FORMAT_ORDER.index(used) + 1]
                        log.warning("server refused response_format %s; using %s", used, self.format)
                    continue
                raise self._status_error(exc.status_code, body, exc.response.headers) from None
            except oa.APITimeoutError:
                raise TransientError(f"timed out after {self.config.timeout:g} s") from None
            except oa.APIConnectionError as exc:
                raise TransientError(self.redact(f"connection error: {_cause(exc)}")) from None
            except oa.APIError as exc:  # e.g. a 200 whose body is not a completion
                raise TransientError(self.redact(f"bad response: {exc}")) from None
            choices = getattr(completion, "choices", None)
            if not choices:
                raise TransientError(self.redact(f"response without choices: {str(completion)[:200]}"))
            choice = choices[0]
            usage = completion.usage
            return ChatResponse(
                text=choice.message.content or "",
                input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                output_tokens=getattr(usage, "completion_tokens", 0) or 0,
                finish_reason=choice.finish_reason,
            )

    async def aclose(self) -> None:
        await self.client.close()


class AnthropicBackend(_Base):
    """Anthropic Messages API; structure comes from a forced tool whose input schema is ours."""

    name = "anthropic"
    format = "tool_use"

    def __init__(self, config: LLMConfig) -> None:
        super().__init__(config)
        import anthropic

        self._anthropic = anthropic
        self.client = anthropic.AsyncAnthropic(
            base_url=config.endpoint, api_key=self._key, timeout=config.timeout, max_retries=0
        )
        import inspect

        self._sdk_temperature = "temperature" in inspect.signature(self.client.messages.create).parameters

    async def complete(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> ChatResponse:
        an = self._anthropic
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        convo = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "messages": convo,
            "tools": [{"name": name, "description": "Record the structured answer.", "input_schema": schema}],
            "tool_choice": {"type": "tool", "name": name},
        }
        if system:
            kwargs["system"] = system
        if self._sdk_temperature:
            kwargs["temperature"] = self.config.temperature
        else:  # recent SDKs dropped the keyword; the Messages API field is unchanged
            kwargs["extra_body"] = {"temperature": self.config.temperature}
        try:
            message = await self.client.messages.create(**kwargs)
        except an.APIStatusError as exc:
            raise self._status_error(exc.status_code, _body_text(exc), exc.response.headers) from None
        except an.APITimeoutError:
            raise TransientError(f"timed out after {self.config.timeout:g} s") from None
        except an.APIConnectionError as exc:
            raise TransientError(self.redact(f"connection error: {_cause(exc)}")) from None
        except an.APIError as exc:
            raise TransientError(self.redact(f"bad response: {exc}")) from None
        text = ""
        for block in message.content:
            if getattr(block, "type", None) == "tool_use":
                text = json.dumps(block.input, ensure_ascii=False)
                break
            if getattr(block, "type", None) == "text" and not text:
                text = block.text
        usage = message.usage
        return ChatResponse(
            text=text,
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
            finish_reason=message.stop_reason,
        )

    async def aclose(self) -> None:
        await self.client.close()


def _body_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if body is not None:
        try:
            return json.dumps(body)[:MAX_ERROR_CHARS]
        except (TypeError, ValueError):
            pass
    try:
        return exc.response.text[:MAX_ERROR_CHARS]
    except Exception:  # noqa: BLE001 - best effort for an error message
        return str(exc)[:MAX_ERROR_CHARS]


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else str(exc)


def make_backend(config: LLMConfig) -> Backend:
    """The backend for ``config.provider`` (checks ``--local-only`` and the key first)."""
    if config.provider == "anthropic":
        return AnthropicBackend(config)
    return OpenAIBackend(config)
