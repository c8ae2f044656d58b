"""A small interpreter of the Amazon States Language, for the subset the migration's state
machine (deploy/stepfunctions/migrate.asl.json) uses: Task (``lambda:invoke``, with
``Parameters``, ``ResultSelector``, ``ResultPath`` and ``Retry``), Choice (``StringEquals``,
``BooleanEquals``), Wait, Map (``ItemsPath``, ``ItemSelector``, ``MaxConcurrency``: its items run
concurrently, all at once when it is 0 or absent) and
Succeed. It lets a test drive the Lambda handler exactly as the definition says Step Functions
would, with the waits scaled down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: ``invoke(payload) -> result`` stands for the Lambda function.
Invoke = Callable[[Any], Any]


def _path(path: str, data: Any, context: Mapping[str, Any]) -> Any:
    root, rest = (context, path[2:]) if path.startswith("$$") else (data, path[1:])
    value = root
    for part in filter(None, rest.split(".")):
        value = value[part]
    return value


def _resolve(template: Any, data: Any, context: Mapping[str, Any]) -> Any:
    """Parameters / ResultSelector / ItemSelector: ``"key.$": "$.path"`` entries read ``data``."""
    if isinstance(template, dict):
        out = {}
        for key, value in template.items():
            if key.endswith(".$"):
                out[key[:-2]] = _path(value, data, context)
            else:
                out[key] = _resolve(value, data, context)
        return out
    return template


class Machine:
    """Runs a state machine definition with ``invoke`` as its Lambda function.

    ``error_of(exc)`` names the States error an exception of the function stands for (what
    ``Retry`` matches); ``scale`` multiplies every wait; ``transitions`` counts the states run.
    """

    def __init__(self, definition: Mapping[str, Any], invoke: Invoke, *,
                 error_of: Callable[[BaseException], str] = lambda exc: type(exc).__name__,
                 scale: float = 1.0) -> None:
        self.definition = definition
        self.invoke = invoke
        self.error_of = error_of
        self.scale = scale
        self.transitions: list[str] = []

    def run(self, data: Any = None, graph: Mapping[str, Any] | None = None,
            context: Mapping[str, Any] | None = None) -> Any:
        graph = graph or self.definition
        name = graph["StartAt"]
        context = context or {}
        while True:
            self.transitions.append(name)
            state = graph["States"][name]
            kind = state["Type"]
            if kind == "Succeed":
                return data
            if kind == "Task":
                data = self._task(state, data, context)
            elif kind == "Wait":
                time.sleep(state["Seconds"] * self.scale)
            elif kind == "Map":
                data = self._map(state, data)
            elif kind == "Choice":
                name = self._choose(state, data)
                continue
            else:
                raise NotImplementedError(kind)
            name = state["Next"]

    def _task(self, state: Mapping[str, Any], data: Any, context: Mapping[str, Any]) -> Any:
        assert state["Resource"] == "arn:aws:states:::lambda:invoke"
        payload = _resolve(state["Parameters"], data, context)["Payload"]
        attempts: dict[int, int] = {}
        while True:
            try:
                result = {"Payload": self.invoke(payload)}
                break
            except Exception as exc:
                error = self.error_of(exc)
                for index, rule in enumerate(state.get("Retry", [])):
                    if error in rule["ErrorEquals"]:
                        tried = attempts.get(index, 0)
                        if tried < rule.get("MaxAttempts", 3):
                            attempts[index] = tried + 1
                            time.sleep(rule.get("IntervalSeconds", 1)
                                       * rule.get("BackoffRate", 2.0) ** tried * self.scale)
                            break
                else:
                    raise
        if "ResultSelector" in state:
            result = _resolve(state["ResultSelector"], result, context)
        return self._result(state, data, result)

    def _map(self, state: Mapping[str, Any], data: Any) -> Any:
        items = _path(state.get("ItemsPath", "$"), data, {})
        processor = state["ItemProcessor"]

        def item(index: int, value: Any) -> Any:
            context = {"Map": {"Item": {"Index": index, "Value": value}}}
            selected = _resolve(state["ItemSelector"], data, context) \
                if "ItemSelector" in state else value
            return self.run(selected, processor, context)

        limit = int(state.get("MaxConcurrency", 0)) or len(items)
        with ThreadPoolExecutor(max_workers=max(1, min(limit, len(items)))) as pool:
            results = [f.result() for f in [pool.submit(item, i, v) for i, v in enumerate(items)]]
        return self._result(state, data, results)

    @staticmethod
    def _result(state: Mapping[str, Any], data: Any, result: Any) -> Any:
        if "ResultPath" in state and state["ResultPath"] is None:
            return data
        assert state.get("ResultPath", "$") == "$"
        return result

    @staticmethod
    def _choose(state: Mapping[str, Any], data: Any) -> str:
        for choice in state["Choices"]:
            value = _path(choice["Variable"], data, {})
            if "StringEquals" in choice and value == choice["StringEquals"]:
                return str(choice["Next"])
            if "BooleanEquals" in choice and value is choice["BooleanEquals"]:
                return str(choice["Next"])
        return str(state["Default"])
