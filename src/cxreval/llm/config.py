"""LLM engine settings: one validated model, filled from a YAML file, the environment and CLI flags.

Precedence, lowest to highest: defaults < YAML file (``--llm-config``) < environment
(``CXREVAL_LLM_<FIELD>``, e.g. ``CXREVAL_LLM_MODEL``) < explicit arguments (CLI flags).
The API key itself is never a setting: ``api_key_env`` names the environment variable that
holds it, so keys stay out of files, caches, logs and outputs. That name is printed only when it
looks like a conventional variable name (:data:`SHOWN_ENV_NAME`: capitals, digits and ``_``, at
most 64 characters): anything else (``gsk_...``, ``hf_...``) may be a key pasted by mistake. For
the same reason a file that cannot be read is reported by file, line and column, never by its
lines (:func:`read_config_file`).
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from cxreval.literals import Provider, ResponseFormat, SchemaStyle

DEFAULT_KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_BASE_URL: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
ENV_PREFIX = "CXREVAL_LLM_"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Names that may be printed: conventional variable names. Any other accepted name is never shown.
SHOWN_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


#: OpenAI's reasoning models (o1, o3, o4-mini, GPT-5 and their dated or provider-prefixed names):
#: they refuse ``max_tokens`` (it is ``max_completion_tokens``) and any ``temperature`` but the
#: default with a 400, so the OpenAI backend sends neither.
_REASONING_MODEL = re.compile(r"(?:^|/)(?:o\d+|gpt-5)(?:$|[-.:_])", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names one of OpenAI's reasoning models (see ``_REASONING_MODEL``)."""
    return _REASONING_MODEL.search(model) is not None


class LLMConfigError(ValueError):
    """Settings that cannot be used (bad file, bad value, missing key, non-local endpoint)."""


#: The package each provider's backend needs: httpx2 for both (one JSON POST per call).
PROVIDER_PACKAGES = {"openai": "httpx2", "anthropic": "httpx2"}
LLM_EXTRA = "pip install 'cxreval[llm]'"


def require_backend(provider: str) -> None:
    """Raise :class:`LLMConfigError` naming the extra when ``provider``'s HTTP package is not installed
    (checked without importing it, so a run fails before any pair is judged)."""
    import importlib.util

    package = PROVIDER_PACKAGES.get(provider, provider)
    if importlib.util.find_spec(package) is None:
        raise LLMConfigError(f"the {provider} backend needs the {package!r} package, in the optional extra 'llm': {LLM_EXTRA}")


class LLMConfig(BaseModel):
    """Everything needed to call an LLM judge; the fields that shape answers go into cache keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider = "openai"
    base_url: str | None = Field(None, description="endpoint; None = the provider's public API")
    replicas: list[str] = Field(
        default_factory=list,
        description=(
            "more endpoints serving the same model (vLLM replicas with no load balancer in front): calls are "
            "spread over base_url and these, an endpoint that fails is rested and its calls go to the others"
        ),
    )
    model: str = Field(..., min_length=1)
    api_key_env: str | None = Field(None, repr=False, description="name of the env variable holding the key")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(
        None,
        ge=16,
        le=200_000,
        description=(
            "output tokens per call; unset: sized from each call's answer schema, so the longest answer "
            "the schema allows fits (a dense answer too)"
        ),
    )
    timeout: float = Field(120.0, gt=0, description="deadline per HTTP request (connect and the whole answer), seconds")
    concurrency: int = Field(8, ge=1, le=1024)
    retries: int = Field(4, ge=0, le=20, description="transport retries per call (429, 5xx, timeouts)")
    rate_limit: float | None = Field(None, gt=0, description="max requests per second")
    response_format: ResponseFormat = "auto"
    strict: bool = Field(True, description="json_schema strict flag (OpenAI structured outputs)")
    schema_style: SchemaStyle = Field("sparse", description="dense: one field per entity; sparse: a list")
    max_items: int = Field(40, ge=1, le=400, description="maxItems of sparse entity / mention lists")
    max_evidence_chars: int = Field(200, ge=0, le=2000, description="maxLength of evidence quotes")
    price_input: float = Field(0.0, ge=0, description="USD per million input tokens")
    price_output: float = Field(0.0, ge=0, description="USD per million output tokens")
    max_cost: float | None = Field(None, gt=0, description="USD; stop starting calls once spent")
    local_only: bool = Field(False, description="refuse any endpoint that is not on loopback")
    cache_path: Path | None = Field(None, description="SQLite answer store; None = user cache dir")
    seed: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _url_list(cls, data: Any) -> Any:
        """``base_url: [a, b, ...]`` (YAML) is ``base_url: a`` with replicas ``b, ...``."""
        if isinstance(data, dict) and isinstance(data.get("base_url"), list | tuple):
            urls = list(data["base_url"])
            if not urls:
                raise ValueError("base_url is an empty list")
            data = {**data, "base_url": urls[0], "replicas": [*urls[1:], *data.get("replicas", [])]}
        return data

    @field_validator("replicas")
    @classmethod
    def _replica_urls(cls, value: list[str]) -> list[str]:
        return [v for v in (cls._url(v) for v in value) if v is not None]

    @model_validator(mode="after")
    def _replicas_need_base_url(self) -> LLMConfig:
        if self.replicas and self.base_url is None:
            raise ValueError(
                "replicas need base_url: replicas serve the model at base_url (without it the first "
                "endpoint would be the provider's public API)"
            )
        if len(set(self.endpoints)) != len(self.endpoints):
            raise ValueError("base_url and replicas name an endpoint twice")
        return self

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parts = urlsplit(value)
            host = parts.hostname
        except ValueError:
            raise ValueError("base_url is not a URL") from None
        if parts.username or parts.password:  # checked first: never echo a URL that holds a password
            raise ValueError("base_url must not carry credentials (user:password@); use api_key_env")
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(f"base_url must be an http(s) URL, got {safe_url(value)!r}")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _key_env(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.fullmatch(value):
            # never echo the value: it is often the key itself, pasted by mistake
            raise ValueError(
                "api_key_env takes the NAME of an environment variable (letters, digits, _; "
                "e.g. OPENAI_API_KEY), not the key itself"
            )
        return value

    # -- derived -------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_BASE_URL[self.provider]

    @property
    def key_env(self) -> str:
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]

    @property
    def key_env_shown(self) -> str:
        """How to name the key's variable in a message: the name itself only when it looks like
        a conventional variable name, never a value that may be a key."""
        return shown_env_name(self.key_env)

    @property
    def endpoints(self) -> list[str]:
        """Every endpoint calls may go to: ``endpoint``, then the replicas."""
        return [self.endpoint, *self.replicas]

    @property
    def is_local(self) -> bool:
        return all(is_loopback_url(url) for url in self.endpoints)

    def api_key(self) -> str:
        """The key from the named environment variable.

        A loopback server usually needs none, so a placeholder is sent when the variable is
        unset; any other endpoint without a key is an error naming the variable, never a value.
        """
        value = os.environ.get(self.key_env, "")
        if value:
            return value
        if self.is_local:
            return "sk-local-no-key"
        if SHOWN_ENV_NAME.fullmatch(self.key_env):
            raise LLMConfigError(
                f"no API key: environment variable {self.key_env} is not set (choose another with --api-key-env)"
            )
        raise LLMConfigError(
            "no API key: the value given to --api-key-env (api_key_env) does not look like a variable name "
            "(capitals, digits and _, e.g. OPENAI_API_KEY) and may be a key itself, so it is not shown; "
            "no environment variable of that name is set. Put the key in a variable and give its NAME"
        )

    def check_endpoint(self) -> None:
        """Enforce ``local_only``: only 127.0.0.0/8, ::1 and ``localhost`` pass."""
        if self.local_only and not self.is_local:
            far = next(url for url in self.endpoints if not is_loopback_url(url))
            raise LLMConfigError(f"--local-only: endpoint {far} is not on loopback (127.0.0.0/8, ::1, localhost)")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.price_input + output_tokens * self.price_output) / 1e6

    @property
    def sends_temperature(self) -> bool:
        """False for OpenAI's reasoning models: they sample at their own default temperature."""
        return not (self.provider == "openai" and is_reasoning_model(self.model))

    def temperature_label(self) -> str:
        """The temperature as signatures show it (``default`` where none is sent)."""
        return f"{self.temperature:g}" if self.sends_temperature else "default"

    def max_tokens_for(self, schema: dict[str, Any]) -> int:
        """Output tokens a call with this answer ``schema`` may use: ``max_tokens`` where set, else
        the bound of :func:`~cxreval.llm.schemas.answer_token_bound`."""
        from .schemas import answer_token_bound

        return self.max_tokens if self.max_tokens is not None else answer_token_bound(schema)

    def answer_params(self) -> dict[str, Any]:
        """The settings that can change an answer: part of every cache key and signature."""
        return {
            "provider": self.provider,
            "model": self.model,
            "temperature": self.temperature if self.sends_temperature else "default",
            "max_tokens": self.max_tokens if self.max_tokens is not None else "auto",
            "schema": self.schema_style,
            "max_items": self.max_items,
            "max_evidence_chars": self.max_evidence_chars,
            "response_format": self.response_format,
            "strict": self.strict,
            "seed": self.seed,
        }

    def resolved_cache_path(self) -> Path:
        return self.cache_path or default_cache_path()

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        file: str | Path | None = None,
        *,
        env: dict[str, str] | None = None,
        **overrides: Any,
    ) -> LLMConfig:
        """Merge YAML file, ``CXREVAL_LLM_*`` environment and explicit overrides (``None`` = unset)."""
        data: dict[str, Any] = {}
        where: dict[str, str] = {}
        if file is not None:
            path = Path(file)
            loaded, where = read_config_file(path)
            if "api_key" in loaded:
                raise LLMConfigError(
                    f"{where['api_key']}: keys do not belong in files; set api_key_env to the name of an environment variable"
                )
            data.update(loaded)
        environ = os.environ if env is None else env
        for name in cls.model_fields:
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                data[name] = raw
                where.pop(name, None)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_settings(data, {k: v for k, v in where.items() if overrides.get(k) is None})

    @classmethod
    def from_settings(cls, data: dict[str, Any], where: dict[str, str] | None = None) -> LLMConfig:
        """Validate settings; the error names each bad field, where the file holds it (``where``:
        setting -> ``file line L, column C``) and why, never the value given (a value may be a
        key or a URL with a password), nor an unknown setting's name unless it looks like one."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(_setting_problem(e, where or {}) for e in exc.errors())
            raise LLMConfigError(f"invalid LLM settings: {problems}") from None


#: Unknown setting names that may be printed (lower-case words): anything else may be a key.
SHOWN_SETTING = re.compile(r"[a-z_]{1,40}")
#: Quoted text in a YAML error that may be printed: one (escaped) character or a token such as '<stream end>'.
_SHOWN_QUOTE = re.compile(r"\\?.|<[a-z ]{1,20}>")


def read_config_file(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings of a YAML file, and where each stands (setting -> ``file line L, column C``).

    A file that is not UTF-8 or not YAML is an :class:`LLMConfigError` that gives the file, line
    and column and what is wrong, never the line itself: PyYAML's own message quotes it, and the
    line may hold a key pasted by mistake.
    """
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise LLMConfigError(f"{path}: cannot read LLM config: {exc.strerror or type(exc).__name__}") from None
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line, column = _line_column(before, len(before))
        raise LLMConfigError(f"{path}, line {line}, column {column}: not UTF-8 text") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise LLMConfigError(f"{path}, {_yaml_problem(exc, text)}") from None
    if node is None:  # an empty file: no settings
        return {}, {}
    if not isinstance(loaded, dict) or not isinstance(node, yaml.MappingNode):
        raise LLMConfigError(f"{path}: an LLM config must be a mapping of settings")
    where = {
        k.value: f"{path}, line {k.start_mark.line + 1}, column {k.start_mark.column + 1}"
        for k, _ in node.value
        if isinstance(k, yaml.ScalarNode)
    }
    return loaded, where


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """``line L, column C: not valid YAML: <what PyYAML found>``, without the snippet of the line
    PyYAML quotes, and with any longer quoted text of the file (a tag, an alias) left out."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        line, column = mark.line + 1, mark.column + 1
    else:  # a ReaderError: a character YAML does not allow, at a position
        line, column = _line_column(text, int(getattr(exc, "position", 0)))
    problem = _unquoted(getattr(exc, "problem", None) or getattr(exc, "reason", None) or "cannot be read")
    context, started = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and started is not None:
        problem += f" ({_unquoted(context)}, started at line {started.line + 1}, column {started.column + 1})"
    return f"line {line}, column {column}: not valid YAML: {problem} (the line is not shown: it may hold a key)"


def _unquoted(message: object) -> str:
    """A PyYAML message with quoted text of the file left out, but for one character or a token."""
    return re.sub(r"'([^']*)'", lambda m: m.group(0) if _SHOWN_QUOTE.fullmatch(m.group(1)) else "(not shown)", str(message))


def _setting_problem(error: Any, where: dict[str, str]) -> str:
    """One validation error as ``setting (file, line, column): why``; an unknown setting is named
    only when its name looks like a setting's (:data:`SHOWN_SETTING`)."""
    loc = [str(p) for p in error["loc"]]
    head = loc[0] if loc else ""
    label = ".".join(loc) or "config"
    if error["type"] == "extra_forbidden" and not SHOWN_SETTING.fullmatch(head):
        label = "a setting whose name is not shown (it may be a key)"
    at = f" ({where[head]})" if head in where else ""
    return f"{label}{at}: {error['msg']}"


def shown_env_name(name: str) -> str:
    """``name`` if it may be printed (:data:`SHOWN_ENV_NAME`), else a description that does not echo it."""
    if SHOWN_ENV_NAME.fullmatch(name):
        return name
    return "(the value given to --api-key-env: not shown, it does not look like a variable name and may be a key)"


def safe_url(url: str) -> str:
    """A URL fit to print: any ``user:password@`` part is replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(not a URL)"
    if parts.username is None and parts.password is None:
        return url
    netloc = "[credentials]@" + parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=netloc).geturl()


def is_loopback_url(url: str) -> bool:
    """True when the URL's host is ``localhost`` or a loopback IP literal (no DNS lookup)."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_cache_path() -> Path:
    """``$CXREVAL_CACHE_DIR`` or ``$XDG_CACHE_HOME/cxreval`` (``~/.cache/cxreval``), file ``llm-answers.sqlite``."""
    base = os.environ.get("CXREVAL_CACHE_DIR")
    if base:
        return Path(base) / "llm-answers.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "cxreval" / "llm-answers.sqlite"
