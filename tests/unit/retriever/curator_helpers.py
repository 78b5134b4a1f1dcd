"""A scripted ADK model for the curator's tests: it calls the scripted tools one per model turn, then answers."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types


class ScriptedLlm(BaseLlm):
    """Turn n (counted by the function responses so far in this run's request) calls ``script[n]``; then text."""

    script: list[tuple[str, dict[str, Any]]]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        done = 0
        for content in llm_request.contents:
            done = 0 if content.role == "user" and any(p.text for p in content.parts or []) else done
            done += sum(1 for p in content.parts or [] if p.function_response)
        if done < len(self.script):
            name, args = self.script[done]
            call = types.FunctionCall(name=name, args=args)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text="deployed")]))


def deploy_tools() -> list[Any]:
    """``flaky_deploy`` always answers an error result; ``deploy`` succeeds."""
    from google.adk.tools.function_tool import FunctionTool

    def flaky_deploy(service: str) -> dict[str, Any]:
        """Deploy a service (the old way)."""
        return {"error": f"deploy of {service} timed out"}

    def deploy(service: str, region: str) -> dict[str, Any]:
        """Deploy a service to a region."""
        return {"ok": True, "service": service, "region": region}

    return [FunctionTool(flaky_deploy), FunctionTool(deploy)]


ERROR_RUN = [("flaky_deploy", {"service": "billing"})] * 3 + [("deploy", {"service": "billing", "region": "eu"})]
