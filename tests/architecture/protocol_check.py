"""Checking a plugin against its contract: a ``typing.Protocol`` naming what the plugin declares.

Each registry states its contract next to itself (``agent/modules/_contract.py``,
``agent/datasources/_contract.py``, ``agent/distros/_contract.py``,
``network/renderers/_contract.py``, ``commands/_contract.py``): Protocols whose annotated
attributes are the declared fields and whose methods are the hooks (``PROTOCOLS`` says which part
of a plugin file each one describes), plus ``problems``, the kind's own rules. This file holds
what they share, for the tests (it was ``cloudseed/core/contracts.py``; nothing that runs needs it):
every annotated field present with a value of its type, every hook callable with the Protocol's
parameters. ``contract_problems`` checks a plugin file against its kind: the Protocols first, then
the kind's rules.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from typing import Any, Callable, ClassVar, Union, get_args, get_origin, get_type_hints


def conforms(value: Any, hint: Any) -> bool:
    """Is ``value`` of the annotated type ``hint`` (containers checked element by element)?"""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = get_origin(hint), get_args(hint)
    if origin is ClassVar:
        return conforms(value, args[0]) if args else True
    if origin is Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        return any(conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin is type:
        return inspect.isclass(value) and (not args or issubclass(value, args[0]))
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(conforms(v, a) for v, a in zip(value, args)))
    if origin in (list, set, frozenset):
        return isinstance(value, origin) and (not args or all(conforms(v, args[0]) for v in value))
    if origin is dict:
        return isinstance(value, dict) and (not args or all(
            conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items()))
    if origin in (Callable, collections.abc.Callable):
        return callable(value)
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        return isinstance(value, (int, float) if hint is float else int) and not isinstance(value, bool)
    if inspect.isclass(hint):
        return isinstance(value, hint)
    return True  # a hint this checker does not know (a TypeVar...): not held against the plugin


def type_name(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if inspect.isclass(hint) and not get_args(hint) else None
    return text or str(hint).replace("typing.", "")


def _hooks(protocol: type) -> dict[str, inspect.Signature]:
    """The methods a Protocol declares, with their signatures less ``self``/``cls``."""
    hooks = {}
    for name, member in vars(protocol).items():
        if name.startswith("_"):
            continue
        function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if inspect.isfunction(function):
            signature = inspect.signature(function)
            params = list(signature.parameters.values())
            if not isinstance(member, staticmethod):
                params = params[1:]
            hooks[name] = signature.replace(parameters=params)
    return hooks


def _accepts(actual: inspect.Signature, wanted: inspect.Signature) -> str | None:
    """Why a callable of signature ``actual`` cannot be called as ``wanted`` says (None: it can)."""
    params = list(actual.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star_args = any(p.kind is p.VAR_POSITIONAL for p in params)
    star_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required_wanted = [p for p in wanted.parameters.values() if p.default is p.empty]
    optional_wanted = [p for p in wanted.parameters.values() if p.default is not p.empty]
    if len(positional) < len(required_wanted) and not star_args:
        return f"takes {len(positional)} positional argument(s), the contract passes {len(required_wanted)}"
    required = [p for p in positional if p.default is p.empty]
    required += [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > len(required_wanted):
        extra = ", ".join(p.name for p in required[len(required_wanted):])
        return f"requires {extra}, which the contract does not pass"
    for p in optional_wanted:
        if p.name not in names and not star_kwargs:
            return f"does not accept the optional argument {p.name!r}"
    return None


def problems(plugin: Any, protocol: type, owner: str = "") -> list[str]:
    """Every way ``plugin`` (a module or a class) breaks ``protocol``: missing or mistyped fields, bad hooks."""
    found = []
    where = f"{owner}: " if owner else ""
    hooks = _hooks(protocol)
    try:
        hints = get_type_hints(protocol, include_extras=False)
    except Exception as e:  # an annotation that does not resolve is the contract's bug, said plainly
        return [f"{where}cannot read the contract {protocol.__name__}: {e}"]
    for name, hint in hints.items():
        if name.startswith("_") or name in hooks:
            continue
        if not hasattr(plugin, name):
            found.append(f"{where}{name} is not declared")
        elif not conforms(getattr(plugin, name), hint):
            found.append(f"{where}{name} = {getattr(plugin, name)!r:.80} is not {type_name(hint)}")
    for name, wanted in hooks.items():
        hook = getattr(plugin, name, None)
        if hook is None:
            found.append(f"{where}{name}() is not defined")
            continue
        if not callable(hook):
            found.append(f"{where}{name} is not callable")
            continue
        try:
            actual = inspect.signature(hook)
        except (TypeError, ValueError):
            continue
        if inspect.isclass(plugin) and inspect.isfunction(inspect.getattr_static(plugin, name)):
            # an instance method looked up on the class: drop self
            actual = actual.replace(parameters=list(actual.parameters.values())[1:])
        why = _accepts(actual, wanted)
        if why:
            found.append(f"{where}{name}{actual} {why} (contract: {name}{wanted})")
    return found


def contract_problems(contract: Any, plugin: Any, stem: str, *args: Any, **kwargs: Any) -> list[str]:
    """Every way the plugin file ``stem`` breaks the contract module ``contract`` (a ``_contract.py``):
    its ``PROTOCOLS`` (every one), then, when they all hold, its ``problems`` (with ``args`` and
    ``kwargs``, the kind's extra facts), which assume them."""
    found = []
    for attr, protocol in contract.PROTOCOLS:
        found += problems(plugin if attr is None else getattr(plugin, attr, None), protocol, attr or "")
    return found or contract.problems(plugin, stem, *args, **kwargs)
