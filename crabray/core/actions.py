"""``Action``: a typed operation whose signature and docstring are its schema.

``@action`` turns a function into an ``Action`` (CRAB's model): the signature
becomes a pydantic ``parameters`` model, the return hint a ``returns`` model,
and the Google-style docstring the description shown to agents. Parameters
named in ``KEPT_PARAMS`` (``env``, ``submission``, ``trajectory``) are injected
at run time and never appear in the schema.

Example:
    >>> @action
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.
    ...
    ...     Args:
    ...         a: The first number.
    ...         b: The second number.
    ...     '''
    ...     return a + b
    >>> add.run(a=2)
    3
    >>> add(b=5).run(a=2)   # calling binds arguments: a closed action
    7
"""

from __future__ import annotations

import copy
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, Self

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model

from crabray.core.env import Env
from crabray.core.errors import ActionError, ActionParameterError

KEPT_PARAMS: tuple[str, ...] = ("env", "submission", "trajectory")
"""Parameter names filled by crabray at run time: the environment, the agent's submission,
and (for a task's scorer) the episode's trajectory as JSON text."""

_MAX_PIPE_PARAMS = 1


class Action(BaseModel):
    """A unit operation an agent or a setup list performs in an environment.

    Args:
        name: Identifier the agent calls it by.
        entry: The function that does the work.
        parameters: Pydantic model of the parameters the caller provides.
        returns: Pydantic model with one field, ``returns``, typed as the result.
        description: What the action does, shown to agents.
        kept_params: Parameters crabray injects (``env``, ``submission``, ``trajectory``).
        env_name: The environment the action belongs to, when fixed.
        local: Runs without a sandbox: ``env`` is the episode's root environment.
        bound: Arguments fixed by calling the action (see ``__call__``).
        sealed: Called with positional arguments (CRAB's closed action): parameters
            with a default that were not bound keep their default and are no longer
            offered to the caller.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    entry: Callable[..., Any]
    parameters: type[BaseModel]
    returns: type[BaseModel]
    description: str | None = None
    kept_params: tuple[str, ...] = ()
    env_name: str | None = None
    local: bool = False
    bound: dict[str, Any] = Field(default_factory=dict)
    sealed: bool = False

    _decorator_args: dict[str, Any] = PrivateAttr(default_factory=dict)
    _parts: tuple[Action, ...] = PrivateAttr(default=())
    """The actions a combination (``>>``, ``+``, ``&``, ``|``, ``~``) was made of."""

    def __eq__(self, other: object) -> bool:
        """Identity, not field equality: actions are graph nodes and setup steps."""
        return self is other

    def __hash__(self) -> int:
        """The object's identity, as ``__eq__`` compares."""
        return id(self)

    def __repr__(self) -> str:
        """The class and the label, e.g. ``Evaluator(path_exists(path='a.txt'))``."""
        return f"{type(self).__name__}({self.label})"

    @property
    def label(self) -> str:
        """The name with its bound arguments, e.g. ``path_exists(path='a.txt')``."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.bound.items())
        return f"{self.name}({args})" if args else self.name

    @property
    def open_parameters(self) -> dict[str, Any]:
        """Parameter fields the caller still has to (or may) provide.

        A sealed action offers only the required ones it still lacks.
        """
        return {
            n: f
            for n, f in self.parameters.model_fields.items()
            if n not in self.bound and not (self.sealed and not f.is_required())
        }

    @property
    def required_parameters(self) -> list[str]:
        """Open parameters without a default."""
        return [n for n, f in self.open_parameters.items() if f.is_required()]

    @property
    def is_closed(self) -> bool:
        """True when the action can run without any argument from the caller."""
        return not self.required_parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Self:
        """Bind arguments and return a new, (partly) closed action; nothing runs.

        As in CRAB: positional arguments close the action (its parameters with
        a default keep it and leave the schema, so ``add(5)`` offers nothing);
        keyword arguments alone bind just those. Either way the description
        gains CRAB's suffix `` Input: (args) {kwargs}``.

        Raises:
            ActionParameterError: An argument names no parameter, or is given twice.
        """
        open_names = list(self.open_parameters)
        if len(args) > len(open_names):
            raise ActionParameterError(
                self.name, [("*args", f"got {len(args)} positional arguments for {open_names}")]
            )
        positional = dict(zip(open_names, args, strict=False))
        doubled = sorted(set(positional) & set(kwargs))
        unknown = sorted(set(kwargs) - set(open_names))
        problems = [(n, "given twice") for n in doubled]
        problems += [(n, f"no such open parameter; open: {open_names}") for n in unknown]
        if problems:
            raise ActionParameterError(self.name, problems)
        update: dict[str, Any] = {
            "bound": {**self.bound, **positional, **kwargs},
            "entry": functools.partial(self.entry, **positional, **kwargs),
            "sealed": self.sealed or bool(args),
        }
        if self.description is not None:
            update["description"] = f"{self.description} Input: {args} {kwargs}"
        return self.model_copy(update=update)

    def set_kept_param(self, **params: Any) -> Self:
        """A copy with kept parameters fixed (CRAB's API): e.g. ``set_kept_param(env=my_env)``.

        The parameters given leave ``kept_params``; others are ignored, as in CRAB.
        """
        fixed = {k: v for k, v in params.items() if k in self.kept_params}
        return self.model_copy(
            update={
                "entry": functools.partial(self.entry, **fixed),
                "kept_params": tuple(k for k in self.kept_params if k not in fixed),
            }
        )

    def get_required_params(self) -> dict[str, Any]:
        """CRAB's name for the open parameters without a default, with their fields."""
        return {n: self.open_parameters[n] for n in self.required_parameters}

    def on(self, env_name: str) -> Self:
        """A copy of this action that runs in the environment ``env_name``."""
        return self.model_copy(update={"env_name": env_name})

    @property
    def parts(self) -> tuple[Action, ...]:
        """The actions this one combines (empty for an action made from a function)."""
        return self._parts

    def bound_problems(self) -> list[tuple[str, str]]:
        """What is wrong with the arguments bound to this action and to the actions it combines.

        What running it would find first (``validate_arguments``), found without
        running it: an argument of the wrong type, a value out of range. A
        parameter still open is not a problem here.

        Returns:
            ``(action.parameter, message)`` pairs; empty when every bound argument validates.
        """
        problems: list[tuple[str, str]] = []
        if self.bound:
            try:
                self.parameters.model_validate(self.bound)
            except ValidationError as exc:
                problems += [
                    (".".join([self.name, *(str(p) for p in err["loc"])]), err["msg"])
                    for err in exc.errors()
                    if err["type"] != "missing"
                ]
        for part in self._parts:
            problems += part.bound_problems()
        return problems

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Merge ``arguments`` with the bound ones and validate them against ``parameters``.

        Raises:
            ActionParameterError: Naming the action, each bad parameter and the problem.
        """
        fixed = set(self.parameters.model_fields) - set(self.open_parameters)
        overlap = sorted(set(arguments) & fixed)
        if overlap:
            raise ActionParameterError(self.name, [(n, "is fixed by the task") for n in overlap])
        try:
            model = self.parameters.model_validate({**self.bound, **arguments})
        except ValidationError as exc:
            problems = [
                (".".join(str(p) for p in err["loc"]) or "(arguments)", err["msg"])
                for err in exc.errors()
            ]
            raise ActionParameterError(self.name, problems) from exc
        return {name: getattr(model, name) for name in self.parameters.model_fields}

    def run(self, env: Env | None = None, /, **arguments: Any) -> Any:
        """Validate ``arguments`` and run the action in ``env``.

        Raises:
            ActionParameterError: The arguments do not validate.
        """
        return self.invoke({"env": env}, arguments)

    @property
    def runs_in_sandbox(self) -> bool:
        """CRAB's rule: a plain function (no kept ``env``, not ``local``) runs in its sandbox.

        Such an action is handed to its environment's ``run_plain`` (the
        sandbox's guest process runs it); an action that takes ``env`` runs
        here and drives the sandbox through it.
        """
        return not self.local and "env" not in self.kept_params

    def invoke(self, context: dict[str, Any], arguments: dict[str, Any]) -> Any:
        """Run with validated ``arguments`` and the kept parameters taken from ``context``.

        An action that :attr:`runs_in_sandbox` goes to ``context["env"].run_plain``
        when the environment has one (a sandbox of an episode); otherwise it runs here.
        """
        values = self.validate_arguments(arguments)
        for kept in self.kept_params:
            values[kept] = context.get(kept)
        run_plain = getattr(context.get("env"), "run_plain", None)
        if self.runs_in_sandbox and run_plain is not None:
            return run_plain(self, values)
        return self.entry(**values)

    def to_openai_json_schema(self) -> dict[str, Any]:
        """CRAB's schema of the action: ``{"name", "description", "parameters"}``.

        ``parameters`` is the JSON schema of the open parameters (bound ones are
        left out). For the tool definition a chat-completions API accepts, use
        ``to_openai_tool``.
        """
        return {
            "name": self.name,
            "description": self.description or self.name,
            "parameters": self._parameters_schema(),
        }

    def to_openai_tool(self) -> dict[str, Any]:
        """The tool definition an OpenAI-compatible chat-completions API accepts.

        ``{"type": "function", "function": {"name", "description", "parameters"}}``;
        bound parameters are left out: the agent cannot (and need not) set them.
        """
        return {"type": "function", "function": self.to_openai_json_schema()}

    def _parameters_schema(self) -> dict[str, Any]:
        schema = copy.deepcopy(_model_schema(self.parameters))
        offered = self.open_parameters
        properties = {k: v for k, v in schema.get("properties", {}).items() if k in offered}
        for prop in properties.values():
            prop.pop("title", None)
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        required = [r for r in schema.get("required", []) if r in offered]
        if required:
            parameters["required"] = required
        if "$defs" in schema:
            parameters["$defs"] = schema["$defs"]
        return parameters

    def __rshift__(self, other: Action) -> Action:
        """Pipe: run ``self``, feed its return value to ``other``'s one required parameter.

        The result is named ``<self>_pipe_<other>`` (CRAB's name, a valid tool name).

        Raises:
            ActionError: ``other`` does not have exactly one required open parameter,
                or its type cannot take ``self``'s return type.
        """
        targets = other.required_parameters
        if len(targets) != _MAX_PIPE_PARAMS:
            raise ActionError(
                f"cannot pipe '{self.name}' into '{other.name}': it must have exactly one "
                f"required open parameter to receive the value, it has {targets or 'none'}"
            )
        target = targets[0]
        produced = self.returns.model_fields["returns"].annotation
        wanted = other.parameters.model_fields[target].annotation
        if not _compatible(produced, wanted):
            raise ActionError(
                f"cannot pipe '{self.name}' into '{other.name}': '{self.name}' returns "
                f"{_type_name(produced)} but parameter '{target}' takes {_type_name(wanted)}"
            )
        first, second = self, other
        order = list(self.open_parameters)

        def piped(*args: Any, **values: Any) -> Any:
            values.update(zip(order, args, strict=False))
            context = {k: values.pop(k) for k in KEPT_PARAMS if k in values}
            value = first.invoke(context, values)
            return second.invoke(context, {target: value})

        return _combined(
            f"{self.name}_pipe_{other.name}",
            piped,
            self.open_parameters,
            second.returns,
            (self, other),
        )

    def __add__(self, other: Action) -> Action:
        """Sequence: run ``self`` then ``other``; returns ``other``'s result.

        The result is named ``<self>_then_<other>`` (CRAB's name, a valid tool name).

        Raises:
            ActionError: Both actions have an open parameter of the same name.
        """
        clash = sorted(set(self.open_parameters) & set(other.open_parameters))
        if clash:
            raise ActionError(
                f"cannot sequence '{self.name}' + '{other.name}': both take open parameters "
                f"{clash}; bind them first, e.g. {self.name}({clash[0]}=...)"
            )
        first, second = self, other

        def sequenced(**values: Any) -> Any:
            context = {k: values.pop(k) for k in KEPT_PARAMS if k in values}
            first.invoke(context, {k: v for k, v in values.items() if k in first.open_parameters})
            return second.invoke(
                context, {k: v for k, v in values.items() if k in second.open_parameters}
            )

        return _combined(
            f"{self.name}_then_{other.name}",
            sequenced,
            {**self.open_parameters, **other.open_parameters},
            second.returns,
            (self, other),
        )


def _combined(
    name: str,
    entry: Callable[..., Any],
    fields: dict[str, Any],
    returns: type[BaseModel],
    parts: tuple[Action, ...],
) -> Action:
    """Build the action a combination operator produces from its parts."""
    env_names = {p.env_name for p in parts if p.env_name}
    if len(env_names) > 1:
        raise ActionError(
            f"cannot combine actions of different environments {sorted(env_names)} into '{name}'"
        )
    definitions: dict[str, Any] = {n: (f.annotation, f) for n, f in fields.items()}
    parameters = create_model(
        _model_name(name, "Parameters"), __config__=ConfigDict(extra="forbid"), **definitions
    )
    combined = type(parts[0])(
        name=name,
        entry=entry,
        parameters=parameters,
        returns=returns,
        description=" then ".join(p.description or p.name for p in parts),
        kept_params=KEPT_PARAMS,
        env_name=next(iter(env_names), None),
        local=all(p.local for p in parts),
    )
    combined._parts = parts
    return combined


def _compatible(produced: Any, wanted: Any) -> bool:
    """Whether a value of type ``produced`` may be passed where ``wanted`` is expected."""
    if Any in (produced, wanted) or produced == wanted:
        return True
    if produced is int and float in (wanted, *typing.get_args(wanted)):
        return True  # PEP 484 numeric tower: an int is accepted where a float is expected
    if isinstance(produced, type) and isinstance(wanted, type):
        return issubclass(produced, wanted)
    return produced in typing.get_args(wanted)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def _model_name(name: str, suffix: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name) + suffix


def build_action(
    func: Callable[..., Any],
    *,
    cls: type[Action] = Action,
    env_name: str | None = None,
    local: bool = False,
    **extra: Any,
) -> Action:
    """Turn ``func`` into an action of class ``cls`` from its signature and docstring.

    Raises:
        ActionError: A hint cannot be resolved, or the function takes ``*args``/``**kwargs``.
    """
    name = func.__name__
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ActionError(f"action '{name}': cannot resolve its type hints: {exc}") from exc
    doc = docstring_parser.parse(inspect.getdoc(func) or "")
    param_docs = {p.arg_name: p.description for p in doc.params}
    fields: dict[str, Any] = {}
    kept: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.name in KEPT_PARAMS:
            kept.append(param.name)
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ActionError(f"action '{name}': *args and **kwargs cannot be described to agents")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            hints.get(param.name, Any),  # CRAB's rule: a parameter without a hint takes anything
            Field(default, description=param_docs.get(param.name)),
        )
    parameters = create_model(
        _model_name(name, "Parameters"), __config__=ConfigDict(extra="forbid"), **fields
    )
    returns = create_model(_model_name(name, "Returns"), returns=(hints.get("return", Any), None))
    description = "\n\n".join(
        part for part in (doc.short_description, doc.long_description) if part
    )
    built = cls(
        name=name,
        entry=func,
        parameters=parameters,
        returns=returns,
        description=description or None,
        kept_params=tuple(kept),
        env_name=env_name,
        local=local,
        **extra,
    )
    built._decorator_args.update(env_name=env_name, local=local, **extra)
    return built


@typing.overload
def action(func: Callable[..., Any], /) -> Action: ...


@typing.overload
def action(
    *, env_name: str | None = None, local: bool = False
) -> Callable[[Callable[..., Any]], Action]: ...


def action(
    func: Callable[..., Any] | None = None,
    /,
    *,
    env_name: str | None = None,
    local: bool = False,
) -> Action | Callable[[Callable[..., Any]], Action]:
    """Decorator: turn a typed, documented function into an ``Action``.

    Usable bare (``@action``) or with options (``@action(env_name="vm")``).

    Args:
        func: The function (when used bare).
        env_name: Fix the environment the action runs in.
        local: Run without a sandbox; ``env`` receives the root environment.
    """
    if func is not None:
        return build_action(func)
    return lambda f: build_action(f, env_name=env_name, local=local)


@functools.lru_cache(maxsize=1024)
def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A parameters model's JSON schema, made once per model.

    Every episode hands its agent the tools of its action space, and pydantic
    builds a schema anew on each call (a sixth of a trivial episode's CPU in a
    profile); the bound copies of an action share its model. Callers get a
    deep copy, as they edit it.
    """
    return model.model_json_schema()
