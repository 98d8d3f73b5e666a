"""A ValidatingAdmissionPolicy's CEL evaluated as the API server would for one request (cel-python), for fast
offline tests of the shipped policies; the tests on the real API server prove them (tests/*_apiserver.py).

Like the server: variables are evaluated lazily (one that fails only fails the rules that use it: CEL's
errors-as-values carry that), the Kubernetes string extensions the policies use are there, and with a param
(`paramKind`) the rules see it as `params`.
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes


def _substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    return celtypes.StringType(str(text)[int(start):] if end is None else str(text)[int(start):int(end)])


def _join(items: Any, separator: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(item) for item in items))


# Kubernetes' CEL string library (k8s.io/apiserver/pkg/cel/library and cel-go's ext.Strings) as far as used.
FUNCTIONS = {"substring": _substring, "join": _join,
             "lowerAscii": lambda text: celtypes.StringType(str(text).lower())}


class Policy:
    """The ValidatingAdmissionPolicy's CEL, evaluated as the API server would for one request."""

    def __init__(self, policy: dict[str, Any]) -> None:
        self.env = celpy.Environment()
        spec = policy["spec"]
        self.match = [self._compile(m["expression"]) for m in spec["matchConditions"]]
        self.variables = [(v["name"], self._compile(v["expression"])) for v in spec.get("variables", [])]
        self.rules = [(self._compile(v["expression"]),
                       self._compile(v["messageExpression"]) if "messageExpression" in v else v.get("message"))
                      for v in spec["validations"]]

    def _compile(self, expression: str) -> Any:
        return self.env.program(self.env.compile(expression), functions=FUNCTIONS)

    def denials(self, request: dict, old: dict | None, new: dict | None,
                params: dict | None = None) -> list[str] | None:
        """None when the policy does not apply to the request; else the failed rules' messages."""
        scope: dict[str, Any] = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(new),
                                 "oldObject": celpy.json_to_cel(old), "params": celpy.json_to_cel(params)}
        if not all(m.evaluate(scope) for m in self.match):
            return None
        variables: dict[celtypes.StringType, Any] = {}
        for name, program in self.variables:
            try:
                variables[celtypes.StringType(name)] = program.evaluate({**scope, "variables": celtypes.MapType(variables)})
            except celpy.CELEvalError as exc:
                variables[celtypes.StringType(name)] = exc  # an error value: fails only what uses it
        scope["variables"] = celtypes.MapType(variables)
        failed = []
        for rule, message in self.rules:
            try:
                ok = bool(rule.evaluate(scope))
            except celpy.CELEvalError:
                ok = False  # failurePolicy: Fail
            if not ok:
                try:
                    failed.append(message if isinstance(message, str) else
                                  str(message.evaluate(scope)) if message else "denied")
                except celpy.CELEvalError:
                    failed.append("denied")
        return failed
