"""A loopback double of the vLLM server routes alight's weight updates use, shaped as vLLM 0.32 answers them.

It logs every route called (in order), reads the weights `reload_weights` is pointed at, and can be told to
fail one route with the status vLLM would use. Routes and bodies follow vLLM's
`entrypoints/rl/online/api_router.py`, `serve/dev/rpc`, `serve/dev/cache` and `serve/lora` routers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, Query
from fastapi.responses import JSONResponse, Response


@dataclass
class VllmDouble:
    calls: list[str] = field(default_factory=list)
    weight_version: str = "default"  # vLLM's engine core starts at "default"
    loaded: dict[str, Any] = field(default_factory=dict)  # tensor name -> tensor, from the last reload
    adapters: dict[str, str] = field(default_factory=dict)  # lora_name -> lora_path
    adapter_files: list[str] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)  # route -> status to answer once
    paused: bool = False
    dev_mode: bool = True

    def app(self) -> FastAPI:
        app = FastAPI()

        def failing(route: str) -> JSONResponse | None:
            self.calls.append(route)
            status = self.fail.pop(route, None)
            if status is None:
                return None
            return JSONResponse({"error": {"message": f"{route} failed", "type": "InternalServerError"}}, status)

        @app.get("/health")
        async def health() -> Response:
            return Response(status_code=200)  # vLLM's /health has an empty body

        if not self.dev_mode:
            return app

        @app.post("/pause")
        async def pause(mode: str = Query("abort")) -> JSONResponse:
            if (bad := failing(f"/pause?mode={mode}")) is not None:
                return bad
            self.paused = True
            return JSONResponse({"status": "paused"})

        @app.post("/resume")
        async def resume() -> JSONResponse:
            if (bad := failing("/resume")) is not None:
                return bad
            self.paused = False
            return JSONResponse({"status": "resumed"})

        @app.post("/collective_rpc")
        def collective_rpc(body: dict[str, Any] = Body()) -> Response:
            if (bad := failing(f"/collective_rpc:{body.get('method')}")) is not None:
                return bad
            if body.get("method") == "reload_weights":
                from safetensors.torch import load_file

                folder = Path(body["kwargs"]["weights_path"])
                self.loaded = {}
                for file in sorted(folder.glob("*.safetensors")):
                    self.loaded.update(load_file(str(file)))
            return Response(status_code=200)  # reload_weights returns None: vLLM answers an empty 200

        @app.post("/reset_prefix_cache")
        async def reset_prefix_cache() -> Response:
            return failing("/reset_prefix_cache") or Response(status_code=200)

        @app.post("/update_weight_version")
        async def update_weight_version(new_version: str = Body(embed=True)) -> JSONResponse:
            if (bad := failing("/update_weight_version")) is not None:
                return bad
            self.weight_version = new_version
            return JSONResponse({"success": True, "new_version": new_version})

        @app.get("/weight_info")
        async def weight_info() -> JSONResponse:
            return JSONResponse({"weight_version": self.weight_version})

        @app.post("/v1/load_lora_adapter")
        def load_lora_adapter(body: dict[str, Any] = Body()) -> Response:
            if (bad := failing(f"/v1/load_lora_adapter:inplace={body.get('load_inplace', False)}")) is not None:
                return bad
            name = body["lora_name"]
            if name in self.adapters and not body.get("load_inplace"):
                message = f"The lora adapter '{name}' has already been loaded."
                return JSONResponse({"error": {"message": message, "type": "InvalidUserInput", "code": 400}}, 400)
            self.adapters[name] = body["lora_path"]
            self.adapter_files = sorted(p.name for p in Path(body["lora_path"]).iterdir())
            return Response(f"Success: LoRA adapter '{name}' added successfully.", status_code=200)

        return app
