"""A CloudFormation template rendered for given parameters, as CloudFormation would before it
creates anything: each parameter checked against its AllowedPattern/AllowedValues, the Rules'
assertions evaluated (a failing one refuses the stack), the Conditions decided, and the resources
and outputs kept with their ``Fn::If`` chosen, ``AWS::NoValue`` dropped and parameter ``Ref``s
replaced by their values. What stays unresolved (``Fn::GetAtt``, ``Fn::Sub``, ``Ref`` to a
resource) is left for cfn-lint to check in the rendered template.

Only the functions the deploy templates use in Rules and Conditions are known (``Ref``,
``Fn::Equals``, ``Fn::Not``, ``Fn::And``, ``Fn::Or``, ``Condition``, ``Fn::Contains``,
``Fn::EachMemberIn``); any other there is an error, never a silent pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: The pseudo parameters a rendering knows besides AWS::Region.
PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012"}

_NO_VALUE = object()


class Refused(Exception):
    """CloudFormation would refuse the stack: ``name`` is the parameter or rule that refuses."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name


def render(template: Mapping[str, Any], parameters: Mapping[str, str], *, region: str
           ) -> dict[str, Any]:
    """The template as CloudFormation would deploy it in ``region`` with ``parameters``
    (the others at their defaults); :class:`Refused` when a parameter or a rule refuses."""
    values = _parameters(template.get("Parameters", {}), parameters)
    values.update(PSEUDO)
    values["AWS::Region"] = region
    conditions = template.get("Conditions", {})
    decided: dict[str, bool] = {}

    def value(node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {"Ref"}:
            return values[node["Ref"]]
        if isinstance(node, list):
            return [value(item) for item in node]
        if isinstance(node, str):
            return node
        raise AssertionError(f"not a value the renderer knows: {node!r}")

    def truth(node: Any) -> bool:
        [(name, args)] = node.items()
        if name == "Condition":
            if args not in decided:
                decided[args] = truth(conditions[args])
            return decided[args]
        if name == "Fn::Equals":
            return bool(value(args[0]) == value(args[1]))
        if name == "Fn::Not":
            return not truth(args[0])
        if name == "Fn::And":
            return all(truth(arg) for arg in args)
        if name == "Fn::Or":
            return any(truth(arg) for arg in args)
        if name == "Fn::Contains":
            return value(args[1]) in value(args[0])
        if name == "Fn::EachMemberIn":
            return set(value(args[0])) <= set(value(args[1]))
        raise AssertionError(f"not a condition function the renderer knows: {name}")

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Fn::If"}:
                condition, then, otherwise = node["Fn::If"]
                return resolve(then if truth({"Condition": condition}) else otherwise)
            if set(node) == {"Ref"} and node["Ref"] in values:
                return values[node["Ref"]]
            if set(node) == {"Ref"} and node["Ref"] == "AWS::NoValue":
                return _NO_VALUE
            resolved = {key: resolve(item) for key, item in node.items()}
            if set(resolved) == {"Fn::Join"} and all(
                    isinstance(part, str) for part in resolved["Fn::Join"][1]):
                delimiter, parts = resolved["Fn::Join"]
                return delimiter.join(parts)
            return {key: item for key, item in resolved.items() if item is not _NO_VALUE}
        if isinstance(node, list):
            return [item for item in map(resolve, node) if item is not _NO_VALUE]
        return node

    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not truth(rule["RuleCondition"]):
            continue
        for assertion in rule["Assertions"]:
            if not truth(assertion["Assert"]):
                raise Refused(name, assertion.get("AssertDescription", ""))
    rendered: dict[str, Any] = {"AWSTemplateFormatVersion": "2010-09-09"}
    for section in ("Resources", "Outputs"):
        rendered[section] = {
            name: resolve({key: item for key, item in body.items() if key != "Condition"})
            for name, body in template.get(section, {}).items()
            if "Condition" not in body or truth({"Condition": body["Condition"]})}
    return rendered


def _parameters(declared: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    unknown = set(given) - set(declared)
    if unknown:
        raise Refused(sorted(unknown)[0], "not a parameter of the template")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        if name not in given and "Default" not in spec:
            raise Refused(name, "no value and no default")
        text = str(given.get(name, spec.get("Default")))
        if "AllowedValues" in spec and text not in [str(v) for v in spec["AllowedValues"]]:
            raise Refused(name, f"{text!r} is not one of {spec['AllowedValues']}")
        if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], text):
            raise Refused(name, f"{text!r} does not match {spec['AllowedPattern']}")
        values[name] = text.split(",") if spec.get("Type") == "CommaDelimitedList" else text
    return values
