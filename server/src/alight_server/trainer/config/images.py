"""The images the Kubernetes runner may run (`controller.images:`): the scanner each digest passes first."""

from __future__ import annotations

from pydantic import Field

from alight.schemas import Strict


class ImageSettings(Strict):
    """`alight controller --runner k8s --config CONFIG` reads these (controller/k8s/images.py); its flags override."""

    # Run once per digest before the first Job that uses it, `{image}` replaced by the pinned reference; a non-zero
    # exit, a timeout or a missing binary refuses the image (fails closed), a pass is cached. E.g.
    # 'trivy image --exit-code 1 --severity CRITICAL {image}'. None: no scan.
    scan: str | None = None
    scan_timeout_s: float = Field(default=600.0, ge=1)
